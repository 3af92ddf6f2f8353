# SPDX-License-Identifier: GPL-2.0-only
"""Boot tests that know what is tested: they call kernel-boot/nsboot (the
harness that configures, builds, boots and parses, and knows nothing of
nestsleep) with what to boot, and judge what came back.

  boottest   'make boottest': each patch of a 'make fixes' series, built
             and booted, with the exercisers of kernel-boot/exercise/
             (start at boottest.run())
  proof      'make runtime-proof', 'make stress': the test module's before
             form against the after form nestsleep MODE=patch generates
             (start at proof.run())

Both are reached through 'python3 -m nestsleep boottest|runtime-proof'
(nestsleep.cli).  This package imports nsboot; nsboot never imports it.
"""

from nestsleep import cache_dir
import nsboot


def use_cache() -> None:
	"""Give nsboot nestsleep's cache directory (NESTSLEEP_CACHE): its build
	dirs go to <cache>/kernel-boot, its default tree is there too."""
	nsboot.set_cache_dir(cache_dir())
