# SPDX-License-Identifier: GPL-2.0-only
"""common.run_apart(): a step run in a forked child, its result returned;
and the pipeline's tree-knowledge pass, which runs that way so that the
whole-tree facts and call graph it builds leave with the child."""

import os
import shutil
import signal
import tempfile
import unittest

from nestsleep import TOP
from nestsleep.analysis import pipeline
from nestsleep.common import UserError, run_apart


class RunApartTest(unittest.TestCase):
	def test_result(self):
		self.assertEqual(run_apart(lambda: {"pid": os.getpid(), "x": [1, 2]})["x"], [1, 2])
		self.assertNotEqual(run_apart(os.getpid), os.getpid())

	def test_user_error(self):
		def bad():
			raise UserError("KDIR=x: no such directory")
		with self.assertRaisesRegex(UserError, "^KDIR=x: no such directory$"):
			run_apart(bad)

	def test_other_error_has_the_traceback(self):
		def bug():
			return {}["missing"]
		with self.assertRaisesRegex(RuntimeError, "KeyError: 'missing'"):
			run_apart(bug)

	def test_killed(self):
		with self.assertRaisesRegex(UserError, "killed by signal 9"):
			run_apart(lambda: os.kill(os.getpid(), signal.SIGKILL))

	def test_exit_without_result(self):
		with self.assertRaisesRegex(RuntimeError, "no result"):
			run_apart(lambda: os._exit(3))


def shapes_tree(test):
	"""(a scratch dir, a tree in it holding the shapes fixture)."""
	tmp = tempfile.mkdtemp(prefix="nestsleep-apart-")
	test.addCleanup(shutil.rmtree, tmp, True)
	src = os.path.join(tmp, "src")
	os.makedirs(src)
	shutil.copy(os.path.join(TOP, "fixtures", "report", "shapes.c"), src)
	return tmp, src


class KnowledgeApartTest(unittest.TestCase):
	def test_tree_knowledge_in_a_child(self):
		tmp, src = shapes_tree(self)
		seen = os.path.join(tmp, "pid")
		real = pipeline.tree_knowledge

		def spy(*a):
			with open(seen, "w") as f:
				f.write(str(os.getpid()))
			return real(*a)
		pipeline.tree_knowledge = spy
		try:
			res = pipeline.check(pipeline.Options(kdir=src, mode="report", jobs=1,
							      cache=os.path.join(tmp, "cache")))
		finally:
			pipeline.tree_knowledge = real
		self.assertTrue(res.findings)
		with open(seen) as f:
			self.assertNotEqual(int(f.read()), os.getpid())
		# the child's phase times come back
		self.assertIn("window", res.times)


class RunSpawnedTest(unittest.TestCase):
	def test_result(self):
		from nestsleep.common import run_spawned
		self.assertNotEqual(run_spawned("os", "getpid"), os.getpid())
		self.assertEqual(run_spawned("json", "loads", '{"a": [1]}'), {"a": [1]})

	def test_errors(self):
		from nestsleep.common import run_spawned
		with self.assertRaisesRegex(UserError, "^CONFIDENCE=bogus: give"):
			run_spawned("nestsleep.common", "check_confidence", "bogus")
		with self.assertRaisesRegex(RuntimeError, "JSONDecodeError"):
			run_spawned("json", "loads", "{")
		with self.assertRaisesRegex(UserError, "killed by signal 6"):
			run_spawned("os", "abort")
		with self.assertRaisesRegex(RuntimeError, "no result"):
			run_spawned("os", "_exit", 3)

	def test_stdout_is_the_result_alone(self):
		from nestsleep.common import run_spawned
		self.assertIsNone(run_spawned("builtins", "print", "to stderr, not into the result"))


class WakeCovApartTest(unittest.TestCase):
	"""The wake coverage runs in a process of its own: what it builds is
	not added to the run's memory."""

	def test_in_another_process(self):
		from nestsleep.analysis import wakecov
		seen = []
		real = wakecov._wake_coverage

		def spy(*a):
			seen.append(os.getpid())
			return real(*a)
		wakecov._wake_coverage = spy
		try:
			tmp, src = shapes_tree(self)
			res = pipeline.check(pipeline.Options(kdir=src, mode="report", jobs=1,
							      cache=os.path.join(tmp, "cache")))
		finally:
			wakecov._wake_coverage = real
		self.assertTrue(res.findings)
		self.assertEqual(seen, [], "ran in this process")


class KnowledgeReusedTest(unittest.TestCase):
	"""An edit that changes no facts of the files the tree-knowledge pass
	read (a comment) reuses the last run's knowledge; one that does is
	derived again, and the findings follow it."""

	HELPER = "#include <linux/mutex.h>\nint helper(struct s *x)\n{\n\tmutex_lock(&x->m);\n\treturn x->n;\n}\n"
	WAITER = ("int helper(struct s *x);\nint w(struct s *x)\n{\n\twhile (1) {\n\t\tset_current_state(TASK_INTERRUPTIBLE);\n"
		  "\t\tif (helper(x))\n\t\t\tbreak;\n\t\tschedule();\n\t}\n\t__set_current_state(TASK_RUNNING);\n\treturn 0;\n}\n")

	def run_tree(self, src, cache):
		import contextlib
		import io
		err = io.StringIO()
		with contextlib.redirect_stderr(err):
			res = pipeline.check(pipeline.Options(kdir=src, mode="report", jobs=1, cache=cache))
		return res, err.getvalue()

	def test_reuse(self):
		tmp = tempfile.mkdtemp(prefix="nestsleep-reuse-")
		self.addCleanup(shutil.rmtree, tmp, True)
		src, cache = os.path.join(tmp, "src"), os.path.join(tmp, "cache")
		os.makedirs(src)
		for name, text in (("helper.c", self.HELPER), ("waiter.c", self.WAITER)):
			with open(os.path.join(src, name), "w") as f:
				f.write(text)
		first, err = self.run_tree(src, cache)
		self.assertNotIn("tree knowledge reused", err)
		self.assertEqual([f["chain"] for f in first.findings], [["helper", "mutex_lock"]])
		with open(os.path.join(src, "helper.c"), "a") as f:
			f.write("/* a comment */\n")
		again, err = self.run_tree(src, cache)
		self.assertIn("tree knowledge reused", err)
		self.assertEqual(again.output, first.output)
		with open(os.path.join(src, "helper.c"), "w") as f:
			f.write(self.HELPER.replace("mutex_lock(&x->m);", "x->n++;"))
		changed, err = self.run_tree(src, cache)
		self.assertNotIn("tree knowledge reused", err)
		self.assertNotIn("tree knowledge cached", err)
		self.assertEqual(changed.findings, [])
