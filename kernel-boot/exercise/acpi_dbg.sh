#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only
# exercises: drivers/acpi/acpi_dbg.c
# needs: CONFIG_ACPI_DEBUGGER_USER CONFIG_DEBUG_FS CONFIG_PCI
# (without PCI, ACPI on the QEMU pc machine fails "During Region
# initialization" and never loads the tables: no acpidbg)
#
# Drive the ACPI AML debugger's user interface, as tools/power/acpi's
# acpidbg does: open /sys/kernel/debug/acpi/acpidbg for reading and writing
# (a reader, which starts the "aml" debugger thread, and a writer), send
# commands, read the output,
# close.  That runs every wait of the file: acpi_aml_write() and
# acpi_aml_read() in this process, acpi_aml_read_cmd() and
# acpi_aml_write_log() in the debugger thread, and acpi_aml_release() at
# close.  In 6.1 each waits with a condition that takes acpi_aml_io.lock
# (mutex_lock() in TASK_(UN)INTERRUPTIBLE).
#
# The "do not call blocking ops" warning is a WARN_ONCE for the whole
# kernel: clear_warn_once is written every 0.2 s meanwhile, so that each
# offending function can warn, not only the first one.
# Prints one KTAP line; exit status 0 when the debugger answered.
D=/sys/kernel/debug/acpi/acpidbg
if [ ! -e $D ]; then
	echo "ok 1 acpi_dbg # SKIP $D does not exist"
	exit 0
fi
( while :; do echo 1 > /sys/kernel/debug/clear_warn_once 2>/dev/null; sleep 0.2; done ) &
CLR=$!
OUT=/tmp/acpidbg.out
# The reader and the writer open the file separately, as acpidbg does: a
# shared open file would hold f_pos_lock in the blocked read() and block
# every write().  The first reader starts the debugger thread; writers are
# allowed once it runs.
cat $D > $OUT &
RD=$!
sleep 1
if ! exec 4>$D; then
	kill $RD $CLR 2>/dev/null
	echo "not ok 1 acpi_dbg # cannot open $D for writing"
	exit 1
fi
for cmd in help methods stats help; do
	printf '%s\n' "$cmd" >&4
	sleep 1
done
exec 4>&-
kill $RD 2>/dev/null
kill $CLR 2>/dev/null
wait 2>/dev/null
n=$(wc -c < $OUT)
echo "# acpidbg answered $n bytes"
head -c 300 $OUT | tr -c '[:print:]\n' ' ' | sed 's/^/# /'
if [ "$n" -gt 0 ]; then
	echo "ok 1 acpi_dbg"
	exit 0
fi
echo "not ok 1 acpi_dbg # no output from the debugger"
exit 1
