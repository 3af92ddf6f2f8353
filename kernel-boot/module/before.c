// SPDX-License-Identifier: GPL-2.0-only
/*
 * before.c - the "before" wait bodies: nested sleeps, as nestsleep finds
 * them in the kernel.
 *
 * Each wait is alone in a small function, so that nestsleep MODE=patch can
 * rewrite this file into after.c; the "after" form is generated, never
 * written by hand.  Every condition (or loop body) below takes ctx->lock, a
 * mutex, while the task state is not TASK_RUNNING.  Under
 * CONFIG_DEBUG_ATOMIC_SLEEP=y each one prints, once per clear_warn_once:
 *
 *   do not call blocking ops when !TASK_RUNNING; state=2 set at ...
 *
 * nst_wait_event_timeout_msleep() is the silent kind: msleep() in the
 * condition resets the state with no warning, and the wait spins.
 */
#include <linux/delay.h>
#include <linux/kthread.h>
#include <linux/mutex.h>
#include <linux/sched.h>
#include <linux/sched/signal.h>
#include <linux/wait.h>
#include <linux/wait_bit.h>

#include "nst.h"

/* The condition: it takes a mutex, so it may sleep. */
static noinline bool nst_reached(struct nst_ctx *ctx)
{
	bool reached;

	mutex_lock(&ctx->lock);
	ctx->evals++;
	reached = ctx->seq >= ctx->target;
	mutex_unlock(&ctx->lock);
	return reached;
}

/* A condition that sleeps without warning: msleep() sets TASK_RUNNING. */
static noinline bool nst_reached_slowly(struct nst_ctx *ctx)
{
	ctx->evals++;
	msleep(1);
	return READ_ONCE(ctx->seq) >= READ_ONCE(ctx->target);
}

void nst_wait_event(struct nst_ctx *ctx)
{
	wait_event(ctx->wq, nst_reached(ctx));
}

int nst_wait_event_interruptible(struct nst_ctx *ctx)
{
	return wait_event_interruptible(ctx->wq, nst_reached(ctx));
}

long nst_wait_event_timeout(struct nst_ctx *ctx, long timeout)
{
	return wait_event_timeout(ctx->wq, nst_reached(ctx), timeout);
}

long nst_wait_event_interruptible_timeout(struct nst_ctx *ctx, long timeout)
{
	return wait_event_interruptible_timeout(ctx->wq, nst_reached(ctx),
						timeout);
}

int nst_wait_event_killable(struct nst_ctx *ctx)
{
	return wait_event_killable(ctx->wq, nst_reached(ctx));
}

void nst_prepare_to_wait_loop(struct nst_ctx *ctx)
{
	DEFINE_WAIT(wait);

	for (;;) {
		prepare_to_wait(&ctx->wq, &wait, TASK_UNINTERRUPTIBLE);
		if (nst_reached(ctx))
			break;
		schedule();
	}
	finish_wait(&ctx->wq, &wait);
}

/*
 * The Bluetooth cmtp/bnep shape: the thread sits on a wait queue with a
 * default entry and is woken by wake_up_process(ctx->waiter).
 */
void nst_set_current_state_loop(struct nst_ctx *ctx)
{
	DECLARE_WAITQUEUE(wait, current);

	ctx->waiter = current;
	add_wait_queue(&ctx->wq, &wait);
	for (;;) {
		set_current_state(TASK_UNINTERRUPTIBLE);
		if (nst_reached(ctx))
			break;
		schedule();
	}
	__set_current_state(TASK_RUNNING);
	remove_wait_queue(&ctx->wq, &wait);
}

long nst_wait_event_timeout_msleep(struct nst_ctx *ctx, long timeout)
{
	return wait_event_timeout(ctx->wq, nst_reached_slowly(ctx), timeout);
}

/*
 * The kthread cases (see nst.h): each thread waits until the runner's waker
 * advances ctx->seq, acks the round, and waits again until kthread_stop().
 */
DECLARE_WAIT_QUEUE_HEAD(nst_kglobal_wq);

/* woken by wake_up_process(nst_kglobal_task) */
int nst_kthread_global(void *arg)
{
	struct nst_kctx *k = arg;

	while (!kthread_should_stop()) {
		wait_event(nst_kglobal_wq, nst_reached(&k->ctx) || kthread_should_stop());
		nst_kround_done(k);
	}
	return 0;
}

/* woken by wake_up_process(k->task) */
int nst_kthread_member(void *arg)
{
	struct nst_kctx *k = arg;

	while (!kthread_should_stop()) {
		wait_event(k->ctx.wq, nst_reached(&k->ctx) || kthread_should_stop());
		nst_kround_done(k);
	}
	return 0;
}

/* woken by a copy of k->copy_task, made with READ_ONCE() */
int nst_kthread_copy(void *arg)
{
	struct nst_kctx *k = arg;

	while (!kthread_should_stop()) {
		wait_event_interruptible(k->ctx.wq, nst_reached(&k->ctx) || kthread_should_stop());
		nst_kround_done(k);
	}
	return 0;
}

/* its task pointer goes through nst_kstash(): nestsleep must refuse it */
int nst_kthread_escape(void *arg)
{
	struct nst_kctx *k = arg;

	while (!kthread_should_stop()) {
		wait_event(k->ctx.wq, nst_reached(&k->ctx) || kthread_should_stop());
		nst_kround_done(k);
	}
	return 0;
}

/* parked now and then with kthread_park() */
int nst_kthread_park(void *arg)
{
	struct nst_kctx *k = arg;

	while (!kthread_should_stop()) {
		if (kthread_should_park()) {
			kthread_parkme();
			continue;
		}
		wait_event(k->ctx.wq, nst_reached(&k->ctx) || kthread_should_park() ||
			   kthread_should_stop());
		nst_kround_done(k);
	}
	return 0;
}

/*
 * The hidp shape (seed 005, before 5da8e47d849d): a set_current_state()
 * loop on no wait queue, woken by wake_up_process(k->ownq_task) from
 * nst_kwake_ownq() below.
 */
int nst_kthread_ownq(void *arg)
{
	struct nst_kctx *k = arg;

	for (;;) {
		set_current_state(TASK_UNINTERRUPTIBLE);
		if (kthread_should_stop())
			break;
		if (nst_reached(&k->ctx)) {
			__set_current_state(TASK_RUNNING);
			nst_kround_done(k);
			continue;
		}
		schedule();
	}
	__set_current_state(TASK_RUNNING);
	return 0;
}

void nst_kwake_ownq(struct nst_kctx *k)
{
	wake_up_process(k->ownq_task);
}

/*
 * The wrong-mode wakeup.  The condition takes m->lock, uncontended: the
 * checker reports the wait (the before form warns once), but the task does
 * not sleep in it, so the wait sleeps in its schedule_timeout() and ends
 * only on a wakeup of its state, or at its timeout.
 */
static noinline bool nst_mode_busy(struct nst_mode *m)
{
	bool busy;

	mutex_lock(&m->lock);
	busy = m->busy != 0;
	mutex_unlock(&m->lock);
	return busy;
}

long nst_mode_wait(struct nst_mode *m, long timeout)
{
	return wait_event_timeout(m->wq, !nst_mode_busy(m), timeout);
}

/* the writer: wake_up_interruptible() does not wake TASK_UNINTERRUPTIBLE */
void nst_mode_done(struct nst_mode *m)
{
	mutex_lock(&m->lock);
	m->busy = 0;
	mutex_unlock(&m->lock);
	wake_up_interruptible(&m->wq);
}

/*
 * The poll: msleep() in the condition returns in TASK_RUNNING, so the wait
 * re-reads p->done every pass and ends once the waker has set it, woken or
 * not.  A wait_woken() form of it would sleep until nst_poll_signal()'s
 * wake_up(), which waits for p->lock, which the waiter holds: it waits out
 * its timeout (nestsleep_test.c's nst_poll_wait_woken() shows it).
 */
bool nst_poll_seen(struct nst_poll *p)
{
	p->evals++;
	msleep(1);
	return READ_ONCE(p->done) >= READ_ONCE(p->target);
}

long nst_poll_wait(struct nst_poll *p, long timeout)
{
	long ret;

	mutex_lock(&p->lock);
	ret = wait_event_timeout(p->wq, nst_poll_seen(p), timeout);
	mutex_unlock(&p->lock);
	return ret;
}

/* the only waker of p->wq: it sets p->done, then needs p->lock */
void nst_poll_signal(struct nst_poll *p, unsigned long seq)
{
	WRITE_ONCE(p->done, seq);
	mutex_lock(&p->lock);
	p->signals++;
	mutex_unlock(&p->lock);
	wake_up(&p->wq);
}

/*
 * The thread exit (nst.h): every kthread_stop() finds the loop below
 * either asleep in schedule(), and its wakeup brings the thread back to
 * set_current_state() and the break, or before the test: either way the
 * break leaves with the state set.
 */
int nst_kthread_exit(void *arg)
{
	struct nst_kexit *x = arg;

	complete(&x->started);
	for (;;) {
		set_current_state(TASK_INTERRUPTIBLE);
		if (kthread_should_stop())
			break;
		schedule();
	}
	return 0;
}

/*
 * The sctp_wait_for_sndbuf() shape: an exclusive prepare_to_wait() loop
 * left by gotos to labels that "goto out", whose finish_wait() ends the
 * wait; a timed wait that returns the time left, 0 at its timeout.
 */
long nst_prepare_to_wait_goto(struct nst_ctx *ctx, long timeout)
{
	DEFINE_WAIT(wait);
	long ret = timeout;

	for (;;) {
		prepare_to_wait_exclusive(&ctx->wq, &wait, TASK_INTERRUPTIBLE);
		if (signal_pending(current))
			goto interrupted;
		if (nst_reached(ctx))
			break;
		if (!ret)
			goto timed_out;
		ret = schedule_timeout(ret);
	}
out:
	finish_wait(&ctx->wq, &wait);
	return ret;

interrupted:
	ret = -ERESTARTSYS;
	goto out;

timed_out:
	ret = 0;
	goto out;
}

/*
 * pkt_make_request_write()'s shape: a prepare_to_wait_event() loop on the
 * hashed queue of a variable, woken by wake_up_var(&ctx->seq)
 * (nestsleep_test.c's nst_var_round_signal()), with a wait_bit_queue_entry
 * local to the block that the loop ends.  The loop leaves with the entry
 * still queued and the task state set, and the mutex_lock() after it may
 * sleep; MODE=patch adds the finish_wait() after the loop.
 */
void nst_var_wait_endblock(struct nst_ctx *ctx)
{
	if (READ_ONCE(ctx->seq) < READ_ONCE(ctx->target)) {
		struct wait_bit_queue_entry wqe;

		init_wait_var_entry(&wqe, &ctx->seq, 0);
		for (;;) {
			prepare_to_wait_event(__var_waitqueue(&ctx->seq),
					      &wqe.wq_entry, TASK_UNINTERRUPTIBLE);
			if (READ_ONCE(ctx->seq) >= READ_ONCE(ctx->target))
				break;
			schedule();
		}
	}
	mutex_lock(&ctx->lock);
	ctx->evals++;
	mutex_unlock(&ctx->lock);
}

/*
 * A wait entry with a wake function of its own (6.1 io_cqring_wait()):
 * nst_own_wake_function() wakes only when the condition holds.  The first
 * pass asks for a retry without sleeping (io_cqring_wait_schedule()'s
 * overflow return), so the next pass takes ctx->lock in nst_own_flush()
 * in the state prepare_to_wait_exclusive() set.  MODE=patch keeps the
 * entry and restores TASK_RUNNING before nst_own_flush().
 */
struct nst_own_wait {
	struct wait_queue_entry wq;
	struct nst_ctx *ctx;
};

static noinline bool nst_own_should_wake(struct nst_ctx *ctx)
{
	return READ_ONCE(ctx->seq) >= READ_ONCE(ctx->target);
}

static int nst_own_wake_function(struct wait_queue_entry *curr,
				 unsigned int mode, int wake_flags, void *key)
{
	struct nst_own_wait *ow = container_of(curr, struct nst_own_wait, wq);

	if (nst_own_should_wake(ow->ctx))
		return autoremove_wake_function(curr, mode, wake_flags, key);
	return 0;
}

/* io_cqring_overflow_flush(): takes the mutex */
static noinline void nst_own_flush(struct nst_ctx *ctx)
{
	mutex_lock(&ctx->lock);
	ctx->evals++;
	mutex_unlock(&ctx->lock);
}

/* io_cqring_wait_schedule(): tests the condition, may retry at once */
static noinline int nst_own_schedule(struct nst_own_wait *ow, bool retry)
{
	if (nst_own_should_wake(ow->ctx))
		return 0;
	if (retry)
		return 1;
	schedule();
	return 1;
}

void nst_own_wake_wait(struct nst_ctx *ctx)
{
	struct nst_own_wait ow;
	bool retry = true;
	int ret;

	init_waitqueue_func_entry(&ow.wq, nst_own_wake_function);
	ow.wq.private = current;
	INIT_LIST_HEAD(&ow.wq.entry);
	ow.ctx = ctx;

	do {
		nst_own_flush(ctx);
		prepare_to_wait_exclusive(&ctx->wq, &ow.wq, TASK_UNINTERRUPTIBLE);
		ret = nst_own_schedule(&ow, retry);
		retry = false;
	} while (ret > 0);
	finish_wait(&ctx->wq, &ow.wq);
}

/*
 * Issue 34, a set_current_state() in the middle of its loop (6.1
 * apm_mainloop()'s shape, with a condition): the setter, then work that
 * takes ctx.lock, then the test of ctx.seq, the flag the runner advances
 * before its wake_up_process().  MODE=patch moves the setter after the
 * work (scripts/nestsleep/fix/setter.py); the test after its new place
 * keeps a wakeup that comes during the work.
 */
static noinline void nst_ksetter_work(struct nst_kctx *k)
{
	if (nst_reached(&k->ctx))
		nst_kround_done(k);
}

int nst_kthread_setter(void *arg)
{
	struct nst_kctx *k = arg;

	while (!kthread_should_stop()) {
		k->setter_passes++;
		set_current_state(TASK_UNINTERRUPTIBLE);
		nst_ksetter_work(k);
		if (READ_ONCE(k->ctx.seq) < READ_ONCE(k->ctx.target) && !kthread_should_stop())
			schedule();
		__set_current_state(TASK_RUNNING);
	}
	return 0;
}
