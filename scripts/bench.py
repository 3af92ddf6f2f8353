#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-only
"""make bench: nestsleep's whole-tree speed against the kernel's own rule.

All runs use one scratch copy of KDIR (hard links, so it costs no space and
the user's tree is never touched), on the same machine, one after the
other, so the ratios hold on a noisy machine:

  A  nestsleep MODE=report, whole tree, cold (empty knowledge cache)
  B  the same, warm (nothing changed)
  C  warm, after editing one file that a finding's chain passes through
  D  M=drivers/md, warm
  K  the kernel's 'make coccicheck COCCI=scripts/coccinelle/locks/call_kern.cocci
     MODE=report' over the whole tree (intraprocedural, one level)

Each run is measured with /usr/bin/time -v (wall, CPU, peak RSS over the
process tree).  Results: a table on stdout and reports/bench/<tree-id>.json.
"""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PY = "/usr/bin/python3"

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from treeid import tree_id  # noqa: E402


def timed(name, cmd, env=None, cwd=None, log=None):
	"""Run cmd under /usr/bin/time -v; return the measurements."""
	tfile = tempfile.mktemp(prefix="nestsleep-time-")
	print("bench: %s: $ %s" % (name, " ".join(cmd)), file=sys.stderr, flush=True)
	t0 = time.time()
	with open(log or os.devnull, "w") as out:
		proc = subprocess.run(["/usr/bin/time", "-v", "-o", tfile] + cmd, stdout=out,
				      stderr=subprocess.STDOUT, env=env, cwd=cwd)
	wall = time.time() - t0
	with open(tfile) as f:
		tv = f.read()
	os.unlink(tfile)

	def field(label):
		m = re.search(r"^\s*%s:\s*(.*)$" % re.escape(label), tv, re.M)
		return m.group(1) if m else ""
	cpu = float(field("User time (seconds)") or 0) + float(field("System time (seconds)") or 0)
	rss = int(field("Maximum resident set size (kbytes)") or 0)
	res = {"run": name, "wall_s": round(wall, 1), "cpu_s": round(cpu, 1), "peak_rss_mib": round(rss / 1024, 1),
	       "exit": proc.returncode, "command": " ".join(cmd)}
	if log:
		# nestsleep's closing line gives the time of each phase
		with open(log, errors="replace") as f:
			tail = f.read().splitlines()[-1:] or [""]
		m = re.search(r"\(([a-z]+ [0-9.]+s(?:, [a-z]+ [0-9.]+s)*)\)\s*$", tail[0])
		if m:
			res["phases_s"] = {k: float(v) for k, v in re.findall(r"([a-z]+) ([0-9.]+)s", m.group(1))}
	print("bench: %s: %.1fs wall, %.1fs CPU, %.0f MiB peak, exit %d" % (
		name, wall, cpu, rss / 1024, proc.returncode), file=sys.stderr, flush=True)
	return res


def main(argv):
	ap = argparse.ArgumentParser()
	ap.add_argument("--kdir", required=True)
	ap.add_argument("-j", "--jobs", type=int, default=os.cpu_count() or 1)
	ap.add_argument("--work", default=os.path.join(os.environ.get(
		"NESTSLEEP_CACHE", os.path.expanduser("~/.cache/nestsleep")), "bench"))
	ap.add_argument("--out", default=os.path.join(TOP, "reports", "bench"))
	ap.add_argument("--skip-k", action="store_true", help="do not run the kernel's rule (K)")
	a = ap.parse_args(argv)
	kdir = os.path.realpath(a.kdir)
	if not os.path.isfile(os.path.join(kdir, "Makefile")):
		print("bench: no kernel tree at KDIR=%s" % a.kdir, file=sys.stderr)
		return 2
	tid = tree_id(kdir)
	shutil.rmtree(a.work, ignore_errors=True)
	os.makedirs(a.work)
	copy = os.path.join(a.work, "tree")
	print("bench: hard-linked copy of %s in %s" % (kdir, copy), file=sys.stderr, flush=True)
	subprocess.run(["cp", "-al", kdir, copy], check=True)
	cache = os.path.join(a.work, "cache")
	env = dict(os.environ, NESTSLEEP_CACHE=cache)
	tool = [PY, os.path.join(TOP, "scripts", "nestsleep.py"), "--kdir", copy, "-j", str(a.jobs)]
	runs = []
	try:
		ajson = os.path.join(a.work, "A.json")
		runs.append(timed("A", tool + ["--json", ajson], env, log=os.path.join(a.work, "A.log")))
		runs.append(timed("B", tool, env, log=os.path.join(a.work, "B.log")))
		with open(ajson) as f:
			findings = json.load(f)["findings"]
		target = None
		for fd in findings:
			if len(fd["chain"]) > 1:
				target = fd["file"]
				break
		if target is None and findings:
			target = findings[0]["file"]
		if target:
			# edit through a new file, so the hard link to the user's tree breaks
			p = os.path.join(copy, target)
			with open(p, "rb") as f:
				data = f.read()
			with open(p + ".tmp", "wb") as f:
				f.write(data + b"\n/* nestsleep bench: edited */\n")
			os.replace(p + ".tmp", p)
		c = timed("C", tool, env, log=os.path.join(a.work, "C.log"))
		c["edited"] = target
		runs.append(c)
		runs.append(timed("D", tool + ["--m", "drivers/md"], env, log=os.path.join(a.work, "D.log")))
		if not a.skip_k:
			runs.append(timed("K", ["make", "-C", copy, "coccicheck", "COCCI=scripts/coccinelle/locks/call_kern.cocci",
						"MODE=report", "J=%d" % a.jobs], log=os.path.join(a.work, "K.log")))
	finally:
		shutil.rmtree(copy, ignore_errors=True)
	by = {r["run"]: r for r in runs}
	ratios = {}
	if "K" in by and by["K"]["wall_s"]:
		for n in "ABCD":
			ratios["%s/K" % n] = round(by[n]["wall_s"] / by["K"]["wall_s"], 3)
	targets = {"A/K": 1.0, "B/K": 0.25, "C/K": 0.3}
	result = {"tree": tid, "kdir": kdir, "cores": os.cpu_count(), "jobs": a.jobs,
		  "date": time.strftime("%Y-%m-%d %H:%M:%S"), "runs": runs, "ratios": ratios,
		  "targets": {"A/K": "<= 1.0", "B/K": "<= 0.25", "C/K": "<= 0.3", "D": "<= 20 s", "peak": "<= 2048 MiB"},
		  "met": {k: ratios.get(k, 99) <= v for k, v in targets.items()}}
	result["met"]["D"] = by["D"]["wall_s"] <= 20
	result["met"]["peak"] = max(r["peak_rss_mib"] for r in runs if r["run"] != "K") <= 2048
	os.makedirs(a.out, exist_ok=True)
	out = os.path.join(a.out, tid + ".json")
	with open(out, "w") as f:
		json.dump(result, f, indent=1)
		f.write("\n")
	print("%-4s %9s %9s %10s %7s" % ("run", "wall s", "CPU s", "peak MiB", "vs K"))
	for r in runs:
		ratio = ratios.get("%s/K" % r["run"], "")
		print("%-4s %9.1f %9.1f %10.0f %7s" % (r["run"], r["wall_s"], r["cpu_s"], r["peak_rss_mib"], ratio))
	print("targets met: %s" % ", ".join("%s %s" % (k, "yes" if v else "NO") for k, v in result["met"].items()))
	print("written to %s" % os.path.relpath(out, TOP))
	return 0 if all(r["exit"] == 0 for r in runs) else 1


if __name__ == "__main__":
	sys.exit(main(sys.argv[1:]))
