# SPDX-License-Identifier: GPL-2.0-only
"""The driver's copy of the rule has the pw and sc window rules split by
window name (waiters.split_rule()): the copies cover every name once,
everything that inherits from a split rule is copied with it, spatch
takes the result without a word, and it finds on the report fixtures the
records the unsplit copy finds."""

import glob
import json
import os
import re
import shutil
import subprocess
import tempfile
import unittest

from nestsleep import DEFAULT_COCCI, TOP
from nestsleep.analysis import waiters

WINDOW = ["mutex_lock", "msleep", "kmalloc", "copy_to_user", "schedule", "wait_event", "might_sleep",
	  "down", "usleep_range", "flush_work", "get_user", "put_user", "kzalloc", "lock_sock"]


def specialized(dst, split):
	"""The driver's copy of the rule for WINDOW, split or not."""
	saved = waiters.SPLIT_RULES
	waiters.SPLIT_RULES = waiters.SPLIT_RULES if split else ()
	try:
		return waiters.specialize_rule(DEFAULT_COCCI, dst, {}, [], WINDOW)
	finally:
		waiters.SPLIT_RULES = saved


def headers(text):
	return re.findall(r"^@(\w+)\b[^\n]*@", text, re.M)


class SplitRuleTest(unittest.TestCase):
	def setUp(self):
		self.dir = tempfile.mkdtemp(prefix="nestsleep-split-")
		with open(specialized(os.path.join(self.dir, "split.cocci"), True)) as f:
			self.split = f.read()
		with open(specialized(os.path.join(self.dir, "one.cocci"), False)) as f:
			self.one = f.read()

	def tearDown(self):
		shutil.rmtree(self.dir, ignore_errors=True)

	def test_copies_cover_the_names_once(self):
		k = waiters.SPLIT
		for name in waiters.SPLIT_RULES:
			with self.subTest(rule=name):
				self.assertNotIn(name, headers(self.split))
				self.assertEqual([h for h in headers(self.split) if h.startswith(name + "_")],
						 ["%s_%d" % (name, g) for g in range(k)])
				seen = []
				for g in range(k):
					block = self.split[self.split.index("@%s_%d exists@" % (name, g)):]
					m = re.search(r'identifier f =~ "\^\((.*?)\)\$";', block)
					seen += m.group(1).split("|")
				self.assertEqual(sorted(seen), sorted(WINDOW))

	def test_inheritors_follow(self):
		"""Each copy has its script, sc's have their scsched, and nothing
		names a rule that is gone."""
		k = waiters.SPLIT
		for name in waiters.SPLIT_RULES:
			self.assertIsNone(re.search(r"(?<![\w.])%s\.\w" % name, self.split), name)
			for g in range(k):
				self.assertIn("f << %s_%d.f;" % (name, g), self.split)
		for g in range(k):
			self.assertIn("@scsched_%d depends on" % g, self.split)
			self.assertIn("q << scsched_%d.q;" % g, self.split)
		anyp = re.search(r"position any_p = \{([^}]*)\};", self.split).group(1).split(", ")
		self.assertEqual(sorted(anyp), sorted(["wc.p", "carry.p"] + ["%s_%d.p" % (n, g) for n in ("pw", "sc")
									   for g in range(k)]))
		# the rules that inherit nothing from pw or sc are there once, unchanged
		for h in headers(self.one):
			if h not in waiters.SPLIT_RULES + ("scsched", "script"):
				self.assertEqual(headers(self.split).count(h), headers(self.one).count(h), h)

	@unittest.skipUnless(shutil.which("spatch"), "spatch is not installed")
	def test_same_records_on_the_fixtures(self):
		"""spatch on every report fixture: the split copy prints the
		records of the unsplit one (in any order) and no warning."""
		srcs = sorted(glob.glob(os.path.join(TOP, "fixtures", "report", "*.c")))
		self.assertGreater(len(srcs), 10)
		# and one window per name, alone in its function (mvumi_rescan_bus()
		# in 6.1: its msleep() was lost when a copy's script did not follow it)
		one = os.path.join(self.dir, "one_per_name.c")
		with open(one, "w") as f:
			for i, name in enumerate(WINDOW):
				f.write("static int t%d(struct d *d)\n{\n\twhile (!kthread_should_stop()) {\n"
					"\t\tset_current_state(TASK_INTERRUPTIBLE);\n\t\tif (!d->x)\n\t\t\tschedule();\n"
					"\t\t%s(d->y);\n\t\t__set_current_state(TASK_RUNNING);\n\t}\n\treturn 0;\n}\n\n"
					"static void u%d(struct d *d)\n{\n\tDEFINE_WAIT(w);\n\tprepare_to_wait(&d->q, &w, "
					"TASK_UNINTERRUPTIBLE);\n\t%s(d->y);\n\tschedule();\n\tfinish_wait(&d->q, &w);\n}\n\n"
					% (i, name, i, name))
		srcs.append(one)
		out = {}
		for which in ("split", "one"):
			groups = os.path.join(self.dir, "groups")
			with open(groups, "w") as f:
				f.write("".join(s + "\n\n" for s in srcs))
			paths = {}
			for nm, val in (("waiters", {}), ("carriers", []), ("window", WINDOW)):
				paths[nm] = os.path.join(self.dir, nm + ".json")
				with open(paths[nm], "w") as f:
					json.dump(val, f)
			env = dict(os.environ, NESTSLEEP_RAW="1", NESTSLEEP_WAITERS=paths["waiters"],
				   NESTSLEEP_CARRIERS=paths["carriers"], NESTSLEEP_WINDOW=paths["window"])
			r = subprocess.run(["spatch", "--sp-file", os.path.join(self.dir, which + ".cocci"), "--no-show-diff",
					    "--quiet", "--no-includes", "--include-headers", "--file-groups", groups],
					   capture_output=True, text=True, env=env, cwd=self.dir, timeout=600)
			self.assertEqual(r.returncode, 0, r.stderr[-2000:])
			self.assertNotIn("warning", r.stderr.lower())
			out[which] = sorted(l for l in r.stdout.splitlines() if l.startswith("NESTSLEEP "))
		self.assertGreater(len([l for l in out["one"] if '"prepare_to_wait"' in l or '"set_current_state"' in l]), 5)
		for name in WINDOW:
			if name == "schedule":
				continue	# it ends the window (ns_record() drops it)
			for shape in ("set_current_state", "prepare_to_wait"):
				self.assertTrue(any('"call": "%s"' % name in l and '"shape": "%s"' % shape in l and "one_per_name.c" in l
						    for l in out["one"]), (name, shape))
		self.assertEqual(out["split"], out["one"])


class SplitForTest(unittest.TestCase):
	"""pipeline.split_for(): a file is matched with the split rules only
	when a function of it that sets the task state makes SPLIT_CALLS
	calls or more (the facts' "setter" and "calls")."""

	@staticmethod
	def fn(setter, ncalls):
		return {"setter": setter, "calls": [{"name": "c%d" % i, "line": i} for i in range(ncalls)]}

	def test_forms(self):
		from nestsleep.analysis import pipeline
		n = waiters.SPLIT_CALLS
		self.assertEqual(pipeline.split_for({"a": self.fn(True, n)}), waiters.SPLIT)
		self.assertEqual(pipeline.split_for({"a": self.fn(True, n - 1)}), 1)
		self.assertEqual(pipeline.split_for({"a": self.fn(False, 10 * n), "b": self.fn(True, 3)}), 1)
		self.assertEqual(pipeline.split_for({"a": self.fn(False, 10 * n), "b": self.fn(True, n + 1)}), waiters.SPLIT)
		self.assertEqual(pipeline.split_for({}), 1)

	def test_rule_of_each_form(self):
		"""specialize_rule(split=1) leaves the window rules whole."""
		with tempfile.TemporaryDirectory() as d:
			got = {}
			for k in (1, waiters.SPLIT):
				dst = os.path.join(d, "r%d.cocci" % k)
				waiters.specialize_rule(DEFAULT_COCCI, dst, {}, [], WINDOW, split=k)
				with open(dst) as f:
					got[k] = f.read()
			self.assertIn("@pw exists@", got[1])
			self.assertNotIn("@pw_0 ", got[1])
			self.assertIn("@pw_0 exists@", got[waiters.SPLIT])


if __name__ == "__main__":
	unittest.main()
