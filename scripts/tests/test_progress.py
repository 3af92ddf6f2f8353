# SPDX-License-Identifier: GPL-2.0-only
"""Progress on stderr during long phases (issue 14, item 5): on a terminal
one line redrawn with files done of total and the time left; otherwise a
plain line every so often; nothing for a short phase.  And the rule's side
of it: spatch names each finished file in the progress file."""

import io
import os
import subprocess
import tempfile
import unittest

from nestsleep import TOP
from nestsleep.progress import EVERY, QUIET_START, Progress, appended


class Clock:
	def __init__(self):
		self.t = 100.0

	def __call__(self):
		return self.t


class Stream(io.StringIO):
	def __init__(self, tty):
		super().__init__()
		self.tty = tty

	def isatty(self):
		return self.tty


class ProgressTest(unittest.TestCase):
	def setUp(self):
		Progress.last_line = None

	def drive(self, tty, steps, clock=None, work=None):
		"""Advance a fake clock by steps seconds per file, 10 files."""
		clock, out = clock or Clock(), Stream(tty)
		p = Progress("matching", 10, stream=out, clock=clock, work=sum(work or []))
		for done in range(1, 11):
			clock.t += steps
			p.update(done, sum((work or [])[:done]))
		p.close()
		return out.getvalue()

	def test_short_phase_is_silent(self):
		self.assertEqual(self.drive(True, QUIET_START / 20), "")
		self.assertEqual(self.drive(False, QUIET_START / 20), "")

	def test_terminal_line_is_redrawn_and_cleared(self):
		text = self.drive(True, 1.0)
		self.assertIn("\rmatching: 3/10 files, about 7s left", text)
		self.assertNotIn("\n", text)
		self.assertTrue(text.endswith("\r"), repr(text[-40:]))
		self.assertEqual(text.split("\r")[-2].strip(), "")

	def test_log_gets_a_plain_line_every_so_often(self):
		text = self.drive(False, EVERY / 2)
		lines = text.splitlines()
		# one line per EVERY seconds: at files 2, 4, 6, 8 and 10
		self.assertEqual(len(lines), 5, text)
		self.assertEqual(lines[0], "nestsleep: matching: 2/10 files, about 2m00s left")
		self.assertEqual(lines[-1], "nestsleep: matching: 10/10 files")
		self.assertNotIn("\r", text)

	def test_time_left_by_work_not_by_files(self):
		"""The largest files go first: the first 2 of 10 files are 80 % of
		the bytes, so after them the time left is a quarter of the time
		spent, not four times it."""
		text = self.drive(True, 1.5, work=[40, 40] + [2.5] * 8)
		self.assertIn("matching: 2/10 files, about 1s left", text)

	def test_plain_lines_are_spaced_across_phases(self):
		"""Many short phases (batches) still give a line every EVERY s."""
		clock, text = Clock(), ""
		for _ in range(6):
			text += self.drive(False, EVERY / 40, clock=clock)
		self.assertEqual(len(text.splitlines()), 1, text)
		for _ in range(6):
			text += self.drive(False, EVERY / 20, clock=clock)
		self.assertEqual(len(text.splitlines()), 4, text)

	def test_appended_lines_of_a_growing_file(self):
		with tempfile.TemporaryDirectory() as d:
			path, state = os.path.join(d, "p"), {}
			self.assertEqual(appended(path, state), [])
			with open(path, "a") as f:
				f.write("a.c\nb.c\nc.")
			self.assertEqual(appended(path, state), ["a.c", "b.c"])
			with open(path, "a") as f:
				f.write("c\n")
			self.assertEqual(appended(path, state), ["c.c"])
			self.assertEqual(appended(path, state), [])


class RuleProgressTest(unittest.TestCase):
	def test_spatch_names_each_finished_file_once(self):
		src = os.path.join(TOP, "fixtures", "report")
		names = ["callee_restores.c", "chain_depth.c", "funcptr.c"]
		with tempfile.TemporaryDirectory() as d:
			progress = os.path.join(d, "progress")
			env = dict(os.environ, NESTSLEEP_RAW="1", NESTSLEEP_PROGRESS_FILE=progress)
			r = subprocess.run(["spatch", "--sp-file", os.path.join(TOP, "cocci", "nested_sleep.cocci"),
					    "--no-show-diff", "--quiet", "--jobs", "2", "--chunksize", "1",
					    "--tmp-dir", os.path.join(d, "par")] + [os.path.join(src, n) for n in names],
					   capture_output=True, text=True, env=env, cwd=d, timeout=300)
			self.assertEqual(r.returncode, 0, r.stderr)
			with open(progress) as f:
				done = f.read().splitlines()
			self.assertEqual(sorted(done), sorted(os.path.join(src, n) for n in names))


if __name__ == "__main__":
	unittest.main()
