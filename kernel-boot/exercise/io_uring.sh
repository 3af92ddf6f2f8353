#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only
# exercises: io_uring/io_uring.c
# needs: CONFIG_IO_URING
# program: io_uring.c
# drives: races a waiting io_uring_enter() against NOPs that overflow the completion queue
#
# io_cqring_wait() (6.1): io_cqring_wait_schedule() returns 1 without
# scheduling when IO_CHECK_CQ_OVERFLOW_BIT is set, still in
# TASK_INTERRUPTIBLE from prepare_to_wait_exclusive(), and the loop calls
# io_cqring_overflow_flush(), which takes ctx->uring_lock (mutex_lock).
# The io_uring program (io_uring.c) races a waiter, which calls
# io_uring_enter(GETEVENTS) with a zero timeout again and again, against
# batches of NOPs that overflow the CQ (each batch after a random busy wait
# of 0-100 us, so that it starts at a random point of the waiter's loop);
# it stops when the warning comes or after 30 s, then checks that a wait
# for a CQE sleeps until it comes (a 200 ms blocking io_uring_enter()).
# 6.1 only: upstream 52ea806ad983 ("io_uring: finish waiting before
# flushing overflow entries", in 6.12) sets TASK_RUNNING before the flush,
# so 6.12 runs the same race without the warning.
# Measured on the 6.1 dev kernel (TCG, 2 vCPUs): 31 boots out of 31 warned,
# 0.0-5.4 s into the race; with __set_current_state(TASK_RUNNING) after
# io_cqring_wait_schedule() (a local control build) no warning in 30 s
# (67776 batches).
# Prints one KTAP line; exit status 0 when the program drove the waits.
echo 1 > /sys/kernel/debug/clear_warn_once 2>/dev/null
io_uring -t 30 -d 100
rc=$?
if [ $rc -eq 0 ]; then
	echo "ok 1 io_uring"
	exit 0
fi
if [ $rc -eq 77 ]; then
	echo "ok 1 io_uring # SKIP io_uring_setup() is not implemented"
	exit 0
fi
echo "not ok 1 io_uring # the io_uring program failed (exit $rc)"
exit 1
