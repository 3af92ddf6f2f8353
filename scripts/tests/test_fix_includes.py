# SPDX-License-Identifier: GPL-2.0-only
"""Where a fix's #include lines go (issue 32): into the file's include
block, before its first function, and only when the file does not
already get the header through its own #include lines.  Fixer.include()
writes the unit's diff; series.apply_unit() puts the include lines again
into the file that carries the series' earlier patches; the committed
patches under reports/fixes/ must show both right."""

import glob
import os
import re
import shutil
import subprocess
import tempfile
import unittest

from nestsleep import TOP, cache_dir
from nestsleep.fix import edits, fixer, includes
from nestsleep.knowledge import Knowledge
from nestsleep.series import gitrepo

KN = Knowledge()

WAIT = ("struct dev { wait_queue_head_t wq; };\nint dev_ready(struct dev *d);\n\n"
	"int f(struct dev *d)\n{\n\treturn wait_event_killable(d->wq, dev_ready(d));\n}\n")


class NoWakers(fixer.Fixer):
	"""The fixer without tree facts: the waker rule has nothing to check."""

	def wakers(self, *a):
		pass


def write(root, rel, text):
	path = os.path.join(root, rel)
	os.makedirs(os.path.dirname(path), exist_ok=True)
	with open(path, "w") as f:
		f.write(text)


def new_lines(diff, pat=r"^\+#\s*include\b"):
	"""{file: [new-file line numbers of the added lines matching pat]} of a
	unified diff."""
	out, rel, n = {}, None, 0
	for ln in diff.splitlines():
		m = re.match(r"^\+\+\+ (?:b/)?(\S+)", ln)
		if m:
			rel = m.group(1)
			continue
		if ln.startswith(("--- ", "diff ", "index ")):
			continue
		m = re.match(r"^@@ -\d+(?:,\d+)? \+(\d+)(?:,\d+)? @@", ln)
		if m:
			n = int(m.group(1))
			continue
		if rel is None or not ln[:1] in (" ", "+", "-", ""):
			continue
		if ln.startswith("+") and re.match(pat, ln):
			out.setdefault(rel, []).append(n)
		if not ln.startswith("-"):
			n += 1
	return out


def first_function_line(text):
	"""Line number (1-based) of the first function definition's '{'."""
	o = includes.first_function(text)
	return None if o < 0 else text.count("\n", 0, o) + 1


class FixerPlacementTest(unittest.TestCase):
	def setUp(self):
		self.tmp = tempfile.mkdtemp(prefix="nestsleep-inc-")
		self.addCleanup(shutil.rmtree, self.tmp)

	def fix(self, src, rel="drivers/x/t.c"):
		write(self.tmp, rel, src)
		fx = NoWakers(self.tmp, KN)
		u = edits.Unit(rel, "f", None)
		lines = src.split("\n")
		i = next(k for k, l in enumerate(lines) if "wait_event_killable(" in l)
		fx.plan({"file": rel, "function": "f", "primitive": "wait_event_killable", "shape": "wait_event",
			 "line": i + 1, "col": lines[i].index("wait_event_killable("), "confidence": "high",
			 "paths": [{"line": i + 1}]}, u)
		fx.finish(u)
		diff = fx.diff(u.edits)
		self.assertIn("wait_woken(", diff)
		return diff

	def assert_in_block(self, src, diff, rel="drivers/x/t.c"):
		first = first_function_line(src)
		added = new_lines(diff).get(rel, [])
		self.assertTrue(added, diff)
		for n in added:
			self.assertLess(n, first, diff)

	def test_local_includes_only(self):
		"""saa7164-encoder.c: its one #include is "saa7164.h"."""
		src = "/* c */\n\n#include \"t.h\"\n\n#define X 1\n\n" + WAIT
		write(self.tmp, "drivers/x/t.h", "/* nothing */\n")
		diff = self.fix(src)
		self.assertIn("+#include <linux/sched/signal.h>\n+#include <linux/wait.h>\n #include \"t.h\"\n", diff)
		self.assert_in_block(src, diff)

	def test_include_in_ifdef_after_a_function(self):
		"""An #include under #ifdef after a function is not the include
		block: <linux/wait.h> sorts before <linux/zzz.h>, but goes after
		<linux/slab.h>, at the top."""
		src = ("#include <linux/module.h>\n#include <linux/slab.h>\n\n"
		       "static int helper(void)\n{\n\treturn 0;\n}\n\n"
		       "#ifdef CONFIG_FOO\n#include <linux/zzz.h>\n#endif\n\n" + WAIT)
		diff = self.fix(src)
		self.assert_in_block(src, diff)
		self.assertIn(" #include <linux/slab.h>\n+#include <linux/wait.h>\n", diff)
		self.assertIn(" #include <linux/module.h>\n+#include <linux/sched/signal.h>\n #include <linux/slab.h>\n", diff)

	def test_include_in_ifdef_at_the_top(self):
		"""An #include under #ifdef in the include block is no place
		either: the new line would be conditional."""
		src = ("#include <linux/module.h>\n#ifdef CONFIG_FOO\n#include <linux/zzz.h>\n#endif\n\n" + WAIT)
		diff = self.fix(src)
		self.assertNotIn("#ifdef CONFIG_FOO\n+#include", diff)
		self.assertIn(" #include <linux/module.h>\n+#include <linux/sched/signal.h>\n+#include <linux/wait.h>\n",
			      diff)

	def test_header_reached_through_includes(self):
		"""The file gets <linux/wait.h> through <linux/foo.h>, and
		<linux/sched/signal.h> through its own "local.h" and <asm/bar.h>
		(arch/x86/include): nothing to add."""
		write(self.tmp, "include/linux/wait.h", "#ifndef _LINUX_WAIT_H\n#define _LINUX_WAIT_H\n#endif\n")
		write(self.tmp, "include/linux/sched/signal.h", "/* */\n")
		write(self.tmp, "include/linux/foo.h",
		      "#ifndef _FOO_H\n#define _FOO_H\n#include <linux/list.h>\n#include <linux/wait.h>\n#endif\n")
		write(self.tmp, "arch/x86/include/asm/bar.h", "#include <linux/sched/signal.h>\n")
		write(self.tmp, "drivers/x/local.h", "#pragma once\n#include <asm/bar.h>\n")
		src = "#include <linux/foo.h>\n#include \"local.h\"\n\n" + WAIT
		diff = self.fix(src)
		self.assertNotIn("+#include", diff)

	def test_header_under_ifdef_is_not_reached(self):
		"""Near miss: <linux/foo.h> includes <linux/wait.h> only under
		#ifdef CONFIG_FOO, which the walk does not assume."""
		write(self.tmp, "include/linux/wait.h", "/* */\n")
		write(self.tmp, "include/linux/sched/signal.h", "/* */\n")
		write(self.tmp, "include/linux/foo.h",
		      "#ifndef _FOO_H\n#define _FOO_H\n#include <linux/sched/signal.h>\n"
		      "#ifdef CONFIG_FOO\n#include <linux/wait.h>\n#endif\n#endif\n")
		src = "#include <linux/foo.h>\n\n" + WAIT
		diff = self.fix(src)
		self.assertIn("+#include <linux/wait.h>\n", diff)
		self.assertNotIn("+#include <linux/sched/signal.h>\n", diff)

	def test_walk_cap_adds_the_include(self):
		"""A chain longer than the walk's cap: the include is added."""
		write(self.tmp, "include/linux/wait.h", "/* */\n")
		write(self.tmp, "include/linux/sched/signal.h", "/* */\n")
		n = includes.MAX_FILES + 5
		for k in range(n):
			nxt = "linux/wait.h" if k == n - 1 else "linux/c%d.h" % (k + 1)
			write(self.tmp, "include/linux/c%d.h" % k, "#include <%s>\n#include <linux/sched/signal.h>\n" % nxt)
		src = "#include <linux/c0.h>\n\n" + WAIT
		diff = self.fix(src)
		self.assertIn("+#include <linux/wait.h>\n", diff)


class SeriesApplyTest(unittest.TestCase):
	"""series.apply_unit() adds an include-only hunk by hand, to the file
	that carries the series' earlier patches."""

	def apply(self, src, diff):
		tmp = tempfile.mkdtemp(prefix="nestsleep-inc-")
		self.addCleanup(shutil.rmtree, tmp)
		write(tmp, "d/t.c", src)
		repo = gitrepo.Repo(tmp, "A <a@example.invalid>", "Thu, 1 Jan 2026 00:00:00 +0000")
		repo.git("init", "-q")
		self.assertIsNone(gitrepo.apply_unit(repo, diff))
		with open(os.path.join(tmp, "d/t.c")) as f:
			return f.read()

	def test_local_includes_only(self):
		"""saa7164: the hunk's context before the new lines is a blank
		line, which is not where they go (the file's last blank line is
		inside its last function)."""
		src = ("/*\n * c\n */\n\n#include \"t.h\"\n\n#define X 1\n\nvoid g(void)\n{\n\tint a;\n\n"
		       "\ta = 1;\n}\n")
		diff = ("--- a/d/t.c\n+++ b/d/t.c\n@@ -3,5 +3,7 @@\n  */\n \n+#include <linux/sched/signal.h>\n"
			"+#include <linux/wait.h>\n #include \"t.h\"\n \n #define X 1\n")
		new = self.apply(src, diff)
		self.assertEqual(new, src.replace("\n#include \"t.h\"", "\n#include <linux/sched/signal.h>\n"
						  "#include <linux/wait.h>\n#include \"t.h\""))

	def test_sorted_place_and_not_twice(self):
		src = ("#include <linux/module.h>\n#include <linux/slab.h>\n#include <linux/wait.h>\n\n"
		       "void g(void)\n{\n}\n\n#ifdef CONFIG_FOO\n#include <linux/zzz.h>\n#endif\n")
		diff = ("--- a/d/t.c\n+++ b/d/t.c\n@@ -1,3 +1,5 @@\n #include <linux/module.h>\n"
			"+#include <linux/sched/signal.h>\n #include <linux/slab.h>\n+#include <linux/wait.h>\n \n")
		new = self.apply(src, diff)
		self.assertEqual(new, src.replace("<linux/module.h>\n", "<linux/module.h>\n#include <linux/sched/signal.h>\n"))


def tree_for(tid):
	m = re.match(r"linux-(\d+\.\d+)\.\d+$", tid)
	return os.path.join(cache_dir(), "linux-source-" + m.group(1)) if m else None


def judge_from_hunks(text):
	"""Without the kernel tree: the +#include lines that follow, in their
	own hunk, a line that closes or opens a top-level block, or whose
	hunk header names a function (git's funcname line before the hunk)."""
	bad = []
	for rel, hunks in gitrepo.split_diff(text):
		for h in hunks:
			fn = h[0].split("@@")[2].strip() if h[0].count("@@") >= 2 else ""
			seen = bool(re.match(r"^[A-Za-z_][^=;]*\(", fn))
			for ln in h[1:]:
				if ln.startswith("+") and re.match(r"^\+#\s*include\b", ln) and seen:
					bad.append((rel, ln.strip()))
				if ln[1:2] in ("}", "{"):
					seen = True
	return bad


class CommittedPatchesTest(unittest.TestCase):
	maxDiff = None

	def test_includes_before_first_function(self):
		"""Every +#include of a committed patch lands before the first
		function definition of the file it patches (the patched file is
		rebuilt from the kernel tree plus the series' patches in order)."""
		bad = []
		for out in sorted(glob.glob(os.path.join(TOP, "reports", "fixes", "*", "series.json"))):
			tid = os.path.basename(os.path.dirname(out))
			kdir = tree_for(tid)
			for sdir in sorted(glob.glob(os.path.join(os.path.dirname(out), "*", ""))):
				patches = sorted(p for p in glob.glob(os.path.join(sdir, "[0-9]*.patch"))
						 if not os.path.basename(p).startswith("0000-"))
				bad += self.check_series(tid, kdir, patches)
		self.assertEqual(bad, [])

	def check_series(self, tid, kdir, patches):
		bad = []
		tmp = tempfile.mkdtemp(prefix="nestsleep-inc-")
		self.addCleanup(shutil.rmtree, tmp)
		for p in patches:
			with open(p, errors="surrogateescape") as f:
				text = f.read()
			name = "%s/%s" % (tid, os.path.relpath(p, os.path.join(TOP, "reports", "fixes", tid)))
			files = [rel for rel, _ in gitrepo.split_diff(text)]
			ok = kdir and os.path.isdir(kdir)
			for rel in files:
				dst = os.path.join(tmp, rel)
				if ok and not os.path.exists(dst) and os.path.isfile(os.path.join(kdir, rel)):
					os.makedirs(os.path.dirname(dst), exist_ok=True)
					shutil.copyfile(os.path.join(kdir, rel), dst)
			r = subprocess.run(["patch", "-p1", "-s", "--no-backup-if-mismatch", "-i", p], cwd=tmp,
					   capture_output=True) if ok else None
			if r is None or r.returncode != 0:
				# no tree, or it does not take the patch: the hunks decide
				bad += [(name, rel, inc, "after a function (hunk context)")
					for rel, inc in judge_from_hunks(text)]
				continue
			for rel, nums in new_lines(text).items():
				with open(os.path.join(tmp, rel), errors="surrogateescape") as f:
					first = first_function_line(f.read())
				for n in nums:
					if first is not None and n > first:
						bad.append((name, rel, "line %d" % n, "first function body at line %d" % first))
		return bad


if __name__ == "__main__":
	unittest.main()
