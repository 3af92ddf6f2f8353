# SPDX-License-Identifier: GPL-2.0-only
#
# x86_64 under QEMU: bzImage on the first 16550 UART.  The serial-console
# Kconfig symbols live in configs/base.config.

from nsboot.qemu_config import QemuArchParams

QEMU_ARCH = QemuArchParams(
	linux_arch='x86_64',
	srcarch='x86',
	qemu_arch='x86_64',
	kernel_path='arch/x86/boot/bzImage',
	kernel_command_line='console=ttyS0',
	extra_qemu_params=(),
)
