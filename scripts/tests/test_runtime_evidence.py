# SPDX-License-Identifier: GPL-2.0-only
"""Runtime evidence in the triage reports and the changelogs (issue 18):
the reasons table, the evidence line, the quoted splat."""

import json
import os
import re
import unittest

from nestsleep import TOP
from nestsleep.series import effect
from nestsleep.series import changelog, changelog_tested, records
from nestsleep.triage import reports

SPLAT = ["do not call blocking ops when !TASK_RUNNING; state=1 set at [<(____ptrval____)>] hpet_read+0x8c/0x210",
	 "WARNING: CPU: 1 PID: 80 at kernel/sched/core.c:9944 __might_sleep+0x4d/0x60",
	 "Call Trace:", " <TASK>", " __might_fault+0x27/0x70", " hpet_read+0x179/0x210", " </TASK>"]


def true_sites():
	"""(tree, file, function) of every finding labelled true."""
	out = []
	for name in sorted(os.listdir(os.path.join(TOP, "reports", "labels"))):
		with open(os.path.join(TOP, "reports", "labels", name)) as f:
			labels = json.load(f)["labels"]
		for lab in labels.values():
			if lab.get("verdict") != "true":
				continue
			m = re.match(r"^(\S+?):\d+.*?\b(\w+)\(\)\s*$", lab["site"])
			out.append((name, m.group(1), m.group(2)))
	return out


class ReasonsTest(unittest.TestCase):

	def test_every_true_finding_has_an_exerciser_or_a_reason(self):
		"""Issue 18: each true finding is exercised in QEMU, or its reason is recorded."""
		reasons = reports.load_reasons()
		ex = reports.exerciser_files()
		missing = []
		for tree, path, fn in true_sites():
			r = {"file": path, "function": fn, "verdict": "true"}
			if path in ex:
				continue
			why = reports.runtime_reason(r, reasons, ex)
			if why.startswith("no exerciser yet"):
				missing.append("%s: %s %s()" % (tree, path, fn))
		self.assertEqual(missing, [])

	def test_reason_matching(self):
		reasons = [{"path": "drivers/media/pci/saa7164/", "reason": "needs a saa7164 PCI card"},
			   {"path": "drivers/tty/tty_port.c", "function": "tty_port_block_til_ready", "reason": "sdio_uart"}]
		r = {"file": "drivers/media/pci/saa7164/saa7164-vbi.c", "function": "fops_read"}
		self.assertEqual(reports.runtime_reason(r, reasons, set()), "needs a saa7164 PCI card")
		r = {"file": "drivers/tty/tty_port.c", "function": "tty_port_close", "paths": [{"effect": "warns"}]}
		self.assertTrue(reports.runtime_reason(r, reasons, set()).startswith("no exerciser yet"))
		r = {"file": "drivers/x/y.c", "function": "f", "paths": [{"effect": "silent"}, {"effect": "silent"}]}
		self.assertEqual(reports.runtime_reason(r, reasons, set()), reports.SILENT)
		r = {"file": "drivers/char/hpet.c", "function": "hpet_read",
		     "runtime": {"exerciser": "kernel-boot/exercise/hpet.sh", "reproduced": False, "baseline_tries": 5}}
		self.assertIn("did not warn in 5 boot(s)", reports.runtime_reason(r, reasons, {"drivers/char/hpet.c"}))

	def test_runtime_table(self):
		rt = {"exerciser": "kernel-boot/exercise/hpet.sh", "reproduced": True, "baseline_tries": 2,
		      "patched_tries": 2, "warning_gone": True, "splat": SPLAT}
		recs = [{"verdict": "true", "file": "drivers/char/hpet.c", "line": 303, "function": "hpet_read", "runtime": rt},
			{"verdict": "true", "file": "drivers/media/radio/radio-cadet.c", "line": 339, "function": "cadet_read",
			 "runtime_reason": "needs an ISA card"},
			{"verdict": "false-positive", "file": "a.c", "line": 1, "function": "a", "runtime_reason": "x"}]
		md = "\n".join(reports.runtime_md(recs))
		self.assertIn("| 2 | 1 | 1 | 1 |", md)
		self.assertIn("| `drivers/char/hpet.c:303` hpet_read() | `kernel-boot/exercise/hpet.sh` | 2 | warning gone (2 boot(s)) |", md)
		self.assertIn("| needs an ISA card | `radio-cadet.c` cadet_read() |", md)
		self.assertNotIn("a()", md)
		self.assertIn("**reproduced in QEMU**", reports.evidence_text(recs[0]))
		self.assertEqual(reports.evidence_text(recs[1]), "not reproduced: needs an ISA card")


class ChangelogSplatTest(unittest.TestCase):
	"""A changelog quotes a warning only when a boot printed it, and then that warning."""

	def records(self, **boot):
		return {"c164de450d66b8ed": {"function": "hpet_read", "boot": dict(boot)}}

	def test_quotes_the_recorded_splat(self):
		recs = self.records(reproduced=True, splat=SPLAT, exerciser="kernel-boot/exercise/hpet.sh",
				    baseline_hits=["do not call blocking ops in hpet_read"])
		effs = [{"shape": "after_loop", "how": "warns", "state": "1", "fingerprints": ["c164de450d66b8ed"]}]
		text = "\n\n".join(changelog.effect_paragraphs(effs, recs))
		# the exerciser's path is not in the kernel tree: it goes below '---'
		self.assertIn("with a test driving the wait", " ".join(text.split()))
		self.assertNotIn("kernel-boot/", text)
		self.assertIn("  do not call blocking ops when !TASK_RUNNING; state=1 set at", text)
		self.assertIn("   hpet_read+0x179/0x210", text)

	def test_quoted_splat_keeps_to_the_commit_log_width(self):
		"""Every line of the quote before the WARNING: line (where
		checkpatch's stack-dump allowance starts) is within 75 columns,
		and the changelog says the first line was wrapped."""
		recs = self.records(reproduced=True, splat=SPLAT, exerciser="kernel-boot/exercise/hpet.sh")
		effs = [{"shape": "after_loop", "how": "warns", "state": "1", "fingerprints": ["c164de450d66b8ed"]}]
		text = "\n\n".join(changelog.effect_paragraphs(effs, recs))
		block = effect.splat_block({"splat": SPLAT})
		head = block.split("WARNING:")[0].splitlines()
		self.assertTrue(all(len(x) <= 75 for x in head), head)
		self.assertEqual(head[1], "  [<(____ptrval____)>] hpet_read+0x8c/0x210")
		self.assertIn("its first line wrapped", " ".join(text.split()))

	def test_no_splat_no_quote(self):
		recs = self.records(reproduced=False, exerciser="kernel-boot/exercise/hpet.sh")
		effs = [{"shape": "after_loop", "how": "warns", "state": "1", "fingerprints": ["c164de450d66b8ed"]}]
		text = "\n\n".join(changelog.effect_paragraphs(effs, recs))
		self.assertIn("no boot has printed it here", " ".join(text.split()))
		self.assertNotIn("Call Trace", text)
		self.assertIsNone(effect.splat_block("do not call blocking ops in hpet_read"))

	def test_tested_paragraph_per_wait(self):
		"""A function with two waits, one reproduced, one not: both are said."""
		gone = {"build": "ok", "boot": "ok", "status": "ok", "applied_after": [], "exercised": True,
			"reproduced": True, "warning_gone": True, "exerciser": "kernel-boot/exercise/acpi_dbg.sh"}
		quiet = dict(gone, reproduced=False, warning_gone=False, baseline_hits=[], patched_hits=[])
		recs = {"a": {"function": "acpi_aml_read", "boot": dict(gone, function="acpi_aml_read")},
			"b": {"function": "acpi_aml_release", "boot": dict(gone, function="acpi_aml_release")},
			"c": {"function": "acpi_aml_release", "boot": dict(quiet, function="acpi_aml_release")}}
		t = changelog_tested.tested_paragraph(["a", "b", "c"], recs)
		self.assertIn("with the patch on top of the unpatched tree:", t)
		self.assertIn("acpi_aml_read(), acpi_aml_release() (wait 1 of 2): reproduced in QEMU", t)
		self.assertIn("acpi_aml_release() (wait 2 of 2): exercised (kernel-boot/exercise/acpi_dbg.sh), but the "
			      "unpatched kernel did not warn there either", t)
		self.assertNotIn("one function's rewrite at a time", t)

	def test_not_patched_exerciser_claims_nothing_for_the_patch(self):
		b = {"build": "ok", "boot": "ok", "status": "ok", "applied_after": [], "exercised": False,
		     "reproduced": True, "warning_gone": False, "baseline_tries": 1,
		     "baseline_hits": ["do not call blocking ops in wpan_phy_unregister"],
		     "exerciser": "kernel-boot/exercise/wpan_phy_unregister.sh",
		     "not_patched": "ending the wait crashes the patched kernel too"}
		s = changelog_tested.boot_sentence(b)
		self.assertIn("cannot run on the patched kernel (ending the wait crashes", s)
		self.assertNotIn("the patched kernel did not", s)
		self.assertNotIn("warning gone", records.boot_status(b, ""))

	def test_evidence_line_picks_the_phase_of_the_function(self):
		out = ["# write: input ring filled with 3561 more bytes",
		       "# write: blocked 646 ms, then wrote 4096 of 4096 bytes",
		       "# kernel warned with acpi_aml_write in the trace: no",
		       "# release: 88 closes during queued commands, 3 returned in < 100 ms; close took 1.3..108.6 ms"]
		self.assertEqual(changelog_tested.evidence_line({"function": "acpi_aml_write", "patched_output": out}),
				 "write: blocked 646 ms, then wrote 4096 of 4096 bytes")
		self.assertTrue(changelog_tested.evidence_line({"function": "acpi_aml_release", "patched_output": out}).startswith("release: 88"))
		self.assertIsNone(changelog_tested.evidence_line({"function": "acpi_aml_read", "patched_output": out}))
		self.assertEqual(changelog_tested.evidence_line({"function": "hpet_read", "patched_output": [
			"# read 1: 8 bytes, 1 interrupt(s), blocked 83.8 ms", "# 3 of 3 reads blocked and returned data"]}),
				 "3 of 3 reads blocked and returned data")

	def test_boot_sentence_warning_gone(self):
		b = {"build": "ok", "boot": "ok", "status": "ok", "applied_after": [], "exercised": True,
		     "reproduced": True, "warning_gone": True, "baseline_tries": 1, "patched_tries": 1,
		     "exerciser": "kernel-boot/exercise/hpet.sh", "patched_output": ["3 of 3 reads blocked and returned data"]}
		s = changelog_tested.boot_sentence(b)
		self.assertIn("the unpatched kernel warned in its boot 1", s)
		self.assertIn("(3 of 3 reads blocked and returned data)", s)
		self.assertEqual(records.boot_status(b, ""), "compiled, booted, reproduced, exercised: warning gone")
		b2 = dict(b, warning_gone=False, patched_hits=[], exercised=False)
		self.assertIn("not shown to have run", changelog_tested.boot_sentence(b2))


if __name__ == "__main__":
	unittest.main()
