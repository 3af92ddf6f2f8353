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

#endif /* NST_H */
