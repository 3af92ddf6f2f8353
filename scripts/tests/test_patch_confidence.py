# SPDX-License-Identifier: GPL-2.0-only
"""MODE=patch and CONFIDENCE= (issue 32 item 9): by default MODE=patch
rewrites only the fixes of high confidence, as 'make fixes' selects them
without hand labels (series.select); CONFIDENCE=medium or low selects
more.  Each finding left out is named on stderr, one line, with its
confidence; stdout is the diff alone.  A bad CONFIDENCE= is one line and
exit 2.

The trees are two patch fixtures, one each (the wake coverage of
in_loop() depends on the tree): prepare_to_wait_rewrite.c, whose
exclusive() fix has medium confidence (the fixer's own doubt about an
exclusive waiter) while its other fixes have high, and in_loop() of
wait_event_rewrite.c, whose wait_event() fix has high confidence and whose
missed wakeup (d->count++ with no wake_up()) medium: one unit, so both
stay out by default, as in 'make fixes'."""

import os
import shutil
import subprocess
import tempfile
import unittest

from nestsleep import TOP

PY = "/usr/bin/python3"
PTW = "prepare_to_wait_rewrite.c"
WER = "wait_event_rewrite.c"


def fixture_line(name, text, after=""):
	"""The line number of text in fixtures/patch/name (the first one after
	the line after, whole)."""
	with open(os.path.join(TOP, "fixtures", "patch", name)) as f:
		lines = f.read().split("\n")
	start = lines.index(after) if after else 0
	return next(i for i in range(start, len(lines)) if text in lines[i]) + 1


class PatchConfidenceTest(unittest.TestCase):
	@classmethod
	def setUpClass(cls):
		cls.tmp = tempfile.mkdtemp(prefix="nestsleep-conf-")
		cls.cache = os.path.join(cls.tmp, "cache")
		cls.kdir = {}
		for name in (PTW, WER):
			cls.kdir[name] = os.path.join(cls.tmp, name[:-2])
			os.mkdir(cls.kdir[name])
			shutil.copy(os.path.join(TOP, "fixtures", "patch", name), cls.kdir[name])
		cls.runs = {}

	@classmethod
	def tearDownClass(cls):
		shutil.rmtree(cls.tmp, ignore_errors=True)

	def cli(self, name, *args):
		key = (name,) + args
		if key not in self.runs:
			r = subprocess.run([PY, "-m", "nestsleep", "coccicheck", "--kdir", self.kdir[name], "--cache", self.cache,
					    "--mode", "patch", "-j", "2"] + list(args),
					   capture_output=True, text=True, timeout=600,
					   env=dict(os.environ, NESTSLEEP_CACHE=self.cache))
			self.assertEqual(r.returncode, 0, r.stderr[-3000:])
			self.runs[key] = r
		return self.runs[key]

	def patched(self, r, name):
		"""The file name after r's diff."""
		copy = os.path.join(self.tmp, "copy")
		shutil.rmtree(copy, ignore_errors=True)
		shutil.copytree(self.kdir[name], copy)
		p = subprocess.run(["patch", "-p1", "-s", "--no-backup-if-mismatch"], cwd=copy, input=r.stdout,
				   capture_output=True, text=True, timeout=60)
		self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
		with open(os.path.join(copy, name)) as f:
			return f.read()

	def function(self, text, head):
		"""The definition that starts with the line head."""
		s = text.index("\n" + head + "\n{\n") + 1
		return text[s:text.index("\n}\n", s) + 3]

	def changed(self, r, name, head):
		with open(os.path.join(self.kdir[name], name)) as f:
			before = f.read()
		return self.function(before, head) != self.function(self.patched(r, name), head)

	def left_out(self, r):
		"""The lines that name a finding left out (log()'s prefix dropped)."""
		return [l[len("nestsleep: "):] for l in r.stderr.splitlines()
			if "below CONFIDENCE=" in l and ": patch: " not in l]

	def test_default_rewrites_high_only(self):
		r = self.cli(PTW)
		# the high fixes of the file are there
		self.assertTrue(self.changed(r, PTW, "void top_of_loop(struct dev *d)"))
		# the medium one is not, and stderr says why
		self.assertFalse(self.changed(r, PTW, "void exclusive(struct dev *d)"))
		line = fixture_line(PTW, "prepare_to_wait_exclusive(")
		self.assertIn("%s:%d: exclusive: confidence medium below CONFIDENCE=high" % (PTW, line),
			      self.left_out(r))

	def test_default_leaves_out_the_whole_unit(self):
		"""in_loop(): its missed wakeup has medium confidence, and its
		wait_event() fix (high) goes with it, as in 'make fixes'."""
		r = self.cli(WER)
		self.assertFalse(self.changed(r, WER, "void in_loop(struct dev *d, int wait)"))
		miss = fixture_line(WER, "d->count++;", "void in_loop(struct dev *d, int wait)")
		wait = fixture_line(WER, "wait_event(d->wq, dev_ready(d));", "void in_loop(struct dev *d, int wait)")
		out = self.left_out(r)
		self.assertIn("%s:%d: in_loop: confidence medium below CONFIDENCE=high" % (WER, miss), out)
		self.assertTrue(any(l.startswith("%s:%d: in_loop: confidence high, " % (WER, wait)) for l in out), out)
		self.assertEqual(len(out), 2, out)
		# the other functions of the file are rewritten
		self.assertTrue(self.changed(r, WER, "void plain(struct dev *d)"))

	def test_stdout_is_only_the_diff(self):
		for name in (PTW, WER):
			r = self.cli(name)
			self.assertTrue(r.stdout.startswith("--- a/"), r.stdout[:200])
			self.assertNotIn("CONFIDENCE", r.stdout)
			self.patched(r, name)

	def test_medium_selects_more(self):
		r = self.cli(PTW, "--confidence", "medium")
		self.assertTrue(self.changed(r, PTW, "void exclusive(struct dev *d)"))
		self.assertEqual(self.left_out(r), [])
		r = self.cli(WER, "--confidence", "medium")
		self.assertTrue(self.changed(r, WER, "void in_loop(struct dev *d, int wait)"))
		self.assertIn("+\t\twake_up(&d->wq);", r.stdout)
		self.assertEqual(self.left_out(r), [])

	def test_low_is_everything(self):
		for name in (PTW, WER):
			r = self.cli(name, "--confidence", "low")
			self.assertEqual(r.stdout, self.cli(name, "--confidence", "medium").stdout)
			self.assertEqual(self.left_out(r), [])

	def test_bad_confidence(self):
		for bad in ("bogus", "HIGHEST", ""):
			r = subprocess.run([PY, "-m", "nestsleep", "coccicheck", "--kdir", self.kdir[PTW], "--cache", self.cache,
					    "--mode", "patch", "--confidence", bad], capture_output=True, text=True, timeout=120)
			self.assertEqual(r.returncode, 2, r.stderr)
			lines = [l for l in r.stderr.splitlines() if l.strip()]
			self.assertEqual(len(lines), 1, r.stderr)
			self.assertIn("CONFIDENCE=%s" % bad, lines[0])
			self.assertEqual(r.stdout, "")

	def test_through_make(self):
		"""make coccicheck MODE=patch hands CONFIDENCE= on."""
		r = subprocess.run(["make", "-s", "-C", TOP, "coccicheck", "KDIR=" + self.kdir[PTW], "MODE=patch",
				    "CONFIDENCE=medium", "J=2"], capture_output=True, text=True, timeout=600,
				   env=dict(os.environ, NESTSLEEP_CACHE=self.cache))
		self.assertEqual(r.returncode, 0, r.stderr[-3000:])
		self.assertTrue(self.changed(r, PTW, "void exclusive(struct dev *d)"))
		r = subprocess.run(["make", "-s", "-C", TOP, "coccicheck", "KDIR=" + self.kdir[PTW], "MODE=patch",
				    "CONFIDENCE=maybe"], capture_output=True, text=True, timeout=600,
				   env=dict(os.environ, NESTSLEEP_CACHE=self.cache))
		self.assertNotEqual(r.returncode, 0)
		self.assertIn("CONFIDENCE=maybe", r.stderr)
		self.assertNotIn("Traceback", r.stderr)
		self.assertEqual(r.stdout, "")


if __name__ == "__main__":
	unittest.main()
