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


class KnowledgeApartTest(unittest.TestCase):
	def test_tree_knowledge_in_a_child(self):
		tmp = tempfile.mkdtemp(prefix="nestsleep-apart-")
		self.addCleanup(shutil.rmtree, tmp, True)
		src = os.path.join(tmp, "src")
		os.makedirs(src)
		shutil.copy(os.path.join(TOP, "fixtures", "report", "shapes.c"), src)
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
