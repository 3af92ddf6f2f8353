# SPDX-License-Identifier: GPL-2.0-only
"""make bench's arithmetic: the tree's size, the cost per MLOC, the targets."""

import os
import tempfile
import unittest

from nestsleep import bench


def run(name, wall, cpu=None, rss=100.0):
	return {"run": name, "wall_s": wall, "cpu_s": wall if cpu is None else cpu, "peak_rss_mib": rss, "exit": 0}


class MlocTest(unittest.TestCase):
	def test_counts_c_and_h_lines_only_outside_hidden_dirs(self):
		with tempfile.TemporaryDirectory() as d:
			os.makedirs(os.path.join(d, "a", ".git"))
			with open(os.path.join(d, "a", "x.c"), "w") as f:
				f.write("int a;\nint b;\n")
			with open(os.path.join(d, "a", "y.h"), "w") as f:
				f.write("int c;")          # no final newline: still a line
			with open(os.path.join(d, "a", "z.S"), "w") as f:
				f.write("nop\n" * 10)
			with open(os.path.join(d, "a", ".git", "w.c"), "w") as f:
				f.write("int d;\n" * 10)
			self.assertEqual(bench.source_lines(d), 3)


class CostTest(unittest.TestCase):
	def test_cost_per_mloc_of_each_run(self):
		res = {"tree": "linux-x", "source_lines": 2000000,
		       "runs": [run("A", 100.0, 180.0), run("B", 4.0), run("K", 200.0, 390.0)]}
		cost = bench.per_mloc(res)
		self.assertEqual(cost["A"], {"wall_s": 50.0, "cpu_s": 90.0})
		self.assertEqual(cost["K"], {"wall_s": 100.0, "cpu_s": 195.0})
		self.assertEqual(cost["B"]["wall_s"], 2.0)

	def test_growth_line_compares_the_trees(self):
		small = {"tree": "linux-6.1", "source_lines": 2000000, "runs": [run("A", 100.0), run("K", 200.0)]}
		big = {"tree": "linux-6.12", "source_lines": 2500000, "runs": [run("A", 150.0), run("K", 240.0)]}
		for r in (small, big):
			r["per_mloc"] = bench.per_mloc(r)
		line = bench.cost_line([small, big])
		self.assertIn("cost per MLOC", line)
		self.assertIn("linux-6.1 2.00 MLOC", line)
		self.assertIn("A 50.0 s", line)
		self.assertIn("K 96.0 s", line)
		# 6.12 is 1.25x the lines; A grows 1.5x, K 1.2x
		self.assertIn("x1.25 lines", line)
		self.assertIn("A x1.50", line)
		self.assertIn("K x1.20", line)


class TargetsTest(unittest.TestCase):
	def test_targets_of_issue_35(self):
		runs = [run("A", 100.0, rss=900.0), run("B", 6.0), run("C", 12.0), run("D", 3.0), run("K", 200.0, rss=50.0)]
		met = bench.targets_met(runs)
		self.assertEqual(met, {"A/K": True, "B/K": True, "C/K": True, "D": True, "peak": True})
		runs[0]["wall_s"] = 101.0          # A/K 0.505 > 0.5
		runs[1]["wall_s"] = 6.1            # B/K 0.0305 > 0.03
		runs[2]["peak_rss_mib"] = 1025.0   # over 1 GiB
		met = bench.targets_met(runs)
		self.assertFalse(met["A/K"])
		self.assertFalse(met["B/K"])
		self.assertTrue(met["C/K"])
		self.assertFalse(met["peak"])


if __name__ == "__main__":
	unittest.main()
