#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-only
# The outputs a change that must not change them is compared by (issue
# "structure": byte-identical before and after): MODE=report, MODE=patch
# (every confidence), make fixes (with its in-order build) and make triage,
# on each tree, with the date and the version fixed so that two runs at
# two commits can be compared with diff -r.  Run it from the top of a checkout:
#
#   scripts/dev/outputs.sh OUTDIR [KDIR...]    (default: the cached 6.1 and 6.12)
#   diff -r BEFORE AFTER                        (the *.err files hold timings)
#
# Prints one checksum line per output.  Whole-tree runs: minutes each.
set -u
[ $# -ge 1 ] || { echo "usage: $0 OUTDIR [KDIR...]" >&2; exit 2; }
O=$1; shift
C=${NESTSLEEP_CACHE:-$HOME/.cache/nestsleep}
[ $# -ge 1 ] || set -- "$C/linux-source-6.1" "$C/linux-source-6.12"
mkdir -p "$O" || exit 2
export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-1796601600} NESTSLEEP_VERSION=${NESTSLEEP_VERSION:-cmp}
for K in "$@"; do
	[ -d "$K" ] || { echo "$0: $K: no such tree" >&2; exit 2; }
	t=$(basename "$K")
	make -s coccicheck MODE=report KDIR="$K" > "$O/report-$t.txt" 2> "$O/report-$t.err"
	make -s coccicheck MODE=patch CONFIDENCE=low KDIR="$K" > "$O/patch-$t.diff" 2> "$O/patch-$t.err"
	make -s fixes KDIR="$K" OUT="$O/fixes-$t" > "$O/fixes-$t.out" 2> "$O/fixes-$t.err"
	make -s triage KDIR="$K" OUT="$O/triage-$t" > "$O/triage-$t.out" 2> "$O/triage-$t.err"
	for x in report-$t.txt patch-$t.diff fixes-$t triage-$t; do
		if [ -d "$O/$x" ]; then
			s=$(cd "$O/$x" && find . -type f | LC_ALL=C sort | xargs cat | md5sum)
		else
			s=$(md5sum < "$O/$x")
		fi
		echo "${s%% *}  $x"
	done
done
