# SPDX-License-Identifier: GPL-2.0-only
"""The restore-after-loop fix (issue 15, item 4): which loop a state
setter is in (cfacts.loop_around()), the labels that rule the fix out
(cfacts.labels_between()), and how a rule's output becomes the fixer's
Edits (edits.text_edits()).  fixtures/patch/restore_after_loop tests the
whole path through spatch."""

import unittest

from nestsleep.analysis import cfacts
from nestsleep.fix import edits

SRC = """int f(struct d *d)
{
	for (;;) {
		set_current_state(TASK_INTERRUPTIBLE);
		if (d->x)
			break;
		while (d->y)
			d->y--;
		schedule();
	}
	do {
		set_current_state(TASK_INTERRUPTIBLE);
		schedule();
	} while (d->z);
	while (d->w)
		set_current_state(TASK_UNINTERRUPTIBLE);
again:
	g(d);
	switch (d->x) {
	default:
		break;
	}
	return 0;
}
"""


class LoopAroundTest(unittest.TestCase):
	def setUp(self):
		self.toks = cfacts.tokenize(SRC)

	def test_the_innermost_loop_holding_the_line(self):
		self.assertEqual(cfacts.loop_around(self.toks, 4), (3, 10))
		self.assertEqual(cfacts.loop_around(self.toks, 8), (7, 8))	# the inner while's body

	def test_a_do_loop_ends_at_its_while(self):
		self.assertEqual(cfacts.loop_around(self.toks, 12), (11, 14))

	def test_an_unbraced_body(self):
		self.assertEqual(cfacts.loop_around(self.toks, 16), (15, 16))

	def test_outside_every_loop(self):
		self.assertIsNone(cfacts.loop_around(self.toks, 18))
		self.assertIsNone(cfacts.loop_around(self.toks, 3))	# the loop's own header

	def test_labels_but_not_cases(self):
		self.assertTrue(cfacts.labels_between(self.toks, 15, 18))
		self.assertFalse(cfacts.labels_between(self.toks, 18, 23))	# 'default:' is no label
		self.assertFalse(cfacts.labels_between(self.toks, 1, 16))


class TextEditsTest(unittest.TestCase):
	def check(self, old, new):
		got = edits.apply_edits(old, edits.text_edits(old, new))
		self.assertEqual(got, new)

	def test_insertion_replacement_and_deletion(self):
		old = "a\nb\nc\nd\n"
		self.check(old, "a\nb\nx\nc\nd\n")
		self.check(old, "a\ny\nc\nd\n")
		self.check(old, "a\nc\nd\n")

	def test_the_last_line_without_a_newline(self):
		self.check("a\nb", "a\nb\nc")
		self.check("a\nb", "a\nc")

	def test_one_edit_per_changed_run(self):
		e = edits.text_edits("a\nb\nc\nd\ne\n", "a\nB\nc\nd\nE\n")
		self.assertEqual(len(e), 2)


if __name__ == "__main__":
	unittest.main()
