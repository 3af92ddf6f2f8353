// SPDX-License-Identifier: GPL-2.0-only
/*
 * Read /dev/hpet as Documentation/timers/hpet_example.c does: ask for
 * periodic interrupts on a free HPET timer, then read() the interrupt
 * count, which blocks in hpet_read() until the next interrupt.  hpet_read()
 * leaves its wait loop in TASK_INTERRUPTIBLE and calls put_user(), so with
 * CONFIG_DEBUG_ATOMIC_SLEEP the unpatched kernel warns "do not call
 * blocking ops when !TASK_RUNNING" from might_fault().
 *
 * Prints what it saw as KTAP diagnostics; exit 0 when every read blocked
 * and then returned data, 77 when there is no /dev/hpet or no free timer.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/hpet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	int reads = argc > 1 ? atoi(argv[1]) : 3;
	unsigned long freq = 16, data;
	int fd, i, ok = 0;

	fd = open("/dev/hpet", O_RDONLY);
	if (fd < 0) {
		printf("# /dev/hpet: %s\n", strerror(errno));
		return 77;
	}
	if (ioctl(fd, HPET_IRQFREQ, freq) < 0) {
		printf("# HPET_IRQFREQ %lu: %s\n", freq, strerror(errno));
		return 77;
	}
	if (ioctl(fd, HPET_IE_ON, 0) < 0) {
		printf("# HPET_IE_ON: %s\n", strerror(errno));
		return 77;
	}
	for (i = 0; i < reads; i++) {
		double t = now();
		ssize_t n = read(fd, &data, sizeof(data));

		t = now() - t;
		printf("# read %d: %zd bytes, %lu interrupt(s), blocked %.1f ms\n",
		       i + 1, n, n == sizeof(data) ? data : 0, t * 1e3);
		if (n == sizeof(data) && data > 0)
			ok++;
	}
	ioctl(fd, HPET_IE_OFF, 0);
	close(fd);
	printf("# %d of %d reads blocked and returned data\n", ok, reads);
	return ok == reads ? 0 : 1;
}
