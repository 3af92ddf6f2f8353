// SPDX-License-Identifier: GPL-2.0-only
/*
 * io_uring: drive io_cqring_wait() (io_uring/io_uring.c) into the overflow
 * retry of its wait loop.  In 6.1 the loop is
 *
 *	do {
 *		if (!io_cqring_overflow_flush(ctx))	// mutex_lock(uring_lock)
 *			...				// if the overflow bit is set
 *		prepare_to_wait_exclusive(&ctx->cq_wait, ..., TASK_INTERRUPTIBLE);
 *		ret = io_cqring_wait_schedule(ctx, &iowq, &timeout);
 *	} while (ret > 0);
 *
 * and io_cqring_wait_schedule() returns 1 without scheduling when it finds
 * IO_CHECK_CQ_OVERFLOW_BIT set: the next io_cqring_overflow_flush() takes
 * the mutex in TASK_INTERRUPTIBLE (fixed upstream by "io_uring: finish
 * waiting before flushing overflow entries").  The flush at the top of the
 * loop must have found the bit clear (or cleared it), so the bit has to be
 * set between that flush and the check, while the waiter still wants more
 * CQEs than the committed CQ tail shows.
 *
 * How this program gets there, with raw syscalls and no liburing:
 * - one ring with E SQ entries and E CQ entries (IORING_SETUP_CQSIZE), all
 *   SQEs NOPs;
 * - the CQ holds E-1 CQEs and the overflow list is empty;
 * - a waiter thread calls io_uring_enter(GETEVENTS, min_complete=E) with a
 *   zero timeout (IORING_ENTER_EXT_ARG) again and again: each call passes
 *   through the wait loop once (flush, prepare_to_wait, the check) and
 *   returns -ETIME;
 * - the main thread submits E NOPs in one io_uring_enter(): they complete
 *   inline and are posted in one batch under completion_lock: the first
 *   fills the CQ, the next E-1 go to the overflow list, and the first of
 *   those sets IO_CHECK_CQ_OVERFLOW_BIT.  The CQ tail the waiter compares
 *   with (rings->cq.tail) is committed only after the whole batch, so a
 *   waiter that reads check_cq during the batch returns 1 in
 *   TASK_INTERRUPTIBLE and calls mutex_lock() (the submitter holds
 *   uring_lock);
 * - the main thread consumes E CQEs (writes cq.head) and calls
 *   io_uring_enter(GETEVENTS, min_complete=0), which flushes the E-1
 *   overflowed CQEs into the CQ: back to the start.
 * The main thread stops when the kernel log shows the "do not call blocking
 * ops when !TASK_RUNNING" warning (/dev/kmsg, or else the W taint flag in
 * /proc/sys/kernel/tainted changing) or after the time limit.
 * At the end it checks that io_cqring_wait() really sleeps: the waiter
 * waits for 1 CQE on an empty CQ without timeout, the main thread posts it
 * after 200 ms.
 *
 * Usage: io_uring [-t seconds] [-e entries] [-d us]
 * (-d: the longest busy wait before a batch, in microseconds)
 * Prints "# ..." lines; exit 0 when the race ran (overflows posted, the
 * waiter called with fewer than E CQEs ready) and the final wait slept,
 * 77 without io_uring (ENOSYS), 2 on bad arguments, 1 otherwise.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/io_uring.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

struct ring {
	int fd;
	unsigned entries;		/* SQ and CQ size */
	unsigned *sq_tail, *sq_array, *sq_flags;
	unsigned *cq_head, *cq_tail;
	struct io_uring_sqe *sqes;
};

static struct ring R;
static atomic_int stop_waiter;
static atomic_long n_calls, n_wait, n_err;

static int sys_setup(unsigned entries, struct io_uring_params *p)
{
	return syscall(__NR_io_uring_setup, entries, p);
}

static int sys_enter(int fd, unsigned to_submit, unsigned min_complete,
		     unsigned flags, void *arg, size_t argsz)
{
	return syscall(__NR_io_uring_enter, fd, to_submit, min_complete, flags,
		       arg, argsz);
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void pin(int cpu)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	if (sched_setaffinity(0, sizeof(set), &set))
		printf("# cannot pin to CPU %d: %s\n", cpu, strerror(errno));
}

static int ring_setup(unsigned entries)
{
	struct io_uring_params p;
	size_t sq_sz, cq_sz;
	char *sq, *cq;
	unsigned i;

	memset(&p, 0, sizeof(p));
	p.flags = IORING_SETUP_CQSIZE;
	p.cq_entries = entries;
	R.fd = sys_setup(entries, &p);
	if (R.fd < 0) {
		int e = errno;

		printf("# io_uring_setup: %s\n", strerror(e));
		return e == ENOSYS ? -ENOSYS : -1;
	}
	if (p.sq_entries != entries || p.cq_entries != entries) {
		printf("# io_uring_setup gave %u SQ / %u CQ entries, not %u\n",
		       p.sq_entries, p.cq_entries, entries);
		return -1;
	}
	R.entries = entries;
	sq_sz = p.sq_off.array + p.sq_entries * sizeof(unsigned);
	cq_sz = p.cq_off.cqes + p.cq_entries * sizeof(struct io_uring_cqe);
	if (p.features & IORING_FEAT_SINGLE_MMAP) {
		if (cq_sz > sq_sz)
			sq_sz = cq_sz;
		cq_sz = sq_sz;
	}
	sq = mmap(NULL, sq_sz, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE,
		  R.fd, IORING_OFF_SQ_RING);
	if (sq == MAP_FAILED)
		goto fail;
	if (p.features & IORING_FEAT_SINGLE_MMAP)
		cq = sq;
	else
		cq = mmap(NULL, cq_sz, PROT_READ | PROT_WRITE,
			  MAP_SHARED | MAP_POPULATE, R.fd, IORING_OFF_CQ_RING);
	if (cq == MAP_FAILED)
		goto fail;
	R.sqes = mmap(NULL, p.sq_entries * sizeof(struct io_uring_sqe),
		      PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, R.fd,
		      IORING_OFF_SQES);
	if (R.sqes == MAP_FAILED)
		goto fail;
	R.sq_tail = (unsigned *)(sq + p.sq_off.tail);
	R.sq_array = (unsigned *)(sq + p.sq_off.array);
	R.sq_flags = (unsigned *)(sq + p.sq_off.flags);
	R.cq_head = (unsigned *)(cq + p.cq_off.head);
	R.cq_tail = (unsigned *)(cq + p.cq_off.tail);
	for (i = 0; i < entries; i++) {
		memset(&R.sqes[i], 0, sizeof(R.sqes[i]));
		R.sqes[i].opcode = IORING_OP_NOP;
		R.sqes[i].user_data = i;
		R.sq_array[i] = i;
	}
	return 0;
fail:
	printf("# mmap of the rings: %s\n", strerror(errno));
	return -1;
}

/* queue n NOPs (n <= entries: the SQEs are reused) and submit them */
static int submit_nops(unsigned n)
{
	unsigned tail = atomic_load_explicit((_Atomic unsigned *)R.sq_tail,
					     memory_order_relaxed);

	atomic_store_explicit((_Atomic unsigned *)R.sq_tail, tail + n,
			      memory_order_release);
	return sys_enter(R.fd, n, 0, 0, NULL, 0);
}

static unsigned cq_ready(void)
{
	return atomic_load_explicit((_Atomic unsigned *)R.cq_tail,
				    memory_order_acquire) -
	       atomic_load_explicit((_Atomic unsigned *)R.cq_head,
				    memory_order_relaxed);
}

static void cq_consume(unsigned n)
{
	unsigned head = atomic_load_explicit((_Atomic unsigned *)R.cq_head,
					     memory_order_relaxed);

	atomic_store_explicit((_Atomic unsigned *)R.cq_head, head + n,
			      memory_order_release);
}

static void *waiter(void *unused)
{
	struct __kernel_timespec ts = { 0, 0 };
	struct io_uring_getevents_arg arg;

	pin(1);
	memset(&arg, 0, sizeof(arg));
	arg.ts = (unsigned long)&ts;
	while (!atomic_load(&stop_waiter)) {
		int ret;

		/* fewer than E CQEs: this call goes on to the wait loop */
		if (cq_ready() < R.entries)
			n_wait++;
		ret = sys_enter(R.fd, 0, R.entries,
				IORING_ENTER_GETEVENTS | IORING_ENTER_EXT_ARG,
				&arg, sizeof(arg));
		n_calls++;
		/* a timeout with CQEs in the ring returns 0, not -ETIME */
		if (ret < 0)
			n_err++;
	}
	return NULL;
}

/* The kernel log, to see the warning come. */
static int kmsg_fd = -1;
static int taint0;

static int read_taint(void)
{
	char buf[32] = "";
	int fd = open("/proc/sys/kernel/tainted", O_RDONLY);

	if (fd < 0)
		return -1;
	if (read(fd, buf, sizeof(buf) - 1) < 0)
		buf[0] = 0;
	close(fd);
	return atoi(buf);
}

static void watch_start(void)
{
	kmsg_fd = open("/dev/kmsg", O_RDONLY | O_NONBLOCK);
	if (kmsg_fd >= 0)
		lseek(kmsg_fd, 0, SEEK_END);
	taint0 = read_taint();
	printf("# watching %s for the warning (taint now %d)\n",
	       kmsg_fd >= 0 ? "/dev/kmsg" : "/proc/sys/kernel/tainted", taint0);
}

/* 1 when the kernel printed the nested-sleep warning since watch_start() */
static int warned(void)
{
	char rec[2048];
	int found = 0;
	ssize_t n;

	if (kmsg_fd < 0) {
		int t = read_taint();

		return t >= 0 && (t & (1 << 9)) && !(taint0 & (1 << 9));
	}
	while ((n = read(kmsg_fd, rec, sizeof(rec) - 1)) != 0) {
		if (n < 0) {
			if (errno == EPIPE)	/* overwritten records: go on */
				continue;
			break;			/* EAGAIN: nothing more */
		}
		rec[n] = 0;
		if (strstr(rec, "do not call blocking ops when !TASK_RUNNING"))
			found = 1;
	}
	return found;
}

/* The final check: io_cqring_wait() sleeps until a CQE comes. */
static void *sleeper(void *out)
{
	double t0 = now();
	int ret;

	ret = sys_enter(R.fd, 0, 1, IORING_ENTER_GETEVENTS, NULL, 0);
	((double *)out)[0] = ret < 0 ? -errno : ret;
	((double *)out)[1] = now() - t0;
	return NULL;
}

static int check_sleep(void)
{
	double res[2];
	pthread_t t;
	unsigned got;

	cq_consume(cq_ready());
	if (pthread_create(&t, NULL, sleeper, res))
		return 0;
	usleep(200000);
	submit_nops(1);
	pthread_join(t, NULL);
	got = cq_ready();
	printf("# blocking wait for 1 CQE returned %.0f after %.0f ms with %u CQE(s)\n",
	       res[0], res[1] * 1000, got);
	return res[0] == 0 && res[1] >= 0.15 && got == 1;
}

int main(int argc, char **argv)
{
	double limit = 20, t0, t;
	int entries = 32, delay_us = 0;
	long iters = 0, short_batches = 0, no_overflow = 0;
	int found = 0, opt, ok;
	pthread_t w;

	opterr = 0;
	while ((opt = getopt(argc, argv, "t:e:d:")) != -1) {
		if (opt == 't')
			limit = atof(optarg);
		else if (opt == 'd')
			delay_us = atoi(optarg);
		else if (opt == 'e')
			entries = atoi(optarg);
		else
			goto usage;
	}
	if (optind != argc || limit <= 0 || entries < 2 || entries > 4096 ||
	    (entries & (entries - 1)) || delay_us < 0 || delay_us > 1000000)
		goto usage;
	setvbuf(stdout, NULL, _IOLBF, 0);
	opt = ring_setup(entries);
	if (opt)
		return opt == -ENOSYS ? 77 : 1;
	pin(0);
	/* the CQ holds E-1 CQEs */
	if (submit_nops(entries - 1) != (int)entries - 1 ||
	    cq_ready() != entries - 1) {
		printf("# could not post %u NOPs: %s\n", entries - 1, strerror(errno));
		return 1;
	}
	watch_start();
	if (pthread_create(&w, NULL, waiter, NULL)) {
		printf("# pthread_create failed\n");
		return 1;
	}
	t0 = now();
	t = t0;
	while (t - t0 < limit) {
		/*
		 * Let the waiter find E-1 CQEs and enter its wait loop: the
		 * batch should start at a random point of its loop.
		 */
		if (delay_us) {
			double until = now() + (rand() % (delay_us + 1)) / 1e6;

			while (now() < until)
				;
		}
		/* 1 CQE fills the CQ, E-1 go to the overflow list */
		if (submit_nops(entries) != (int)entries)
			short_batches++;
		if (!(atomic_load((_Atomic unsigned *)R.sq_flags) & IORING_SQ_CQ_OVERFLOW))
			no_overflow++;
		/* consume E and flush the overflow: E-1 in the CQ again */
		cq_consume(entries);
		sys_enter(R.fd, 0, 0, IORING_ENTER_GETEVENTS, NULL, 0);
		iters++;
		if ((iters & 15) == 0) {
			t = now();
			if (warned()) {
				found = 1;
				break;
			}
		}
	}
	t = now() - t0;
	atomic_store(&stop_waiter, 1);
	pthread_join(w, NULL);
	if (!found)
		found = warned();
	printf("# %ld batches of %u NOPs in %.1f s (%ld short, %ld without overflow)\n",
	       iters, entries, t, short_batches, no_overflow);
	printf("# waiter: %ld io_uring_enter calls, %ld with fewer than %u CQEs ready, %ld errors\n",
	       (long)n_calls, (long)n_wait, entries, (long)n_err);
	printf("# nested-sleep warning %s\n",
	       found ? "seen" : "not seen");
	ok = check_sleep();
	return (iters > 0 && n_wait > 0 && no_overflow < iters && ok) ? 0 : 1;
usage:
	fprintf(stderr, "usage: io_uring [-t seconds] [-e entries (power of 2)] [-d us]\n");
	return 2;
}
