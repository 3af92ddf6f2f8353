# SPDX-License-Identifier: GPL-2.0-only
"""Argument facts (issue 16): the parameter tests each call runs under
(cfacts.annotate_calls()), how constants decide them (summarize.Args), and
how the same condition tested twice is recognised (sameguard.atoms()).
The fixtures report/arg_sensitive, report/gfp_provenance and
report/same_condition_guard test the whole pipeline; these pin the edge
cases of each step."""

import unittest

from nestsleep.analysis import cfacts, sameguard
from nestsleep.analysis.summarize import Args, map_conds
from nestsleep.knowledge import Knowledge

KN = Knowledge()


def calls_of(src, func):
	f = cfacts.extract(src, KN.want_args, KN.restore, KN.words)
	fn = f["functions"].get(func) or f["macros"].get(func)
	return {(c["name"], c["line"]): c for c in fn["calls"]}


class GuardFactsTest(unittest.TestCase):
	def test_else_if_chain_negates_earlier_tests(self):
		c = calls_of("""int f(int mode, int *p)
{
	if (mode == M_A)
		a();
	else if (mode == M_B)
		b();
	else
		other();
	return 0;
}
""", "f")
		self.assertEqual(c[("a", 4)]["cond"], [[0, "eq", "M_A"]])
		self.assertEqual(c[("b", 6)]["cond"], [[0, "ne", "M_A"], [0, "eq", "M_B"]])
		self.assertEqual(c[("other", 8)]["cond"], [[0, "ne", "M_A"], [0, "ne", "M_B"]])

	def test_early_return_holds_until_a_label_a_goto_reaches(self):
		c = calls_of("""int f(struct op *op, int x)
{
	if (x)
		goto out;
	if (!op)
		return 0;
	use(op);
out:
	after(op);
	return 1;
}
""", "f")
		# 'if (x) goto out;' leaves like a return: x is 0 until the label
		self.assertEqual(c[("use", 7)]["cond"], [[1, "z", ""], [0, "nz", ""]])
		self.assertNotIn("cond", c[("after", 9)])

	def test_preprocessor_line_is_not_a_statement(self):
		c = calls_of("""void f(int mode)
{
	if (!mode)
		return;
#define F_MAX 3
	if (mode == M_A)
		a();
	else
		b();
}
""", "f")
		self.assertEqual(c[("a", 7)]["cond"], [[0, "nz", ""], [0, "eq", "M_A"]])
		self.assertEqual(c[("b", 9)]["cond"], [[0, "nz", ""], [0, "ne", "M_A"]])

	def test_disjunction_early_exit_gives_each_negation(self):
		c = calls_of("""void f(int a, unsigned int fl)
{
	if (!a || (fl & F_X))
		return;
	g();
}
""", "f")
		self.assertEqual(sorted(c[("g", 5)]["cond"]), [[0, "nz", ""], [1, "nobit", "F_X"]])

	def test_assigned_parameter_has_no_tests_and_is_not_passed_on(self):
		c = calls_of("""void f(unsigned int fl)
{
	fl |= F_X;
	if (fl & F_X)
		g(fl);
}
""", "f")
		self.assertNotIn("cond", c[("g", 5)])
		self.assertNotIn("pa", c[("g", 5)])

	def test_member_address_does_not_change_the_parameter(self):
		c = calls_of("""int f(struct c *c, struct op *op)
{
	spin_lock(&c->lock);
	if (op)
		prepare_to_wait(&c->wq, &op->wait, TASK_UNINTERRUPTIBLE);
	g(&op);
	return 0;
}
""", "f")
		self.assertNotIn("cond", c[("prepare_to_wait", 5)])	# &op: op may change
		c = calls_of("""int f(struct c *c, struct op *op)
{
	spin_lock(&c->lock);
	if (op)
		prepare_to_wait(&c->wq, &op->wait, TASK_UNINTERRUPTIBLE);
	return -EINTR;
}
""", "f")
		self.assertEqual(c[("prepare_to_wait", 5)]["cond"], [[1, "nz", ""]])

	def test_member_increment_does_not_change_the_parameter(self):
		src = """int f(struct c *c, struct op *op)
{
	%s;
	if (op)
		g(c);
	return 0;
}
"""
		for stmt, changed in (("++op->n", False), ("op->n++", False), ("&op[1]", False),
				      ("++op", True), ("op++", True), ("g(&op)", True)):
			c = calls_of(src % stmt, "f")
			self.assertEqual("cond" not in c[("g", 5)], changed, stmt)

	def test_bug_on_rules_out_its_condition(self):
		c = calls_of("""void f(unsigned int fl)
{
	BUG_ON(fl & F_X);
	g(fl);
}
""", "f")
		self.assertEqual(c[("g", 4)]["cond"], [[0, "nobit", "F_X"]])
		self.assertEqual(c[("g", 4)]["pa"], [[0, "p", 0]])

	def test_provenance_needs_every_allocation_to_agree(self):
		c = calls_of("""void f(gfp_t gfp, int n)
{
	struct t *a = t_alloc(n, GFP_ATOMIC);
	struct t *b = t_alloc(n, GFP_ATOMIC);
	struct t *d;

	grow(&d, gfp);
	b = t_lookup(n);
	t_free(a);
	t_free(b);
	t_free(d);
}
""", "f")
		self.assertEqual(c[("t_free", 9)]["prov"], ["c", "GFP_ATOMIC"])
		self.assertNotIn("prov", c[("t_free", 10)])	# b was reassigned
		self.assertEqual(c[("t_free", 11)]["prov"], ["p", 0])

	def test_variadic_macro_passes_arguments_through(self):
		c = calls_of("#define m_alloc(...) alloc_hooks(m_alloc_noprof(__VA_ARGS__))\n", "m_alloc")
		self.assertEqual(c[("m_alloc_noprof", 1)]["va"], 0)
		self.assertNotIn("pa", c[("m_alloc_noprof", 1)])


	def test_ternary_branches_run_under_its_test(self):
		c = calls_of("""int f(int atomic, int x, int y)
{
	atomic ? udelay(10) : usleep_range(10, 20);
	y = g(x) ? h(atomic && x ? one() : two()) : k();
	return 0;
}
""", "f")
		self.assertEqual(c[("udelay", 3)]["cond"], [[0, "nz", ""]])
		self.assertEqual(c[("usleep_range", 3)]["cond"], [[0, "z", ""]])
		# only the inner ?: tests a parameter: its && gives both tests
		self.assertEqual(c[("one", 4)]["cond"], [[0, "nz", ""], [1, "nz", ""]])
		self.assertNotIn("cond", c[("two", 4)])
		self.assertNotIn("cond", c[("h", 4)])
		self.assertNotIn("cond", c[("k", 4)])

	def test_copy_of_a_parameter_is_the_parameter(self):
		c = calls_of("""int f(unsigned long sleep_us, int n)
{
	unsigned long __sleep_us = (sleep_us);
	int m = n;

	might_sleep_if((__sleep_us) != 0);
	if (__sleep_us)
		usleep_range(__sleep_us, 2);
	m++;
	if (m)
		g(m);
	return 0;
}
""", "f")
		self.assertEqual(c[("usleep_range", 8)]["cond"], [[0, "nz", ""]])
		self.assertEqual(c[("usleep_range", 8)]["pa"], [[0, "p", 0], [1, "c", "2"]])
		self.assertEqual(c[("might_sleep_if", 6)]["acond"], [[0, "nz", ""]])
		# m is written again: not a copy
		self.assertNotIn("cond", c[("g", 11)])

	def test_statement_expression_macro_body_is_walked(self):
		c = calls_of("""#define poll(op, sleep_us, \\
		  before) \\
({ \\
	if (before && (sleep_us)) \\
		usleep_range(1, sleep_us); \\
	op(); \\
})
""", "poll")
		self.assertEqual(c[("usleep_range", 5)]["cond"], [[2, "nz", ""], [1, "nz", ""]])
		self.assertNotIn("cond", c[("op", 6)])


class AtomicRegionTest(unittest.TestCase):
	def test_calls_between_lock_and_unlock(self):
		c = calls_of("""int f(struct d *d)
{
	unsigned long flags;

	spin_lock_irqsave(&d->lock, flags);
	if (!d->busy) {
		spin_unlock_irqrestore(&d->lock, flags);
		return early();
	}
	in_region();
	spin_unlock_irqrestore(&d->lock, flags);
	after();
	preempt_disable();
	spin_lock(&d->a);
	spin_unlock(&d->b);
	no_preempt();
	preempt_enable();
	last();
	preempt_disable();
	schedule_preempt_disabled();
	preempt_enable();
	return 0;
}
""", "f")
		self.assertFalse(c[("schedule_preempt_disabled", 20)].get("atomic"))
		self.assertTrue(c[("early", 8)].get("atomic"))
		self.assertTrue(c[("in_region", 10)].get("atomic"))
		self.assertFalse(c[("after", 12)].get("atomic"))
		# another spelling of the lock ends the innermost of its kind
		self.assertTrue(c[("no_preempt", 16)].get("atomic"))
		self.assertFalse(c[("last", 18)].get("atomic"))

	def test_region_locks_are_the_known_non_sleeping_locks(self):
		# the spinlock group of not_sleeping and the lock regions must
		# not drift apart
		enters = set(n for n, k, side in KN.words.regions if side == "enter" and k in ("spinlock", "rwlock"))
		locks = set(n for g in KN.info["not_sleeping"] for n in g["functions"]
			    if "trylock" not in n and "unlock" not in n and ("spin_lock" in n or n in ("read_lock", "write_lock")))
		self.assertTrue(locks)
		self.assertLessEqual(locks, enters)


class RunsOnTrueTest(unittest.TestCase):
	def run_true(self, src, func):
		f = cfacts.extract(src, KN.want_args, KN.restore, KN.words)
		return bool(f["functions"][func].get("run_true"))

	def test_true_only_after_the_restore(self):
		self.assertTrue(self.run_true("""int f(void)
{
	if (pending()) {
		__set_current_state(TASK_RUNNING);
		run();
		return 1;
	}
	return 0;
}
""", "f"))

	def test_a_store_through_a_pointer_is_not_a_returned_flag(self):
		self.assertFalse(self.run_true("""void f(bool *locked)
{
	if (!*locked) {
		mutex_lock(&m);
		*locked = true;
	}
}
""", "f"))

	def test_restore_in_a_branch_does_not_cover_a_later_return(self):
		self.assertFalse(self.run_true("""int f(int x)
{
	if (x)
		__set_current_state(TASK_RUNNING);
	return 1;
}
""", "f"))


class ArgsTest(unittest.TestCase):
	def test_constants_decide_tests(self):
		a = Args(KN)
		table = [
			("nz", "", "NULL", False), ("nz", "", "0", False), ("nz", "", "1", True),
			("z", "", "NULL", True), ("nz", "", "FOO", None),
			("bit", "F_X", "0", False), ("bit", "F_X", "F_X|F_Y", True), ("bit", "F_X", "F_Y", None),
			("nobit", "F_X", "F_X", False),
			("eq", "S_LIVE", "S_LIVE", True), ("eq", "S_LIVE", "S_RESETTING", False),
			("ne", "S_LIVE", "S_LIVE", False), ("eq", "S_LIVE", "state", None),
			("blocking", "", "GFP_KERNEL", True), ("blocking", "", "GFP_ATOMIC|__GFP_NOWARN", False),
			("blocking", "", "GFP_NOWAIT", False), ("nonblocking", "", "GFP_NOIO", False),
			("blocking", "", "gfp", None),
		]
		for op, val, text, want in table:
			self.assertIs(a.test(op, val, text), want, (op, val, text))

	def test_keep_breaks_ties_by_line(self):
		from nestsleep.analysis.summarize import keep
		from nestsleep.model import Witness
		a = Witness(("join", "kasprintf"), "warns", "gfp_alloc", 0, (("x.c", 480), ("x.c", 409)))
		b = Witness(("join", "kasprintf"), "warns", "gfp_alloc", 0, (("x.c", 480), ("x.c", 407)))
		self.assertEqual(keep([a, b])[0], b)
		self.assertEqual(keep([b, a])[0], b)
		self.assertTrue(b.better_than(a))
		self.assertFalse(a.better_than(b))

	def test_map_conds(self):
		a = Args(KN)
		conds = frozenset([(1, "bit", "F_X")])
		self.assertEqual(map_conds(conds, {"pa": [[1, "c", "0"]]}, a), (None, False))
		self.assertEqual(map_conds(conds, {"pa": [[1, "p", 2]]}, a), ({(2, "bit", "F_X")}, False))
		self.assertEqual(map_conds(conds, {}, a), (frozenset(), False))
		self.assertEqual(map_conds(conds, {"va": 1}, a), ({(2, "bit", "F_X")}, False))
		# a gfp the caller computes: kept as possible, with a doubt
		self.assertEqual(map_conds(frozenset([(0, "blocking", "")]), {}, a), (frozenset(), True))


class SameGuardAtomsTest(unittest.TestCase):
	def test_atoms(self):
		self.assertEqual(sameguard.atoms("!noblock"), ([("noblock", False)], [("noblock", True)]))
		self.assertEqual(sameguard.atoms("unlikely(!bus->polling_mode)"),
				 ([("bus->polling_mode", False)], [("bus->polling_mode", True)]))
		self.assertEqual(sameguard.atoms("a&&b"), ([("a", True), ("b", True)], []))
		self.assertFalse(sameguard._pure("x=y"))
		self.assertFalse(sameguard._pure("f(x)"))
		self.assertTrue(sameguard._pure("x==y"))


if __name__ == "__main__":
	unittest.main()
