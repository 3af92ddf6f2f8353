# SPDX-License-Identifier: GPL-2.0-only
"""nsboot: build and boot kernels in QEMU, as tools/testing/kunit does.

  config     kconfig fragments and their check after olddefconfig
  kernel     builds (one at a time, under a lock) and QEMU runs (TCG)
  parser     KTAP and kernel-log parsing into typed results
  proof      the test module before and after the rewrite
  boottest   every patch of a 'make fixes' series, built and booted
  main       the command line ('python3 -m nsboot')
"""

import os

from nestsleep import cache_dir

HARNESS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))	# kernel-boot/
TOP = os.path.dirname(HARNESS)


def cache_root() -> str:
	"""$NESTSLEEP_CACHE/kernel-boot (default ~/.cache/nestsleep/kernel-boot)."""
	return os.path.join(cache_dir(), 'kernel-boot')
