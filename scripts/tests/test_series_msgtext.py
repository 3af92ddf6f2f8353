# SPDX-License-Identifier: GPL-2.0-only
"""The changelog text of make fixes: the state a loop sets, read from its
source even when the call spans lines; the one line on how a patch was
found and tested; the details that go below '---'; subjects that name
the file when two patches of a series would share one."""

import os
import shutil
import sys
import tempfile
import unittest

from nestsleep.series import effect
from nestsleep.series import changelog, changelog_tested, records, subjects
from nestsleep.series import passes

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_claims import unquoted  # noqa: E402


def tree(files):
	"""A one-file-per-entry tree with include/linux/sched.h's states."""
	d = tempfile.mkdtemp(prefix="ns-msgtext-")
	files = dict(files)
	files.setdefault("include/linux/sched.h", "#define TASK_INTERRUPTIBLE\t\t0x0001\n"
			 "#define TASK_UNINTERRUPTIBLE\t\t0x0002\n#define TASK_WAKEKILL\t\t\t0x0100\n"
			 "#define TASK_KILLABLE\t\t\t(TASK_WAKEKILL | TASK_UNINTERRUPTIBLE)\n")
	for rel, text in files.items():
		p = os.path.join(d, rel)
		os.makedirs(os.path.dirname(p), exist_ok=True)
		with open(p, "w") as f:
			f.write(text)
	return d


class LoopStateTest(unittest.TestCase):
	def setUp(self):
		self.kdir = tree({"drivers/x/x.c": (
			"static ssize_t x_read(void)\n{\n\tfor (;;) {\n"
			"\t\tprepare_to_wait(&ctx->events_wq, &event_wait,\n"
			"\t\t\t\tTASK_INTERRUPTIBLE);\n"
			"\t\tif (x_pending(ctx))\n\t\t\tbreak;\n\t\tschedule();\n\t}\n"
			"\tset_current_state(\n\t\tTASK_KILLABLE);\n}\n")})
		self.addCleanup(shutil.rmtree, self.kdir)

	def test_call_across_lines(self):
		f = {"file": "drivers/x/x.c", "line": 4, "primitive": "prepare_to_wait"}
		self.assertEqual(changelog.finding_state(self.kdir, f, {}), ("TASK_INTERRUPTIBLE", "1"))
		f = {"file": "drivers/x/x.c", "line": 10, "primitive": "set_current_state"}
		self.assertEqual(changelog.finding_state(self.kdir, f, {}), ("TASK_KILLABLE", "102"))

	def test_unknown_state_prints_no_placeholder(self):
		f = {"file": "drivers/x/x.c", "line": 6, "primitive": "prepare_to_wait"}
		self.assertEqual(changelog.finding_state(self.kdir, f, {}), (None, None))
		t = " ".join(changelog.effect_paragraphs([{"shape": "prepare_to_wait", "how": "warns", "state": None,
							"fingerprints": ["fp"]}], {}))
		self.assertNotIn("state=?", t)
		self.assertIn("CONFIG_DEBUG_ATOMIC_SLEEP=y", t)


class SameSubjectTest(unittest.TestCase):
	@staticmethod
	def group(func, file):
		return [("%s:%s" % (file, func), [{"function": func, "primitive": "wait_event_interruptible",
						   "shape": "wait_event", "role": "cond", "file": file}])]

	def test_same_function_in_two_files(self):
		gs = [self.group("fops_read", "drivers/media/pci/saa7164/saa7164-encoder.c"),
		      self.group("fops_read", "drivers/media/pci/saa7164/saa7164-vbi.c"),
		      self.group("other_read", "drivers/media/pci/saa7164/saa7164-vbi.c")]
		subs = subjects.series_subjects(["media: saa7164:"] * 3, gs)
		self.assertEqual(subs, ["media: saa7164: fix nested sleep in fops_read() of saa7164-encoder.c",
					"media: saa7164: fix nested sleep in fops_read() of saa7164-vbi.c",
					"media: saa7164: fix nested sleep in other_read()"])
		self.assertTrue(all(len(x) <= 75 for x in subs))

	def test_too_long_names_the_file_only(self):
		f = "drivers/x/long_driver_file.c"
		gs = [self.group("a_rather_long_read_function_name", f), self.group("a_rather_long_read_function_name", f)]
		subs = subjects.series_subjects(["staging: something:"] * 2, gs)
		self.assertEqual(subs, ["staging: something: fix nested sleep in long_driver_file.c"] * 2)


BUILT = {"status": "ok", "how": "drivers/char/hpet.o in x86_64 allmodconfig (CONFIG_WERROR=y) compiled after patch 1"}
BUILT_PPC = {"status": "ok", "how": "drivers/misc/ocxl/file.o in powerpc allmodconfig (CONFIG_WERROR=y, "
	     "powerpc64-linux-gnu-gcc) compiled after patch 1"}
BOOTED = {"status": "ok", "build": "ok", "boot": "ok", "exerciser": "kernel-boot/exercise/hpet.sh"}
BY_HPET = " by a test that reads interrupt counts from the HPET character device"


class FoundLineTest(unittest.TestCase):
	"""How a patch was found and tested, in one sentence of the commit
	message, from the test records; the details go below '---'."""

	def line(self, *recs):
		records = {"fp%d" % i: dict(r, function="f%d" % i) for i, r in enumerate(recs)}
		return " ".join(changelog_tested.found_line(list(records), records).split())

	def test_reproduced_only_when_a_boot_warned(self):
		self.assertEqual(self.line({"build": BUILT, "boot": dict(BOOTED, reproduced=True, warning_gone=True,
									  baseline_hits=["x"])}),
				 "Found by nestsleep, a Coccinelle-based checker; reproduced in QEMU with "
				 "CONFIG_DEBUG_ATOMIC_SLEEP=y" + BY_HPET + ", and the patched kernel no longer warns.")
		self.assertEqual(self.line({"build": BUILT, "boot": dict(BOOTED, exercised=True)}),
				 "Found by nestsleep, a Coccinelle-based checker; exercised in QEMU with "
				 "CONFIG_DEBUG_ATOMIC_SLEEP=y, where the unpatched kernel did not warn.")
		self.assertEqual(self.line({"build": BUILT, "boot": dict(BOOTED)}),
				 "Found by nestsleep, a Coccinelle-based checker; built and booted in QEMU, but the "
				 "path was not exercised.")

	def test_built_only(self):
		stale = {"status": "not run", "build": "not run", "boot": "not run", "reason": records.STALE}
		self.assertEqual(self.line({"build": BUILT, "boot": stale}),
				 "Found by nestsleep, a Coccinelle-based checker; build-tested only (x86_64 allmodconfig).")
		self.assertEqual(self.line({"build": BUILT_PPC, "boot": {"status": "config failed", "reason": "x"}}),
				 "Found by nestsleep, a Coccinelle-based checker; build-tested only (powerpc "
				 "allmodconfig).")
		self.assertEqual(self.line({}), "Found by nestsleep, a Coccinelle-based checker; not compiled or "
				 "boot-tested.")

	def test_mixed_waits(self):
		t = self.line({"build": BUILT, "boot": dict(BOOTED, reproduced=True)},
			      {"build": BUILT, "boot": dict(BOOTED, reproduced=True)},
			      {"build": BUILT, "boot": dict(BOOTED, exercised=True)})
		self.assertEqual(t, "Found by nestsleep, a Coccinelle-based checker; reproduced in QEMU with "
				 "CONFIG_DEBUG_ATOMIC_SLEEP=y" + BY_HPET + " (2 of the 3 nested sleeps); exercised in QEMU with "
				 "CONFIG_DEBUG_ATOMIC_SLEEP=y, where the unpatched kernel did not warn (1 of 3).")

	def test_what_the_test_drove(self):
		"""A reproduction names what its exerciser drives (the '# drives:'
		line of kernel-boot/exercise/NAME.sh), not the exerciser."""
		t = self.line({"build": BUILT, "boot": dict(BOOTED, reproduced=True,
							  exerciser="kernel-boot/exercise/wiphy_unregister.sh")})
		self.assertIn("reproduced in QEMU with CONFIG_DEBUG_ATOMIC_SLEEP=y by a test that brings up a new "
			      "interface of a mac80211_hwsim radio while the radio is being deleted", t)
		self.assertNotIn("wiphy_unregister.sh", t)

	def test_missed_wakeup_is_not_reproduced_by_a_warning(self):
		"""A boot that warned shows the nested sleeps an exerciser drove, not
		a missed wakeup (the 6.1 reviewer of round 2 found 'reproduced' on
		the ACPI missed-wakeup patch false)."""
		rec = {"kind": "missed_wakeup", "build": BUILT,
		       "boot": dict(BOOTED, reproduced=True, warning_gone=True, baseline_hits=["x"])}
		t = self.line(rec)
		self.assertNotIn("reproduced", t)
		self.assertIn("a missed wakeup prints no warning", t)
		records = {"fp": dict(rec, function="f")}
		self.assertNotIn("warned", changelog_tested.tested_paragraph(["fp"], records))

	def test_missed_wakeup_status_claims_no_reproduction(self):
		"""The short statuses series.json and the triage index show."""
		b = dict(BOOTED, reproduced=True, warning_gone=True, baseline_hits=["x"])
		self.assertEqual(records.boot_status(b, "", "missed_wakeup"),
				 "compiled, booted (a missed wakeup prints no warning)")
		self.assertIn("reproduced", records.boot_status(b, ""))
		st = records.patch_status(["fp"], {"fp": {"kind": "missed_wakeup", "build": BUILT, "boot": b}})
		self.assertNotIn("reproduced", st)

	def test_no_tool_paths(self):
		for recs in (({"build": BUILT, "boot": dict(BOOTED, reproduced=True)},), ({},)):
			self.assertNotIn("/", self.line(*recs).replace("allmodconfig", ""))


class BelowDashesTest(unittest.TestCase):
	PATCH = ("From 1 Mon Sep 17 00:00:00 2001\nSubject: [PATCH] x: fix\n\nBody.\n---\n"
		 " drivers/x.c | 1 +\n 1 file changed\n\ndiff --git a/drivers/x.c b/drivers/x.c\n"
		 "--- a/drivers/x.c\n+++ b/drivers/x.c\n@@ -1 +1 @@\n-a\n+b\n-- \n2.39.5\n")

	def test_notes_go_after_the_dashes(self):
		out = changelog.below_dashes(self.PATCH, "Tested with kernel-boot/exercise/x.sh.")
		msg, rest = out.split("\n---\n", 1)
		self.assertEqual(msg, "From 1 Mon Sep 17 00:00:00 2001\nSubject: [PATCH] x: fix\n\nBody.")
		self.assertTrue(rest.startswith("Tested with kernel-boot/exercise/x.sh.\n\n drivers/x.c | 1 +\n"), rest)
		self.assertTrue(out.endswith(self.PATCH.split("\n---\n", 1)[1]))


# the shape of drivers/macintosh/via-pmu.c:2172 pmu_read() (6.1), and near
# misses: the state set again on each pass, a fault that ends the loop, a
# call with no guard on the value the loop tests
PMU = """static ssize_t x_read(struct file *file, char __user *buf, size_t count)
{
	int ret = 0;

	add_wait_queue(&pp->wait, &wait);
	set_current_state(TASK_INTERRUPTIBLE);

	for (;;) {
		ret = -EAGAIN;
		if (pp->rb_get != pp->rb_put) {
			ret = rp->len;
			if (ret > count)
				ret = count;
			if (ret > 0 && copy_to_user(buf, rp->data, ret))
				ret = -EFAULT;
			pp->rb_get = i;
		}
		if (ret >= 0)
			break;
		if (signal_pending(current))
			break;
		schedule();
	}
	__set_current_state(TASK_RUNNING);
	return ret;
}
"""


def pmu_variant(old, new):
	assert old in PMU
	return PMU.replace(old, new)


class FaultSpinTest(unittest.TestCase):
	CASES = {
		"x.c": (PMU, True),
		# set on each pass: a fault that slept is followed by a set state
		"reset.c": (pmu_variant("\t\tret = -EAGAIN;\n", "\t\tset_current_state(TASK_INTERRUPTIBLE);\n"
					"\t\tret = -EAGAIN;\n").replace("\tset_current_state(TASK_INTERRUPTIBLE);\n\n", "\n"),
			    False),
		# the fault leaves the loop
		"leaves.c": (pmu_variant("if (ret >= 0)\n\t\t\tbreak;", "if (ret != -EAGAIN)\n\t\t\tbreak;"), False),
		# no guard: success is not shown to leave the loop
		"noguard.c": (pmu_variant("ret > 0 && copy_to_user", "copy_to_user"), False),
		# ret written again between the call and the test
		"rewrite.c": (pmu_variant("\t\t\tpp->rb_get = i;\n", "\t\t\tret = 0;\n"), False),
	}

	def setUp(self):
		self.kdir = tree({"drivers/x/" + k: v[0] for k, v in self.CASES.items()})
		self.addCleanup(shutil.rmtree, self.kdir)

	def finding(self, name):
		lines = self.CASES[name][0].splitlines()
		return {"file": "drivers/x/" + name, "function": "x_read", "shape": "set_current_state",
			"primitive": "set_current_state", "call": "copy_to_user",
			"line": 1 + next(i for i, l in enumerate(lines) if "set_current_state(TASK_INTERRUPTIBLE)" in l),
			"call_line": 1 + next(i for i, l in enumerate(lines) if "copy_to_user(" in l)}

	def test_shape(self):
		for name, (text, want) in self.CASES.items():
			got = passes.fault_spin(self.kdir, self.finding(name))
			self.assertEqual(bool(got), want, (name, got))
		self.assertEqual(passes.fault_spin(self.kdir, self.finding("x.c")),
				 {"call": "copy_to_user", "var": "ret", "fail": "-EFAULT", "exit": "ret >= 0",
				  "set": "set_current_state"})

	def test_text(self):
		info = passes.fault_spin(self.kdir, self.finding("x.c"))
		t = " ".join(effect.effect_text("set_current_state", "warns", "1", None, passes=info).split())
		self.assertIn("copy_to_user() runs on the pass that ends the wait", t)
		self.assertIn("-EFAULT does not end the loop", t)
		self.assertIn("set_current_state() sets the task state only before the loop", t)
		self.assertIn("spins", t)
		self.assertNotIn("On a pass that does not end the wait", t)
		self.assertEqual(unquoted(t, "fault_spin"), [])


if __name__ == "__main__":
	unittest.main()
