# SPDX-License-Identifier: GPL-2.0-only
"""Where the knowledge comes from: every entry of cocci/sleep_info.json
names its "source", kernel lines or hand labels, and those exist.

An entry is any object in the file that has a "reason" (each group, each
not_sleeping entry, each top-level special rule, each sub-object of
tasks and each waiters root); a "NAME_reason" beside a list needs a
"NAME_source"; a top-level list (blocking_gfp) needs a top-level
"NAME_source".  A source is "path/file.c:LINE" in the 6.1 tree,
"6.12:path/file.c:LINE" in the 6.12 tree, or
"label:<tree-id>:<fingerprint>" for a hand label in reports/labels/."""

import json
import os
import re
import shutil
import tempfile
import unittest

from nestsleep import SLEEP_INFO, TOP, cache_dir
from nestsleep import knowledge
from nestsleep.knowledge import Knowledge

TREES = {"": os.path.join(cache_dir(), "linux-source-6.1"),
	 "6.12:": os.path.join(cache_dir(), "linux-source-6.12")}
LABELS = os.path.join(TOP, "reports", "labels")
FILE_LINE = re.compile(r"^(6\.12:)?([A-Za-z0-9_./+-]+\.[chS]):([0-9]+)$")
LABEL = re.compile(r"^label:(linux-[0-9.]+):([0-9a-f]{16})$")


def with_reason(node, where="", out=None):
	"""(where, object, source key) of every object that carries a reason,
	and of every "NAME_reason" beside a list, anywhere in the file."""
	out = [] if out is None else out
	if isinstance(node, dict):
		for k in node:
			if k == "reason":
				out.append((where, node, "source"))
			elif k.endswith("_reason"):
				out.append((where + "." + k, node, k[:-len("reason")] + "source"))
		for k, v in node.items():
			with_reason(v, "%s.%s" % (where, k) if where else k, out)
	elif isinstance(node, list):
		for i, v in enumerate(node):
			with_reason(v, "%s[%d]" % (where, i), out)
	return out


class SourcesTest(unittest.TestCase):
	@classmethod
	def setUpClass(cls):
		with open(SLEEP_INFO) as f:
			cls.info = json.load(f)
		cls.labels = {}
		for name in os.listdir(LABELS):
			if name.endswith(".json"):
				with open(os.path.join(LABELS, name)) as f:
					cls.labels[name[:-len(".json")]] = set(json.load(f)["labels"])

	def all_sources(self):
		out = []
		for where, obj, key in with_reason(self.info):
			out += [(where, s) for s in obj.get(key, ())]
		for k, v in self.info.items():
			if isinstance(v, list) and all(isinstance(x, str) for x in v):
				out += [(k, s) for s in self.info.get(k + "_source", ())]
		return out

	def test_every_entry_has_a_source(self):
		missing = [where or "(top)" for where, obj, key in with_reason(self.info)
			   if not (isinstance(obj.get(key), list) and obj[key]
				   and all(isinstance(s, str) and s for s in obj[key]))]
		self.assertEqual(missing, [])

	def test_every_top_level_rule_is_covered(self):
		"""No top-level section escapes: each is an object with a reason,
		a list of such objects, or a list of names with a NAME_source."""
		bare = []
		for k, v in self.info.items():
			if k == "about" or k.endswith("_source"):
				continue
			if isinstance(v, dict) and v.get("source"):
				continue
			if isinstance(v, list) and v and all(isinstance(x, dict) and x.get("source") for x in v):
				continue
			if isinstance(v, list) and self.info.get(k + "_source"):
				continue
			bare.append(k)
		self.assertEqual(bare, [])

	def test_sources_are_well_formed(self):
		bad = [(w, s) for w, s in self.all_sources() if not (FILE_LINE.match(s) or LABEL.match(s))]
		self.assertEqual(bad, [])

	def test_label_sources_name_a_label(self):
		bad = []
		for where, s in self.all_sources():
			m = LABEL.match(s)
			if m and m.group(2) not in self.labels.get(m.group(1), ()):
				bad.append((where, s))
		self.assertEqual(bad, [])

	def test_file_lines_exist_in_the_tree(self):
		"""Each path:LINE names a file of its tree and a non-blank line
		within it."""
		missing = [p for p in TREES.values() if not os.path.isdir(os.path.join(p, "kernel"))]
		if missing:
			self.skipTest("kernel tree not unpacked: %s (make setup unpacks it)" % ", ".join(missing))
		bad, lines = [], {}
		for where, s in self.all_sources():
			m = FILE_LINE.match(s)
			if not m:
				continue
			path = os.path.join(TREES[m.group(1) or ""], m.group(2))
			if path not in lines:
				try:
					with open(path, errors="replace") as f:
						lines[path] = f.read().split("\n")
				except OSError:
					lines[path] = None
			n = int(m.group(3))
			text = lines[path]
			if text is None or not 1 <= n <= len(text) or not text[n - 1].strip():
				bad.append((where, s))
		self.assertEqual(bad, [])


class LabelOnlyTest(unittest.TestCase):
	"""Knowledge.label_only and source_counts() on a small file."""

	def load(self, info):
		d = tempfile.mkdtemp(prefix="nestsleep-ksource-")
		self.addCleanup(shutil.rmtree, d, True)
		path = os.path.join(d, "sleep_info.json")
		with open(path, "w") as f:
			json.dump(info, f)
		return Knowledge(path)

	def test_label_only(self):
		with open(SLEEP_INFO) as f:
			info = json.load(f)
		info["groups"].append({"name": "taught", "effect": "warns", "reason": "a label said so",
				       "source": ["label:linux-6.1.192:0000000000000000"], "functions": ["taught_fn"]})
		info["groups"].append({"name": "both", "effect": "warns", "reason": "a label and the source",
				       "source": ["label:linux-6.1.192:0000000000000000", "kernel/locking/mutex.c:283"],
				       "functions": ["both_fn"]})
		kn = self.load(info)
		self.assertIn("taught_fn", kn.label_only)
		self.assertNotIn("both_fn", kn.label_only)
		self.assertNotIn("mutex_lock", kn.label_only)
		counts = kn.source_counts()
		self.assertEqual(counts["groups"]["label_only"], Knowledge().source_counts()["groups"]["label_only"] + 1)
		self.assertEqual(counts["groups"]["kernel"], Knowledge().source_counts()["groups"]["kernel"] + 1)

	def test_entries_cover_the_sections(self):
		kn = Knowledge()
		sections = set(sec for sec, _ in knowledge.entries(kn.info))
		self.assertTrue({"groups", "not_sleeping", "thread_exit", "tasks", "waiters"} <= sections, sections)


class LabelDoubtTest(unittest.TestCase):
	"""A chain that ends in a primitive whose only source is a hand label
	gets one more doubt (pipeline.site_paths()).  No real entry is
	label-only, so fixtures/report/label_sourced.c runs here with a copy of
	sleep_info.json whose semaphore group is known only from a label: its
	down() chain drops from high to medium, the mutex_lock() near miss
	stays high."""

	def run_with(self, info):
		from nestsleep.analysis import pipeline
		d = tempfile.mkdtemp(prefix="nestsleep-ksource-")
		self.addCleanup(shutil.rmtree, d, True)
		tree = os.path.join(d, "tree")
		os.mkdir(tree)
		shutil.copy(os.path.join(TOP, "fixtures", "report", "label_sourced.c"), tree)
		path = os.path.join(d, "sleep_info.json")
		with open(path, "w") as f:
			json.dump(info, f)
		real = pipeline.Knowledge
		pipeline.Knowledge = lambda: real(path)
		try:
			res = pipeline.check(pipeline.Options(kdir=tree, mode="report", jobs=1,
							      cache=os.path.join(cache_dir(), "test-cache")))
		finally:
			pipeline.Knowledge = real
		return {f["chain"][-1]: (f["confidence"], f["doubts"]) for f in res.findings}

	def test_label_only_group_costs_one_doubt(self):
		with open(SLEEP_INFO) as f:
			info = json.load(f)
		base = self.run_with(info)
		self.assertEqual(base, {"down": ("high", 0), "mutex_lock": ("high", 0)})
		sem = next(g for g in info["groups"] if g["name"] == "semaphore")
		sem["source"] = ["label:linux-6.1.192:0000000000000000"]
		self.assertEqual(self.run_with(info), {"down": ("medium", 1), "mutex_lock": ("high", 0)})


if __name__ == "__main__":
	unittest.main()
