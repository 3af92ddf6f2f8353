# SPDX-License-Identifier: GPL-2.0-only
"""The tree id that names report and bench directories:
linux-VERSION.PATCHLEVEL.SUBLEVEL from KDIR/Makefile, plus -<git describe>
where KDIR is a git checkout."""

import os
import re
import subprocess


def tree_id(kdir):
	"""linux-VERSION.PATCHLEVEL.SUBLEVEL[-git describe]."""
	vals = {}
	with open(os.path.join(kdir, "Makefile")) as f:
		for line in f:
			m = re.match(r"(VERSION|PATCHLEVEL|SUBLEVEL)\s*=\s*(\d*)", line)
			if m:
				vals[m.group(1)] = m.group(2) or "0"
			if len(vals) == 3:
				break
	tid = "linux-%s.%s.%s" % (vals.get("VERSION", "0"), vals.get("PATCHLEVEL", "0"), vals.get("SUBLEVEL", "0"))
	if os.path.exists(os.path.join(kdir, ".git")):
		r = subprocess.run(["git", "-C", kdir, "describe", "--always"], capture_output=True, text=True)
		if r.returncode == 0 and r.stdout.strip():
			tid += "-" + r.stdout.strip()
	return tid
