#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only
# exercises: net/sctp/socket.c
# needs: CONFIG_IP_SCTP CONFIG_MEMCG CONFIG_CGROUPS
# program: sctp.c
# drives: sends on an SCTP socket from a memory cgroup too small for the send buffer
#
# sctp_wait_for_sndbuf() charges the socket's memory cgroup after
# prepare_to_wait_exclusive(TASK_INTERRUPTIBLE).  Run the sender (sctp.c)
# in a cgroup v2 group with a small memory.max, so that a send must wait
# for a charge the group refuses: the charge reclaims and then runs the
# group's OOM killer (mutex_lock_killable(&oom_lock)) while the task is
# not running.
# Prints one KTAP line; exit status 0 when a send blocked and then went on.
ip link set lo up
CG=/sys/fs/cgroup
mkdir -p $CG
if ! grep -q " $CG cgroup2 " /proc/mounts && ! mount -t cgroup2 none $CG; then
	echo "ok 1 sctp # SKIP cannot mount cgroup2"
	exit 0
fi
if ! echo +memory > $CG/cgroup.subtree_control; then
	echo "ok 1 sctp # SKIP no memory controller"
	exit 0
fi
mkdir -p $CG/nsboot-sctp
echo 6M > $CG/nsboot-sctp/memory.max
[ -w /sys/kernel/debug/clear_warn_once ] && echo 1 > /sys/kernel/debug/clear_warn_once
# the group's memory is charged from the first page the program touches
sh -c "echo \$\$ > $CG/nsboot-sctp/cgroup.procs && exec sctp"
st=$?
echo "# memory.events: $(tr '\n' ' ' < $CG/nsboot-sctp/memory.events)"
rmdir $CG/nsboot-sctp 2>/dev/null
if [ $st -eq 77 ]; then
	echo "ok 1 sctp # SKIP no SCTP"
	exit 0
fi
if [ $st -eq 0 ]; then
	echo "ok 1 sctp"
	exit 0
fi
echo "not ok 1 sctp # no send blocked"
exit 1
