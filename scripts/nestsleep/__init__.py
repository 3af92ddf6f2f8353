# SPDX-License-Identifier: GPL-2.0-only
"""nestsleep: find and fix nested sleeps in Linux kernel wait loops.

Run as '/usr/bin/python3 -m nestsleep <command>' (the Makefile sets
PYTHONPATH); 'cli.py' holds the commands.  One subpackage per stage:

  analysis/  scan, waiters, match, resolve, summarize, report: findings
  fix/       MODE=patch: the wait_woken() rewrite and the waker rule
  series/    'make fixes': per-maintainer patch series from the findings
  triage/    'make triage': maintainer reports, SARIF, labels carried over

Paths shared by every stage live here, so that no module works out the
checkout or the cache on its own.
"""

import os

VERSION = "0.1"
# the checkout: scripts/nestsleep/__init__.py is two levels below it
TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
COCCI_DIR = os.path.join(TOP, "cocci")
SLEEP_INFO = os.path.join(COCCI_DIR, "sleep_info.json")
DEFAULT_COCCI = os.path.join(COCCI_DIR, "nested_sleep.cocci")


def cache_dir():
	"""The cache root: $NESTSLEEP_CACHE, else ~/.cache/nestsleep."""
	return os.environ.get("NESTSLEEP_CACHE") or os.path.expanduser("~/.cache/nestsleep")
