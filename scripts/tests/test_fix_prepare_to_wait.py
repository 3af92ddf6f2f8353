# SPDX-License-Identifier: GPL-2.0-only
"""The prepare_to_wait*() rewrite (issue 15): what prepare_to_wait.py hands to
cocci/fix_prepare_to_wait.cocci, and what the rule changes and leaves.
fixtures/patch/prepare_to_wait_rewrite tests the shapes end to end."""

import os
import shutil
import tempfile
import unittest

from nestsleep.fix import ctext, edits, fixer, sites
from nestsleep.knowledge import Knowledge

KN = Knowledge()

SRC = """#include <linux/wait.h>

struct dev { wait_queue_head_t wq; spinlock_t lock; int ready; };
int dev_get(struct dev *d);

void guarded(struct dev *d)
{
	DEFINE_WAIT(wait);

	scoped_guard(spinlock_irqsave, &d->lock) {
		d->ready--;
	}
	for (;;) {
		prepare_to_wait(&d->wq, &wait, TASK_UNINTERRUPTIBLE);
		if (dev_get(d))
			break;
		schedule();
	}
	finish_wait(&d->wq, &wait);
}

void other(struct dev *d)
{
	DEFINE_WAIT(wait);

	prepare_to_wait(&d->wq, &wait, TASK_UNINTERRUPTIBLE);
	schedule();
	finish_wait(&d->wq, &wait);
}

long sleeps_after(struct dev *d, long t)
{
	DEFINE_WAIT(wait);

	while (t) {
		prepare_to_wait(&d->wq, &wait, TASK_INTERRUPTIBLE);
		if (dev_get(d))
			break;
		t = schedule_timeout(t);
		prepare_to_wait(&d->wq, &wait, TASK_INTERRUPTIBLE);
	}
	finish_wait(&d->wq, &wait);
	schedule();
	return t;
}

void do_loop(struct dev *d)
{
	DEFINE_WAIT(wait);

	do {
		prepare_to_wait(&d->wq, &wait, TASK_UNINTERRUPTIBLE);
		if (dev_get(d))
			break;
		schedule();
	} while (1);
	finish_wait(&d->wq, &wait);
}
"""


class NoWakers(fixer.Fixer):
	"""The fixer without tree facts: the waker rule has nothing to check."""

	def wakers(self, *a):
		pass


def finding(func):
	lines = SRC.split("\n")
	start = next(i for i, l in enumerate(lines) if func + "(" in l and not l.startswith("\t"))
	i = next(i for i in range(start, len(lines)) if "prepare_to_wait(" in lines[i])
	return {"file": "t.c", "function": func, "primitive": "prepare_to_wait", "shape": "prepare_to_wait",
		"line": i + 1, "col": lines[i].index("prepare_to_wait("), "confidence": "high",
		"paths": [{"line": i + 2}]}


class PrepareToWaitTest(unittest.TestCase):
	def setUp(self):
		self.tmp = tempfile.mkdtemp(prefix="nestsleep-t-")
		with open(os.path.join(self.tmp, "t.c"), "w") as f:
			f.write(SRC)
		self.fx = NoWakers(self.tmp, KN)

	def tearDown(self):
		shutil.rmtree(self.tmp)

	def diff(self, func):
		u = edits.Unit("t.c", func, None)
		self.fx.plan(finding(func), u)
		self.fx.finish(u)
		return u, self.fx.diff(u.edits)

	def test_a_function_with_a_scoped_guard_is_rewritten(self):
		# without the macro hints spatch drops the whole function
		u, d = self.diff("guarded")
		self.assertEqual(u.ptw["form"], "top")
		self.assertIn("+\tadd_wait_queue(&d->wq, &wait);\n", d)
		self.assertIn("+\t\twait_woken(&wait, TASK_UNINTERRUPTIBLE, MAX_SCHEDULE_TIMEOUT);\n", d)
		self.assertIn("+\tremove_wait_queue(&d->wq, &wait);\n", d)

	def test_only_the_loop_of_the_finding_changes(self):
		_, d = self.diff("guarded")
		self.assertEqual(d.count("DEFINE_WAIT_FUNC"), 1)
		self.assertEqual(d.count("remove_wait_queue"), 1)
		self.assertNotIn("-\tschedule();", d)

	def test_a_sleep_after_the_loop_stays_and_rearms_go(self):
		u, d = self.diff("sleeps_after")
		self.assertEqual(len(u.ptw["sched"]), 1)
		self.assertIn("+\t\tt = wait_woken(&wait, TASK_INTERRUPTIBLE, t);\n", d)
		self.assertEqual(d.count("-\t\tprepare_to_wait("), 2)
		self.assertNotIn("-\tschedule();", d)

	def test_a_do_while_loop_is_refused_with_the_reason(self):
		u = edits.Unit("t.c", "do_loop", None)
		with self.assertRaises(edits.Refuse) as cm:
			self.fx.plan(finding("do_loop"), u)
		self.assertIn("do ... while", cm.exception.reason)

	def test_positions_are_spatch_columns(self):
		ft = self.fx.text("t.c")
		o, c = ctext.function_body(ft.m, SRC.index("\t\tschedule();"))
		line = SRC[:SRC.index("\t\tschedule();")].count("\n") + 1
		self.assertEqual(sites.schedules(self.fx, ft, o, c, "prepare_to_wait"), ["%d:2" % line])


if __name__ == "__main__":
	unittest.main()
