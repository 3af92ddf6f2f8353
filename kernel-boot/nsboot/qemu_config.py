# SPDX-License-Identifier: GPL-2.0-only
#
# The per-architecture QEMU parameters that nsboot boots with, as data
# (after the kernel's tools/testing/kunit/qemu_config.py).

"""QemuArchParams: one frozen dataclass per architecture (qemu_configs/)."""

from dataclasses import dataclass
from typing import Tuple


@dataclass(frozen=True)
class QemuArchParams:
	"""How to build and boot one architecture.

	linux_arch	ARCH= for make
	srcarch		the arch/ directory (for Kconfig)
	qemu_arch	qemu-system-<qemu_arch>
	kernel_path	the image, relative to the build dir
	kernel_command_line	always on the command line
	extra_qemu_params	added after the common QEMU arguments
	"""
	linux_arch: str
	srcarch: str
	qemu_arch: str
	kernel_path: str
	kernel_command_line: str
	extra_qemu_params: Tuple[str, ...] = ()
