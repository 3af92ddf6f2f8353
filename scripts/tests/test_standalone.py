# SPDX-License-Identifier: GPL-2.0-only
"""cocci/nested_sleep.cocci run alone, as the kernel's 'make coccicheck'
runs it: spatch's own messages.  coccicheck puts spatch's stderr on its
stdout, so in MODE=patch a warning spatch prints about the rule itself
lands in the diff that a user pipes to patch(1).  fixtures/standalone
holds the outputs; run_tests.py runs them through the kernel's make."""

import os
import re
import shutil
import subprocess
import tempfile
import unittest

from nestsleep import TOP

COCCI = os.path.join(TOP, "cocci")
FIXTURES = os.path.join(TOP, "fixtures", "standalone")
# what spatch says about a rule it parsed: 'warning: rule starting on line
# N: inherited metavariable key not used in the -, +, or context code'.
# Lower case: the rule's own report lines say 'WARNING: nested sleep'.
NOISE = re.compile(r"(?m)^.*(?:\bwarning:|\bnot used\b).*$")


def spatch(rule, src, defines, cwd):
	"""spatch as coccicheck runs it (options from the rule's header)."""
	cmd = ["spatch", "--very-quiet", "--cocci-file", rule, "--no-includes", "--include-headers"]
	for d in defines:
		cmd += ["-D", d]
	return subprocess.run(cmd + [os.path.basename(src)], capture_output=True, text=True, cwd=cwd,
			      timeout=300)


@unittest.skipUnless(shutil.which("spatch"), "spatch is not installed")
class SpatchMessagesTest(unittest.TestCase):
	def setUp(self):
		self.dir = tempfile.mkdtemp(prefix="nestsleep-sa-")

	def tearDown(self):
		shutil.rmtree(self.dir, ignore_errors=True)

	def run_rule(self, rule, fixture, defines):
		src = os.path.join(self.dir, fixture)
		shutil.copy(os.path.join(FIXTURES, fixture), src)
		return spatch(os.path.join(COCCI, rule), src, defines, self.dir)

	def assertQuiet(self, r, what):
		self.assertEqual(r.returncode, 0, "%s: %s" % (what, r.stderr[-2000:]))
		noise = NOISE.findall(r.stdout) + NOISE.findall(r.stderr)
		self.assertEqual(noise, [], what)

	def test_patch_mode_alone_prints_only_the_diff(self):
		"""A rewrite (patch_one.c) and refusals (patch_refused.c)."""
		r = self.run_rule("nested_sleep.cocci", "patch_one.c", ["patch"])
		self.assertQuiet(r, "nested_sleep.cocci -D patch on patch_one.c")
		# the rewrite rules ran: a quiet run that rewrote nothing proves nothing
		self.assertIn("+\tadd_wait_queue(&d->wq, &wait_entry);", r.stdout)
		r = self.run_rule("nested_sleep.cocci", "patch_refused.c", ["patch"])
		self.assertQuiet(r, "nested_sleep.cocci -D patch on patch_refused.c")
		self.assertIn("INFO: nested sleep not rewritten", r.stdout)

	def test_a_file_after_a_rewritten_one_is_left_alone(self):
		"""coccicheck runs one spatch over a directory: what the rule
		chose for one file (an #include for its signal test, the sites
		and their texts) must not touch the next file."""
		shutil.copy(os.path.join(FIXTURES, "patch_one.c"), os.path.join(self.dir, "a.c"))
		with open(os.path.join(self.dir, "b.c"), "w") as f:
			f.write("#include <linux/sched.h>\n#include <linux/wait.h>\n\n"
				"int b(wait_queue_head_t *q, int *c)\n{\n"
				"\treturn wait_event_interruptible(*q, *c);\n}\n")
		cmd = ["spatch", "--very-quiet", "--cocci-file", os.path.join(COCCI, "nested_sleep.cocci"),
		       "--no-includes", "--include-headers", "-D", "patch", "--dir", "."]
		r = subprocess.run(cmd, capture_output=True, text=True, cwd=self.dir, timeout=300)
		self.assertQuiet(r, "nested_sleep.cocci -D patch --dir")
		files = re.findall(r"(?m)^\+\+\+ (\S+)", r.stdout)
		self.assertEqual([os.path.basename(f) for f in files], ["a.c"], r.stdout)
		self.assertIn("+#include <linux/sched/signal.h>", r.stdout)

	def test_other_modes_alone_are_quiet(self):
		for mode in ("report", "context", "org"):
			r = self.run_rule("nested_sleep.cocci", "direct.c", [mode])
			self.assertQuiet(r, "nested_sleep.cocci -D %s" % mode)
			self.assertIn("nested sleep" if mode != "context" else "kzalloc", r.stdout, mode)

	def test_the_drivers_rewrite_rule_is_quiet(self):
		"""fix_wait_event.cocci, whose rules the standalone rule copies,
		with and without the brace balancing the driver asks for."""
		for defines in (["patch"], ["patch", "balance"]):
			r = self.run_rule("fix_wait_event.cocci", "patch_one.c", defines)
			self.assertQuiet(r, "fix_wait_event.cocci -D %s" % " -D ".join(defines))


if __name__ == "__main__":
	unittest.main()
