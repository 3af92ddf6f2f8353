// SPDX-License-Identifier: GPL-2.0-only
/*
 * Send on an SCTP association over loopback from inside a small memory
 * cgroup (cgroup v2, set up by sctp.sh) until a send has to wait in
 * sctp_wait_for_sndbuf() for a memory charge that the cgroup refuses.
 *
 * sctp_wait_for_sndbuf() tests sk_wmem_schedule() after
 * prepare_to_wait_exclusive(TASK_INTERRUPTIBLE).  In process context that
 * charges the socket's memory cgroup with GFP_KERNEL: over memory.max the
 * charge reclaims and then runs the cgroup's OOM killer, which takes
 * oom_lock with mutex_lock_killable() while the task is not running.
 *
 * The receiver never reads, so the receive side keeps its memory charged.
 * This process sets its oom_score_adj to -1000, so the group's OOM killer
 * finds nothing to kill and the charge fails: sctp_sendmsg_to_asoc() then
 * waits in sctp_wait_for_sndbuf(), whose next sk_wmem_schedule() charges
 * again in TASK_INTERRUPTIBLE.  (An optional first argument, N MiB, starts
 * a child with N MiB of anonymous memory for the OOM killer to take.)
 * Stops when the kernel is tainted with a warning (bit 9 of
 * /proc/sys/kernel/tainted) or after 60 s.
 * Prints KTAP diagnostics; exit 0 when a send blocked (waited > 50 ms).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef IPPROTO_SCTP
#define IPPROTO_SCTP 132
#endif

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static int tainted_warn(void)
{
	char buf[32] = "";
	int fd = open("/proc/sys/kernel/tainted", O_RDONLY);

	if (fd < 0)
		return 0;
	if (read(fd, buf, sizeof(buf) - 1) < 0)
		buf[0] = 0;
	close(fd);
	return (strtoul(buf, NULL, 10) >> 9) & 1;
}

static void write_file(const char *path, const char *s)
{
	int fd = open(path, O_WRONLY);

	if (fd >= 0) {
		if (write(fd, s, strlen(s)) < 0)
			printf("# %s: %s\n", path, strerror(errno));
		close(fd);
	}
}

static pid_t victim(size_t mib)
{
	pid_t pid = fork();

	if (pid == 0) {
		char *p = mmap(NULL, mib << 20, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

		write_file("/proc/self/oom_score_adj", "1000");
		if (p != MAP_FAILED)
			memset(p, 1, mib << 20);
		for (;;)
			pause();
	}
	return pid;
}

int main(int argc, char **argv)
{
	int victim_mib = argc > 1 ? atoi(argv[1]) : 0;
	int bufsize = 4 << 20, one = 1, ls, cs, as, blocked = 0, timedout = 0, warned0;
	struct sockaddr_in a = { .sin_family = AF_INET };
	struct timeval tv = { .tv_sec = 2 };
	static char msg[32768];
	socklen_t alen = sizeof(a);
	long sent = 0, calls = 0;
	double t0 = now(), maxw = 0;
	pid_t child = 0;

	write_file("/proc/self/oom_score_adj", "-1000");
	if (victim_mib > 0)
		child = victim(victim_mib);
	warned0 = tainted_warn();
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	ls = socket(AF_INET, SOCK_STREAM, IPPROTO_SCTP);
	if (ls < 0) {
		printf("# socket(IPPROTO_SCTP): %s\n", strerror(errno));
		if (child > 0)
			kill(child, SIGKILL);
		return 77;
	}
	setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	setsockopt(ls, SOL_SOCKET, SO_RCVBUFFORCE, &bufsize, sizeof(bufsize));
	if (bind(ls, (struct sockaddr *)&a, sizeof(a)) || listen(ls, 1) ||
	    getsockname(ls, (struct sockaddr *)&a, &alen)) {
		printf("# listen: %s\n", strerror(errno));
		if (child > 0)
			kill(child, SIGKILL);
		return 1;
	}
	cs = socket(AF_INET, SOCK_STREAM, IPPROTO_SCTP);
	setsockopt(cs, SOL_SOCKET, SO_SNDBUFFORCE, &bufsize, sizeof(bufsize));
	setsockopt(cs, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	if (connect(cs, (struct sockaddr *)&a, sizeof(a))) {
		printf("# connect: %s\n", strerror(errno));
		if (child > 0)
			kill(child, SIGKILL);
		return 1;
	}
	as = accept(ls, NULL, NULL);
	printf("# association up on 127.0.0.1:%d; sending 32 KiB messages, the receiver does not read\n",
	       ntohs(a.sin_port));
	fflush(stdout);
	while (now() - t0 < 60 && !(tainted_warn() && !warned0)) {
		double t = now();
		ssize_t n = send(cs, msg, sizeof(msg), 0);

		t = now() - t;
		calls++;
		if (t > maxw)
			maxw = t;
		if (n > 0) {
			sent += n;
			if (t > 0.05)
				blocked++;
		} else if (errno == EAGAIN && t > 0.05) {
			timedout++;
		} else if (errno != EAGAIN && errno != EINTR && errno != ENOMEM) {
			printf("# send: %s after %ld bytes\n", strerror(errno), sent);
			break;
		}
	}
	printf("# %ld send() calls, %ld bytes sent; %d sends blocked > 50 ms and then sent, %d blocked until SO_SNDTIMEO; longest %.0f ms\n",
	       calls, sent, blocked, timedout, maxw * 1e3);
	printf("# kernel warning taint: %s\n", tainted_warn() ? "set" : "not set");
	if (child > 0) {
		kill(child, SIGKILL);
		waitpid(child, NULL, 0);
	}
	close(as);
	close(cs);
	close(ls);
	return blocked + timedout ? 0 : 1;
}
