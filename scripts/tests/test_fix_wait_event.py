# SPDX-License-Identifier: GPL-2.0-only
"""The Python side of the wait_event*() rewrite (issue 15): which sites
wait_event.py hands to cocci/fix_wait_event.cocci, the names it passes in, and
the sites it refuses with a reason.  fixtures/patch/wait_event_rewrite
tests the whole path through spatch."""

import os
import shutil
import tempfile
import unittest

from nestsleep.fix import ctext, edits, fixer, layout
from nestsleep.knowledge import Knowledge

KN = Knowledge()

SRC = """#include <linux/wait.h>

struct dev { wait_queue_head_t wq; int ready; };
int dev_ready(struct dev *d);

int param_named_ret(struct dev *d, int ret, long timeout)
{
	if (wait_event_interruptible(d->wq, dev_ready(d)))
		return ret;
	return wait_event_timeout(d->wq, dev_ready(d), timeout);
}

int assign_local(struct dev *d)
{
	int err;

	err = wait_event_interruptible(d->wq, dev_ready(d));
	return err;
}

int else_assign(struct dev *d)
{
	int ret;

	if (d->ready)
		ret = 0;
	else
		ret = wait_event_killable(d->wq, dev_ready(d));
	return ret;
}

int declaration(struct dev *d)
{
	int ret = wait_event_interruptible(d->wq, dev_ready(d));

	return ret;
}

int exclusive(struct dev *d)
{
	return wait_event_interruptible_exclusive(d->wq, dev_ready(d));
}

void stmt_expr(struct dev *d)
{
	wait_event(d->wq, ({ int n = dev_ready(d); n; }));
}

unsigned int my_poll(struct file *file, poll_table *pt)
{
	struct dev *d = file->private_data;

	wait_event(d->wq, dev_ready(d));
	return 0;
}

void discarded(struct dev *d)
{
	wait_event_interruptible(d->wq, dev_ready(d));
}

long assigning_cond(struct dev *d)
{
	int n;

	return wait_event_timeout(d->wq, (n = dev_ready(d)) != 0, HZ);
}
"""


class NoWakers(fixer.Fixer):
	"""The fixer without tree facts: the waker rule has nothing to check."""

	def wakers(self, *a):
		pass


def finding(src, func, prim, nth=0):
	lines = src.split("\n")
	start = next(i for i, l in enumerate(lines) if func + "(" in l and not l.startswith("\t"))
	hits = [i for i in range(start, len(lines)) if prim + "(" in lines[i]]
	i = hits[nth]
	return {"file": "t.c", "function": func, "primitive": prim, "shape": "wait_event", "line": i + 1,
		"col": lines[i].index(prim + "("), "confidence": "high", "paths": [{"line": i + 1}]}


class IncludeOrderTest(unittest.TestCase):
	def test_nearly_sorted_includes_keep_their_order(self):
		"""spi-nor's core.c: err.h, errno.h, delay.h are out of order, yet
		<linux/sched/signal.h> goes before <linux/sched/task_stack.h>."""
		src = ("#include <linux/err.h>\n#include <linux/errno.h>\n#include <linux/delay.h>\n"
		       "#include <linux/mutex.h>\n#include <linux/sched/task_stack.h>\n#include <linux/spi/flash.h>\n"
		       "\nstruct dev { wait_queue_head_t wq; };\nint dev_ready(struct dev *d);\n\n"
		       "int f(struct dev *d)\n{\n\treturn wait_event_killable(d->wq, dev_ready(d));\n}\n")
		tmp = tempfile.mkdtemp(prefix="nestsleep-t-")
		self.addCleanup(shutil.rmtree, tmp)
		with open(os.path.join(tmp, "t.c"), "w") as f:
			f.write(src)
		fx = NoWakers(tmp, KN)
		u = edits.Unit("t.c", "f", None)
		fx.plan(finding(src, "f", "wait_event_killable"), u)
		fx.finish(u)
		diff = fx.diff(u.edits)
		self.assertIn(" #include <linux/mutex.h>\n+#include <linux/sched/signal.h>\n #include <linux/sched/task_stack.h>",
			      diff)


class FlipCompareTest(unittest.TestCase):
	def test_one_comparison_is_flipped(self):
		"""xen-netfront: 'while (!(state(dev) == X))' reads 'while (state(dev) != X)'."""
		old = "\twait_event(module_wq, xenbus_read_driver_state(dev) == XenbusStateClosed);\n"
		new = "\twhile (!(xenbus_read_driver_state(dev) == XenbusStateClosed)) {\n"
		self.assertEqual(layout.wrap_long(old, new),
				 "\twhile (xenbus_read_driver_state(dev) != XenbusStateClosed) {\n")
		self.assertEqual(layout.flip_compare("\twhile (!(a != b))\n"), "\twhile (a == b)\n")
		for keep in ("\twhile (!(a == b && c)) {\n", "\twhile (!(a) == (b)) {\n",
			     "\twhile (!(f(a == b))) {\n", "\twhile (!(a == b ? 1 : 0)) {\n", "\twhile (!(!a == b)) {\n",
			     "\twhile (!(x >> 3)) {\n", "\twhile (!(x < y && z)) {\n", "\twhile (!!a == b) {\n",
			     "\twhile (!!a + b) {\n"):
			self.assertEqual(layout.flip_compare(keep), keep)

	def test_order_comparisons_and_double_negation(self):
		"""Issue 32: 'while (!(x >= 0))' reads 'while (x < 0)', and
		'while (!!acpi_aml_busy())' reads 'while (acpi_aml_busy())'."""
		for old, new in (("\twhile (!(x >= 0)) {\n", "\twhile (x < 0) {\n"),
				 ("\twhile (!(x <= n))\n", "\twhile (x > n)\n"),
				 ("\twhile (!(p->len > 3)) {\n", "\twhile (p->len <= 3) {\n"),
				 ("\twhile (!(f(a, b) < 2))\n", "\twhile (f(a, b) >= 2)\n"),
				 ("\twhile (!!acpi_aml_busy())\n", "\twhile (acpi_aml_busy())\n"),
				 ("\twhile (!!d->flags) {\n", "\twhile (d->flags) {\n")):
			self.assertEqual(layout.flip_compare(old), new)


class WaitEventSitesTest(unittest.TestCase):
	def setUp(self):
		self.tmp = tempfile.mkdtemp(prefix="nestsleep-t-")
		with open(os.path.join(self.tmp, "t.c"), "w") as f:
			f.write(SRC)
		self.fx = NoWakers(self.tmp, KN)

	def tearDown(self):
		shutil.rmtree(self.tmp)

	def plan(self, *fs):
		u = edits.Unit("t.c", fs[0]["function"], None)
		for f in fs:
			self.fx.plan(f, u)
		return u

	def refusal(self, f):
		with self.assertRaises(edits.Refuse) as cm:
			self.plan(f)
		return cm.exception

	def test_names_avoid_the_parameters(self):
		u = self.plan(finding(SRC, "param_named_ret", "wait_event_interruptible"),
			      finding(SRC, "param_named_ret", "wait_event_timeout"))
		self.assertEqual(sorted(s["form"] for s in u.sites.values()), ["signal", "timeout"])
		self.assertIn("ret", u.taken)
		self.assertIn("timeout", u.taken)
		self.fx.finish(u)
		diff = self.fx.diff(u.edits)
		self.assertIn("+\tint err;\n", diff)
		self.assertIn("+\tlong remaining;\n", diff)
		self.assertNotIn("int ret;", diff)

	def test_signal_caveat_says_what_the_value_was(self):
		"""-ERESTARTSYS is claimed only where the macro's value is used
		(drbd's discarded wait_event_interruptible())."""
		used = self.plan(finding(SRC, "assign_local", "wait_event_interruptible"))
		self.assertTrue(any("gives -ERESTARTSYS" in c for c in used.caveats), used.caveats)
		u = self.plan(finding(SRC, "discarded", "wait_event_interruptible"))
		sig = [c for c in u.caveats if c.startswith("signals:")]
		self.assertEqual(len(sig), 1, u.caveats)
		self.assertNotIn("gives -ERESTARTSYS", sig[0])
		self.assertIn("was not used here", sig[0])

	def test_a_lone_assignment_keeps_its_variable(self):
		u = self.plan(finding(SRC, "assign_local", "wait_event_interruptible"))
		self.fx.finish(u)
		diff = self.fx.diff(u.edits)
		self.assertIn("+\terr = 0;\n", diff)
		self.assertNotIn("int ret;", diff)
		self.assertIn("+#include <linux/sched/signal.h>\n", diff)

	def test_an_else_assignment_is_rewritten_with_braces(self):
		u = self.plan(finding(SRC, "else_assign", "wait_event_killable"))
		self.assertEqual(list(u.sites.values())[0]["lvalue"], "ret")
		self.fx.finish(u)
		diff = self.fx.diff(u.edits)
		# both arms get braces (coding-style.rst), '} else {' on one line
		self.assertIn("+\tif (d->ready) {\n", diff)
		self.assertIn("+\t} else {\n", diff)
		self.assertIn("fatal_signal_pending(current)", diff)

	def test_a_declaration_initializer_is_refused(self):
		r = self.refusal(finding(SRC, "declaration", "wait_event_interruptible"))
		self.assertEqual(r.status, "report-only")
		self.assertIn("initializes a declaration (int ret)", r.reason)

	def test_an_exclusive_signal_wait_is_report_only(self):
		r = self.refusal(finding(SRC, "exclusive", "wait_event_interruptible_exclusive"))
		self.assertEqual(r.status, "report-only")
		self.assertIn("exclusive waiter", r.reason)

	def test_a_statement_expression_goes_to_the_text_rewrite(self):
		# spatch 1.1.1 does not match '({ ... })' as a macro argument
		u = self.plan(finding(SRC, "stmt_expr", "wait_event"))
		self.assertEqual((u.text_sites, u.sites), (1, {}))
		self.fx.finish(u)
		self.assertIn("+\t\tint n = dev_ready(d);\n", self.fx.diff(u.edits))

	def test_a_poll_method_is_its_own_bug(self):
		r = self.refusal(finding(SRC, "my_poll", "wait_event"))
		self.assertEqual(r.status, "report-only")
		self.assertIn("->poll()", r.reason)

	def test_an_assigning_condition_is_hoisted(self):
		u = self.plan(finding(SRC, "assigning_cond", "wait_event_timeout"))
		self.assertEqual(u.text_sites, 1)
		self.fx.finish(u)
		diff = self.fx.diff(u.edits)
		self.assertIn("+\t\tn = dev_ready(d);\n", diff)
		self.assertIn("+\t\tif (n != 0) {\n", diff)

	def test_the_two_rewrites_never_share_a_function(self):
		fs = [finding(SRC, "param_named_ret", "wait_event_interruptible"),
		      finding(SRC, "stmt_expr", "wait_event")]
		fs[1]["function"] = fs[0]["function"]
		u = edits.Unit("t.c", "param_named_ret", None)
		self.fx.plan(fs[0], u)
		with self.assertRaises(edits.Refuse) as cm:
			self.fx.plan(fs[1], u)
		self.assertIn("both the semantic patch and the text rewrite", cm.exception.reason)

	def test_a_long_comparison_is_broken_after_its_operator(self):
		old = "x\n"
		new = ("x\n\t\t\tif (xenbus_read_driver_state(dev->otherend) == XenbusStateClosing || "
		       "xenbus_read_driver_state(dev->otherend) == XenbusStateClosed) {\n")
		got = layout.wrap_long(old, new).split("\n")
		self.assertTrue(all(ctext.cols(x) <= 80 for x in got), got)
		self.assertEqual(got[1], "\t\t\tif (xenbus_read_driver_state(dev->otherend) ==")
		self.assertEqual(got[2], "\t\t\t    XenbusStateClosing ||")

	def test_a_lone_comparison_is_broken_too(self):
		new = "x\n\twhile (!(xenbus_read_driver_state(np->xbdev->otherend) == XenbusStateReconfigured))\n"
		self.assertEqual(layout.wrap_long("x\n", new),
				 "x\n\twhile (xenbus_read_driver_state(np->xbdev->otherend) !=\n"
				 "\t       XenbusStateReconfigured)\n")

	def test_spaces_become_tabs(self):
		self.assertEqual(layout.wrap_long("x\n", "x\n\t\t           MAX_SCHEDULE_TIMEOUT);\n"),
				 "x\n\t\t\t   MAX_SCHEDULE_TIMEOUT);\n")

	def test_long_conditions_are_wrapped(self):
		old = "x\n"
		new = "x\n\twhile (!(aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa(d) || bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb(d)))\n"
		self.assertEqual(layout.wrap_long(old, new),
				 "x\n\twhile (!(aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa(d) ||\n"
				 "\t\t bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb(d)))\n")
		new = "x\n\t\tif (signal_pending_state(TASK_INTERRUPTIBLE | TASK_FREEZABLE, current)) {\n"
		self.assertEqual(layout.wrap_long(old, new),
				 "x\n\t\tif (signal_pending_state(TASK_INTERRUPTIBLE | TASK_FREEZABLE,\n"
				 "\t\t\t\t\t current)) {\n")


class FlatTest(unittest.TestCase):
	def test_blanks_inside_a_literal_are_kept(self):
		t = 'f(d,  "a  b",   \'  \')'
		self.assertEqual(ctext.flat(t, ctext.mask(t), 0, len(t)), 'f(d, "a  b", \'  \')')



class BraceLayoutTest(unittest.TestCase):
	"""join_else(): the braces spatch adds around an if arm, where
	coding-style.rst puts them, and the original code left as it is."""

	def test_added_braces_join_their_if_and_else(self):
		old = "\tif (a)\n\t\tx();\n\telse\n\t\ty();\n"
		new = "\tif (a)\n\t{\n\t\tz();\n\t}\n\telse {\n\t\ty();\n\t\n\t}\n"
		self.assertEqual("".join(layout.join_else(old, ctext.LINES.findall(new))),
				 "\tif (a) {\n\t\tz();\n\t} else {\n\t\ty();\n\t}\n")

	def test_the_original_code_is_left_as_it_is(self):
		old = "\tif (a) {\n\t\tx();\n\t}\n\telse\n\t\ty();\n\tw();\n"
		new = "\tif (a) {\n\t\tx();\n\t}\n\telse\n\t\ty();\n\tz();\n"
		self.assertEqual("".join(layout.join_else(old, ctext.LINES.findall(new))), new)


class BitwiseWrapTest(unittest.TestCase):
	def test_a_register_and_mask_is_broken_after_the_operator(self):
		# 6.1 pi433_receive(): the moved condition came out at 84 columns
		new = "x\n\t\twhile (!(rf69_read_reg(spi, REG_IRQFLAGS1) & MASK_IRQFLAGS1_RSSI)) {\n"
		self.assertEqual(layout.wrap_long("x\n", new),
				 "x\n\t\twhile (!(rf69_read_reg(spi, REG_IRQFLAGS1) &\n"
				 "\t\t\t MASK_IRQFLAGS1_RSSI)) {\n")


class ReindentTest(unittest.TestCase):
	def test_an_added_loop_is_indented_by_its_braces(self):
		# 6.12 saa7164 fops_read(): spatch copied the function's odd steps
		old = "\tif (x) {\n\t\tif (wait_event_interruptible(q,\n\t\t\tready(p))) {\n\t\t\t\tbreak;\n\t\t}\n"
		new = ("\tif (x) {\n\t\tret = 0;\n\t\twhile (!ready(p)) {\n\t\t\t\tif (signal_pending(current)) {\n"
		       "\t\t\t\t\tret = -ERESTARTSYS;\n\t\t\t\t\tbreak;\n\t\t\t\t}\n"
		       "\t\t\t\twait_woken(&wait,\n\t\t\t\t\t   TASK_INTERRUPTIBLE,\n\t\t\t\t\t   MAX_SCHEDULE_TIMEOUT);\n"
		       "\t\t}\n\t\tif (ret) {\n\t\t\t\tbreak;\n\t\t}\n")
		self.assertEqual(layout.wrap_long(old, new),
				 "\tif (x) {\n\t\tret = 0;\n\t\twhile (!ready(p)) {\n\t\t\tif (signal_pending(current)) {\n"
				 "\t\t\t\tret = -ERESTARTSYS;\n\t\t\t\tbreak;\n\t\t\t}\n"
				 "\t\t\twait_woken(&wait, TASK_INTERRUPTIBLE,\n\t\t\t\t   MAX_SCHEDULE_TIMEOUT);\n"
				 "\t\t}\n\t\tif (ret) {\n\t\t\t\tbreak;\n\t\t}\n")


class KeepBlankTest(unittest.TestCase):
	"""keep_blank(): a blank line spatch removed with a statement goes back
	between the code it had kept apart, and only there."""

	def test_the_blank_line_before_a_removed_statement_comes_back(self):
		# 6.12 tty_port_block_til_ready(): the blank line went with the
		# removed prepare_to_wait()
		old = ["\tif (x)\n", "\t\ty();\n", "\n", "\tprepare_to_wait(q, &w, s);\n", "\t/* c */\n"]
		new = ["\tif (x)\n", "\t\ty();\n", "\t/* c */\n"]
		self.assertEqual(layout.keep_blank(old, new),
				 ["\tif (x)\n", "\t\ty();\n", "\n", "\t/* c */\n"])

	def test_no_blank_after_an_opening_brace_or_without_one_removed(self):
		old = ["\tfor (;;) {\n", "\n", "\tprepare_to_wait(q, &w, s);\n", "\t\ty();\n"]
		new = ["\tfor (;;) {\n", "\t\ty();\n"]
		self.assertEqual(layout.keep_blank(old, new), new)
		old = ["\ta();\n", "\tprepare_to_wait(q, &w, s);\n", "\tb();\n"]
		new = ["\ta();\n", "\tb();\n"]
		self.assertEqual(layout.keep_blank(old, new), new)


class DeclLineTest(unittest.TestCase):
	"""The text path declares its entry above the block's declarations
	with no blank line between them (drbd_request_detach_interruptible()
	got one before 'int ret, rv;')."""

	def test_declarations(self):
		for line in ("\tint ret, rv;", "\tint a = 1, b;", "\tstruct x *p, *q;", "\tchar buf[8], c;",
			     "\tunsigned long flags;", "\tDEFINE_WAIT(w);"):
			self.assertTrue(ctext.is_decl_line(line), line)
		for line in ("\tret = f(a, b);", "\tx = y;", "\treturn a;", "\tfoo(a, b);"):
			self.assertFalse(ctext.is_decl_line(line), line)


if __name__ == "__main__":
	unittest.main()
