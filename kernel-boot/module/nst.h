/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * nst.h - the interface between the test runner (nestsleep_test.c) and
 * the wait bodies (before.c, or the after.c that nestsleep MODE=patch
 * generates from it).
 *
 * Every wait body waits on one struct nst_ctx until ctx->seq reaches
 * ctx->target.  The waker advances ctx->seq under ctx->lock and then calls
 * wake_up(&ctx->wq) or, for the set_current_state() loop,
 * wake_up_process(ctx->waiter).
 */
#ifndef NST_H
#define NST_H

#include <linux/completion.h>
#include <linux/mutex.h>
#include <linux/wait.h>
#include <linux/sched.h>

struct nst_ctx {
	struct mutex lock;		/* taken by the "before" conditions */
	wait_queue_head_t wq;		/* woken by wake_up() */
	unsigned long seq;		/* advanced by the waker, under lock */
	unsigned long target;		/* the waiter waits for seq >= target */
	unsigned long evals;		/* condition evaluations */
	struct task_struct *waiter;	/* for wake_up_process() wakers */
};

/*
 * The kthread cases: a kthread of before.c waits round after round by
 * itself, and the runner wakes it through a task pointer kept in one of the
 * places where nestsleep's waker rule must find it: a global, a struct
 * member, a member the waker copies with READ_ONCE(), a pointer that
 * escapes through nst_kstash() (the rule must refuse), a thread that is
 * also parked (refused on a kernel whose wait_woken() ignores parking), and
 * a set_current_state() loop on no wait queue, woken by before.c's
 * nst_kwake_ownq() (MODE=patch gives it a queue of its own, as hidp's fix
 * 5da8e47d849d did; its waker must be in its own file).
 */
struct nst_kctx {
	struct nst_ctx ctx;		/* lock, wq, seq, target, evals */
	wait_queue_head_t ackwq;	/* the thread acks each round here */
	unsigned long ack;		/* the last round the thread finished */
	struct task_struct *task;	/* the member case */
	struct task_struct *copy_task;	/* the local-copy case */
	struct task_struct *stash;	/* the escape case, set by nst_kstash() */
	struct task_struct *park_task;	/* the park case */
	struct task_struct *ownq_task;	/* the own-queue case */
	/* issue 34: a setter in the middle of the loop (fix/setter.py) */
	struct task_struct *setter_task;	/* the moved-setter case */
	unsigned long setter_passes;	/* its passes through the loop */
};

extern struct task_struct *nst_kglobal_task;	/* the global case */
extern wait_queue_head_t nst_kglobal_wq;

/* runner: the thread finished a round (acks it, wakes the waker) */
void nst_kround_done(struct nst_kctx *k);
/* runner: keeps a task pointer where nestsleep cannot follow it */
void nst_kstash(struct nst_kctx *k, struct task_struct *t);

int nst_kthread_global(void *arg);
int nst_kthread_member(void *arg);
int nst_kthread_copy(void *arg);
int nst_kthread_escape(void *arg);
int nst_kthread_park(void *arg);
int nst_kthread_ownq(void *arg);
void nst_kwake_ownq(struct nst_kctx *k);
/* issue 34: the moved-setter case, woken by wake_up_process() after the
 * runner has advanced ctx.seq (the flag its loop tests) */
int nst_kthread_setter(void *arg);

/* One function per wait variant.  Each one is rewritten as a unit. */
void nst_wait_event(struct nst_ctx *ctx);
int nst_wait_event_interruptible(struct nst_ctx *ctx);
long nst_wait_event_timeout(struct nst_ctx *ctx, long timeout);
long nst_wait_event_interruptible_timeout(struct nst_ctx *ctx, long timeout);
int nst_wait_event_killable(struct nst_ctx *ctx);
void nst_prepare_to_wait_loop(struct nst_ctx *ctx);
void nst_set_current_state_loop(struct nst_ctx *ctx);

/* A condition that resets the task state silently (msleep). */
long nst_wait_event_timeout_msleep(struct nst_ctx *ctx, long timeout);

/*
 * The wrong-mode wakeup (acpi_dbg's shape): nst_mode_wait() waits in
 * TASK_UNINTERRUPTIBLE until m->busy is 0; nst_mode_done() clears it and
 * wakes the queue with wake_up_interruptible(), which wakes no such task.
 * MODE=patch turns that into wake_up() (the missed-wakeup fix).
 */
struct nst_mode {
	struct mutex lock;		/* taken by the condition */
	wait_queue_head_t wq;
	unsigned long busy;		/* the waiter waits for 0 */
};

long nst_mode_wait(struct nst_mode *m, long timeout);
void nst_mode_done(struct nst_mode *m);

/*
 * A poll whose only waker needs a lock the waiter holds: nst_poll_wait()
 * holds p->lock across a wait whose condition msleep()s on every pass;
 * nst_poll_signal() sets p->done, then takes p->lock before its wake_up().
 * MODE=patch must leave the wait alone (the poll rule).
 */
struct nst_poll {
	struct mutex lock;		/* held by the waiter across the wait */
	wait_queue_head_t wq;
	unsigned long done;		/* set by the waker, without the lock */
	unsigned long target;		/* the waiter waits for done >= target */
	unsigned long evals;		/* condition evaluations */
	unsigned long signals;		/* the waker's bookkeeping, under lock */
};

bool nst_poll_seen(struct nst_poll *p);
long nst_poll_wait(struct nst_poll *p, long timeout);
void nst_poll_signal(struct nst_poll *p, unsigned long seq);

/*
 * The thread exit (w1_process() before 36225a7c72e9, dlm_recoverd(),
 * ubifs_bg_thread()): nst_kthread_exit() completes x->started, then waits
 * in a set_current_state() loop until kthread_stop() and breaks out of it
 * with the task state set.  kthread() then calls kthread_exit(), whose
 * do_exit() -> exit_signals() calls might_sleep() (through
 * percpu_down_read() with cgroups, directly without): the before form warns
 * on every stop, once per clear_warn_once.  MODE=patch restores
 * TASK_RUNNING before the break.
 */
struct nst_kexit {
	struct completion started;	/* the thread function runs */
};

int nst_kthread_exit(void *arg);

/* issue 34: a prepare_to_wait_exclusive() loop left by gotos (sctp) */
long nst_prepare_to_wait_goto(struct nst_ctx *ctx, long timeout);

/*
 * pkt_make_request_write()'s shape: nst_var_wait_endblock() waits until
 * ctx->seq reaches ctx->target on __var_waitqueue(&ctx->seq), woken by
 * wake_up_var(&ctx->seq); its loop leaves the entry queued (MODE=patch
 * adds the finish_wait()).
 */
void nst_var_wait_endblock(struct nst_ctx *ctx);

/* a wait entry with a wake function of its own (io_cqring_wait()) */
void nst_own_wake_wait(struct nst_ctx *ctx);

#endif /* NST_H */
