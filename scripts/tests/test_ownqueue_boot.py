# SPDX-License-Identifier: GPL-2.0-only
"""Tests for scripts/dev/boot_ownqueue.py, the boot check of the
own-queue form on rfcomm and hidp: its verdicts over real console logs
(kernel-boot/test_data/real_ownqueue_{before,after}_tcg.log, captured by
the check) and a derived one where rmmod rfcomm never returns.  No kernel
is built or booted here."""

import os
import shutil
import subprocess
import tempfile
import unittest

from nestsleep import TOP
from dev import boot_ownqueue as cob

DATA = os.path.join(TOP, "kernel-boot", "test_data")


def log(name):
	with open(os.path.join(DATA, name), encoding="utf-8", errors="replace") as f:
		return f.readlines()


def failed(checks):
	return [n for n, ok, _ in checks if not ok]


class JudgeTest(unittest.TestCase):
	def test_before_warns_through_rfcomm_run_and_unloads(self):
		checks, m = cob.judge("before", log("real_ownqueue_before_tcg.log"))
		self.assertEqual(failed(checks), [])
		self.assertEqual([(s["title"], s["through_rfcomm_run"], s["set_at"]) for s in m["splats"]],
				 [("do not call blocking ops in rfcomm_run", True, "rfcomm_run+0x129/0x1039")])
		self.assertEqual(sorted(m["cases"]), sorted(cob.CASES))
		self.assertIn("S (sleeping)", " ".join(m["cases"]["krfcommd_sleeps"]["diagnostics"]))

	def test_excerpt_keeps_the_trace_not_the_registers(self):
		_, m = cob.judge("before", log("real_ownqueue_before_tcg.log"))
		text = "\n".join(m["splats"][0]["excerpt"])
		self.assertIn("do not call blocking ops when !TASK_RUNNING; state=1 set at", text)
		self.assertIn("rfcomm_run+0x154/0x1039 [rfcomm]", text)
		self.assertIn("Comm: krfcommd", text)
		self.assertNotIn("RAX:", text)
		self.assertNotIn("Code:", text)

	def test_after_is_quiet_and_unloads(self):
		checks, m = cob.judge("after", log("real_ownqueue_after_tcg.log"))
		self.assertEqual(failed(checks), [])
		self.assertEqual(m["splats"], [])
		self.assertEqual(m["status"], "SUCCESS")

	def test_a_warning_after_the_fix_fails(self):
		# the before log read as an after form: the splat must count against it
		checks, _ = cob.judge("after", log("real_ownqueue_before_tcg.log"))
		self.assertEqual(failed(checks), ["after/quiet"])

	def test_no_warning_before_the_fix_fails(self):
		# the after log read as a before form: the check did not see the bug
		checks, _ = cob.judge("before", log("real_ownqueue_after_tcg.log"))
		self.assertEqual(failed(checks), ["before/warns"])

	def test_rmmod_that_does_not_return_fails(self):
		checks, _ = cob.judge("after", log("derived_ownqueue_rmmod_stuck.log"))
		self.assertEqual(failed(checks), ["after/rmmod_rfcomm"])
		detail = dict((n, d) for n, _, d in checks)["after/rmmod_rfcomm"]
		self.assertIn("still running after 20 s", detail)

	def test_a_log_that_stops_fails_booted_and_every_later_case(self):
		lines = log("real_ownqueue_after_tcg.log")
		cut = next(i for i, l in enumerate(lines) if "rmmod rfcomm:" in l)
		checks, _ = cob.judge("after", lines[:cut])
		self.assertEqual(failed(checks), ["after/booted", "after/rmmod_rfcomm", "after/rmmod_hidp",
						  "after/rmmod_bluetooth"])


class GuestScriptTest(unittest.TestCase):
	@unittest.skipUnless(shutil.which("busybox"), "busybox missing")
	def test_guest_script_parses_in_busybox_sh(self):
		with tempfile.NamedTemporaryFile("w", suffix=".sh") as f:
			f.write(cob.GUEST_SCRIPT.replace("@BOUND@", str(cob.RMMOD_BOUND)))
			f.flush()
			p = subprocess.run(["busybox", "sh", "-n", f.name], capture_output=True, text=True)
		self.assertEqual((p.returncode, p.stderr), (0, ""))

	def test_guest_script_plans_one_result_per_case(self):
		self.assertIn('echo "1..%d"' % len(cob.CASES), cob.GUEST_SCRIPT)
		for case in cob.CASES:
			self.assertIn(" %s\n" % case, cob.GUEST_SCRIPT)


if __name__ == "__main__":
	unittest.main()
