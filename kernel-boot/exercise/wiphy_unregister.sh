#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only
# exercises: net/wireless/core.c
# needs: CONFIG_CFG80211 CONFIG_MAC80211 CONFIG_MAC80211_HWSIM CONFIG_DEBUG_FS CONFIG_INET
# program: wiphy_unregister.c
# drives: brings up a new interface of a mac80211_hwsim radio while the radio is being deleted, after mac80211 has closed its interfaces (a race)
#
# wiphy_unregister() waits for rdev->opencount == 0 with a condition that
# takes the wiphy mutex.  The wait sleeps only if an interface of the wiphy
# is open when the unregistration starts; mac80211 closes and removes all of
# them just before, so the program creates and brings up a new interface
# (nl80211 NEW_INTERFACE, IFF_UP) as soon as HWSIM_CMD_DEL_RADIO has
# removed the old ones (see wiphy_unregister.c and unreg_race.h).
# This is a race that is a bug of its own: mac80211 accepts NEW_INTERFACE
# on a wiphy whose ieee80211_unregister_hw() is past
# ieee80211_remove_interfaces().  When the new interface comes after
# wiphy_unregister() read opencount, the wiphy is unregistered under it
# (WARNING at net/wireless/core.c WARN_ON(!list_empty(&rdev->wiphy.wdev_list)))
# and opening it is a use-after-free (mutex magic, NULL pointer in
# __queue_work: panic).  Measured on the 6.1 dev kernel (host loaded by
# kernel builds): the wait warned, and then slept until the interface was
# deleted, in 10 of 11 boots, each in the first round; 1 boot panicked
# on a late interface.  The boots that warned had no other splat.
# Prints one KTAP line; exit 0 when a deletion was seen blocked until the
# interface was deleted.
if [ ! -d /sys/class/ieee80211 ]; then
	echo "ok 1 wiphy_unregister # SKIP no /sys/class/ieee80211"
	exit 0
fi
echo 1 > /sys/kernel/debug/clear_warn_once 2>/dev/null
wiphy_unregister 50 ${WIPHY_UNREG_SECONDS:-240}
rc=$?
dmesg | grep -E 'do not call blocking|wdev_list|WARNING' | head -5 | sed 's/^/# /'
if [ $rc -eq 0 ]; then
	echo "ok 1 wiphy_unregister"
	exit 0
fi
echo "not ok 1 wiphy_unregister # no deletion blocked on an open interface (exit $rc)"
exit 1
