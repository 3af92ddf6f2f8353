# SPDX-License-Identifier: GPL-2.0-only
"""nsboot: build and boot kernels in QEMU, as tools/testing/kunit does.

  config     kconfig fragments and their check after olddefconfig
  kernel     builds (one at a time, under a lock) and QEMU runs (TCG)
  parser     KTAP and kernel-log parsing into typed results
  main       the stages and the command line ('python3 -m nsboot')

nsboot knows nothing of what is tested: it imports nothing from nestsleep.
What to boot comes in as arguments; where to cache comes from the caller
(set_cache_dir()).  The orchestration that knows about findings, series
and exercisers (make boottest, make runtime-proof) is nestsleep.boot, which
calls nsboot.
"""

import os

HARNESS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))	# kernel-boot/
TOP = os.path.dirname(HARNESS)

_cache_dir = ''


def set_cache_dir(path: str) -> None:
	"""The cache directory to use from now on (nestsleep passes its own
	cache_dir()); '' goes back to the default."""
	global _cache_dir
	_cache_dir = path


def cache_dir() -> str:
	"""What set_cache_dir() gave, else $NESTSLEEP_CACHE, else
	~/.cache/nestsleep: it holds the default kernel tree (linux-source-6.1)."""
	return _cache_dir or os.environ.get('NESTSLEEP_CACHE') or os.path.expanduser('~/.cache/nestsleep')


def cache_root() -> str:
	"""<cache dir>/kernel-boot (default ~/.cache/nestsleep/kernel-boot)."""
	return os.path.join(cache_dir(), 'kernel-boot')
