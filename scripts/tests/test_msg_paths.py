# SPDX-License-Identifier: GPL-2.0-only
"""A commit message must mean something after 'git am': the body between
the subject and the '---' line names only paths of the kernel tree the
series is for (this tool's own paths, its scripts and its exercisers go
below '---' or in the cover letter), and no patch carries a template
placeholder such as 'state=?'.

A path is a token with a '/' whose last part has a file extension
(foo/bar.c, kernel/sched/core.c:8654) or whose first part is a top-level
directory of the tree (drivers/misc/ocxl/Kconfig); a URL, a call list
such as wait_event()/wake_up(), a ratio N/M or an offset such as
hpet_read+0x79/0x148 is not one."""

import glob
import os
import re
import unittest

from nestsleep import TOP, cache_dir
from nestsleep.triage import treeid

PLACEHOLDER = re.compile(r"\bstate=\?")
PATHLIKE = re.compile(r"^[\w.+-]+(?:/[\w.+-]+)+/?$")
EXT = re.compile(r"\.[A-Za-z][\w]*$")


def message_body(text):
	"""The body of a format-patch mail: after the headers (and the blank
	line that ends them), before the '---' line."""
	body = text.split("\n\n", 1)[1] if "\n\n" in text else text
	return re.split(r"^---$", body, 1, flags=re.M)[0]


def paths_in(text, topdirs):
	"""The tokens of text that name a path (see the module docstring)."""
	out = []
	for tok in text.split():
		if "://" in tok or re.search(r"\w\(", tok):
			continue
		t = tok.strip("()[]<>\"'`,;")
		t = re.sub(r"(?::\d+)+[.,;:)]*$", "", t).rstrip(".:")
		if not PATHLIKE.match(t):
			continue
		parts = t.rstrip("/").split("/")
		if EXT.search(parts[-1]) or parts[0] in topdirs:
			out.append(t)
	return out


def missing_paths(text, kdir):
	"""The paths the text names that the tree at kdir does not have."""
	top = {d for d in os.listdir(kdir) if os.path.isdir(os.path.join(kdir, d)) and not d.startswith(".")}
	return [p for p in paths_in(text, top) if not os.path.exists(os.path.join(kdir, p))]


def trees():
	"""tree id -> kernel tree, for the trees under the cache."""
	out = {}
	for d in sorted(glob.glob(os.path.join(cache_dir(), "linux-source-*"))):
		if os.path.exists(os.path.join(d, "Makefile")):
			out[treeid.tree_id(d)] = d
	return out


def committed_patches():
	"""(tree id, path) of every committed patch, cover letters included."""
	for p in sorted(glob.glob(os.path.join(TOP, "reports", "fixes", "*", "*", "*.patch"))):
		yield os.path.basename(os.path.dirname(os.path.dirname(p))), p


class DetectorTest(unittest.TestCase):
	TOP = {"drivers", "kernel", "include", "block", "mm"}

	def test_paths(self):
		for s, want in (("see kernel/sched/core.c:8654 here", ["kernel/sched/core.c"]),
				("(drivers/misc/ocxl/Kconfig:10);", ["drivers/misc/ocxl/Kconfig"]),
				("Found by cocci/nested_sleep.cocci.", ["cocci/nested_sleep.cocci"]),
				("driving kernel-boot/exercise/hpet.sh, the", ["kernel-boot/exercise/hpet.sh"]),
				("in include/linux/sched.h.", ["include/linux/sched.h"])):
			self.assertEqual(paths_in(s, self.TOP), want, s)

	def test_not_paths(self):
		for s in ("wait_event()/wake_up() pairs", "N/M of the reads", "1/2 media: x",
			  "an add_wait_queue()/wait_woken()/remove_wait_queue() loop",
			  "[<(____ptrval____)>] hpet_read+0x79/0x148", "https://lwn.net/Articles/628628/",
			  "read/write calls", "TASK_(UN)INTERRUPTIBLE", "and/or"):
			self.assertEqual(paths_in(s, self.TOP), [], s)

	def test_body_stops_at_dashes(self):
		text = "From: x\nSubject: y\n\nbody names drivers/a.c\n---\n tools/b.c | 1 +\n"
		self.assertEqual(paths_in(message_body(text), self.TOP), ["drivers/a.c"])


class CommittedPatchesTest(unittest.TestCase):
	def test_messages_name_only_tree_paths(self):
		known = trees()
		bad = []
		for tid, p in committed_patches():
			if os.path.basename(p).startswith("0000-"):
				continue
			self.assertIn(tid, known, "no kernel tree under %s for %s" % (cache_dir(), tid))
			with open(p, errors="replace") as f:
				body = message_body(f.read())
			bad += ["%s: %s" % (os.path.relpath(p, TOP), x) for x in missing_paths(body, known[tid])]
		self.assertEqual(bad, [])

	def test_no_placeholder(self):
		bad = []
		for tid, p in committed_patches():
			with open(p, errors="replace") as f:
				for n, line in enumerate(f, 1):
					if PLACEHOLDER.search(line):
						bad.append("%s:%d: %s" % (os.path.relpath(p, TOP), n, line.strip()))
		self.assertEqual(bad, [])


if __name__ == "__main__":
	unittest.main()
