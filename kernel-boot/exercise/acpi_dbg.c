// SPDX-License-Identifier: GPL-2.0-only
/*
 * Drive every wait of drivers/acpi/acpi_dbg.c (the ACPI AML debugger's
 * user interface, /sys/kernel/debug/acpi/acpidbg) so that each one really
 * sleeps.  Each wait tests a condition that takes acpi_aml_io.lock
 * (mutex_lock()) after the task state was set, so with
 * CONFIG_DEBUG_ATOMIC_SLEEP the unpatched kernel warns "do not call
 * blocking ops when !TASK_RUNNING" the first time a wait (re)tests its
 * condition in its loop: on entry when the condition is false, and again
 * after every wakeup.
 *
 * The warning is a WARN_ONCE for the whole kernel, so each phase puts the
 * waiters it does not target to sleep first, then clears the once flag,
 * then makes only its target wait enter (or wake up and retest):
 *   1 read_cmd:  the first reader starts the "aml" debugger thread, which
 *                prints a prompt and waits in acpi_aml_read_cmd() for a
 *                command (empty input ring).
 *   2 read:      a read() of the empty output ring waits in acpi_aml_read()
 *                until a command ("\n") makes the debugger print a prompt.
 *   3 write_log: 2000 empty commands without reading: every one prints a
 *                3-byte prompt, the 4 KiB output ring fills and the thread
 *                waits in acpi_aml_write_log(); reading a little wakes it.
 *   4 write:     while the thread is stuck on the full output ring, the
 *                input ring is filled (O_NONBLOCK writes until EAGAIN); a
 *                blocking write() then waits in acpi_aml_write() until the
 *                reader drains the output and the thread eats the input.
 *   5 release:   closing the reader runs acpi_aml_release(), which waits
 *                while the thread is inside a ring operation
 *                (ACPI_AML_BUSY flags) and then while it still runs.  The
 *                thread is made to execute 1300 queued empty commands and
 *                the reader is closed at varying delays meanwhile.  That
 *                races, so it is retried, up to argv[1] (100) times, until
 *                the kernel warned in acpi_aml_release() or three closes
 *                were fast: when the busy wait sleeps (uninterruptible),
 *                the ring operations' wake_up_interruptible() does not
 *                wake it, only the thread's exit (wake_up()) does, so the
 *                close returns as soon as the thread ended (1-36 ms seen);
 *                otherwise acpi_terminate_debugger() polls the thread in
 *                100 ms steps and the close takes over 100 ms.  The
 *                second wait (!acpi_aml_used()) only waits between the
 *                thread's acpi_gbl_db_threads_terminated = TRUE and its
 *                usages--, a few instructions; nothing here aims at it.
 *                The kernel log is read only to stop early and to say, per
 *                phase, whether the kernel warned.
 *
 * Prints KTAP diagnostics ("# ...") with the measured sleeps; exit 0 when
 * the read and the write blocked and then completed, 77 when there is no
 * debugger file, 1 otherwise.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/klog.h>
#include <time.h>
#include <unistd.h>

#define DBG "/sys/kernel/debug/acpi/acpidbg"
#define RING 4096

static int rfd = -1, wfd = -1;
static char nl[16384];

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void msleep(int ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

static void clear_warn_once(void)
{
	int fd = open("/sys/kernel/debug/clear_warn_once", O_WRONLY);

	if (fd >= 0) {
		if (write(fd, "1", 1) != 1)
			printf("# clear_warn_once: %s\n", strerror(errno));
		close(fd);
	}
}

/* State letter (R, S, D, ...) of the "aml" debugger kthread, '?' if none. */
static char aml_state(void)
{
	DIR *d = opendir("/proc");
	struct dirent *e;
	char path[300], buf[256], st = '?';

	if (!d)
		return st;
	while ((e = readdir(d))) {
		FILE *f;

		if (e->d_name[0] < '0' || e->d_name[0] > '9')
			continue;
		snprintf(path, sizeof(path), "/proc/%s/stat", e->d_name);
		f = fopen(path, "r");
		if (!f)
			continue;
		if (fgets(buf, sizeof(buf), f) && strstr(buf, " (aml) "))
			st = strstr(buf, " (aml) ")[7];
		fclose(f);
		if (st != '?')
			break;
	}
	closedir(d);
	return st;
}

/*
 * Wait (up to 5 s) until the aml thread has slept (state S: an
 * interruptible wait of acpi_dbg.c) at two polls 50 ms apart; the state
 * it ended in, for the log.
 */
static char aml_settle(void)
{
	char st = '?', last = '?';
	int i;

	for (i = 0; i < 100; i++) {
		msleep(50);
		st = aml_state();
		if (st == 'S' && last == 'S')
			break;
		last = st;
	}
	return st;
}

static int open_dbg(void)
{
	rfd = open(DBG, O_RDONLY);	/* the reader starts the debugger */
	if (rfd < 0) {
		printf("# open %s for reading: %s\n", DBG, strerror(errno));
		return -1;
	}
	wfd = open(DBG, O_WRONLY);
	if (wfd < 0) {
		printf("# open %s for writing: %s\n", DBG, strerror(errno));
		return -1;
	}
	return 0;
}

static void set_nonblock(int fd, int on)
{
	int fl = fcntl(fd, F_GETFL);

	fcntl(fd, F_SETFL, on ? fl | O_NONBLOCK : fl & ~O_NONBLOCK);
}

/* Read the output ring empty without waiting; returns the bytes read. */
static long drain(void)
{
	char buf[RING];
	long n = 0;
	ssize_t r;

	set_nonblock(rfd, 1);
	while ((r = read(rfd, buf, sizeof(buf))) > 0)
		n += r;
	set_nonblock(rfd, 0);
	return n;
}

/* Read until no output came for quiet_ms; returns the bytes read. */
static long drain_until_quiet(int quiet_ms, volatile int *busy)
{
	struct pollfd p = { .fd = rfd, .events = POLLIN };
	char buf[RING];
	long n = 0;

	for (;;) {
		int r = poll(&p, 1, quiet_ms);

		if (r == 0 && !(busy && *busy))
			break;
		if (r > 0) {
			ssize_t m = read(rfd, buf, sizeof(buf));

			if (m <= 0)
				break;
			n += m;
		}
	}
	return n;
}

struct io {
	int fd;
	size_t len;
	double t0, t1;
	ssize_t ret;
	volatile int busy;
};

static void *reader(void *arg)
{
	struct io *io = arg;
	char buf[RING];

	io->t0 = now_ms();
	io->ret = read(io->fd, buf, sizeof(buf));
	io->t1 = now_ms();
	io->busy = 0;
	return NULL;
}

static void *writer(void *arg)
{
	struct io *io = arg;

	io->t0 = now_ms();
	io->ret = write(io->fd, nl, io->len);
	io->t1 = now_ms();
	io->busy = 0;
	return NULL;
}

static int start(pthread_t *t, void *(*fn)(void *), struct io *io)
{
	io->busy = 1;
	if (pthread_create(t, NULL, fn, io)) {
		printf("# pthread_create failed\n");
		return -1;
	}
	return 0;
}

/* How many "do not call blocking ops" splats name fn in their trace. */
static int splats_with(const char *fn)
{
	static char log[1 << 20];
	int n = klogctl(3, log, sizeof(log) - 1), count = 0;
	char *p, *end, pat[64];

	if (n <= 0)
		return -1;
	log[n] = '\0';
	snprintf(pat, sizeof(pat), "%s+0x", fn);
	for (p = strstr(log, "do not call blocking ops"); p; p = end) {
		char *hit;

		end = strstr(p + 1, "do not call blocking ops");
		hit = strstr(p, pat);
		if (hit && (!end || hit < end))
			count++;
	}
	return count;
}

static void report(const char *fn, int before)
{
	printf("# kernel warned with %s in the trace: %s\n", fn,
	       splats_with(fn) > before ? "yes" : "no");
}

static int phase_read(void)
{
	struct io io = { .fd = rfd };
	int before = splats_with("acpi_aml_read"), blocked;
	pthread_t t;

	drain();	/* wakes the thread too: let it go back to sleep */
	aml_settle();
	clear_warn_once();
	if (start(&t, reader, &io))
		return -1;
	msleep(500);
	blocked = io.busy;
	printf("# read: still blocked after 500 ms: %s\n", blocked ? "yes" : "no");
	if (write(wfd, "\n", 1) != 1)
		printf("# write: %s\n", strerror(errno));
	pthread_join(t, NULL);
	printf("# read: blocked %.0f ms, then returned %zd bytes\n",
	       io.t1 - io.t0, io.ret);
	report("acpi_aml_read", before);
	return io.ret > 0 && blocked ? 0 : -1;
}

static void phase_write_log(void)
{
	char buf[300];
	int before = splats_with("acpi_aml_write_log");
	ssize_t n;

	drain();
	if (write(wfd, nl, 2000) != 2000)
		printf("# write of 2000 commands: %s\n", strerror(errno));
	printf("# write_log: 2000 queued commands, output unread: aml thread state %c\n",
	       aml_settle());
	clear_warn_once();
	n = read(rfd, buf, sizeof(buf));	/* room for 100 prompts: wakes it */
	printf("# write_log: read %zd bytes, then aml thread state %c\n",
	       n, aml_settle());
	report("acpi_aml_write_log", before);
}

static int phase_write(void)
{
	struct io io = { .fd = wfd, .len = RING };
	long queued = 0, out;
	int before = splats_with("acpi_aml_write"), blocked;
	ssize_t n;
	pthread_t t;

	/* the thread sleeps on the full output ring: fill the input ring */
	set_nonblock(wfd, 1);
	while ((n = write(wfd, nl, RING)) > 0)
		queued += n;
	set_nonblock(wfd, 0);
	printf("# write: input ring filled with %ld more bytes (O_NONBLOCK until %s)\n",
	       queued, strerror(errno));
	aml_settle();
	clear_warn_once();
	if (start(&t, writer, &io))
		return -1;
	msleep(500);
	blocked = io.busy;
	printf("# write: still blocked after 500 ms: %s\n", blocked ? "yes" : "no");
	out = drain_until_quiet(500, &io.busy);
	pthread_join(t, NULL);
	printf("# write: blocked %.0f ms, then wrote %zd of %zu bytes; %ld bytes of output drained\n",
	       io.t1 - io.t0, io.ret, io.len, out);
	report("acpi_aml_write", before);
	return io.ret == (ssize_t)io.len && blocked ? 0 : -1;
}

static void phase_release(int tries)
{
	int k, fast = 0, warned = 0;
	double tmin = 1e9, tmax = 0;

	for (k = 1; k <= tries && !warned && fast < 3; k++) {
		double t0, spin_until, dt;
		int d = (k * 389) % 4000;	/* microseconds, spread out */
		int before;

		if (k > 1 && open_dbg())
			return;
		msleep(50);
		drain();
		if (write(wfd, nl, 1300) != 1300)
			printf("# release: write: %s\n", strerror(errno));
		close(wfd);
		before = splats_with("acpi_aml_release");
		clear_warn_once();
		spin_until = now_ms() + d / 1000.0;
		while (now_ms() < spin_until)
			;
		t0 = now_ms();
		close(rfd);		/* the last reader: acpi_aml_release() */
		dt = now_ms() - t0;
		tmin = dt < tmin ? dt : tmin;
		tmax = dt > tmax ? dt : tmax;
		warned = splats_with("acpi_aml_release") > before;
		if (dt < 100)
			fast++;
		if (dt < 100 || warned)
			printf("# release: try %d (close %d us after queueing): close took %.1f ms; kernel warned in acpi_aml_release: %s\n",
			       k, d, dt, warned ? "yes" : "no");
	}
	printf("# release: %d closes during queued commands, %d returned in < 100 ms (no 100 ms poll in acpi_terminate_debugger(): the aml thread had ended while release waited before it, in the busy wait or its mutex); close took %.1f..%.1f ms\n",
	       k - 1, fast, tmin, tmax);
}

int main(int argc, char **argv)
{
	int tries = argc > 1 ? atoi(argv[1]) : 100;
	int ok = 1, before;

	setvbuf(stdout, NULL, _IOLBF, 0);
	memset(nl, '\n', sizeof(nl));
	if (access(DBG, F_OK)) {
		printf("# %s does not exist\n", DBG);
		return 77;
	}
	before = splats_with("acpi_aml_read_cmd");
	clear_warn_once();
	if (open_dbg())
		return 1;
	printf("# read_cmd: debugger started, no command: aml thread state %c\n",
	       aml_settle());
	report("acpi_aml_read_cmd", before);
	if (phase_read())
		ok = 0;
	phase_write_log();
	if (phase_write())
		ok = 0;
	phase_release(tries);
	return ok ? 0 : 1;
}
