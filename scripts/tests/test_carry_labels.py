# SPDX-License-Identifier: GPL-2.0-only
"""Tests for nestsleep.triage.carry_labels: a verdict moves to a later tree only
when the code it read is the same."""

import json
import os
import subprocess
import tempfile
import unittest


SRC = """int helper(struct d *x)
{
	mutex_lock(&x->m);
	return 1;
}

int waiter(struct d *x)
{
	return wait_event_interruptible(x->wq, helper(x));
}
"""


class CarryTest(unittest.TestCase):
	def test_carry_labels_same_text_only(self):
		with tempfile.TemporaryDirectory() as d:
			k1, k2, k3 = (os.path.join(d, n) for n in ("old", "same", "changed"))
			for k, src in ((k1, SRC), (k2, "/* moved down */\n\n" + SRC),
				       (k3, SRC.replace("return 1;", "return x->ready;"))):
				os.makedirs(k)
				with open(os.path.join(k, "a.c"), "w") as f:
					f.write(src)

			def findings(path, shift):
				rec = {"fingerprint": "fp1", "file": "a.c", "line": 9 + shift, "function": "waiter",
				       "confidence": "high", "chain_locs": ["a.c:%d" % (3 + shift)]}
				with open(path, "w") as f:
					json.dump({"tree": "t", "findings": [rec]}, f)
			f1, f2, f3 = (os.path.join(d, n + ".json") for n in ("f1", "f2", "f3"))
			findings(f1, 0)
			findings(f2, 2)
			findings(f3, 0)
			l1 = os.path.join(d, "linux-1.json")
			with open(l1, "w") as f:
				json.dump({"labels": {"fp1": {"verdict": "true", "reason": "mutex in cond"}}}, f)
			for k, fj, want in ((k2, f2, True), (k3, f3, False)):
				l2 = os.path.join(d, "out-%s.json" % os.path.basename(k))
				r = subprocess.run(["/usr/bin/python3", "-m", "nestsleep", "carry-labels",
						    k1, k, f1, fj, l1, l2], capture_output=True, text=True)
				self.assertEqual(r.returncode, 0, r.stderr)
				with open(l2) as f:
					labels = json.load(f)["labels"]
				self.assertEqual("fp1" in labels, want, r.stdout)
				if want:
					self.assertEqual(labels["fp1"]["verdict"], "true")
					self.assertIn("a.c:11 waiter()", labels["fp1"]["site"])
				else:
					self.assertIn("review fp1 high a.c waiter() (changed)", r.stdout)


if __name__ == "__main__":
	unittest.main()
