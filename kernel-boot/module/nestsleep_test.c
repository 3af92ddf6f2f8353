// SPDX-License-Identifier: GPL-2.0-only
/*
 * nestsleep_test.c - the runtime proof for nestsleep's rewrites, in KTAP.
 *
 * The wait bodies live in before.c (or in the after.c that nestsleep
 * MODE=patch generates from it); Kbuild links one of them in, chosen by
 * NST_VARIANT.  This file only drives them: waiter and waker kthreads,
 * signals, timing, and the KTAP report.
 *
 * The module runs one case per write, so that the init script can reset
 * the scheduler's WARN_ONCE between cases and each "before" case prints
 * its own "do not call blocking ops when !TASK_RUNNING":
 *
 *   insmod nestsleep_tests.ko [rounds=N] [bound_ms=N] [jitter_us=N] [only=a,stress_*]
 *   P=/sys/module/nestsleep_tests/parameters
 *   for c in $(cat $P/cases); do
 *           echo 1 > /sys/kernel/debug/clear_warn_once
 *           echo $c > $P/run
 *   done
 *   rmmod nestsleep_tests
 *
 * Output: "KTAP version 1" and "1..N" at load, then "ok N name" or
 * "not ok N name" per case, with "# " diagnostics.  Before a case that
 * the linked variant is expected to warn in, the module prints
 *
 *   # expect-splat: do not call blocking ops when !TASK_RUNNING
 *
 * so that the parser (kernel-boot/nsboot/parser.py) tells the expected
 * splats from the unexpected ones.  The "after" form expects none.
 */
#include <linux/completion.h>
#include <linux/cpumask.h>
#include <linux/delay.h>
#include <linux/err.h>
#include <linux/jiffies.h>
#include <linux/kthread.h>
#include <linux/ktime.h>
#include <linux/module.h>
#include <linux/moduleparam.h>
#include <linux/random.h>
#include <linux/mutex.h>
#include <linux/sched.h>
#include <linux/sched/signal.h>
#include <linux/sched/task.h>
#include <linux/slab.h>
#include <linux/string.h>
#include <linux/wait.h>
#include <linux/wait_bit.h>

#include "nst.h"

#ifndef NST_VARIANT
#define NST_VARIANT "before"
#endif

#define NST_SPLAT "do not call blocking ops when !TASK_RUNNING"

static unsigned long rounds = 10000;
module_param(rounds, ulong, 0644);
MODULE_PARM_DESC(rounds, "wait/wake rounds per stress case (0 skips them)");

static unsigned int bound_ms = 1000;
module_param(bound_ms, uint, 0644);
MODULE_PARM_DESC(bound_ms, "a wait not woken within this is a lost wakeup");

static unsigned int jitter_us;
module_param(jitter_us, uint, 0644);
MODULE_PARM_DESC(jitter_us, "stress: the waker waits 0..jitter_us us before each wake, to vary the interleaving");

static char *only;
module_param(only, charp, 0444);
MODULE_PARM_DESC(only, "comma-separated case names to run (a trailing * matches a prefix)");

static char *unfixed;
module_param(unfixed, charp, 0444);
MODULE_PARM_DESC(unfixed, "comma-separated before.c functions that MODE=patch left alone: their cases warn in the after form too");

enum nst_verdict { NST_PASS, NST_FAIL, NST_SKIP };

/* What a wait returns. */
enum nst_kind {
	NST_VOID,	/* nothing: the condition must hold */
	NST_ERR,	/* 0, or -ERESTARTSYS on a signal */
	NST_REMAIN,	/* the remaining jiffies (>= 1), or 0 on timeout */
};

struct nst_variant {
	const char *name;
	long (*wait)(struct nst_ctx *ctx, long timeout);
	enum nst_kind kind;
	bool wake_process;	/* woken by wake_up_process(), not wake_up() */
};

static long nst_v_wait_event(struct nst_ctx *ctx, long timeout)
{
	nst_wait_event(ctx);
	return 0;
}

static long nst_v_interruptible(struct nst_ctx *ctx, long timeout)
{
	return nst_wait_event_interruptible(ctx);
}

static long nst_v_timeout(struct nst_ctx *ctx, long timeout)
{
	return nst_wait_event_timeout(ctx, timeout);
}

static long nst_v_interruptible_timeout(struct nst_ctx *ctx, long timeout)
{
	return nst_wait_event_interruptible_timeout(ctx, timeout);
}

static long nst_v_killable(struct nst_ctx *ctx, long timeout)
{
	return nst_wait_event_killable(ctx);
}

static long nst_v_timeout_msleep(struct nst_ctx *ctx, long timeout)
{
	return nst_wait_event_timeout_msleep(ctx, timeout);
}

static long nst_v_prepare_to_wait(struct nst_ctx *ctx, long timeout)
{
	nst_prepare_to_wait_loop(ctx);
	return 0;
}

static long nst_v_set_current_state(struct nst_ctx *ctx, long timeout)
{
	nst_set_current_state_loop(ctx);
	return 0;
}

static long nst_v_prepare_to_wait_goto(struct nst_ctx *ctx, long timeout)
{
	return nst_prepare_to_wait_goto(ctx, timeout);
}

static long nst_v_own_wake(struct nst_ctx *ctx, long timeout)
{
	nst_own_wake_wait(ctx);
	return 0;
}

enum {
	V_WAIT_EVENT, V_INTERRUPTIBLE, V_TIMEOUT, V_INTERRUPTIBLE_TIMEOUT,
	V_KILLABLE, V_PREPARE_TO_WAIT, V_SET_CURRENT_STATE, V_TIMEOUT_MSLEEP,
	/* issue 34 */
	V_PTW_GOTO,
	V_OWN_WAKE,
};

static const struct nst_variant nst_variants[] = {
	[V_WAIT_EVENT] = { "wait_event", nst_v_wait_event, NST_VOID, false },
	[V_INTERRUPTIBLE] = { "wait_event_interruptible", nst_v_interruptible, NST_ERR, false },
	[V_TIMEOUT] = { "wait_event_timeout", nst_v_timeout, NST_REMAIN, false },
	[V_INTERRUPTIBLE_TIMEOUT] = { "wait_event_interruptible_timeout",
				      nst_v_interruptible_timeout, NST_REMAIN, false },
	[V_KILLABLE] = { "wait_event_killable", nst_v_killable, NST_ERR, false },
	[V_PREPARE_TO_WAIT] = { "prepare_to_wait_loop", nst_v_prepare_to_wait, NST_VOID, false },
	[V_SET_CURRENT_STATE] = { "set_current_state_loop", nst_v_set_current_state, NST_VOID, true },
	[V_TIMEOUT_MSLEEP] = { "wait_event_timeout(msleep in condition)", nst_v_timeout_msleep,
			       NST_REMAIN, false },
	/* issue 34 */
	[V_PTW_GOTO] = { "prepare_to_wait_goto", nst_v_prepare_to_wait_goto, NST_REMAIN, false },
	[V_OWN_WAKE] = { "own_wake_function", nst_v_own_wake, NST_VOID, false },
};

/* ---- helpers ------------------------------------------------------------ */

static bool nst_is_before(void)
{
	return !strcmp(NST_VARIANT, "before");
}

struct nst_case;
static bool nst_unfixed(const struct nst_case *c);

static void nst_ctx_init(struct nst_ctx *ctx)
{
	mutex_init(&ctx->lock);
	init_waitqueue_head(&ctx->wq);
	ctx->seq = 0;
	ctx->target = 1;
	ctx->evals = 0;
	ctx->waiter = NULL;
}

/*
 * The wakers.  The wake_up_process() is written on ctx->waiter itself, as
 * the Bluetooth wakers write session->task, so that nestsleep MODE=patch
 * finds it and turns it into a wake_up() of ctx->wq in the "after" form.
 */
static void nst_wake(struct nst_ctx *ctx, bool process)
{
	if (!process) {
		wake_up(&ctx->wq);
		return;
	}
	if (!READ_ONCE(ctx->waiter))
		return;
	wake_up_process(ctx->waiter);
}

/* The waker: advance seq under the lock, then wake. */
static void nst_advance(struct nst_ctx *ctx, unsigned long seq, bool process)
{
	mutex_lock(&ctx->lock);
	if (ctx->seq < seq)
		ctx->seq = seq;
	mutex_unlock(&ctx->lock);
	nst_wake(ctx, process);
}

static bool nst_reached_now(struct nst_ctx *ctx)
{
	return READ_ONCE(ctx->seq) >= READ_ONCE(ctx->target);
}

/* A kthread that runs fn once, with a signal allowed if asked. */
struct nst_thread {
	struct task_struct *task;
	struct completion started;
	struct completion done;
	void (*fn)(struct nst_thread *t);
	void *data;
	int signal;
	long ret;
	s64 elapsed_ms;
};

static bool nst_stuck;	/* an earlier case left a thread behind */

static int nst_thread_fn(void *arg)
{
	struct nst_thread *t = arg;
	ktime_t t0;

	if (t->signal)
		allow_signal(t->signal);
	complete(&t->started);
	t0 = ktime_get();
	t->fn(t);
	t->elapsed_ms = ktime_ms_delta(ktime_get(), t0);
	if (t->signal)
		flush_signals(current);
	complete_all(&t->done);	/* stays done: waiting does not consume it */
	return 0;
}

static int nst_thread_start(struct nst_thread *t, const char *name, int cpu)
{
	init_completion(&t->started);
	init_completion(&t->done);
	t->task = kthread_create(nst_thread_fn, t, "nst/%s", name);
	if (IS_ERR(t->task)) {
		int err = PTR_ERR(t->task);

		t->task = NULL;
		return err;
	}
	get_task_struct(t->task);
	if (cpu >= 0)
		kthread_bind(t->task, cpu);
	wake_up_process(t->task);
	wait_for_completion(&t->started);
	return 0;
}

/* Wait up to secs for the thread's fn to return (no hung-task report). */
static bool nst_thread_wait(struct nst_thread *t, unsigned int secs)
{
	unsigned long deadline = jiffies + secs * HZ;

	while (!wait_for_completion_timeout(&t->done, HZ / 10 + 1))
		if (time_after(jiffies, deadline))
			return false;
	return true;
}

/* Reap a thread that has finished; leak (and pin the module) if it has not. */
static void nst_thread_put(struct nst_thread *t)
{
	if (!t->task)
		return;
	if (!completion_done(&t->done)) {
		pr_err("# %s is stuck; the module stays loaded\n", t->task->comm);
		if (!nst_stuck)
			__module_get(THIS_MODULE);
		nst_stuck = true;
		return;
	}
	kthread_stop(t->task);
	put_task_struct(t->task);
	t->task = NULL;
}

/*
 * Wait until the waiter sleeps: its state is not TASK_RUNNING and its
 * condition count stays put for 10 ms.
 */
static bool nst_wait_asleep(struct nst_ctx *ctx, struct task_struct *task)
{
	unsigned long deadline = jiffies + 5 * HZ;

	while (time_before(jiffies, deadline)) {
		unsigned long evals = READ_ONCE(ctx->evals);

		if (!task_is_running(task)) {
			msleep(10);
			if (!task_is_running(task) && READ_ONCE(ctx->evals) == evals)
				return true;
		} else {
			usleep_range(500, 1000);
		}
	}
	return false;
}

static int nst_cpu(int nth)
{
	int cpu = cpumask_first(cpu_online_mask);

	if (nth == 0)
		return cpu;
	cpu = cpumask_next(cpu, cpu_online_mask);
	return cpu < nr_cpu_ids ? cpu : -1;
}

/* ---- the cases ---------------------------------------------------------- */

struct nst_case {
	const char *name;
	enum nst_verdict (*run)(const struct nst_case *c);
	int variant;			/* index into nst_variants, or -1 */
	int signal;			/* for the signal cases */
	unsigned int before_splats;	/* warnings the "before" form prints */
	const char *func;		/* the before.c function, when it may be left unfixed */
};

/*
 * One waiter thread on one context, the main thread as the waker.  It is
 * allocated, thread included, so that a stuck waiter never points into a
 * dead stack frame: a stuck case leaks it on purpose.
 */
struct nst_single {
	struct nst_ctx ctx;
	struct nst_thread t;
	const struct nst_variant *v;
	long timeout;
	bool reached;
	bool asleep;
};

static void nst_single_waiter(struct nst_thread *t)
{
	struct nst_single *s = t->data;

	WRITE_ONCE(s->ctx.waiter, current);
	t->ret = s->v->wait(&s->ctx, s->timeout);
	s->reached = nst_reached_now(&s->ctx);
}

/* Start the waiter of case c; NULL on failure. */
static struct nst_single *nst_single_start(const struct nst_case *c, long timeout)
{
	struct nst_single *s = kzalloc(sizeof(*s), GFP_KERNEL);

	if (!s)
		return NULL;
	nst_ctx_init(&s->ctx);
	s->v = &nst_variants[c->variant];
	s->timeout = timeout;
	s->t.fn = nst_single_waiter;
	s->t.data = s;
	s->t.signal = c->signal;
	if (nst_thread_start(&s->t, c->name, nst_cpu(0))) {
		kfree(s);
		return NULL;
	}
	return s;
}

/*
 * Wait for the waiter to return; wake it for good if it does not.  Returns
 * whether it returned in time.  Frees s unless the waiter is stuck.
 */
static bool nst_single_finish(const struct nst_case *c, struct nst_single *s,
			      unsigned int secs)
{
	bool ok = nst_thread_wait(&s->t, secs);

	if (!ok) {
		pr_info("# %s: the waiter did not return within %u s; waking it\n",
			c->name, secs);
		nst_advance(&s->ctx, ULONG_MAX, s->v->wake_process);
		nst_thread_wait(&s->t, 5);
	}
	nst_thread_put(&s->t);
	return ok;
}

static void nst_single_free(struct nst_single *s)
{
	if (!s->t.task)		/* a stuck waiter keeps its context */
		kfree(s);
}

/* Each variant: the waker makes the condition true; the wait returns. */
static enum nst_verdict nst_case_variant(const struct nst_case *c)
{
	struct nst_single *s = nst_single_start(c, 10 * HZ);
	bool returned, good;

	if (!s)
		return NST_FAIL;
	s->asleep = nst_wait_asleep(&s->ctx, s->t.task);
	nst_advance(&s->ctx, 1, s->v->wake_process);
	returned = nst_single_finish(c, s, 10);
	switch (s->v->kind) {
	case NST_VOID:
		good = s->reached;
		break;
	case NST_ERR:
		good = s->t.ret == 0 && s->reached;
		break;
	default:
		good = s->t.ret > 0 && s->t.ret <= s->timeout && s->reached;
		break;
	}
	pr_info("# %s: %s ret=%ld reached=%d evals=%lu asleep=%d elapsed_ms=%lld\n",
		c->name, s->v->name, s->t.ret, s->reached, s->ctx.evals,
		s->asleep, s->t.elapsed_ms);
	nst_single_free(s);
	return returned && good ? NST_PASS : NST_FAIL;
}

/* A timed wait whose condition never comes true returns 0 after its timeout. */
static enum nst_verdict nst_case_timeout_expires(const struct nst_case *c)
{
	const unsigned int ms = 100;
	struct nst_single *s = nst_single_start(c, msecs_to_jiffies(ms));
	bool returned, good;

	if (!s)
		return NST_FAIL;
	returned = nst_single_finish(c, s, 10);
	/* jiffies granularity below, TCG slowness above */
	good = s->t.ret == 0 && !s->reached &&
	       s->t.elapsed_ms >= ms - jiffies_to_msecs(1) &&
	       s->t.elapsed_ms < ms + 5000;
	pr_info("# %s: %s(%u ms) ret=%ld elapsed_ms=%lld evals=%lu\n",
		c->name, s->v->name, ms, s->t.ret, s->t.elapsed_ms, s->ctx.evals);
	nst_single_free(s);
	return returned && good ? NST_PASS : NST_FAIL;
}

/* A timed wait whose condition comes true returns a positive remainder. */
static enum nst_verdict nst_case_remainder(const struct nst_case *c)
{
	struct nst_single *s = nst_single_start(c, 10 * HZ);
	bool returned, good;

	if (!s)
		return NST_FAIL;
	s->asleep = nst_wait_asleep(&s->ctx, s->t.task);
	nst_advance(&s->ctx, 1, false);
	returned = nst_single_finish(c, s, 15);
	good = s->t.ret > 0 && s->t.ret <= s->timeout && s->reached;
	pr_info("# %s: %s(%ld jiffies) ret=%ld reached=%d asleep=%d elapsed_ms=%lld\n",
		c->name, s->v->name, s->timeout, s->t.ret, s->reached,
		s->asleep, s->t.elapsed_ms);
	nst_single_free(s);
	return returned && good ? NST_PASS : NST_FAIL;
}

/*
 * _interruptible waits return -ERESTARTSYS on a signal, _killable ones on
 * SIGKILL: a kthread with allow_signal() waits, the main thread signals it.
 */
static enum nst_verdict nst_case_signal(const struct nst_case *c)
{
	struct nst_single *s = nst_single_start(c, 10 * HZ);
	bool returned, good;

	if (!s)
		return NST_FAIL;
	s->asleep = nst_wait_asleep(&s->ctx, s->t.task);
	send_sig(c->signal, s->t.task, 1);
	returned = nst_single_finish(c, s, 10);
	good = s->t.ret == -ERESTARTSYS && !s->reached;
	pr_info("# %s: %s ret=%ld (want %d) signal=%d asleep=%d elapsed_ms=%lld\n",
		c->name, s->v->name, s->t.ret, -ERESTARTSYS, c->signal,
		s->asleep, s->t.elapsed_ms);
	nst_single_free(s);
	return returned && good ? NST_PASS : NST_FAIL;
}

/* A _killable wait sleeps on through a non-fatal signal. */
static enum nst_verdict nst_case_killable_ignores(const struct nst_case *c)
{
	struct nst_single *s = nst_single_start(c, 10 * HZ);
	bool returned, early, good;

	if (!s)
		return NST_FAIL;
	s->asleep = nst_wait_asleep(&s->ctx, s->t.task);
	send_sig(c->signal, s->t.task, 1);
	msleep(100);
	early = completion_done(&s->t.done);
	nst_advance(&s->ctx, 1, false);
	returned = nst_single_finish(c, s, 10);
	good = !early && s->t.ret == 0 && s->reached;
	pr_info("# %s: %s ret=%ld returned_on_signal=%d reached=%d asleep=%d\n",
		c->name, s->v->name, s->t.ret, early, s->reached, s->asleep);
	nst_single_free(s);
	return returned && good ? NST_PASS : NST_FAIL;
}

/*
 * The silent kind: msleep() in the condition resets the task state without
 * a warning.  The damage: schedule_timeout() then returns at once, so the
 * wait spins, and it never uses up its timeout (only the time spent inside
 * schedule_timeout() counts), so a 200 ms wait_event_timeout() whose
 * condition stays false never returns.  The main thread rescues it after
 * 1 s by making the condition true.  The "before" form must show the damage
 * (it spins and misses its timeout), any other form must not (it sleeps,
 * and returns 0 after about 200 ms).
 */
static enum nst_verdict nst_case_msleep(const struct nst_case *c)
{
	const unsigned int ms = 200;
	struct nst_single *s = nst_single_start(c, msecs_to_jiffies(ms));
	bool in_time, returned, spun, timed_out, good;

	if (!s)
		return NST_FAIL;
	in_time = nst_thread_wait(&s->t, 1);
	if (!in_time)
		nst_advance(&s->ctx, 1, false);	/* the rescue */
	returned = nst_single_finish(c, s, 10);
	spun = s->ctx.evals > 10;
	timed_out = in_time && s->t.ret == 0;
	good = nst_is_before() ? spun && !timed_out : !spun && timed_out;
	pr_info("# %s: %s(%u ms): ret=%ld after %lld ms; the condition ran %lu times; %s\n",
		c->name, s->v->name, ms, s->t.ret, s->t.elapsed_ms, s->ctx.evals,
		timed_out ? "it timed out" : "it did not time out (rescued after 1 s)");
	if (nst_is_before())
		pr_info("# %s: the \"before\" form must spin and miss its timeout, to show the silent damage\n",
			c->name);
	nst_single_free(s);
	return returned && good ? NST_PASS : NST_FAIL;
}

/*
 * The stress test: rounds wait/wake rounds between a waiter kthread on one
 * CPU and a waker kthread on another.  Each round, the waker advances seq
 * and wakes, then waits bound_ms for the waiter's ack; a round not acked
 * in time is a lost wakeup, and the waker wakes again (up to 10 times) so
 * that the test fails instead of hanging.
 */
struct nst_stress {
	struct nst_ctx ctx;
	struct nst_thread waiter, waker;	/* in here: see nst_single */
	const struct nst_variant *v;
	unsigned long rounds;
	long bound;
	wait_queue_head_t ackwq;
	unsigned long ack;
	unsigned long done;
	unsigned long lost;	/* waker: a wake not acked within the bound */
	unsigned long early;	/* waiter: returned without its condition */
	unsigned long timeouts;	/* waiter: a timed wait expired */
	unsigned long errors;	/* waiter: an unexpected return value */
	s64 max_us;
	bool abort;
};

static void nst_stress_waiter(struct nst_thread *t)
{
	struct nst_stress *s = t->data;
	struct nst_ctx *ctx = &s->ctx;
	unsigned long i;

	for (i = 1; i <= s->rounds && !READ_ONCE(s->abort); i++) {
		ktime_t t0;
		long ret;
		s64 us;

		mutex_lock(&ctx->lock);
		ctx->target = i;
		mutex_unlock(&ctx->lock);
		t0 = ktime_get();
		ret = s->v->wait(ctx, 10 * s->bound);
		us = ktime_us_delta(ktime_get(), t0);
		if (us > s->max_us)
			s->max_us = us;
		if (s->v->kind == NST_REMAIN && ret == 0)
			s->timeouts++;
		else if (s->v->kind == NST_ERR && ret != 0)
			s->errors++;
		if (READ_ONCE(ctx->seq) < i)
			s->early++;
		s->done = i;
		WRITE_ONCE(s->ack, i);
		wake_up(&s->ackwq);
	}
}

static void nst_stress_waker(struct nst_thread *t)
{
	struct nst_stress *s = t->data;
	unsigned long i;

	for (i = 1; i <= s->rounds; i++) {
		unsigned int tries = 0;

		if (jitter_us)
			udelay(get_random_u32() % (jitter_us + 1));
		nst_advance(&s->ctx, i, s->v->wake_process);
		while (!wait_event_timeout(s->ackwq, READ_ONCE(s->ack) >= i, s->bound)) {
			if (!tries++)
				s->lost++;
			if (tries > 10) {
				WRITE_ONCE(s->abort, true);
				nst_advance(&s->ctx, ULONG_MAX, s->v->wake_process);
				return;
			}
			nst_wake(&s->ctx, s->v->wake_process);
		}
	}
}

static enum nst_verdict nst_case_stress(const struct nst_case *c)
{
	unsigned int secs = 60 + rounds / 50;
	int cpu0 = nst_cpu(0), cpu1 = nst_cpu(1);
	struct nst_stress *s;
	bool finished, good;

	if (!rounds)
		return NST_SKIP;
	s = kzalloc(sizeof(*s), GFP_KERNEL);
	if (!s)
		return NST_FAIL;
	nst_ctx_init(&s->ctx);
	s->ctx.target = 0;
	init_waitqueue_head(&s->ackwq);
	s->v = &nst_variants[c->variant];
	s->rounds = rounds;
	s->bound = msecs_to_jiffies(bound_ms) ?: 1;
	s->waiter.fn = nst_stress_waiter;
	s->waiter.data = s;
	s->waker.fn = nst_stress_waker;
	s->waker.data = s;
	if (nst_thread_start(&s->waiter, "waiter", cpu0)) {
		kfree(s);
		return NST_FAIL;
	}
	WRITE_ONCE(s->ctx.waiter, s->waiter.task);
	finished = !nst_thread_start(&s->waker, "waker", cpu1) &&
		   nst_thread_wait(&s->waker, secs) &&
		   nst_thread_wait(&s->waiter, 10);
	if (!finished) {
		WRITE_ONCE(s->abort, true);
		nst_advance(&s->ctx, ULONG_MAX, s->v->wake_process);
		nst_thread_wait(&s->waiter, 5);
	}
	nst_thread_put(&s->waker);
	nst_thread_put(&s->waiter);
	pr_info("# %s: %s rounds=%lu/%lu lost=%lu early=%lu timeouts=%lu errors=%lu max_wait_us=%lld bound_ms=%u cpus=%d,%d elapsed_ms=%lld\n",
		c->name, s->v->name, s->done, s->rounds, s->lost, s->early,
		s->timeouts, s->errors, s->max_us, bound_ms, cpu0, cpu1,
		s->waiter.elapsed_ms);
	if (cpu1 < 0)
		pr_info("# %s: only one CPU online; the waker shares it\n", c->name);
	good = finished && s->done == s->rounds && !s->lost && !s->early &&
	       !s->timeouts && !s->errors && !s->abort;
	if (!s->waiter.task && !s->waker.task)
		kfree(s);
	return good ? NST_PASS : NST_FAIL;
}

/*
 * The kthread cases (nst.h): rounds wait/wake rounds between a kthread of
 * before.c and this waker, which wakes it by wake_up_process() (or, in the
 * after form, by whatever MODE=patch turned that into) through the task
 * pointer's home.  A round not acked within bound_ms is a lost wakeup; the
 * waker then wakes again, up to 10 times, so that the case fails instead of
 * hanging.
 */
enum { K_GLOBAL, K_MEMBER, K_COPY, K_ESCAPE, K_PARK, K_OWNQ,
	K_SETTER,	/* issue 34: the moved setter */
};

struct task_struct *nst_kglobal_task;

void nst_kround_done(struct nst_kctx *k)
{
	mutex_lock(&k->ctx.lock);
	if (k->ctx.seq >= k->ctx.target) {
		WRITE_ONCE(k->ack, k->ctx.target);
		k->ctx.target++;
	}
	mutex_unlock(&k->ctx.lock);
	wake_up(&k->ackwq);
}

void nst_kstash(struct nst_kctx *k, struct task_struct *t)
{
	k->stash = t;
}

static void nst_kwake_copy(struct nst_kctx *k)
{
	struct task_struct *t = READ_ONCE(k->copy_task);

	if (t)
		wake_up_process(t);
}

static void nst_kwake(struct nst_kctx *k, int where)
{
	switch (where) {
	case K_GLOBAL:
		wake_up_process(nst_kglobal_task);
		break;
	case K_MEMBER:
		wake_up_process(k->task);
		break;
	case K_COPY:
		nst_kwake_copy(k);
		break;
	case K_ESCAPE:
		wake_up_process(k->stash);
		break;
	case K_PARK:
		wake_up_process(k->park_task);
		break;
	case K_OWNQ:
		nst_kwake_ownq(k);
		break;
	/* issue 34: ctx.seq, the flag its loop tests, is set: wake it */
	case K_SETTER:
		wake_up_process(k->setter_task);
		break;
	}
}

/* Start the thread of case where; false on failure. */
static bool nst_kstart(struct nst_kctx *k, int where)
{
	switch (where) {
	case K_GLOBAL:
		nst_kglobal_task = kthread_run(nst_kthread_global, k, "nst/kglobal");
		return !IS_ERR(nst_kglobal_task);
	case K_MEMBER:
		k->task = kthread_run(nst_kthread_member, k, "nst/kmember");
		return !IS_ERR(k->task);
	case K_COPY:
		k->copy_task = kthread_run(nst_kthread_copy, k, "nst/kcopy");
		return !IS_ERR(k->copy_task);
	case K_ESCAPE:
		nst_kstash(k, kthread_run(nst_kthread_escape, k, "nst/kescape"));
		return !IS_ERR(k->stash);
	case K_PARK:
		k->park_task = kthread_run(nst_kthread_park, k, "nst/kpark");
		return !IS_ERR(k->park_task);
	case K_OWNQ:
		k->ownq_task = kthread_run(nst_kthread_ownq, k, "nst/kownq");
		return !IS_ERR(k->ownq_task);
	/* issue 34 */
	case K_SETTER:
		k->setter_task = kthread_run(nst_kthread_setter, k, "nst/ksetter");
		return !IS_ERR(k->setter_task);
	}
	return false;
}

static void nst_kstop(struct nst_kctx *k, int where)
{
	switch (where) {
	case K_GLOBAL:
		kthread_stop(nst_kglobal_task);
		nst_kglobal_task = NULL;
		break;
	case K_MEMBER:
		kthread_stop(k->task);
		break;
	case K_COPY:
		kthread_stop(k->copy_task);
		break;
	case K_ESCAPE:
		kthread_stop(k->stash);
		break;
	case K_PARK:
		kthread_stop(k->park_task);
		break;
	case K_OWNQ:
		kthread_stop(k->ownq_task);
		break;
	/* issue 34 */
	case K_SETTER:
		kthread_stop(k->setter_task);
		break;
	}
}

static enum nst_verdict nst_case_kthread(const struct nst_case *c)
{
	long bound = msecs_to_jiffies(bound_ms) ?: 1;
	unsigned long i, done = 0, lost = 0, parks = 0;
	struct nst_kctx *k;
	bool abort = false;
	ktime_t t0;

	if (!rounds)
		return NST_SKIP;
	k = kzalloc(sizeof(*k), GFP_KERNEL);
	if (!k)
		return NST_FAIL;
	nst_ctx_init(&k->ctx);
	init_waitqueue_head(&k->ackwq);
	if (!nst_kstart(k, c->variant)) {
		kfree(k);
		return NST_FAIL;
	}
	t0 = ktime_get();
	for (i = 1; i <= rounds && !abort; i++) {
		unsigned int tries = 0;

		if (jitter_us)
			udelay(get_random_u32() % (jitter_us + 1));
		mutex_lock(&k->ctx.lock);
		k->ctx.seq = i;
		mutex_unlock(&k->ctx.lock);
		nst_kwake(k, c->variant);
		while (!wait_event_timeout(k->ackwq, READ_ONCE(k->ack) >= i, bound)) {
			if (!tries++)
				lost++;
			if (tries > 10) {
				abort = true;
				break;
			}
			nst_kwake(k, c->variant);
		}
		if (!abort)
			done = i;
		if (c->variant == K_PARK && i % 500 == 0) {
			kthread_park(k->park_task);
			kthread_unpark(k->park_task);
			parks++;
		}
	}
	nst_kstop(k, c->variant);
	pr_info("# %s: %s rounds=%lu/%lu lost=%lu parks=%lu evals=%lu elapsed_ms=%lld%s\n",
		c->name, c->func, done, rounds, lost, parks, k->ctx.evals,
		ktime_ms_delta(ktime_get(), t0), nst_unfixed(c) ? " (left alone by MODE=patch)" : "");
	kfree(k);
	return !abort && !lost && done == rounds ? NST_PASS : NST_FAIL;
}

/*
 * Wait until task sleeps: not TASK_RUNNING now and 10 ms later (the kthread
 * cases below have no condition counter to watch).
 */
static bool nst_task_asleep(struct task_struct *task)
{
	unsigned long deadline = jiffies + 5 * HZ;

	while (time_before(jiffies, deadline)) {
		if (!task_is_running(task)) {
			msleep(10);
			if (!task_is_running(task))
				return true;
		} else {
			usleep_range(500, 1000);
		}
	}
	return false;
}

/*
 * The two-thread rounds of the missed-wakeup and poll cases: a waiter
 * kthread runs wait() once per round, the main thread wakes it through
 * signal() and waits (bound_ms past the wait's timeout) for its ack.  The
 * waiter starts a round only once signal() has returned in the one before:
 * the poll's waker takes the lock after the waiter's wait has ended, and a
 * waiter that took it again first would poll for a round never signalled.
 */
struct nst_rounds {
	struct nst_thread t;		/* the waiter */
	unsigned long rounds;
	long timeout;			/* of each wait, in jiffies */
	bool settle;			/* signal only once the waiter sleeps */
	void (*arm)(struct nst_rounds *r, unsigned long i);	/* before round i */
	long (*wait)(struct nst_rounds *r);
	void (*signal)(struct nst_rounds *r, unsigned long i);
	void *obj;			/* the nst_mode or nst_poll */
	wait_queue_head_t ackwq;
	unsigned long round;		/* the waiter waits in this round */
	unsigned long ack;		/* the last round it finished */
	unsigned long signalled;	/* the last round signal() returned in */
	unsigned long done, lost, full, rets_le1, unsettled;
	s64 min_us, max_us;		/* each wait */
	s64 max_signal_us;		/* each signal() call */
	bool abort;
};

static void nst_rounds_waiter(struct nst_thread *t)
{
	struct nst_rounds *r = t->data;
	s64 full_us = jiffies_to_usecs(r->timeout) - jiffies_to_usecs(1);
	unsigned long i;

	r->min_us = S64_MAX;
	for (i = 1; i <= r->rounds && !READ_ONCE(r->abort); i++) {
		ktime_t t0;
		long ret;
		s64 us;

		if (!wait_event_timeout(r->ackwq, READ_ONCE(r->signalled) >= i - 1 || READ_ONCE(r->abort),
					r->timeout + 10 * HZ) || READ_ONCE(r->abort))
			break;
		r->arm(r, i);
		WRITE_ONCE(r->round, i);
		wake_up(&r->ackwq);
		t0 = ktime_get();
		ret = r->wait(r);
		us = ktime_us_delta(ktime_get(), t0);
		r->min_us = min(r->min_us, us);
		r->max_us = max(r->max_us, us);
		r->full += us >= full_us;
		r->rets_le1 += ret <= 1;
		r->done = i;
		WRITE_ONCE(r->ack, i);
		wake_up(&r->ackwq);
	}
}

/* Run the rounds; false when the waiter could not be started or stuck. */
static bool nst_rounds_run(struct nst_rounds *r, const char *name)
{
	long bound = r->timeout + (msecs_to_jiffies(bound_ms) ?: 1);
	unsigned long i;
	bool ok;

	init_waitqueue_head(&r->ackwq);
	r->t.fn = nst_rounds_waiter;
	r->t.data = r;
	if (nst_thread_start(&r->t, name, nst_cpu(0)))
		return false;
	for (i = 1; i <= r->rounds && !READ_ONCE(r->abort); i++) {
		unsigned int tries = 0;
		ktime_t t0;
		s64 us;

		if (!wait_event_timeout(r->ackwq, READ_ONCE(r->round) >= i, bound)) {
			WRITE_ONCE(r->abort, true);
			break;
		}
		if (r->settle && !nst_task_asleep(r->t.task))
			r->unsettled++;
		t0 = ktime_get();
		r->signal(r, i);
		us = ktime_us_delta(ktime_get(), t0);
		r->max_signal_us = max(r->max_signal_us, us);
		WRITE_ONCE(r->signalled, i);
		wake_up(&r->ackwq);
		while (!wait_event_timeout(r->ackwq, READ_ONCE(r->ack) >= i, bound)) {
			if (!tries++)
				r->lost++;
			if (tries > 10) {
				WRITE_ONCE(r->abort, true);
				break;
			}
			r->signal(r, i);
		}
	}
	wake_up(&r->ackwq);
	ok = nst_thread_wait(&r->t, 10 + 10 * jiffies_to_msecs(bound) / 1000);
	nst_thread_put(&r->t);
	return ok;
}

/*
 * The wrong-mode wakeup (nst.h): nst_mode_done() makes the condition true
 * and wakes with wake_up_interruptible().  The before form: 3 rounds of a
 * 100 ms wait, each signalled once the waiter sleeps; none is woken, each
 * waits out its full timeout and returns 0 or 1.  The after form (the
 * writer's wake_up_interruptible() made wake_up() by MODE=patch): rounds
 * rounds, each woken well before its timeout (10 * bound_ms).
 */
static void nst_mode_round_arm(struct nst_rounds *r, unsigned long i)
{
	struct nst_mode *m = r->obj;

	mutex_lock(&m->lock);
	m->busy = 1;
	mutex_unlock(&m->lock);
}

static long nst_mode_round_wait(struct nst_rounds *r)
{
	return nst_mode_wait(r->obj, r->timeout);
}

static void nst_mode_round_signal(struct nst_rounds *r, unsigned long i)
{
	nst_mode_done(r->obj);
}

static enum nst_verdict nst_case_mode(const struct nst_case *c)
{
	bool before = nst_is_before(), ran, good;
	ktime_t t0 = ktime_get();
	struct nst_rounds *r;
	struct nst_mode *m;

	if (!rounds)
		return NST_SKIP;
	r = kzalloc(sizeof(*r), GFP_KERNEL);
	m = kzalloc(sizeof(*m), GFP_KERNEL);
	if (!r || !m) {
		kfree(r);
		kfree(m);
		return NST_FAIL;
	}
	mutex_init(&m->lock);
	init_waitqueue_head(&m->wq);
	r->obj = m;
	r->arm = nst_mode_round_arm;
	r->wait = nst_mode_round_wait;
	r->signal = nst_mode_round_signal;
	r->rounds = before ? 3 : rounds;
	r->timeout = before ? msecs_to_jiffies(100) : 10 * (msecs_to_jiffies(bound_ms) ?: 1);
	r->settle = before;
	ran = nst_rounds_run(r, c->name);
	pr_info("# %s: %s(%u ms), its writer %s: rounds=%lu/%lu full_timeout=%lu returned_0_or_1=%lu lost=%lu unsettled=%lu min_wait_us=%lld max_wait_us=%lld\n",
		c->name, before ? "wait_event_timeout" : "the rewritten wait", jiffies_to_msecs(r->timeout),
		before ? "wakes with wake_up_interruptible()" : "as MODE=patch rewrote it",
		r->done, r->rounds, r->full, r->rets_le1, r->lost, r->unsettled,
		r->done ? r->min_us : 0, r->max_us);
	if (before)
		good = r->done == r->rounds && r->full == r->rounds && r->rets_le1 == r->rounds &&
		       !r->unsettled;
	else
		good = r->done == r->rounds && !r->full && !r->lost &&
		       r->max_us < jiffies_to_usecs(r->timeout) / 2;
	if (before)
		pr_info("# %s: the before form must wait out every timeout: the wakeup has the wrong mode\n",
			c->name);
	pr_info("# %s: case_elapsed_ms=%lld\n", c->name, ktime_ms_delta(ktime_get(), t0));
	if (ran) {
		kfree(m);
		kfree(r);
	}
	return ran && good ? NST_PASS : NST_FAIL;
}

/*
 * The poll whose only waker needs a lock the waiter holds (nst.h).  Both
 * forms, since MODE=patch must leave nst_poll_wait() alone: rounds / 50
 * rounds of the polling wait, each ending once the waker has set p->done
 * (well before its 10 * bound_ms timeout), then 3 rounds of
 * nst_poll_wait_woken(), the wait_woken() rewrite the poll rule refuses,
 * written here by hand: each waits out its 100 ms timeout, while the waker
 * sits in mutex_lock() until the waiter lets the lock go.
 */
static long nst_poll_wait_woken(struct nst_poll *p, long timeout)
{
	DEFINE_WAIT_FUNC(wait, woken_wake_function);

	mutex_lock(&p->lock);
	add_wait_queue(&p->wq, &wait);
	while (1) {
		if (nst_poll_seen(p)) {
			if (!timeout)
				timeout = 1;
			break;
		}
		if (!timeout)
			break;
		timeout = wait_woken(&wait, TASK_UNINTERRUPTIBLE, timeout);
	}
	remove_wait_queue(&p->wq, &wait);
	mutex_unlock(&p->lock);
	return timeout;
}

static void nst_poll_round_arm(struct nst_rounds *r, unsigned long i)
{
	struct nst_poll *p = r->obj;

	WRITE_ONCE(p->target, i);
}

static long nst_poll_round_wait(struct nst_rounds *r)
{
	struct nst_poll *p = r->obj;

	return r->settle ? nst_poll_wait_woken(p, r->timeout) : nst_poll_wait(p, r->timeout);
}

static void nst_poll_round_signal(struct nst_rounds *r, unsigned long i)
{
	struct nst_poll *p = r->obj;
	unsigned long deadline = jiffies + HZ;

	/* the waiter is in its wait once it holds the lock */
	while (!mutex_is_locked(&p->lock) && time_before(jiffies, deadline))
		usleep_range(50, 100);
	nst_poll_signal(p, i);
}

static enum nst_verdict nst_case_poll(const struct nst_case *c)
{
	struct nst_rounds *r[2];
	struct nst_poll *p[2];
	ktime_t t0 = ktime_get();
	bool ran = true, good;
	int k;

	if (!rounds)
		return NST_SKIP;
	for (k = 0; k < 2; k++) {
		r[k] = kzalloc(sizeof(*r[k]), GFP_KERNEL);
		p[k] = kzalloc(sizeof(*p[k]), GFP_KERNEL);
		if (!r[k] || !p[k])
			ran = false;
	}
	for (k = 0; k < 2 && ran; k++) {
		mutex_init(&p[k]->lock);
		init_waitqueue_head(&p[k]->wq);
		r[k]->obj = p[k];
		r[k]->arm = nst_poll_round_arm;
		r[k]->wait = nst_poll_round_wait;
		r[k]->signal = nst_poll_round_signal;
		r[k]->settle = k == 1;
		r[k]->rounds = k ? 3 : max(rounds / 50, 1UL);
		r[k]->timeout = k ? msecs_to_jiffies(100) : 10 * (msecs_to_jiffies(bound_ms) ?: 1);
		ran = nst_rounds_run(r[k], k ? "poll_woken" : "poll");
		pr_info("# %s: %s (%u ms, p->lock held): rounds=%lu/%lu full_timeout=%lu lost=%lu min_wait_us=%lld max_wait_us=%lld waker_max_us=%lld\n",
			c->name, k ? "hand-written wait_woken() form" : "nst_poll_wait()",
			jiffies_to_msecs(r[k]->timeout), r[k]->done, r[k]->rounds, r[k]->full,
			r[k]->lost, r[k]->done ? r[k]->min_us : 0, r[k]->max_us, r[k]->max_signal_us);
	}
	good = ran && r[0]->done == r[0]->rounds && !r[0]->full && !r[0]->lost &&
	       r[0]->max_us < jiffies_to_usecs(r[0]->timeout) / 2 &&
	       r[1]->done == r[1]->rounds && r[1]->full == r[1]->rounds && !r[1]->unsettled &&
	       r[1]->max_signal_us >= jiffies_to_usecs(r[1]->timeout) / 2;
	pr_info("# %s: case_elapsed_ms=%lld\n", c->name, ktime_ms_delta(ktime_get(), t0));
	if (ran)
		for (k = 0; k < 2; k++) {
			kfree(p[k]);
			kfree(r[k]);
		}
	return good ? NST_PASS : NST_FAIL;
}

/*
 * The thread exit (nst.h): start nst_kthread_exit(), wait until its
 * function runs, kthread_stop() it.  kthread_stop() returns what the
 * function returned (0), or -EINTR when kthread() stopped the thread
 * before calling it (kernel/kthread.c:372-378 in 6.1): a round counts only
 * when the function ran and returned.  The before form (or one left
 * unfixed): 3 rounds, each breaking out with the state set (the splat
 * prints once); the after form: rounds rounds, and no splat.
 */
static enum nst_verdict nst_case_kexit(const struct nst_case *c)
{
	long bound = msecs_to_jiffies(bound_ms) ?: 1;
	unsigned long i, n, done = 0, unstarted = 0, errors = 0;
	struct nst_kexit *x;
	ktime_t t0 = ktime_get();

	if (!rounds)
		return NST_SKIP;
	n = nst_is_before() || nst_unfixed(c) ? 3 : rounds;
	x = kzalloc(sizeof(*x), GFP_KERNEL);
	if (!x)
		return NST_FAIL;
	for (i = 1; i <= n; i++) {
		struct task_struct *t;
		int ret;

		init_completion(&x->started);
		t = kthread_run(nst_kthread_exit, x, "nst/kexit");
		if (IS_ERR(t)) {
			errors++;
			break;
		}
		if (!wait_for_completion_timeout(&x->started, bound))
			unstarted++;
		ret = kthread_stop(t);
		if (ret)
			errors++;
		else
			done++;
	}
	pr_info("# %s: %s rounds=%lu/%lu unstarted=%lu errors=%lu elapsed_ms=%lld%s\n",
		c->name, c->func, done, n, unstarted, errors, ktime_ms_delta(ktime_get(), t0),
		nst_unfixed(c) ? " (left alone by MODE=patch)" : "");
	kfree(x);
	return done == n && !unstarted && !errors ? NST_PASS : NST_FAIL;
}

/*
 * pkt_make_request_write()'s shape (nst.h): nst_var_wait_endblock() waits on
 * __var_waitqueue(&ctx->seq), woken by wake_up_var(&ctx->seq).  Each
 * round's signal holds ctx->lock, advances ctx->seq and wakes the variable;
 * it then waits (up to bound_ms) until the waiter blocks on ctx->lock in
 * the mutex_lock() after its loop, and wakes the variable again.  In the
 * before form that second wakeup takes the entry the loop left queued off
 * the hashed queue while the entry's stack frame is still live: without
 * it, the next round's init_wait_var_entry() would reinitialise an entry
 * still on the queue.  In the after form it finds no entry (finish_wait()
 * took it off).  Before: 3 rounds, for the warning; after: rounds rounds,
 * none lost.
 */
static void nst_var_round_arm(struct nst_rounds *r, unsigned long i)
{
	struct nst_ctx *ctx = r->obj;

	WRITE_ONCE(ctx->target, i);
}

static long nst_var_round_wait(struct nst_rounds *r)
{
	nst_var_wait_endblock(r->obj);
	return 0;
}

static void nst_var_round_signal(struct nst_rounds *r, unsigned long i)
{
	struct nst_ctx *ctx = r->obj;
	unsigned long deadline = jiffies + (msecs_to_jiffies(bound_ms) ?: 1);

	mutex_lock(&ctx->lock);
	WRITE_ONCE(ctx->seq, i);
	/* the store before __wake_up_bit()'s waitqueue_active() */
	smp_mb();
	wake_up_var(&ctx->seq);
	/* sleeping, not spinning: a spinning owner keeps the waiter spinning */
	while (list_empty(&ctx->lock.wait_list) && time_before(jiffies, deadline))
		usleep_range(20, 50);
	wake_up_var(&ctx->seq);
	mutex_unlock(&ctx->lock);
}

static enum nst_verdict nst_case_var_endblock(const struct nst_case *c)
{
	bool before = nst_is_before() || nst_unfixed(c), ran, good;
	ktime_t t0 = ktime_get();
	struct nst_rounds *r;
	struct nst_ctx *ctx;

	if (!rounds)
		return NST_SKIP;
	r = kzalloc(sizeof(*r), GFP_KERNEL);
	ctx = kzalloc(sizeof(*ctx), GFP_KERNEL);
	if (!r || !ctx) {
		kfree(r);
		kfree(ctx);
		return NST_FAIL;
	}
	nst_ctx_init(ctx);
	ctx->target = 0;
	r->obj = ctx;
	r->arm = nst_var_round_arm;
	r->wait = nst_var_round_wait;
	r->signal = nst_var_round_signal;
	r->rounds = before ? min(rounds, 3UL) : rounds;
	r->timeout = 10 * (msecs_to_jiffies(bound_ms) ?: 1);
	ran = nst_rounds_run(r, c->name);
	pr_info("# %s: %s form: rounds=%lu/%lu lost=%lu max_wait_us=%lld\n", c->name,
		before ? "before" : "after", r->done, r->rounds, r->lost, r->max_us);
	good = ran && r->done == r->rounds && !r->lost && !r->abort;
	pr_info("# %s: case_elapsed_ms=%lld\n", c->name, ktime_ms_delta(ktime_get(), t0));
	if (ran) {
		kfree(ctx);
		kfree(r);
	}
	return good ? NST_PASS : NST_FAIL;
}

static const struct nst_case nst_cases[] = {
	/* one case per wait variant: the waker makes the condition true */
	{ "wait_event", nst_case_variant, V_WAIT_EVENT, 0, 1 },
	{ "wait_event_interruptible", nst_case_variant, V_INTERRUPTIBLE, 0, 1 },
	{ "wait_event_timeout", nst_case_variant, V_TIMEOUT, 0, 1 },
	{ "wait_event_interruptible_timeout", nst_case_variant, V_INTERRUPTIBLE_TIMEOUT, 0, 1 },
	{ "wait_event_killable", nst_case_variant, V_KILLABLE, 0, 1 },
	{ "prepare_to_wait_loop", nst_case_variant, V_PREPARE_TO_WAIT, 0, 1 },
	{ "set_current_state_loop", nst_case_variant, V_SET_CURRENT_STATE, 0, 1 },
	/* semantics: the same results before and after the rewrite */
	{ "timeout_expires", nst_case_timeout_expires, V_TIMEOUT, 0, 1 },
	{ "interruptible_timeout_expires", nst_case_timeout_expires, V_INTERRUPTIBLE_TIMEOUT, 0, 1 },
	{ "timeout_remainder", nst_case_remainder, V_TIMEOUT, 0, 1 },
	{ "interruptible_timeout_remainder", nst_case_remainder, V_INTERRUPTIBLE_TIMEOUT, 0, 1 },
	{ "interruptible_signal", nst_case_signal, V_INTERRUPTIBLE, SIGUSR1, 1 },
	{ "interruptible_timeout_signal", nst_case_signal, V_INTERRUPTIBLE_TIMEOUT, SIGUSR1, 1 },
	{ "killable_sigkill", nst_case_signal, V_KILLABLE, SIGKILL, 1 },
	{ "killable_ignores_sigusr1", nst_case_killable_ignores, V_KILLABLE, SIGUSR1, 1 },
	/* the silent kind: no warning, a spinning wait */
	{ "msleep_in_condition", nst_case_msleep, V_TIMEOUT_MSLEEP, 0, 0 },
	/* no lost wakeup in rounds wait/wake rounds across two CPUs */
	{ "stress_wait_event", nst_case_stress, V_WAIT_EVENT, 0, 1 },
	{ "stress_wait_event_interruptible", nst_case_stress, V_INTERRUPTIBLE, 0, 1 },
	{ "stress_wait_event_timeout", nst_case_stress, V_TIMEOUT, 0, 1 },
	{ "stress_wait_event_interruptible_timeout", nst_case_stress, V_INTERRUPTIBLE_TIMEOUT, 0, 1 },
	{ "stress_wait_event_killable", nst_case_stress, V_KILLABLE, 0, 1 },
	{ "stress_prepare_to_wait_loop", nst_case_stress, V_PREPARE_TO_WAIT, 0, 1 },
	{ "stress_set_current_state_loop", nst_case_stress, V_SET_CURRENT_STATE, 0, 1 },
	/* the waker rule: a kthread woken by wake_up_process() through ... */
	{ "kthread_global", nst_case_kthread, K_GLOBAL, 0, 1, "nst_kthread_global" },
	{ "kthread_member", nst_case_kthread, K_MEMBER, 0, 1, "nst_kthread_member" },
	{ "kthread_copy", nst_case_kthread, K_COPY, 0, 1, "nst_kthread_copy" },
	{ "kthread_escape", nst_case_kthread, K_ESCAPE, 0, 1, "nst_kthread_escape" },
	{ "kthread_park", nst_case_kthread, K_PARK, 0, 1, "nst_kthread_park" },
	{ "kthread_ownq", nst_case_kthread, K_OWNQ, 0, 1, "nst_kthread_ownq" },
	/* a wakeup of the wrong mode: none before, MODE=patch fixes the writer */
	{ "missed_wakeup_mode", nst_case_mode, -1, 0, 1, "nst_mode_wait" },
	/* a poll whose waker needs the waiter's lock: MODE=patch must refuse it */
	{ "poll_held_lock", nst_case_poll, -1, 0, 0, "nst_poll_wait" },
	/* a thread that leaves its wait loop with the state set: kthread_exit() warns */
	{ "kthread_exit", nst_case_kexit, -1, 0, 1, "nst_kthread_exit" },
	/* issue 34: a prepare_to_wait_exclusive() loop left by gotos (sctp) */
	{ "prepare_to_wait_goto", nst_case_variant, V_PTW_GOTO, 0, 1 },
	{ "stress_prepare_to_wait_goto", nst_case_stress, V_PTW_GOTO, 0, 1 },
	/* a prepare_to_wait() loop on a variable's queue that leaves its entry queued */
	{ "var_endblock", nst_case_var_endblock, -1, 0, 1, "nst_var_wait_endblock" },
	/* an entry with its own wake function: TASK_RUNNING restored before the call */
	{ "own_wake_function", nst_case_variant, V_OWN_WAKE, 0, 1 },
	{ "stress_own_wake_function", nst_case_stress, V_OWN_WAKE, 0, 1 },
	/* issue 34: a set_current_state() in the middle of the loop, moved */
	{ "kthread_setter", nst_case_kthread, K_SETTER, 0, 1, "nst_kthread_setter" },
};

/* ---- selection, KTAP, and the module parameters ------------------------ */

static unsigned int nst_pass, nst_fail, nst_skip;

static bool nst_selected(const char *name)
{
	const char *p = only;

	if (!p || !*p)
		return true;
	while (*p) {
		size_t len = strcspn(p, ",");

		if (len && p[len - 1] == '*') {
			if (!strncmp(name, p, len - 1))
				return true;
		} else if (len == strlen(name) && !strncmp(name, p, len)) {
			return true;
		}
		p += len;
		if (*p == ',')
			p++;
	}
	return false;
}

/* Whether c's before.c function is one MODE=patch left alone (unfixed=). */
static bool nst_unfixed(const struct nst_case *c)
{
	size_t len = c->func ? strlen(c->func) : 0;
	const char *p = unfixed;

	if (!len || !p)
		return false;
	while (*p) {
		size_t n = strcspn(p, ",");

		if (n == len && !strncmp(p, c->func, len))
			return true;
		p += n;
		if (*p == ',')
			p++;
	}
	return false;
}

static void nst_run_case(unsigned int number, const struct nst_case *c)
{
	enum nst_verdict v;
	unsigned int i;

	if (nst_stuck) {
		pr_info("ok %u %s # SKIP an earlier case left a thread stuck\n",
			number, c->name);
		nst_skip++;
		return;
	}
	if (nst_is_before() || nst_unfixed(c))
		for (i = 0; i < c->before_splats; i++)
			pr_info("# expect-splat: " NST_SPLAT "\n");
	v = c->run(c);
	switch (v) {
	case NST_PASS:
		pr_info("ok %u %s\n", number, c->name);
		nst_pass++;
		break;
	case NST_SKIP:
		pr_info("ok %u %s # SKIP rounds=0\n", number, c->name);
		nst_skip++;
		break;
	default:
		pr_info("not ok %u %s\n", number, c->name);
		nst_fail++;
		break;
	}
}

static int nst_run_set(const char *val, const struct kernel_param *kp)
{
	char buf[64], *name;
	unsigned int i, number = 0;

	strscpy(buf, val, sizeof(buf));
	name = strim(buf);
	for (i = 0; i < ARRAY_SIZE(nst_cases); i++) {
		if (!nst_selected(nst_cases[i].name))
			continue;
		number++;
		if (!strcmp(name, nst_cases[i].name)) {
			nst_run_case(number, &nst_cases[i]);
			return 0;
		}
	}
	pr_err("nestsleep_tests: no selected case '%s'\n", name);
	return -EINVAL;
}

static int nst_run_get(char *buf, const struct kernel_param *kp)
{
	return scnprintf(buf, PAGE_SIZE, "\n");
}

static const struct kernel_param_ops nst_run_ops = {
	.set = nst_run_set,
	.get = nst_run_get,
};
module_param_cb(run, &nst_run_ops, NULL, 0600);
MODULE_PARM_DESC(run, "write a case name to run it");

static int nst_cases_set(const char *val, const struct kernel_param *kp)
{
	return -EPERM;
}

static int nst_cases_get(char *buf, const struct kernel_param *kp)
{
	int len = 0;
	unsigned int i;

	for (i = 0; i < ARRAY_SIZE(nst_cases); i++)
		if (nst_selected(nst_cases[i].name))
			len += scnprintf(buf + len, PAGE_SIZE - len, "%s%s",
					 len ? " " : "", nst_cases[i].name);
	len += scnprintf(buf + len, PAGE_SIZE - len, "\n");
	return len;
}

static const struct kernel_param_ops nst_cases_ops = {
	.set = nst_cases_set,
	.get = nst_cases_get,
};
module_param_cb(cases, &nst_cases_ops, NULL, 0444);
MODULE_PARM_DESC(cases, "the selected cases, in run order (read-only)");

static int __init nst_init(void)
{
	unsigned int i, n = 0;

	for (i = 0; i < ARRAY_SIZE(nst_cases); i++)
		n += nst_selected(nst_cases[i].name);
	pr_info("KTAP version 1\n");
	pr_info("1..%u\n", n);
	pr_info("# nestsleep_tests: variant=%s rounds=%lu bound_ms=%u jitter_us=%u online_cpus=%u HZ=%u\n",
		NST_VARIANT, rounds, bound_ms, jitter_us, num_online_cpus(), HZ);
	return 0;
}

static void __exit nst_exit(void)
{
	pr_info("# nestsleep_tests: pass:%u fail:%u skip:%u\n",
		nst_pass, nst_fail, nst_skip);
}

module_init(nst_init);
module_exit(nst_exit);

MODULE_DESCRIPTION("nestsleep runtime proof: nested sleeps in wait loops, before and after the rewrite");
MODULE_LICENSE("GPL");
