# SPDX-License-Identifier: GPL-2.0-only
"""Tests for scripts/dev/run_tests.py, the runner of 'make check': its count
must not hide a failure (known failures, skips, class fixtures)."""

import io
import os
import re
import shutil
import tempfile
import textwrap
import unittest

from dev import run_tests

FAKE_TESTS = '''
import os
import unittest

MARK = os.environ["NS_FAKE_MARK"]


class WithFixture(unittest.TestCase):
	@classmethod
	def setUpClass(cls):
		with open(MARK, "a") as f:
			f.write("setUpClass\\n")

	@classmethod
	def tearDownClass(cls):
		with open(MARK, "a") as f:
			f.write("tearDownClass\\n")

	def test_sees_the_fixture(self):
		with open(MARK) as f:
			self.assertIn("setUpClass", f.read())

	def test_fails(self):
		self.assertEqual(1, 2)

	@unittest.skip("not here")
	def test_skipped(self):
		pass
'''


class CountTest(unittest.TestCase):
	def results(self):
		return run_tests.Results(out=io.StringIO())

	def test_known_failure_that_passes_fails_the_run(self):
		r = self.results()
		r.add("report/x_failure", True, 0, known=True)
		self.assertIn("report/x_failure", r.failed)
		self.assertNotIn("report/x_failure", r.passed)
		self.assertIn("rename", r.out.getvalue())

	def test_known_failure_that_fails_is_not_a_pass(self):
		r = self.results()
		r.add("report/y_failure", False, 0, known=True)
		self.assertEqual((r.passed, r.failed, r.known), ([], [], ["report/y_failure"]))

	def test_summary_counts_skips_and_known_failures(self):
		r = self.results()
		r.add("a", True, 0)
		r.add("b", False, 0)
		r.add("c_failure", False, 0, known=True)
		r.skip("d", "no tree")
		lines = r.summary()
		self.assertEqual(lines[-1], "1 passed, 1 failed, 1 skipped")
		self.assertEqual(lines[-2], "1 known failures: c_failure")
		self.assertTrue(re.match(r"^[0-9]+ passed, [0-9]+ failed", lines[-1]), ".ci/run's pattern")


class UnitRunnerTest(unittest.TestCase):
	def setUp(self):
		self.tmp = tempfile.mkdtemp(prefix="nestsleep-rt-")
		self.mark = os.path.join(self.tmp, "mark")
		os.environ["NS_FAKE_MARK"] = self.mark
		with open(os.path.join(self.tmp, "test_fake_fixture.py"), "w") as f:
			f.write(textwrap.dedent(FAKE_TESTS))

	def tearDown(self):
		os.environ.pop("NS_FAKE_MARK", None)
		shutil.rmtree(self.tmp, ignore_errors=True)

	def test_class_fixtures_run_and_every_result_counts(self):
		r = run_tests.Results(out=io.StringIO())
		run_tests.unit_tests(r, "", dirs=(self.tmp,))
		self.assertEqual(r.passed, ["unit/WithFixture.test_sees_the_fixture"])
		self.assertEqual(r.failed, ["unit/WithFixture.test_fails"])
		self.assertEqual(r.skipped, ["unit/WithFixture.test_skipped"])
		with open(self.mark) as f:
			self.assertEqual(f.read().split(), ["setUpClass", "tearDownClass"])

	def test_only_selects_by_name(self):
		r = run_tests.Results(out=io.StringIO())
		run_tests.unit_tests(r, "sees_the", dirs=(self.tmp,))
		self.assertEqual((r.passed, r.failed, r.skipped), (["unit/WithFixture.test_sees_the_fixture"], [], []))



class FixtureOnlyTest(unittest.TestCase):
	"""--only matches the fixture results' names, as it matches the unit
	tests': 'patch/NAME' and 'report/NAME', and the results under them."""

	def test_only_matches_the_result_names(self):
		sel = run_tests.fixture_selected
		self.assertTrue(sel("patch", "wait_event_rewrite", ""))
		self.assertTrue(sel("patch", "wait_event_rewrite", "patch/"))
		self.assertTrue(sel("patch", "wait_event_rewrite", "patch/wait_event"))
		self.assertTrue(sel("patch", "wait_event_rewrite", "wait_event"))
		self.assertTrue(sel("patch", "wait_event_rewrite", "patch/wait_event_rewrite/idempotent"))
		self.assertFalse(sel("patch", "wait_event_rewrite", "report/"))
		self.assertTrue(sel("report", "shapes", "report/sha"))
		self.assertFalse(sel("report", "shapes", "patch/"))
		self.assertFalse(sel("patch", "kthread_wakers", "unit/"))


class LabelledTest(unittest.TestCase):
	"""The 'labelled findings' stage: a true finding whose wait site is no
	longer reported is lost; a harmless or false one may go; a site
	reported with another chain is kept."""

	def test_lost_true(self):
		def f(fp, file, line, chain=("mutex_lock",)):
			return {"fingerprint": fp, "file": file, "line": line, "function": "fn", "chain": list(chain)}
		old = [f("a", "x.c", 10), f("b", "x.c", 20), f("c", "y.c", 5), f("d", "y.c", 9)]
		labels = {"a": {"verdict": "true"}, "b": {"verdict": "true"}, "c": {"verdict": "harmless"},
			  "d": {"verdict": "false-positive"}}
		want = run_tests.true_findings(old, labels)
		self.assertEqual([x["fingerprint"] for x in want], ["a", "b"])
		new = [f("a2", "x.c", 10, ("helper", "down"))]
		self.assertEqual([x["fingerprint"] for x in run_tests.lost_true(want, new)], ["b"])
		self.assertEqual(run_tests.lost_true(want, new + [f("b", "x.c", 20)]), [])


if __name__ == "__main__":
	unittest.main()
