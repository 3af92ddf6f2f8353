# SPDX-License-Identifier: GPL-2.0-only
"""Tests for nestsleep.triage.heldout: the held-out precision of a later
tree's findings (those in functions whose text the earlier tree does not
hold), on two tiny fake trees."""

import os
import shutil
import tempfile
import unittest

from nestsleep.triage import heldout
from nestsleep.triage import reports

OLD = {
	"Makefile": "VERSION = 6\nPATCHLEVEL = 1\nSUBLEVEL = 5\n",
	"drivers/a/a.c": """\
#include <linux/wait.h>

static int same_fn(struct dev *d)
{
	set_current_state(TASK_INTERRUPTIBLE);
	mutex_lock(&d->lock);
	schedule();
	return 0;
}

static int changed_fn(struct dev *d)
{
	set_current_state(TASK_INTERRUPTIBLE);
	schedule();
	return 0;
}

static int ws_fn(struct dev *d)
{
	wait_event(d->wq, d->done);	/* old comment */
	return 0;
}

static void old_name(struct dev *d)
{
	wait_event(d->wq, d->ready);
	if (d->next) old_name(d->next);
}
""",
	"drivers/b/b.c": """\
static int moved_fn(struct dev *d)
{
	wait_event(d->wq, kmalloc(4, GFP_KERNEL) != NULL);
	return 0;
}
""",
}

NEW = {
	"Makefile": "VERSION = 6\nPATCHLEVEL = 12\nSUBLEVEL = 7\n",
	"drivers/a/a.c": """\
#include <linux/wait.h>
#include <linux/mutex.h>

static int same_fn(struct dev *d)
{
	set_current_state(TASK_INTERRUPTIBLE);
	mutex_lock(&d->lock);
	schedule();
	return 0;
}

static int changed_fn(struct dev *d)
{
	set_current_state(TASK_INTERRUPTIBLE);
	msleep(10);
	schedule();
	return 0;
}

/* a new comment above */
static int ws_fn(struct dev *d)
{
	wait_event(d->wq,
		   d->done);	// another comment
	return   0;
}

static int new_fn(struct dev *d)
{
	wait_event(d->wq, mutex_trylock(&d->lock));
	return 0;
}

static void new_name(struct dev *d)
{
	wait_event(d->wq, d->ready);
	if (d->next)
		new_name(d->next);	/* recursive */
}
""",
	"drivers/c/c.c": """\
static int moved_fn(struct dev *d)
{
	wait_event(d->wq, kmalloc(4, GFP_KERNEL) != NULL);
	return 0;
}
""",
}


def finding(fp, rel, line, fn, conf):
	return {"fingerprint": fp, "file": rel, "line": line, "function": fn, "confidence": conf,
		"shape": "wait_event", "primitive": "wait_event"}


FINDINGS = [
	finding("f1", "drivers/a/a.c", 6, "same_fn", "high"),		# same text in 6.1
	finding("f2", "drivers/a/a.c", 14, "changed_fn", "high"),	# changed body
	finding("f3", "drivers/a/a.c", 15, "changed_fn", "medium"),	# same function
	finding("f4", "drivers/a/a.c", 30, "new_fn", "high"),		# new
	finding("f5", "drivers/c/c.c", 3, "moved_fn", "high"),		# moved file
	finding("f6", "drivers/a/a.c", 24, "ws_fn", "medium"),		# whitespace/comments
	finding("f7", "drivers/a/a.c", 36, "new_name", "low"),		# renamed
	finding("f8", "drivers/a/a.c", 31, "new_fn", "low"),		# new, unlabelled
]

LABELS = {
	"f1": {"verdict": "true"}, "f2": {"verdict": "true"}, "f3": {"verdict": "false-positive"},
	"f4": {"verdict": "harmless"}, "f5": {"verdict": "false-positive"}, "f6": {"verdict": "true"},
	"f7": {"verdict": "true"},
}


def write_tree(root, files):
	for rel, text in files.items():
		p = os.path.join(root, rel)
		os.makedirs(os.path.dirname(p), exist_ok=True)
		with open(p, "w") as f:
			f.write(text)


class HeldoutTest(unittest.TestCase):
	@classmethod
	def setUpClass(cls):
		cls.tmp = tempfile.mkdtemp(prefix="nestsleep-heldout-test-")
		cls.old = os.path.join(cls.tmp, "old")
		cls.new = os.path.join(cls.tmp, "new")
		write_tree(cls.old, OLD)
		write_tree(cls.new, NEW)
		cls.res = heldout.compute(FINDINGS, cls.new, cls.old, LABELS, sources={})

	@classmethod
	def tearDownClass(cls):
		shutil.rmtree(cls.tmp, ignore_errors=True)

	def test_function_text_ignores_whitespace_and_comments(self):
		with open(os.path.join(self.old, "drivers/a/a.c")) as f:
			old = {fn.name: fn for fn in heldout.functions(f.read())}
		with open(os.path.join(self.new, "drivers/a/a.c")) as f:
			new = {fn.name: fn for fn in heldout.functions(f.read())}
		self.assertEqual(old["ws_fn"].text, new["ws_fn"].text)
		self.assertEqual(old["same_fn"].text, new["same_fn"].text)
		self.assertNotEqual(old["changed_fn"].text, new["changed_fn"].text)
		self.assertEqual(old["old_name"].anon, new["new_name"].anon)
		self.assertEqual((new["changed_fn"].start, new["changed_fn"].end), (12, 18))

	def test_selection(self):
		st = {fp: v["status"] for fp, v in self.res["status"].items()}
		self.assertEqual(st, {"f1": "same", "f2": "held-out", "f3": "held-out", "f4": "held-out",
				      "f5": "same", "f6": "same", "f7": "renamed", "f8": "held-out"})
		self.assertEqual([r["fingerprint"] for r in self.res["held"]], ["f2", "f3", "f4", "f8"])
		self.assertEqual(self.res["status"]["f5"]["where"], "drivers/b/b.c:1 moved_fn()")
		self.assertEqual(self.res["status"]["f7"]["where"], "drivers/a/a.c:24 old_name()")

	def test_counts(self):
		self.assertEqual(self.res["n"], 4)
		self.assertEqual(self.res["functions"], 2)
		lv = self.res["levels"]
		# (findings, labelled, correct = true + harmless, harmless)
		self.assertEqual([lv[c][:4] for c in ("high", "medium", "low", "all")],
				 [(2, 2, 2, 1), (1, 1, 0, 0), (1, 0, 0, 0), (4, 3, 2, 1)])

	def test_shared_fingerprint_counts_twice(self):
		"""Two wait sites of one function with the same chain share a
		fingerprint and a label; each is a finding, as in reports.precision()."""
		two = FINDINGS + [dict(FINDINGS[1], line=16), dict(FINDINGS[0], line=7)]
		res = heldout.compute(two, self.new, self.old, LABELS, sources={})
		self.assertEqual((res["n"], res["functions"], res["total"]), (5, 2, 10))
		self.assertEqual(sum(res["counts"].values()), 10)
		self.assertEqual(res["levels"]["high"][:4], (3, 3, 3, 1))

	def test_wilson_hand_computed(self):
		z2 = 1.959964 ** 2
		# k = n: lower bound n / (n + z^2), upper 1
		lo, hi = heldout.wilson(2, 2)
		self.assertAlmostEqual(lo, 2 / (2 + z2), places=5)
		self.assertAlmostEqual(hi, 1.0, places=9)
		# k = 0: lower 0, upper z^2 / (n + z^2)
		lo, hi = heldout.wilson(0, 1)
		self.assertAlmostEqual(lo, 0.0, places=9)
		self.assertAlmostEqual(hi, z2 / (1 + z2), places=5)
		# 2 of 3, by hand: centre (2/3 + z^2/6) / (1 + z^2/3), half-width
		# z / (1 + z^2/3) * sqrt(2/27 + z^2/36)
		lo, hi = heldout.wilson(2, 3)
		self.assertAlmostEqual(lo, 0.20766, places=4)
		self.assertAlmostEqual(hi, 0.93851, places=4)
		# Newcombe (1998), Stat Med 17:857, example 81/263: 0.2553-0.3662
		lo, hi = heldout.wilson(81, 263)
		self.assertAlmostEqual(lo, 0.2553, places=4)
		self.assertAlmostEqual(hi, 0.3662, places=4)
		self.assertIsNone(heldout.wilson(0, 0))
		self.assertEqual(self.res["levels"]["all"][4], heldout.wilson(2, 3))

	def test_markdown(self):
		md = "\n".join(heldout.markdown(self.res))
		self.assertIn("Held-out precision", md)
		self.assertIn("linux-6.1.5", md)
		self.assertIn("4 findings in 2 functions", md)
		self.assertIn("| high | 2 | 2 | 2 | 1 | 100% | 34%-100% |", md)
		self.assertIn("| medium | 1 | 1 | 0 | 0 | 0% | 0%-79% |", md)
		self.assertIn("| low | 1 | 0 | 0 | 0 | n/a | n/a |", md)
		self.assertIn("| all | 4 | 3 | 2 | 1 | 67% | 21%-94% |", md)
		self.assertIn("indicative", md)
		self.assertIn("no rule was justified by these labels", md)
		self.assertIn("`f2` drivers/a/a.c:14 changed_fn() high true", md)

	def test_cited_label_is_reported(self):
		res = heldout.compute(FINDINGS, self.new, self.old, LABELS,
				      sources={"cocci/sleep_info.json": '"source": ["label:linux-6.12.7:f2"]'})
		md = "\n".join(heldout.markdown(res))
		self.assertNotIn("no rule was justified by these labels", md)
		self.assertIn("`f2`", md.split("cited", 1)[1])

	def test_index_md(self):
		lines = reports.heldout_lines(self.new, "linux-6.12.7", self.old, FINDINGS, LABELS)
		idx = reports.index_md("linux-6.12.7", self.new, "v", "s", "make triage", {}, [], {}, [],
				       os.path.join(self.tmp, "labels.json"), False, heldout=lines)
		prec = idx.split("## Precision (hand labels)", 1)[1].split("## Calibration", 1)[0]
		self.assertIn("| high | 2 | 2 | 2 | 1 | 100% | 34%-100% |", prec)
		self.assertIn("held-out", prec)

	def test_index_md_not_computed(self):
		# the comparison tree itself, and no comparison tree at all
		lines = reports.heldout_lines(self.old, "linux-6.1.5", self.old, FINDINGS, LABELS)
		self.assertEqual(len(lines), 2)
		self.assertRegex(lines[0], r"^Held-out precision: not computed: .*linux-6\.1\.5")
		lines = reports.heldout_lines(self.new, "linux-6.12.7", os.path.join(self.tmp, "nope"), FINDINGS, LABELS)
		self.assertRegex(lines[0], r"^Held-out precision: not computed: no comparison tree")
		idx = reports.index_md("linux-6.1.5", self.old, "v", "s", "make triage", {}, [], {}, [],
				       os.path.join(self.tmp, "labels.json"), False)
		self.assertNotIn("Held-out", idx)


if __name__ == "__main__":
	unittest.main()
