#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only
# exercises: net/ieee802154/core.c
# needs: CONFIG_IEEE802154 CONFIG_MAC802154 CONFIG_IEEE802154_HWSIM CONFIG_DEBUG_FS CONFIG_INET
# program: wpan_phy_unregister.c
# drives: brings up a new interface of a mac802154_hwsim phy while its driver is being unbound, after mac802154 has closed its interfaces (a race)
# patched: no: ending the wait needs the close of the held interface, which flushes mac802154's destroyed workqueue (a bug of its own) in the patched kernel too
#
# wpan_phy_unregister() waits for rdev->opencount == 0 with a condition that
# takes RTNL.  The wait sleeps only if an interface of the phy is open when
# the unregistration starts; mac802154 closes and removes all of them just
# before, so the program races nl802154 NEW_INTERFACE + IFF_UP against an
# unbind of the mac802154_hwsim platform driver (see wpan_phy_unregister.c
# and unreg_race.h).  This is a race that is a bug of its own: mac802154
# accepts NEW_INTERFACE on a phy whose ieee802154_unregister_hw() is past
# ieee802154_remove_interfaces() and destroy_workqueue(): closing the held
# interface flushes the destroyed workqueue (lockdep: bad unlock balance in
# __flush_workqueue), and an interface that comes after the wait read
# opencount is left on the phy (WARNING at net/ieee802154/core.c
# WARN_ON(!list_empty(&rdev->wpan_dev_list)), then kernel BUG at
# net/mac802154/main.c in ieee802154_free_hw(): panic).
# Ending the wait always needs that close, so every run that makes the wait
# sleep ends in the destroyed-workqueue flush.  Measured on the 6.1 dev
# kernel: the wait warned in 8 of 8 boots (first round); the close then
# gave WARNING in __flush_workqueue (+ bad unlock balance) and the unbind
# returned in 2, a panic (page fault in osq_lock, GPF in
# queued_spin_lock_slowpath) in 4, a hung unbind in 2.  Not usable as a
# clean boottest entry; it shows the warning is reachable.
# Prints one KTAP line; exit 0 when an unbind was seen blocked until the
# interface was deleted.
if [ ! -d /sys/class/ieee802154 ]; then
	echo "ok 1 wpan_phy_unregister # SKIP no /sys/class/ieee802154"
	exit 0
fi
echo 1 > /sys/kernel/debug/clear_warn_once 2>/dev/null
wpan_phy_unregister 50 ${WPAN_UNREG_SECONDS:-240}
rc=$?
dmesg | grep -E 'do not call blocking|wdev_list|WARNING' | head -5 | sed 's/^/# /'
if [ $rc -eq 0 ]; then
	echo "ok 1 wpan_phy_unregister"
	exit 0
fi
echo "not ok 1 wpan_phy_unregister # no unbind blocked on an open interface (exit $rc)"
exit 1
