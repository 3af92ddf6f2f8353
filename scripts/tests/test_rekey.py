# SPDX-License-Identifier: GPL-2.0-only
"""Tests for nestsleep.triage.rekey: labels and fix results follow a finding to its
new fingerprint at the same wait site, and nowhere else."""

import json
import os
import shutil
import subprocess
import tempfile
import unittest

from nestsleep.triage import rekey


def rec(fp, line, chain, fn="f", prim="wait_event", col=1):
	return {"fingerprint": fp, "file": "a.c", "line": line, "col": col, "colend": 9, "primitive": prim,
		"function": fn, "chain": chain}


class RekeyTest(unittest.TestCase):
	def setUp(self):
		self.tmp = tempfile.mkdtemp(prefix="nestsleep-rekey-")
		self.old = {"tree": "linux-6.12.1", "findings": [
			rec("aaaa", 10, ["g", "mutex_lock"]),        # same site, new chain: moves
			rec("bbbb", 20, ["h", "msleep"]),            # unchanged
			rec("cccc", 30, ["k", "read_unlock"]),       # no longer reported
			rec("dddd", 40, ["m", "down"], col=5)]}      # another column: not the same site
		self.new = {"tree": "linux-6.12.1", "findings": [
			rec("a2a2", 10, ["g", "down"]), rec("bbbb", 20, ["h", "msleep"]),
			rec("d2d2", 40, ["m", "down"], col=6)]}
		self.labels = {"labels": {fp: {"verdict": "true", "reason": fp} for fp in ("aaaa", "bbbb", "cccc", "dddd")}}
		os.makedirs(os.path.join(self.tmp, "fixes"))
		self.series = {"series": [{"patches": [{"fingerprints": ["aaaa", "bbbb"]}]}],
			       "report_only": [{"fingerprint": "aaaa"}]}
		self.boot = {"results": {"aaaa": {"status": "ok"}}}
		for name, data in (("old.json", self.old), ("new.json", self.new), ("labels.json", self.labels),
				   ("fixes/series.json", self.series), ("fixes/boottest.json", self.boot)):
			with open(os.path.join(self.tmp, name), "w") as f:
				json.dump(data, f)

	def tearDown(self):
		shutil.rmtree(self.tmp, ignore_errors=True)

	def run_rekey(self, *extra):
		p = lambda n: os.path.join(self.tmp, n)  # noqa: E731
		return subprocess.run(["/usr/bin/python3", "-m", "nestsleep", "rekey", "--old", p("old.json"),
				       "--new", p("new.json")] + list(extra), capture_output=True, text=True)

	def load(self, name):
		with open(os.path.join(self.tmp, name)) as f:
			return json.load(f)

	def test_mapping(self):
		self.assertEqual(rekey.mapping(self.old, self.new), {"aaaa": "a2a2"})

	def test_files(self):
		r = self.run_rekey("--labels", os.path.join(self.tmp, "labels.json"), "--fixes", os.path.join(self.tmp, "fixes"))
		self.assertEqual(r.returncode, 0, r.stderr)
		lab = self.load("labels.json")["labels"]
		self.assertEqual(sorted(lab), ["a2a2", "bbbb", "cccc", "dddd"])
		self.assertEqual(lab["a2a2"]["rekeyed_from"], "aaaa")
		self.assertIn("no longer reported: cccc dddd", r.stdout)
		s = self.load("fixes/series.json")
		self.assertEqual(s["series"][0]["patches"][0]["fingerprints"], ["a2a2", "bbbb"])
		self.assertEqual(s["report_only"][0]["fingerprint"], "a2a2")
		self.assertEqual(self.load("fixes/boottest.json")["results"], {"a2a2": {"status": "ok"}})

	def test_other_tree_refused(self):
		self.new["tree"] = "linux-6.1.1"
		with open(os.path.join(self.tmp, "new.json"), "w") as f:
			json.dump(self.new, f)
		r = self.run_rekey("--labels", os.path.join(self.tmp, "labels.json"))
		self.assertEqual(r.returncode, 2)
		self.assertIn("rekey works within one tree", r.stderr)
		self.assertNotIn("Traceback", r.stderr)
		self.assertEqual(sorted(self.load("labels.json")["labels"]), ["aaaa", "bbbb", "cccc", "dddd"])

	def test_missing_file(self):
		r = subprocess.run(["/usr/bin/python3", "-m", "nestsleep", "rekey", "--old", "/nonexistent.json",
				    "--new", os.path.join(self.tmp, "new.json")], capture_output=True, text=True)
		self.assertEqual(r.returncode, 2)
		self.assertIn("rekey: /nonexistent.json", r.stderr)


if __name__ == "__main__":
	unittest.main()
