#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-only
"""Compile every patch that MODE=patch generates for a tree.

  compile_patches.py --kdir K [--json FINDINGS] [--out RESULT.json] [--only UNIT]

For each patch (one per fixed function): in a scratch hard-link copy of
KDIR, compile the touched objects with sparse (C=2) before the patch, apply
the patch, compile them again, compare the sparse warnings, and revert.  The
build directory is an x86_64 allmodconfig (CONFIG_WERROR=y there, so a new
compiler warning fails the build), cached under
~/.cache/nestsleep/compile-all/.  An object that x86_64 does not build
(powerpc-only drivers) is compiled in a powerpc allmodconfig with Debian's
gcc-powerpc64-linux-gnu instead.  KDIR itself is only read; GNU patch writes
a new file and renames it, so the hard links to KDIR are broken, not written
through (checked before every run).

Each make runs under flock ~/.cache/nestsleep/kbuild.lock, so that it does
not compete with another kernel build of this project.
"""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time

from nestsleep import cache_dir, ktree
from nestsleep.analysis import pipeline

CACHE = cache_dir()
LOCK = os.path.join(CACHE, "kbuild.lock")


class Fail(Exception):
	pass


def log(msg):
	print("compile_patches: " + msg, file=sys.stderr, flush=True)


def run(cmd, cwd=None, timeout=3600, lock=False, inp=None):
	if lock:
		cmd = ["flock", LOCK] + cmd
	log("$ " + " ".join(cmd))
	return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout, input=inp)


# An object that x86_64 allmodconfig does not build (via-pmu, ibmvmc and
# ocxl depend on powerpc platforms) is compiled with Debian's cross
# compiler in a powerpc allmodconfig instead.
CROSS = {"powerpc": "powerpc64-linux-gnu-"}


def arch_flags(arch):
	return ["ARCH=" + arch, "CROSS_COMPILE=" + CROSS[arch]] if arch else []


def make(build, tree, target, extra=(), timeout=3600, arch=None):
	return run(["make", "-C", tree, "O=" + build, "-j%d" % (os.cpu_count() or 1)] + arch_flags(arch) +
		   list(extra) + [target], lock=True, timeout=timeout)


def scratch_tree(kdir, root):
	tree = os.path.join(root, "tree")
	os.makedirs(root, exist_ok=True)
	if os.path.isdir(tree):
		shutil.rmtree(tree)
	err = ktree.scratch_copy(kdir, tree)
	if err:
		raise Fail(err)
	return tree


def prepare(tree, build, arch=None):
	os.makedirs(build, exist_ok=True)
	if not os.path.isfile(os.path.join(build, ".config")):
		r = make(build, tree, "allmodconfig", arch=arch)
		if r.returncode != 0:
			raise Fail("allmodconfig failed:\n" + r.stdout[-2000:] + r.stderr[-2000:])
	t = time.time()
	r = make(build, tree, "modules_prepare", arch=arch)
	if r.returncode != 0:
		raise Fail("modules_prepare failed:\n" + r.stdout[-2000:] + r.stderr[-3000:])
	return time.time() - t


SPARSE_RE = re.compile(r"^(\S+?):\d+:\d+: (warning|error): (.*)$")


def compile_obj(tree, build, obj, arch=None):
	"""(status, sparse warnings as a sorted list without line numbers, log)."""
	r = make(build, tree, obj, ["C=2"], timeout=1800, arch=arch)
	out = r.stdout + r.stderr
	if r.returncode != 0:
		if re.search(r"No rule to make target '%s'" % re.escape(obj), out):
			return "not-built", [], out[-1500:]
		return "failed", [], out[-3000:]
	warns = sorted(set("%s: %s: %s" % (m.group(1), m.group(2), m.group(3))
			   for m in map(SPARSE_RE.match, out.splitlines()) if m))
	return "ok", warns, ""


def main(argv):
	ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
	ap.add_argument("--kdir", required=True)
	ap.add_argument("--json", default="", help="findings JSON from 'nestsleep.py --mode patch --json'")
	ap.add_argument("--out", default="", help="write the results here")
	ap.add_argument("--only", default="", help="only units whose name contains this")
	a = ap.parse_args(argv)
	kdir = os.path.realpath(a.kdir)
	if not os.path.isfile(os.path.join(kdir, "Makefile")):
		log("error: no kernel tree at KDIR=%s" % a.kdir)
		return 2
	for tool in ("make", "gcc", "sparse", "patch", "flock"):
		if shutil.which(tool) is None:
			log("error: %s not found; run 'make setup'" % tool)
			return 2
	if not a.json:
		a.json = os.path.join(CACHE, "compile-all", "findings.json")
		os.makedirs(os.path.dirname(a.json), exist_ok=True)
		opts = pipeline.Options(kdir=kdir, mode="patch", json=a.json, confidence="low")
		try:
			res = pipeline.check(opts)
		except pipeline.UserError as e:
			log("error: nestsleep failed: %s" % e)
			return 2
		with open(a.json, "w") as f:
			json.dump(res.as_json(opts), f, indent=1)
	with open(a.json) as f:
		data = json.load(f)
	units = {}
	for fd in data["findings"]:
		fx = fd.get("fix") or {}
		if fx.get("status") == "patch" and (not a.only or a.only in fx["unit"]):
			units.setdefault(fx["unit"], {"diff": fx["diff"], "files": fx["files"], "fingerprints": []})
			units[fx["unit"]]["fingerprints"].append(fd["fingerprint"])
	root = os.path.join(CACHE, "compile-all")
	try:
		tree = scratch_tree(kdir, root)
		build = os.path.join(root, "build-x86_64-allmodconfig")
		t_prep = prepare(tree, build)
	except (Fail, subprocess.TimeoutExpired) as e:
		log("error: %s" % e)
		return 1
	cross = {}

	def cross_build(arch):
		"""The arch's allmodconfig build directory, prepared on first use;
		None when its cross compiler is not installed."""
		if arch not in cross:
			cross[arch] = None
			if shutil.which(CROSS[arch] + "gcc"):
				b = os.path.join(root, "build-%s-allmodconfig" % arch)
				try:
					log("preparing %s allmodconfig (%.0fs)" % (arch, prepare(tree, b, arch)))
					cross[arch] = b
				except (Fail, subprocess.TimeoutExpired) as e:
					log("error: %s" % e)
		return cross[arch]

	results = []
	for name in sorted(units):
		u = units[name]
		objs = [f[:-2] + ".o" for f in u["files"] if f.endswith(".c")]
		rec = {"unit": name, "fingerprints": u["fingerprints"], "objects": objs, "status": "ok",
		       "details": {}}
		t0 = time.time()
		before = {}
		where = {}
		for o in objs:
			st, w, out = compile_obj(tree, build, o)
			where[o] = (build, None)
			if st != "ok":
				for arch in sorted(CROSS):
					b = cross_build(arch)
					if b:
						st, w, out = compile_obj(tree, b, o, arch)
						if st == "ok":
							where[o] = (b, arch)
							break
			before[o] = (st, w)
		r = run(["patch", "-p1", "--no-backup-if-mismatch", "-s"], cwd=tree, inp=u["diff"])
		if r.returncode != 0:
			rec["status"] = "does-not-apply"
			rec["details"]["patch"] = (r.stdout + r.stderr)[-1500:]
			results.append(rec)
			continue
		# patch writes a new file and renames it: KDIR's copy must be untouched
		for f in u["files"]:
			if os.stat(os.path.join(tree, f)).st_nlink > 1:
				log("error: %s is still a hard link to KDIR after patching" % f)
				return 1
		try:
			for o in objs:
				st0, w0 = before[o]
				if st0 == "not-built":
					rec["details"][o] = "not built by x86_64 allmodconfig, nor by %s allmodconfig with " \
						"%s" % (", ".join(sorted(CROSS)), " or ".join(
							v + "gcc" + ("" if shutil.which(v + "gcc") else " (not installed)")
							for v in CROSS.values()))
					if rec["status"] == "ok":
						rec["status"] = "not-built"
					continue
				if st0 != "ok":
					# Kconfig keeps it out of an x86_64 build (ocxl, via-pmu are
					# powerpc-only): nothing to compare against here
					rec["details"][o] = "the unpatched object does not build in x86_64 allmodconfig either"
					rec["status"] = "not-built"
					continue
				b, arch = where[o]
				st, w, out = compile_obj(tree, b, o, arch)
				if st != "ok":
					rec["status"] = "failed"
					rec["details"][o] = out
					continue
				new = [x for x in w if x not in w0]
				if new:
					rec["status"] = "new-sparse-warnings"
					rec["details"][o] = new
				else:
					rec["details"][o] = "compiled (-Werror)%s, no new sparse warnings (%d before, %d after)" % (
						" for %s with %sgcc" % (arch, CROSS[arch]) if arch else "", len(w0), len(w))
		finally:
			r = run(["patch", "-p1", "-R", "--no-backup-if-mismatch", "-s"], cwd=tree, inp=u["diff"])
			if r.returncode != 0:
				log("error: cannot revert %s; the scratch tree is rebuilt on the next run" % name)
				shutil.rmtree(tree, ignore_errors=True)
				return 1
		rec["seconds"] = round(time.time() - t0, 1)
		results.append(rec)
		log("%s: %s (%.0fs)" % (name, rec["status"], rec["seconds"]))
	summary = {}
	for r in results:
		summary[r["status"]] = summary.get(r["status"], 0) + 1
	out = {"kdir": kdir, "config": "x86_64 allmodconfig (CONFIG_WERROR=y), sparse C=2; objects it does not "
	       "build: %s allmodconfig with the cross compiler" % ", ".join(sorted(CROSS)),
	       "prepare_s": round(t_prep, 1), "summary": summary, "results": results}
	if a.out:
		with open(a.out + ".tmp", "w") as f:
			json.dump(out, f, indent=1)
		os.replace(a.out + ".tmp", a.out)
	for r in results:
		print("%-70s %s" % (r["unit"], r["status"]))
	print("summary: " + ", ".join("%d %s" % (n, k) for k, n in sorted(summary.items())))
	return 0 if all(r["status"] in ("ok", "not-built") for r in results) else 1


if __name__ == "__main__":
	sys.exit(main(sys.argv[1:]))
