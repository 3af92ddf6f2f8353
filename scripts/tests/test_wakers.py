# SPDX-License-Identifier: GPL-2.0-only
"""Unit tests for nestsleep.fix.wakers (the waker rule) and the independent
check scripts/dev/check_wakers.py, on small trees written here."""

import os
import shutil
import tempfile
import unittest

from dev import check_wakers
from nestsleep.analysis.scan import Facts, Tree
from nestsleep.cache import Cache
from nestsleep.fix import edits, fixer, wakers
from nestsleep.fix.ctext import mask
from nestsleep.knowledge import Knowledge

HEADER = """#include <linux/kthread.h>
#include <linux/mutex.h>
#include <linux/wait.h>

struct dev {
	struct mutex lock;
	wait_queue_head_t wq;
	struct task_struct *task;
	int ready;
};

struct other {
	struct task_struct *task;
};

static int ready(struct dev *d)
{
	int r;

	mutex_lock(&d->lock);
	r = d->ready;
	mutex_unlock(&d->lock);
	return r;
}

static int dev_thread(void *arg)
{
	struct dev *d = arg;

	while (!kthread_should_stop()) {
		wait_event(d->wq, ready(d) || kthread_should_stop());
	}
	return 0;
}
"""


class Helpers(unittest.TestCase):
	def test_base_before(self):
		for text, want in (("x = a->b.c[i]", "a->b.c[i]"), ("if (x) t->task", "t->task"),
				   ("f(p)->task", "f(p)->task"), ("for (i = 0; i < 4; i++) w[i]", "w[i]"),
				   ("s.x", "s.x"), ("3.5", "5")):
			m = mask(text)
			s = wakers.WakerRule.base_before(m, len(m))
			self.assertEqual(m[s:], want, text)


	def test_per_line_edits_deduplicate(self):
		# two units: one converts the wakers on two neighbouring lines, the
		# other only the first; their edits of the first line must be equal
		old = "a\n\twake_up_process(x);\n\twake_up_process(y);\nb\n"
		both = wakers.per_line(old, edits.text_edits(old, "a\n\twake_up(q);\n\twake_up(r);\nb\n"))
		one = wakers.per_line(old, edits.text_edits(old, "a\n\twake_up(q);\n\twake_up_process(y);\nb\n"))
		self.assertEqual([(e.s, e.e, e.text) for e in one], [(both[0].s, both[0].e, both[0].text)])
		self.assertEqual(edits.apply_edits(old, both), "a\n\twake_up(q);\n\twake_up(r);\nb\n")


class Rule(unittest.TestCase):
	"""The rule on a small tree: each case writes dev.c and a waker file."""

	def setUp(self):
		self.tmp = tempfile.mkdtemp(prefix="test-wakers-")
		self.cache = os.path.join(self.tmp, "cache")

	def tearDown(self):
		shutil.rmtree(self.tmp, ignore_errors=True)

	def fix(self, main, other="", stop_tested=True):
		tree = os.path.join(self.tmp, "tree")
		os.makedirs(tree, exist_ok=True)
		with open(os.path.join(tree, "dev.c"), "w") as f:
			f.write(HEADER + main)
		with open(os.path.join(tree, "waker.c"), "w") as f:
			f.write("#include <linux/sched.h>\n" + other)
		kn = Knowledge()
		cache = Cache(self.cache)
		t = Tree(tree, cache, 1)
		facts = Facts(t, kn, cache, 1)
		fx = fixer.Fixer(tree, kn, t, facts)
		u = edits.Unit("dev.c", "dev_thread", None)
		ft = fx.text("dev.c")
		pos = ft.t.index("wait_event(d->wq")
		try:
			fx.rule.prepare([("dev.c", "dev_thread")])
			fx.wakers(u, "dev.c", "dev_thread", "&d->wq", "TASK_UNINTERRUPTIBLE", stop_tested, (pos, pos + 10))
			fx.finish(u)    # cocci/fix_wakers.cocci converts the wakers here
		except edits.Refuse as r:
			return r.reason, u
		return None, u

	def test_member_waker_in_other_file_converted(self):
		why, u = self.fix("void start(struct dev *d) { d->task = kthread_run(dev_thread, d, \"d\"); }\n",
				  "#include \"dev.h\"\nvoid kick(struct dev *d)\n{\n\twake_up_process(d->task);\n}\n"
				  "void nope(struct other *o)\n{\n\twake_up_process(o->task);\n}\n")
		self.assertIsNone(why)
		edits = u.edits.get("waker.c", [])
		self.assertEqual([e.text for e in edits], ["\twake_up(&d->wq);\n"])

	def test_every_waker_of_a_file_in_one_run(self):
		# two wakers in one file, one of them through a dead local copy
		# (deleted with its blank line), one through a copy still read
		why, u = self.fix("void start(struct dev *d) { d->task = kthread_run(dev_thread, d, \"d\"); }\n",
				  "#include \"dev.h\"\nvoid kick(struct dev *d)\n{\n\tstruct task_struct *t = d->task;\n\n"
				  "\td->ready = 1;\n\twake_up_process(t);\n}\n"
				  "void poke(struct dev *d)\n{\n\tstruct task_struct *t = READ_ONCE(d->task);\n\n"
				  "\tif (t)\n\t\twake_up_process(t);\n}\n")
		self.assertIsNone(why)
		ft = edits.FileText(os.path.join(self.tmp, "tree", "waker.c"))
		got = edits.apply_edits(ft.t, u.edits["waker.c"])
		self.assertEqual(got, "#include <linux/sched.h>\n#include \"dev.h\"\nvoid kick(struct dev *d)\n{\n"
				 "\td->ready = 1;\n\twake_up(&d->wq);\n}\n"
				 "void poke(struct dev *d)\n{\n\tstruct task_struct *t = READ_ONCE(d->task);\n\n"
				 "\tif (t)\n\t\twake_up(&d->wq);\n}\n")
		self.assertTrue(all(e.key[0] == "waker" for e in u.edits["waker.c"]), u.edits["waker.c"])

	def test_waker_left_unconverted_refuses(self):
		# fix_wakers.cocci without the rule that converts the calls (the
		# dead-copy rule stays: spatch runs no file without a change
		# rule): the unit must be refused, not patched half
		rule = os.path.join(self.tmp, "fix_wakers.cocci")
		with open(wakers.WAKERS_RULE) as f:
			text = f.read()
		with open(rule, "w") as f:
			f.write(text[:text.index("@script:python call@")] + text[text.index("// The copies that fed"):])
		saved = wakers.WAKERS_RULE
		wakers.WAKERS_RULE = rule
		try:
			why, u = self.fix("void start(struct dev *d) { d->task = kthread_run(dev_thread, d, \"d\"); }\n",
					  "#include \"dev.h\"\nvoid kick(struct dev *d)\n{\n\twake_up_process(d->task);\n}\n")
		finally:
			wakers.WAKERS_RULE = saved
		self.assertIn("did not convert waker.c:5 wake_up_process(d->task)", why or "")
		self.assertNotIn("waker.c", u.edits)

	def test_untyped_base_refused(self):
		why, _ = self.fix("void start(struct dev *d) { d->task = kthread_run(dev_thread, d, \"d\"); }\n",
				  "void kick(void *p)\n{\n\tstruct dev *d = p;\n\twake_up_process(dev_of(p)->task);\n}\n")
		self.assertIn("is not known", why or "")

	def test_returned_value_refused(self):
		why, _ = self.fix("struct task_struct *start(struct dev *d)\n{\n"
				  "\treturn kthread_run(dev_thread, d, \"d\");\n}\n")
		self.assertIn("returns the task pointer", why or "")

	def test_copy_to_other_place_refused(self):
		why, _ = self.fix("static struct task_struct *keep;\n"
				  "void start(struct dev *d)\n{\n\td->task = kthread_run(dev_thread, d, \"d\");\n"
				  "\tkeep = d->task;\n}\n")
		self.assertIn("is copied to keep", why or "")

	def test_stop_needs_the_test(self):
		main = "void start(struct dev *d) { d->task = kthread_run(dev_thread, d, \"d\"); }\n" \
		       "void stop(struct dev *d)\n{\n\tkthread_stop(d->task);\n}\n"
		why, u = self.fix(main)
		self.assertIsNone(why)
		self.assertTrue(any("kthread_stop()" in c and "left as they are" in c for c in u.caveats), u.caveats)
		why, _ = self.fix(main, stop_tested=False)
		self.assertIn("does not test kthread_should_stop()", why or "")

	def test_function_pointer_to_unknown_call_refused(self):
		# dev_thread() handed to a function that may run it as a thread
		why, _ = self.fix("void go(void) { start_thread(dev_thread); }\n")
		self.assertIn("dev_thread() is passed to start_thread()", why or "")
		# ... or to a macro that hands it on to such a function
		why, _ = self.fix("#define RUN(fn) start_thread(fn)\nvoid go(void) { RUN(dev_thread); }\n")
		self.assertIn("dev_thread() is passed to RUN()", why or "")

	def test_same_name_variable_passed_to_macro_is_not_the_function(self):
		# dev_thread() is static in dev.c: in waker.c the name is a
		# parameter handed to a logging macro (a value, not the function),
		# and a member of that name read inside a macro argument is a
		# field, not the function either
		other = "#define LOG(fmt, ...) printk(fmt, __VA_ARGS__)\n" \
			"void note(int slot, int dev_thread)\n{\n\tLOG(\"%d %d\", slot, dev_thread);\n}\n" \
			"void peek(struct other *o)\n{\n\tLOG(\"%p\", o->\n\t\tdev_thread);\n}\n"
		why, u = self.fix("void start(struct dev *d) { d->task = kthread_run(dev_thread, d, \"d\"); }\n", other)
		self.assertIsNone(why)
		# the same name in the file that defines the static function, as a
		# parameter of another function, is not the function either
		why, u = self.fix("void start(struct dev *d) { d->task = kthread_run(dev_thread, d, \"d\"); }\n"
				  "void note(int dev_thread) { LOG2(\"%d\", dev_thread); }\n")
		self.assertIsNone(why)
		why, u = self.fix("void start(struct dev *d) { d->task = kthread_run(dev_thread, d, \"d\"); }\n"
				  "void peek(struct other *o) { LOG2(\"%p\", o->\n\t\tdev_thread); }\n")
		self.assertIsNone(why)
		# while the function itself handed to an unknown macro still refuses
		why, _ = self.fix("#define RUN(fn) start_thread(fn)\nvoid go(void) { RUN(dev_thread); }\n")
		self.assertIn("dev_thread() is passed to RUN()", why or "")

	def test_function_pointer_to_registrar_or_table_macro(self):
		why, u = self.fix("void go(struct work_struct *w) { INIT_WORK(w, dev_thread); }\n")
		self.assertIsNone(why)
		why, u = self.fix("#define OP(fn) { .doit = fn, .name = #fn }\nstatic struct op ops[] = { OP(dev_thread) };\n")
		self.assertIsNone(why)
		self.assertTrue(any("no waker to convert" in c for c in u.caveats))

	def test_syscall_path_has_no_waker(self):
		why, u = self.fix("")
		self.assertIsNone(why)
		self.assertTrue(any("no waker to convert" in c for c in u.caveats))


class Check(unittest.TestCase):
	def test_unconverted_waker_is_left(self):
		tmp = tempfile.mkdtemp(prefix="test-check-wakers-")
		try:
			with open(os.path.join(tmp, "dev.c"), "w") as f:
				f.write(HEADER + "void start(struct dev *d) { d->task = kthread_run(dev_thread, d, \"d\"); }\n"
					"void kick(struct dev *d)\n{\n\twake_up_process(d->task);\n}\n")
			tree = check_wakers.Tree(tmp)
			fd = {"file": "dev.c", "function": "dev_thread",
			      "fix": {"status": "patch", "reason": "", "caveats": []}}
			res = check_wakers.check(tree, [fd], "")
			self.assertFalse(res[0][1])
			self.assertTrue(any(x.startswith("LEFT") and "dev.c:" in x for x in res[0][2]))
			with open(os.path.join(tmp, "dev.c")) as f:
				line = [i for i, l in enumerate(f, 1) if "wake_up_process" in l][0]
			diff = "--- a/dev.c\n+++ b/dev.c\n@@ -%d,1 +%d,1 @@\n-\twake_up_process(d->task);\n" \
			       "+\twake_up(&d->wq);\n" % (line, line)
			res = check_wakers.check(tree, [fd], diff)
			self.assertTrue(res[0][1], res)
		finally:
			shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
	unittest.main()
