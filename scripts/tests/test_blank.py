# SPDX-License-Identifier: GPL-2.0-only
"""The copy of a file that the match phase gives spatch (analysis/blank.py):
kept tokens keep their line and column, preprocessor lines and braces stay,
the bodies that hold a wait stay whole, and the findings do not change."""

import json
import os
import re
import subprocess
import tempfile
import unittest

from nestsleep import TOP, cache_dir
from nestsleep.analysis import blank

PY = "/usr/bin/python3"
KTREE = os.path.join(cache_dir(), "linux-source-6.1")

SRC = """\
#include <linux/wait.h>
#define HELPER(x) do { (x)++; } while (0)

struct ops { int (*run)(int); };
static int plain(int a);
static const struct ops my_ops = { .run = plain, };

/* a comment { with a brace */
static int plain(int a)
{
	char *s = "}";
#define LOCAL 3
	return a + LOCAL;
}

static int waits(struct s *x)
{
	wait_event(x->wq, x->done);
	return 0;
}

static int carries(struct s *x)
{
	if (helper_sets_state(x))
		return 1;
	return 0;
}

static int with_ifdef(int a)
{
#ifdef CONFIG_X
	a++;
#endif
	return a;
}

SYSCALL_DEFINE1(foo, int, a)
{
	return a;
}
"""


def body(text, name):
	"""The text from name's header to the '}' that closes its body."""
	m = re.search(r"^[^\n;]*\b%s\([^;]*?\n\{.*?\n}" % name, text, re.M | re.S)
	return m.group(0)


class BlankTest(unittest.TestCase):
	def check_positions(self, src, out):
		"""Same length, newlines in place, each other character kept or a
		space."""
		self.assertEqual(len(out), len(src))
		for i, (a, b) in enumerate(zip(src, out)):
			if a != b:
				self.assertEqual(b, " ", "offset %d: %r became %r" % (i, a, b))
				self.assertNotEqual(a, "\n")

	def test_blanks_only_functions_without_a_wait(self):
		out = blank.blank(SRC, frozenset(["helper_sets_state"]))
		self.check_positions(SRC, out)
		self.assertNotEqual(out, SRC)
		# blanked: the whole definition, header and braces, but its #define
		at = SRC.index("static int plain(int a)\n{")
		self.assertEqual(out[at:at + len(body(SRC[at:], "plain"))].strip(), "#define LOCAL 3")
		# its prototype and the ops table that names it stay
		self.assertIn("static int plain(int a);", out)
		self.assertIn(".run = plain,", out)
		# kept whole: a wait, a name of the keep set, a conditional, a macro header
		for name in ("waits", "carries", "with_ifdef", "SYSCALL_DEFINE1"):
			self.assertEqual(body(out, name), body(SRC, name), name)
		# outside functions: macros, types, initialisers, comments
		self.assertEqual(out[:SRC.index("static int plain(int a)\n{")],
				 SRC[:SRC.index("static int plain(int a)\n{")])

	def test_carrier_is_blanked_without_the_keep_set(self):
		out = blank.blank(SRC)
		self.assertNotIn("helper_sets_state", out)

	def test_unbalanced_branches_keep_the_file(self):
		src = ("static int f(int a)\n{\n#ifdef A\n\tif (a) {\n#else\n\tif (!a) {\n#endif\n"
		       "\t\ta++;\n\t}\n\treturn a;\n}\n\nstatic int g(void)\n{\n\treturn 1;\n}\n")
		self.assertEqual(blank.blank(src), src)
		self.assertEqual(blank.blank(src + "}\n"), src + "}\n")

	def test_neutral_branches_around_functions(self):
		src = ("#ifdef A\nstatic int g(void)\n{\n\treturn 1;\n}\n#else\n"
		       "static int g(void)\n{\n\treturn 2;\n}\n#endif\n")
		out = blank.blank(src)
		self.check_positions(src, out)
		self.assertNotIn("return", out)
		self.assertEqual(out.count("#"), 3)

	def test_tree_files(self):
		"""On files of the 6.1 tree: positions kept, every preprocessor
		line and brace kept, every body with a wait word kept whole."""
		if not os.path.isdir(KTREE):
			self.skipTest("no cached 6.1 tree")
		rels = ["drivers/md/raid10.c", "drivers/md/md.c", "net/sctp/socket.c", "fs/dlm/lock.c",
			"drivers/bluetooth/btusb.c", "kernel/sched/wait.c", "drivers/block/nbd.c",
			"include/linux/wait.h", "drivers/acpi/ec.c", "kernel/kthread.c"]
		shrunk = 0
		for rel in rels:
			with open(os.path.join(KTREE, rel), "rb") as f:
				src = f.read().decode("latin-1")
			out = blank.blank(src)
			self.check_positions(src, out)
			pp = lambda t: [l for l in t.split("\n") if l.lstrip().startswith("#")]
			self.assertEqual(pp(out), pp(src), rel)
			self.assertEqual(out.count("{") - out.count("}"), src.count("{") - src.count("}"))
			for m in re.finditer(r"\b(wait_event\w*|prepare_to_wait\w*|set_current_state)\s*\(", src):
				self.assertEqual(out[m.start():m.end()], m.group(0), "%s: %s" % (rel, m.group(0)))
			shrunk += len(re.sub(r"\s", "", src)) > 2 * len(re.sub(r"\s", "", out))
		self.assertGreater(shrunk, 3)


class BlankFindingsTest(unittest.TestCase):
	"""The findings of fixture files are the same with blanking (the
	default) and without (NESTSLEEP_BLANK=0).  The function coverage
	counts the blanked functions apart: spatch's verdict on a body it
	does not read is unknown."""

	def run_tree(self, d, blanking):
		with tempfile.TemporaryDirectory() as c:
			js = os.path.join(c, "out.json")
			env = dict(os.environ, NESTSLEEP_BLANK="1" if blanking else "0")
			r = subprocess.run([PY, "-m", "nestsleep", "coccicheck", "--kdir", d, "--cache", c, "--json", js],
					   capture_output=True, text=True, env=env, timeout=300)
			self.assertEqual(r.returncode, 0, r.stderr)
			with open(js) as f:
				out = json.load(f)
		return r.stdout, out["findings"], out["coverage"], r.stderr.splitlines()[-1]

	def test_fixture_findings_unchanged(self):
		names = ["kthread_exit.c", "intended_sleep.c", "runs_on_true.c", "funcptr.c", "carried_return_restores.c"]
		with tempfile.TemporaryDirectory() as d:
			for n in names:
				with open(os.path.join(TOP, "fixtures", "report", n)) as f, open(os.path.join(d, n), "w") as g:
					g.write(f.read())
			# a function spatch cannot parse, beside one that waits
			with open(os.path.join(d, "bad.c"), "w") as f:
				f.write("static int odd(int a)\n{\n\treturn a +* ;\n}\n\n"
					"int h(struct s *x)\n{\n\twait_event(x->wq, ready(x));\n\treturn 0;\n}\n")
			out, findings, cov, last = self.run_tree(d, True)
			out0, findings0, cov0, last0 = self.run_tree(d, False)
		self.assertTrue(findings)
		self.assertEqual((out, findings), (out0, findings0))
		# the closing line's file counts are the same
		self.assertEqual(last.split(";")[:2], last0.split(";")[:2])
		self.assertEqual(cov0["functions_dropped"], ["bad.c:odd"])
		self.assertEqual(cov0["functions_blanked"], 0)
		# odd() is blanked: not counted, neither parsed nor dropped
		self.assertEqual(cov["functions_dropped"], [])
		self.assertGreater(cov["functions_blanked"], 0)
		self.assertEqual(cov["functions"] + cov["functions_blanked"], cov0["functions"])
		self.assertEqual(cov["functions_parsed"] + cov["functions_blanked"], cov0["functions_parsed"] + 1)


class AllBlankedTest(unittest.TestCase):
	"""A file whose wait word is only in a macro has every function
	blanked: spatch then reports no function, and the file is not a
	parse failure (arch/x86/kvm/svm/avic.c, evgpe.c on 6.12 were)."""

	SRC = ("#define WAIT_IT(q, c) wait_event(q, c)\n\nstatic int f(int a)\n{\n\treturn a + 1;\n}\n\n"
	       "static const struct s t = { .f = f, };\n")

	def test_left(self):
		out, lines, left = blank.blank_lines(self.SRC)
		self.assertEqual((lines, left), ([4], 0))
		out, lines, left = blank.blank_lines(SRC, frozenset(["helper_sets_state"]))
		self.assertGreaterEqual(left, 4)	# waits, carries, with_ifdef, SYSCALL_DEFINE1

	def test_not_failed(self):
		with tempfile.TemporaryDirectory() as d, tempfile.TemporaryDirectory() as c:
			with open(os.path.join(d, "macro_only.c"), "w") as f:
				f.write(self.SRC)
			js = os.path.join(c, "out.json")
			r = subprocess.run([PY, "-m", "nestsleep", "coccicheck", "--kdir", d, "--cache", c, "--json", js],
					   capture_output=True, text=True, timeout=300)
			self.assertEqual(r.returncode, 0, r.stderr)
			with open(js) as f:
				cov = json.load(f)["coverage"]
		self.assertEqual((cov["files"], cov["parsed"], cov["failed"]), (1, 1, []))
		self.assertEqual(cov["functions_blanked"], 1)


if __name__ == "__main__":
	unittest.main()


class ExternalModuleTest(unittest.TestCase):
	"""The copies spatch reads are made under the run's scratch directory,
	also for an external module (M= an absolute path, whose files are
	named by that path): its files are never written (the copy once went
	to the file itself)."""

	def test_module_files_untouched(self):
		src = ("int helper(int a)\n{\n\treturn a + 1;\n}\n\nint w(struct s *x)\n{\n"
		       "\twait_event(x->wq, x->n);\n\treturn 0;\n}\n")
		with tempfile.TemporaryDirectory() as k, tempfile.TemporaryDirectory() as m, \
				tempfile.TemporaryDirectory() as c:
			with open(os.path.join(k, "a.c"), "w") as f:
				f.write("int a(void)\n{\n\treturn 0;\n}\n")
			path = os.path.join(m, "mod.c")
			with open(path, "w") as f:
				f.write(src)
			r = subprocess.run([PY, "-m", "nestsleep", "coccicheck", "--kdir", k, "--m", m, "--cache", c],
					   capture_output=True, text=True, timeout=300)
			self.assertEqual(r.returncode, 0, r.stderr)
			with open(path) as f:
				self.assertEqual(f.read(), src)
