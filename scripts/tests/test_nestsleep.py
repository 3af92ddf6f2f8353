# SPDX-License-Identifier: GPL-2.0-only
"""Unit tests for nestsleep's driver, fact extractor and knowledge base."""

import json
import os
import re
import shutil
import subprocess
import tempfile
import unittest

from nestsleep import TOP, cache_dir, gen_builtin
from nestsleep.analysis import cfacts
from nestsleep.analysis.resolve import Analysis
from nestsleep.analysis.scan import Facts
from nestsleep.analysis.waiters import derive_waiters
from nestsleep.cache import Cache
from nestsleep.common import sha1
from nestsleep.knowledge import Knowledge
from nestsleep.model import CallTarget

PY = "/usr/bin/python3"
KTREE = os.path.join(cache_dir(), "linux-source-6.1")


class KnowledgeTest(unittest.TestCase):
	def setUp(self):
		self.kn = Knowledge()

	def test_builtin_copy_agrees_with_data(self):
		"""The .cocci files' built-in lists are generated from sleep_info.json."""
		r = subprocess.run([PY, "-m", "nestsleep", "gen-builtin", "--check"],
				   capture_output=True, text=True)
		self.assertEqual(r.returncode, 0, r.stderr)
		with open(os.path.join(TOP, "cocci", "nested_sleep.cocci")) as f:
			text = f.read()
		self.assertIn(gen_builtin.render(self.kn.info), text)

	def test_shared_fix_rules_copied(self):
		"""nested_sleep.cocci's patch mode alone runs a copy of
		fix_wait_event.cocci's rules after '// BEGIN SHARED', and a stale
		copy is what gen-builtin --check reports."""
		with open(os.path.join(TOP, "cocci", "nested_sleep.cocci")) as f:
			text = f.read()
		shared = gen_builtin.shared_rules()
		self.assertIn("@site depends on patch@", shared)
		b = text.index(gen_builtin.COPY_BEGIN) + len(gen_builtin.COPY_BEGIN)
		e = text.index(gen_builtin.COPY_END, b)
		self.assertEqual(text[b:e].strip("\n"), shared.strip("\n"))
		stale = gen_builtin.regenerate(text, self.kn.info, shared=shared + "\n// changed\n")
		self.assertNotEqual(stale, text)
		self.assertEqual(gen_builtin.regenerate(text, self.kn.info), text)
		# every virtual the copied rules depend on is declared
		for v in set(re.findall(r"depends on ([^@]*)@", shared)):
			for name in re.findall(r"[A-Za-z_]\w*", v):
				if name in ("disable",) or name.startswith(("braces", "first")):
					continue
				self.assertRegex(text, r"(?m)^virtual %s$|^@%s\b" % (name, name), name)

	def test_fix_waiters(self):
		"""The waiters the rule rewrites alone, as fix/wait_event.py's refusals
		leave them."""
		fw = gen_builtin.fix_waiters(self.kn.info)
		table = self.kn.info["waiters"]["table"]
		self.assertEqual(fw["wait_event_interruptible"][:3], ("TASK_INTERRUPTIBLE", "signal_pending(current)", False))
		self.assertTrue(fw["wait_event_timeout"][2])
		self.assertIsNone(fw["wait_event_state"][0])
		self.assertTrue(fw["wait_event_cmd"][4])
		for name in fw:
			w = table[name]
			self.assertEqual(w["family"], "wait_event", name)
			self.assertFalse(w["locked"], name)
			self.assertNotEqual(w["timeout"], "ktime", name)
			self.assertFalse(w["exclusive"] and fw[name][1], name)
		for name in ("io_wait_event", "wait_event_lock_irq", "wait_event_interruptible_exclusive",
			     "swait_event_exclusive", "wait_event_hrtimeout", "wait_event_exclusive_cmd"):
			self.assertNotIn(name, fw)

	def test_every_group_has_reason_and_effect(self):
		for g in self.kn.info["groups"]:
			self.assertTrue(g["reason"].strip(), g["name"])
			self.assertIn(g["effect"], ("warns", "silent"), g["name"])

	def test_effects(self):
		self.assertEqual(self.kn.primitive({"name": "mutex_lock"}), ("mutex", "warns"))
		self.assertEqual(self.kn.primitive({"name": "msleep"})[1], "silent")
		self.assertEqual(self.kn.primitive({"name": "schedule_timeout"})[1], "silent")
		self.assertEqual(self.kn.primitive({"name": "copy_from_user"})[1], "warns")

	def test_not_primitives(self):
		for name in ("cond_resched", "release_sock", "mutex_trylock", "spin_lock", "wake_up_process"):
			self.assertEqual(self.kn.primitive({"name": name}), "no", name)
		self.assertIsNone(self.kn.primitive({"name": "some_helper"}))

	def test_gfp(self):
		p = self.kn.primitive
		self.assertEqual(p({"name": "kmalloc", "args": ["sz", "GFP_KERNEL"]}), ("gfp_alloc", "warns"))
		self.assertEqual(p({"name": "kzalloc", "args": ["sz", "GFP_NOFS | __GFP_NOWARN"]}), ("gfp_alloc", "warns"))
		self.assertEqual(p({"name": "kmalloc", "args": ["sz", "GFP_ATOMIC"]}), "no")
		self.assertEqual(p({"name": "kcalloc", "args": ["n", "sz", "GFP_NOWAIT"]}), "no")
		self.assertEqual(p({"name": "kmalloc", "args": ["sz", "gfp"]}), "no")

	def test_guard(self):
		self.assertEqual(self.kn.primitive({"name": "guard", "guard": "mutex"}), ("mutex", "warns"))
		self.assertEqual(self.kn.primitive({"name": "scoped_guard", "guard": "spinlock"}), "no")


SAMPLE = r'''
#define foo_lock() mutex_lock(&foo_mutex)
#define my_wait(q, cond) wait_event_cmd((q)->wq, cond, spin_unlock(&(q)->l), spin_lock(&(q)->l))
struct foo_ops {
	int (*avail)(struct foo *f);
	const struct bar_ops *bar;
};
struct foo {
	const struct foo_ops *ops;
};
static int foo_avail(struct foo *f)
{
	foo_lock();
	return kmalloc(10, GFP_KERNEL) != NULL; /* "not ) a call(" */
}
static const struct foo_ops foo_ops = {
	.avail = foo_avail,
	.bar = &bar,
};
int foo_wait(struct foo *f)
{
	return wait_event_interruptible(f->wq, f->ops->avail(f));
}
static int carrier(void)
{
	set_current_state(TASK_INTERRUPTIBLE);
	if (x)
		return 1;
	schedule();
	return 0;
}
static int not_carrier(void)
{
	set_current_state(TASK_INTERRUPTIBLE);
	schedule();
	return 0;
}
'''


class FactsTest(unittest.TestCase):
	def setUp(self):
		kn = Knowledge()
		self.f = cfacts.extract(SAMPLE, kn.want_args, kn.restore, kn.words)

	def test_functions(self):
		self.assertEqual(set(self.f["functions"]), {"foo_avail", "foo_wait", "carrier", "not_carrier"})
		fa = self.f["functions"]["foo_avail"]
		self.assertTrue(fa["static"])
		names = [c["name"] for c in fa["calls"]]
		self.assertEqual(names, ["foo_lock", "kmalloc"])
		self.assertEqual(fa["calls"][1]["args"], ["10", "GFP_KERNEL"])
		self.assertEqual(fa["locals"], {"f": "foo*"})

	def test_member_call(self):
		c = [c for c in self.f["functions"]["foo_wait"]["calls"] if c["name"] == "avail"][0]
		self.assertEqual(c["kind"], "arrow")
		self.assertEqual(c["base"], "f->ops")

	def test_macros(self):
		m = self.f["macros"]["foo_lock"]
		self.assertEqual(m["params"], [])
		self.assertEqual(m["calls"][0]["name"], "mutex_lock")
		self.assertEqual(self.f["macros"]["my_wait"]["params"], ["q", "cond"])

	def test_structs_and_ops(self):
		self.assertEqual(self.f["structs"]["foo_ops"], {"avail": "()", "bar": "bar_ops"})
		self.assertEqual(self.f["structs"]["foo"], {"ops": "foo_ops"})
		self.assertIn(["foo_ops", "avail", "foo_avail", 17], self.f["ops"])

	def test_carry(self):
		self.assertTrue(self.f["functions"]["carrier"]["carry"])
		self.assertIsNone(self.f["functions"]["not_carrier"]["carry"])


class WaitersTest(unittest.TestCase):
	"""Macro expansion of the real 6.1 headers reproduces the data table."""

	@unittest.skipUnless(os.path.isfile(os.path.join(KTREE, "Makefile")), "no kernel tree")
	def test_derived_table_matches_data(self):
		kn = Knowledge()
		tmp = tempfile.mkdtemp()
		cache = Cache(tmp)
		headers = ["include/linux/wait.h", "include/linux/wait_bit.h", "include/linux/swait.h",
			   "include/linux/rcuwait.h"]

		class T:
			pass
		tree = T()
		tree.files = {}
		tree.abs = {}
		for h in headers:
			tree.abs[h] = os.path.join(KTREE, h)
			with open(tree.abs[h], "rb") as f:
				tree.files[h] = (sha1(f.read()), [], [], [], [], 5)
		tree.sha = lambda rel: tree.files[rel][0]
		facts = Facts(tree, kn, cache, 1)
		w = derive_waiters(kn, facts, headers)
		for name, want in kn.waiters.items():
			got = w[name]
			self.assertNotIn(got["via"], ("table",), "%s was not derived from the headers" % name)
			self.assertEqual(got["cond"], want["cond"], name)
			self.assertEqual(got["cmd"], want["cmd"], name)
			self.assertEqual(bool(got["locked"]), bool(want["locked"]), name)
		self.assertEqual(w["__wait_event_interruptible_timeout"]["cond"], 1)


class SummarizeTest(unittest.TestCase):
	"""The witness of a node must not depend on the order the graph was built in."""

	def graph(self, order):
		def prim(name, group):
			return ({"name": name, "line": 1}, CallTarget("prim", group=group, effect="warns"))

		def call(name, node):
			return ({"name": name, "line": 2}, CallTarget("direct", (node,)))
		A, B, C = ("a.c", "outer", "f"), ("a.c", "over_high", "f"), ("b.c", "wait_acct_move", "f")
		D, E = ("c.c", "deep", "f"), ("c.c", "deeper", "f")
		nodes = {
			# try_charge_memcg() in 6.12: two chains of the same length; the one
			# that ends in a scheduler entry point must lose
			A: {"calls": [call("over_high", B), call("wait_acct_move", C), call("deep", D)]},
			B: {"calls": [prim("schedule_timeout_killable", "schedule")]},
			C: {"calls": [prim("prepare_to_wait", "wait_event")]},
			D: {"calls": [call("deeper", E)]},
			E: {"calls": [prim("mutex_lock", "mutex")]},
		}
		ana = Analysis.__new__(Analysis)
		ana.kn = None	# no knowledge: no argument tests to decide
		ana.nodes = {k: nodes[k] for k in order}
		ana.summarize()
		self.ana = ana
		return ana.summary, A

	def test_order_independent(self):
		keys = [("a.c", "outer", "f"), ("a.c", "over_high", "f"), ("b.c", "wait_acct_move", "f"),
			("c.c", "deep", "f"), ("c.c", "deeper", "f")]
		s1, a = self.graph(keys)
		s2, _ = self.graph(list(reversed(keys)))
		self.assertEqual(s1, s2)
		# a node keeps its best chains, best first
		self.assertEqual(s1[a][0].chain, ("wait_acct_move", "prepare_to_wait"))

	def test_without_a_group(self):
		"""The summaries that avoid the schedule group: over_high (which only
		schedules) has none, and outer keeps a chain that sleeps another way."""
		keys = [("a.c", "outer", "f"), ("a.c", "over_high", "f"), ("b.c", "wait_acct_move", "f"),
			("c.c", "deep", "f"), ("c.c", "deeper", "f")]
		s, a = self.graph(keys)
		without = self.ana.summary_without("schedule")
		self.assertEqual(s[("a.c", "over_high", "f")][0].group, "schedule")
		self.assertNotIn(("a.c", "over_high", "f"), without)
		self.assertEqual(without[a][0].chain, ("wait_acct_move", "prepare_to_wait"))
		self.assertIs(self.ana.summary_without("schedule"), without)


class CliTest(unittest.TestCase):
	"""Bad input: one clear line on stderr, non-zero exit, no traceback."""

	def run_cli(self, *args, env=None):
		return subprocess.run([PY, "-m", "nestsleep", "coccicheck"] + list(args),
				      capture_output=True, text=True, env=env, timeout=60)

	def assertCleanError(self, r, text):
		self.assertNotEqual(r.returncode, 0)
		self.assertNotIn("Traceback", r.stderr)
		self.assertIn(text, r.stderr)

	def test_no_tree(self):
		self.assertCleanError(self.run_cli("--kdir", "/nonexistent/tree"), "no kernel tree at KDIR=/nonexistent/tree")

	def test_bad_mode(self):
		with tempfile.TemporaryDirectory() as d:
			self.assertCleanError(self.run_cli("--kdir", d, "--mode", "bogus"), "unknown MODE=bogus")

	def test_missing_m(self):
		with tempfile.TemporaryDirectory() as d:
			self.assertCleanError(self.run_cli("--kdir", d, "--m", "drivers/nothing"), "M=drivers/nothing")

	def test_no_spatch(self):
		with tempfile.TemporaryDirectory() as d:
			env = dict(os.environ, PATH="/nonexistent")
			r = self.run_cli("--kdir", d, env=env)
			self.assertCleanError(r, "apt-get install -y coccinelle")

	def test_boot_commands_pass_their_options_on(self):
		"""'make boottest' and 'make runtime-proof' give their options to
		nsboot: its own one-line error, not the nestsleep parser's."""
		r = subprocess.run([PY, "-m", "nestsleep", "boottest", "--patches", "/nonexistent/series"],
				   capture_output=True, text=True, timeout=60)
		self.assertCleanError(r, "PATCHES= must name a directory written by make fixes")
		r = subprocess.run([PY, "-m", "nestsleep", "runtime-proof", "--help"],
				   capture_output=True, text=True, timeout=60)
		self.assertEqual(r.returncode, 0, r.stderr)
		self.assertIn("--rounds", r.stdout)

	def test_make_reports_bad_kdir(self):
		r = subprocess.run(["make", "-s", "-C", TOP, "coccicheck", "KDIR=/nonexistent/tree"],
				   capture_output=True, text=True, timeout=120)
		self.assertCleanError(r, "no kernel tree at KDIR=/nonexistent/tree")

	def test_m_limits_output_not_knowledge(self):
		"""M= prints only findings under M, but callees resolve in the whole tree."""
		kdir = os.path.join(TOP, "fixtures", "report", "header_inline")
		with tempfile.TemporaryDirectory() as c:
			full = self.run_cli("--kdir", kdir, "--cache", c)
			self.assertEqual(full.returncode, 0, full.stderr)
			self.assertTrue(full.stdout.strip())
			sub = self.run_cli("--kdir", kdir, "--cache", c, "--m", "drivers/x")
			self.assertEqual(sub.stdout, full.stdout)
			none = self.run_cli("--kdir", kdir, "--cache", c, "--m", "include")
			self.assertEqual(none.returncode, 0, none.stderr)
			self.assertEqual(none.stdout, "")

	def test_m_external_module(self):
		"""An absolute M= outside KDIR is analysed with KDIR's knowledge."""
		kdir = os.path.join(TOP, "fixtures", "report", "header_inline")
		with tempfile.TemporaryDirectory() as c, tempfile.TemporaryDirectory() as mod:
			with open(os.path.join(mod, "ext.c"), "w") as f:
				f.write("int ext_wait(struct hdr_dev *d)\n{\n"
					"\treturn wait_event_interruptible(d->wq, hdr_avail(d));\n}\n")
			r = self.run_cli("--kdir", kdir, "--cache", c, "--m", mod)
			self.assertEqual(r.returncode, 0, r.stderr)
			lines = r.stdout.splitlines()
			self.assertEqual(len(lines), 1, r.stdout)
			self.assertTrue(lines[0].startswith(os.path.realpath(os.path.join(mod, "ext.c")) + ":3:"), lines[0])
			self.assertIn("hdr_avail -> down (warns)", lines[0])

	def test_warm_run_matches_cold_run(self):
		"""The cached tree knowledge gives the same findings as a cold run."""
		kdir = os.path.join(TOP, "fixtures", "report", "cross_file")
		with tempfile.TemporaryDirectory() as c:
			cold = self.run_cli("--kdir", kdir, "--cache", c)
			warm = self.run_cli("--kdir", kdir, "--cache", c)
			self.assertEqual(cold.returncode, 0, cold.stderr)
			self.assertNotIn("tree knowledge cached", cold.stderr)
			self.assertIn("tree knowledge cached", warm.stderr)
			self.assertTrue(cold.stdout.strip())
			self.assertEqual(warm.stdout, cold.stdout)

	def test_unparsable_file_is_named_and_counted(self):
		"""A file spatch cannot parse is named on stderr; the run goes on."""
		with tempfile.TemporaryDirectory() as d, tempfile.TemporaryDirectory() as c:
			with open(os.path.join(d, "bad.c"), "w") as f:
				f.write("int f(struct s *x)\n{\n\twait_event(x->wq, g(x));\n\tthis is not C {{ ;\n}\n")
			with open(os.path.join(d, "good.c"), "w") as f:
				f.write("static int ready(struct s *x)\n{\n\tmutex_lock(&x->m);\n\treturn 1;\n}\n"
					"int h(struct s *x)\n{\n\twait_event(x->wq, ready(x));\n\treturn 0;\n}\n")
			r = self.run_cli("--kdir", d, "--cache", c)
			self.assertEqual(r.returncode, 0, r.stderr)
			self.assertIn("could not parse: bad.c", r.stderr)
			self.assertIn("2 files matched, 1 parsed, 1 failed, 0 timed out", r.stderr.splitlines()[-1])
			self.assertIn("good.c:8:", r.stdout)

	def findings_of(self, src):
		"""The JSON findings of a one-file tree holding src."""
		with tempfile.TemporaryDirectory() as d, tempfile.TemporaryDirectory() as c:
			with open(os.path.join(d, "a.c"), "w") as f:
				f.write(src)
			js = os.path.join(c, "out.json")
			r = self.run_cli("--kdir", d, "--cache", c, "--json", js)
			self.assertEqual(r.returncode, 0, r.stderr)
			with open(js) as f:
				return json.load(f)["findings"]

	def test_annotation_only_chain_does_not_block(self):
		"""A chain that ends in might_sleep() itself, with nothing else on
		the way that sleeps (drbd_alloc_pages()'s __drbd_free_peer_req()),
		is marked blocks=false; a callee with might_sleep() and a real
		sleep beside it (console_lock()) blocks."""
		src = ("static void only_check(struct s *x)\n{\n\tmight_sleep();\n\tkfree(x->p);\n}\n"
		       "static void check_and_lock(struct s *x)\n{\n\tmight_sleep();\n\tif (x->n)\n"
		       "\t\tmutex_lock(&x->m);\n}\n"
		       "int w1(struct s *x)\n{\n\tDEFINE_WAIT(wait);\n\tprepare_to_wait(&x->wq, &wait, TASK_INTERRUPTIBLE);\n"
		       "\tonly_check(x);\n\tschedule();\n\tfinish_wait(&x->wq, &wait);\n\treturn 0;\n}\n"
		       "int w2(struct s *x)\n{\n\tDEFINE_WAIT(wait);\n\tprepare_to_wait(&x->wq, &wait, TASK_INTERRUPTIBLE);\n"
		       "\tcheck_and_lock(x);\n\tschedule();\n\tfinish_wait(&x->wq, &wait);\n\treturn 0;\n}\n")
		got = {x["function"]: (x["chain"][-1], x["blocks"]) for x in self.findings_of(src)}
		self.assertEqual(got["w1"], ("might_sleep", False))
		self.assertEqual(got["w2"][1], True)

	def test_conditional_sleep_gets_a_certain_chain_too(self):
		"""xen-netfront: the best chain ends in an allocation (it sleeps
		only under reclaim); the path also keeps a chain that blocks
		without that condition, for the changelog."""
		src = ("static void take(struct s *x)\n{\n\tmutex_lock(&x->m);\n}\n"
		       "static int get(struct s *x)\n{\n\tx->p = kmalloc(8, GFP_KERNEL);\n\ttake(x);\n\treturn 1;\n}\n"
		       "static int alloc_only(struct s *x)\n{\n\tx->p = kmalloc(8, GFP_KERNEL);\n\treturn 1;\n}\n"
		       "int w(struct s *x)\n{\n\twait_event(x->wq, get(x));\n\twait_event(x->wq, alloc_only(x));\n"
		       "\treturn 0;\n}\n")
		got = {x["call"]: x["paths"][0] for x in self.findings_of(src)}
		self.assertEqual(got["get"]["chain"], ["get", "kmalloc"])
		self.assertEqual(got["get"]["also"], ["get", "take", "mutex_lock"])
		self.assertNotIn("also", got["alloc_only"])

	def test_needs_are_the_chains_not_the_waiters_guards(self):
		"""drbd: the chain under 'if (f & SER)' needs SER; the waiter's
		own BUG_ON(f & SER) before its wait is no test of the chain."""
		src = ("static int req(struct s *x, int f)\n{\n\tif (f & SER)\n\t\tmutex_lock(&x->m);\n"
		       "\tif (x->n)\n\t\twait_event(x->wq2, x->k);\n\treturn 1;\n}\n"
		       "int a(struct s *x, int f)\n{\n\twait_event(x->wq, req(x, f));\n\treturn 0;\n}\n"
		       "int b(struct s *x, int f)\n{\n\tBUG_ON(f & SER);\n\twait_event(x->wq, req(x, f));\n\treturn 0;\n}\n")
		got = {x["function"]: x["paths"][0] for x in self.findings_of(src)}
		self.assertEqual(got["a"]["chain"], ["req", "mutex_lock"])
		self.assertEqual(got["a"]["needs"], [[1, "bit", "SER"]])
		self.assertEqual(got["b"]["chain"], ["req", "wait_event"])
		self.assertNotIn("needs", got["b"])

	def test_guard_hints_and_function_coverage(self):
		"""The scoped_guard hints keep guarded functions; the JSON coverage
		counts them (4 in the fixture), and counts them dropped without.
		With the waitless bodies blanked (the default) the four sg_ready_*()
		helpers, which hold no wait, are counted apart, two of them
		guarded."""
		src = os.path.join(TOP, "fixtures", "report", "scoped_guard.c")
		for blanking, guards, blanked in (("0", 4, 0), ("1", 2, 4)):
			with self.subTest(blanking=blanking), tempfile.TemporaryDirectory() as d, \
					tempfile.TemporaryDirectory() as c:
				shutil.copy(src, d)
				empty = os.path.join(d, "empty.h")
				open(empty, "w").close()
				covs = []
				for extra in ([], ["--spflags", "--macro-file " + empty]):
					js = os.path.join(c, "out.json")
					r = self.run_cli("--kdir", d, "--cache", c, "--json", js, *extra,
							 env=dict(os.environ, NESTSLEEP_BLANK=blanking))
					self.assertEqual(r.returncode, 0, r.stderr)
					with open(js) as f:
						covs.append((json.load(f)["coverage"], r.stdout.count("WARNING")))
				(cov, n), (bare, nbare) = covs
				self.assertEqual((cov["guard_functions"], cov["guard_functions_parsed"]), (guards, guards))
				self.assertEqual(cov["functions_parsed"], cov["functions"])
				self.assertEqual(cov["functions_blanked"], blanked)
				self.assertEqual(n, 3)
				self.assertEqual((bare["guard_functions"], bare["guard_functions_parsed"]), (guards, 0))
				self.assertIn("scoped_guard.c:sg_wait_in_guarded_function", bare["functions_dropped"])
				self.assertEqual(nbare, 2)

	def test_empty_tree_runs(self):
		with tempfile.TemporaryDirectory() as d, tempfile.TemporaryDirectory() as c:
			with open(os.path.join(d, "a.c"), "w") as f:
				f.write("int f(void) { return 0; }\n")
			r = self.run_cli("--kdir", d, "--cache", c)
			self.assertEqual(r.returncode, 0, r.stderr)
			self.assertEqual(r.stdout, "")
			self.assertIn("coverage:", r.stderr.splitlines()[-1])


if __name__ == "__main__":
	unittest.main()
