# SPDX-License-Identifier: GPL-2.0-only
"""The exercisers of kernel-boot/exercise/: NAME.sh and the headers that
say what each drives.  Read by make boottest (nestsleep.boot.boottest) and by
the triage reports, which must agree on them.

  # exercises: <source files the exerciser drives>
  # needs: <Kconfig symbols>
  # program: <a C program beside it, built into the initramfs>
  # drives: <what it does, in kernel terms: the changelog's "by a test
  #          that ...">
  # patched: no <why it cannot run on the patched kernel>
"""

import os

from nestsleep import TOP

EXERCISE_DIR = os.path.join(TOP, "kernel-boot", "exercise")


def read_all(d=EXERCISE_DIR):
	"""[{name, path, files, needs, programs, patched, not_patched, drives}] for each d/*.sh."""
	out = []
	if not os.path.isdir(d):
		return out
	for name in sorted(os.listdir(d)):
		if not name.endswith(".sh"):
			continue
		path = os.path.join(d, name)
		files, needs, programs, not_patched, drives = [], [], [], None, ""
		with open(path) as f:
			for line in f:
				if line.startswith("# exercises:"):
					files += line.split(":", 1)[1].split()
				elif line.startswith("# needs:"):
					needs += [x[len("CONFIG_"):] if x.startswith("CONFIG_") else x
						  for x in line.split(":", 1)[1].split()]
				elif line.startswith("# program:"):
					programs += [os.path.join(d, x) for x in line.split(":", 1)[1].split()]
				elif line.startswith("# drives:"):
					drives = line.split(":", 1)[1].strip()
				elif line.startswith("# patched: no"):
					not_patched = line.split("no", 1)[1].strip(" :\n")
		out.append({"name": name[:-3], "path": path, "files": files, "needs": needs, "programs": programs,
			    "patched": not_patched is None, "not_patched": not_patched or "", "drives": drives})
	return out
