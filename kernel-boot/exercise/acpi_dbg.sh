#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only
# exercises: drivers/acpi/acpi_dbg.c
# needs: CONFIG_ACPI_DEBUGGER_USER CONFIG_DEBUG_FS CONFIG_PCI
# program: acpi_dbg.c
# drives: drives the AML debugger's debugfs file as acpidbg does, one wait at a time
# (without PCI, ACPI on the QEMU pc machine fails "During Region
# initialization" and never loads the tables: no acpidbg)
#
# Drive the ACPI AML debugger's user interface, as tools/power/acpi's
# acpidbg does, through /sys/kernel/debug/acpi/acpidbg: a reader (which
# starts the "aml" debugger thread) and a writer.  acpi_dbg (acpi_dbg.c)
# makes each wait of the file really sleep, one phase at a time:
# acpi_aml_read_cmd() (no command queued), acpi_aml_read() (no output),
# acpi_aml_write_log() (output ring full), acpi_aml_write() (input ring
# full while the thread is stuck on the output ring) and acpi_aml_release()
# (the reader closed while the thread runs queued commands; a race, retried
# up to 100 times).  In 6.1 each wait tests a condition that takes
# acpi_aml_io.lock (mutex_lock() in TASK_(UN)INTERRUPTIBLE).  The warning is
# a WARN_ONCE for the whole kernel: acpi_dbg clears it before each phase.
# Prints one KTAP line; exit status 0 when the read and the write blocked
# and then completed.
acpi_dbg 100
st=$?
if [ $st -eq 77 ]; then
	echo "ok 1 acpi_dbg # SKIP /sys/kernel/debug/acpi/acpidbg does not exist"
	exit 0
fi
if [ $st -eq 0 ]; then
	echo "ok 1 acpi_dbg"
	exit 0
fi
echo "not ok 1 acpi_dbg # a read or write of acpidbg did not block and complete"
exit 1
