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

Each run is measured with wait4() (wall, CPU, peak RSS over the process
tree): the nestsleep runs in a forked child that calls the pipeline, K under
/usr/bin/time -v.  Results: a table on stdout and reports/bench/<tree-id>.json.
"""

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

from nestsleep import TOP, ktree
from nestsleep.analysis import pipeline
from nestsleep.triage.treeid import tree_id


def measured(name, command, wall, cpu, rss_kib, rc, log=None):
	"""One run's record; with a log, the phase times of nestsleep's last line."""
	res = {"run": name, "wall_s": round(wall, 1), "cpu_s": round(cpu, 1), "peak_rss_mib": round(rss_kib / 1024, 1),
	       "exit": rc, "command": command}
	if log:
		# nestsleep's closing line gives the time of each phase
		with open(log, errors="replace") as f:
			tail = f.read().splitlines()[-1:] or [""]
		m = re.search(r"\(([a-z]+ [0-9.]+s(?:, [a-z]+ [0-9.]+s)*)\)\s*$", tail[0])
		if m:
			res["phases_s"] = {k: float(v) for k, v in re.findall(r"([a-z]+) ([0-9.]+)s", m.group(1))}
	print("bench: %s: %.1fs wall, %.1fs CPU, %.0f MiB peak, exit %d" % (
		name, wall, cpu, rss_kib / 1024, rc), file=sys.stderr, flush=True)
	return res


def timed(name, cmd, log=None):
	"""Run an outside command (the kernel's coccicheck) under /usr/bin/time -v."""
	tfile = tempfile.mktemp(prefix="nestsleep-time-")
	print("bench: %s: $ %s" % (name, " ".join(cmd)), file=sys.stderr, flush=True)
	t0 = time.time()
	with open(log or os.devnull, "w") as out:
		proc = subprocess.run(["/usr/bin/time", "-v", "-o", tfile] + cmd, stdout=out,
				      stderr=subprocess.STDOUT)
	wall = time.time() - t0
	with open(tfile) as f:
		tv = f.read()
	os.unlink(tfile)

	def field(label):
		m = re.search(r"^\s*%s:\s*(.*)$" % re.escape(label), tv, re.M)
		return m.group(1) if m else ""
	cpu = float(field("User time (seconds)") or 0) + float(field("System time (seconds)") or 0)
	rss = int(field("Maximum resident set size (kbytes)") or 0)
	return measured(name, " ".join(cmd), wall, cpu, rss, proc.returncode, log)


def timed_check(name, opts, log):
	"""Run the checker with Options opts in a forked child (stdout and
	stderr to log), measured as /usr/bin/time would: wait4()'s rusage
	covers the child and the workers it reaped."""
	command = "nestsleep coccicheck --kdir %s%s" % (opts.kdir, (" --m " + opts.m) if opts.m else "")
	print("bench: %s: %s" % (name, command), file=sys.stderr, flush=True)
	t0 = time.time()
	sys.stdout.flush()
	sys.stderr.flush()
	pid = os.fork()
	if pid == 0:
		rc = 1
		try:
			fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
			os.dup2(fd, 1)
			os.dup2(fd, 2)
			rc = pipeline.main(opts)
			sys.stdout.flush()
			sys.stderr.flush()
		finally:
			os._exit(rc)
	_, status, ru = os.wait4(pid, 0)
	wall = time.time() - t0
	rc = os.waitstatus_to_exitcode(status)
	return measured(name, command, wall, ru.ru_utime + ru.ru_stime, ru.ru_maxrss, rc, log)


def main(a):
	"""'nestsleep bench': a, the parsed command line (cli.py)."""
	a.out = a.out or os.path.join(TOP, "reports", "bench")
	kdir = os.path.realpath(a.kdir)
	if not os.path.isfile(os.path.join(kdir, "Makefile")):
		print("bench: no kernel tree at KDIR=%s" % a.kdir, file=sys.stderr)
		return 2
	tid = tree_id(kdir)
	shutil.rmtree(a.work, ignore_errors=True)
	os.makedirs(a.work)
	copy = os.path.join(a.work, "tree")
	print("bench: hard-linked copy of %s in %s" % (kdir, copy), file=sys.stderr, flush=True)
	err = ktree.scratch_copy(kdir, copy)
	if err:
		print("bench: " + err, file=sys.stderr)
		return 2
	cache = os.path.join(a.work, "cache")

	def opts(**kw):
		return pipeline.Options(kdir=copy, jobs=a.jobs, cache=cache, **kw)
	runs = []
	try:
		ajson = os.path.join(a.work, "A.json")
		runs.append(timed_check("A", opts(json=ajson), os.path.join(a.work, "A.log")))
		runs.append(timed_check("B", opts(), os.path.join(a.work, "B.log")))
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
		c = timed_check("C", opts(), os.path.join(a.work, "C.log"))
		c["edited"] = target
		runs.append(c)
		runs.append(timed_check("D", opts(m="drivers/md"), os.path.join(a.work, "D.log")))
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

