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
#include <linux/wait.h>

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
