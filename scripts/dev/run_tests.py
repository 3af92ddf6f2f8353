#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-only
"""nestsleep's test runner ('make check').

Tests are found from their expected-output files, as in Coccinelle's own
test suite:

  fixtures/report/NAME.report   expected report lines for NAME.c (copied
                                alone into an empty tree) or for the tree
                                NAME/; NAME_failure.* are known limitations
  scripts/test_*.py, kernel-boot/test_*.py
                                unit tests (unittest), one result per test
  fixtures/patch/NAME.res       expected C after MODE=patch on NAME.c (or
                                NAME.res/ for the tree NAME/); the patched
                                code must give an empty second MODE=patch,
                                keep only the unpatched findings, and pass
                                the kernel's checkpatch.pl.  NAME.json, when
                                there: "external": run as an external module
                                (KDIR= the cached tree, an absolute M=);
                                "fix": {function: [status, phrase]}, the fix
                                status of each finding and a phrase of its
                                reason or caveats
  fixtures/realtree/*.json      checks on the real linux-source-6.1 tree
  scripts/dev/check_*.py, kernel-boot/check_*.py
                                slow checks (patch fixtures, compile, boot):
                                programs that print KTAP-style result lines,
                                'ok N - NAME' or 'not ok N - NAME [# SKIP why]'
                                and exit 0; each line is one result

Every test runs under a time limit.  The run ends with 'N known failures'
and 'N passed, N failed, N skipped': a NAME_failure fixture that fails is a
known failure (not a pass); one that passes counts as failed until renamed.
"""

import argparse
import difflib
import glob
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

from nestsleep import TOP, cache_dir, ktree
from nestsleep.triage import treeid

PY = "/usr/bin/python3"
CACHE = cache_dir()
KTREE = os.path.join(CACHE, "linux-source-6.1")
FIXTURE_TIMEOUT = 120


class Results:
	"""Every result, counted once: passed, failed, skipped, and known
	failures (NAME_failure fixtures, as Coccinelle's SCORE_expected).  A
	known failure that fails is not a pass; one that passes counts as
	failed until it is renamed."""

	def __init__(self, out=None):
		self.out = out or sys.stdout
		self.passed, self.failed, self.skipped, self.known, self.fixed = [], [], [], [], []

	def say(self, text):
		print(text, file=self.out, flush=True)

	def add(self, name, ok, secs, detail="", known=False):
		if known and ok:
			self.fixed.append(name)
			self.failed.append(name)
			tag = "FAIL (marked _failure, but passed: rename it)"
		elif known:
			self.known.append(name)
			tag = "KNOWN TO FAIL"
		elif ok:
			self.passed.append(name)
			tag = "ok"
		else:
			self.failed.append(name)
			tag = "FAIL"
		self.say("%-58s %s (%.1fs)" % (name, tag, secs))
		if detail and (not ok or known or name.startswith("realtree/")):
			for line in detail.rstrip().splitlines()[:40]:
				self.say("    " + line)

	def skip(self, name, why):
		self.skipped.append(name)
		self.say("%-58s SKIP (%s)" % (name, why))

	def summary(self):
		"""The closing lines: the lists, the known failures, then the counts."""
		lines = []
		if self.fixed:
			lines.append("marked _failure, but did not fail (rename them): %s" % ", ".join(self.fixed))
		if self.failed:
			lines.append("failed: %s" % ", ".join(self.failed))
		lines.append("%d known failures%s" % (len(self.known), (": " + ", ".join(self.known)) if self.known else ""))
		lines.append("%d passed, %d failed, %d skipped" % (len(self.passed), len(self.failed), len(self.skipped)))
		return lines


def run_tool(kdir, extra=(), timeout=FIXTURE_TIMEOUT, cache=None):
	env = dict(os.environ, NESTSLEEP_CACHE=cache or os.path.join(CACHE, "test-cache"))
	# the command line itself, as 'make coccicheck' runs it
	cmd = [PY, "-m", "nestsleep", "coccicheck", "--kdir", kdir, "-j", "2"] + list(extra)
	return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)


def fixture_selected(kind, name, only):
	"""--only X selects a fixture by its results' names (kind/NAME, and
	kind/NAME/check for the results under it), as it selects unit tests
	by theirs."""
	full = "%s/%s" % (kind, name)
	return not only or only in full or only.startswith(full + "/")


def report_fixtures(res, only):
	for exp in sorted(glob.glob(os.path.join(TOP, "fixtures", "report", "*.report"))):
		name = os.path.basename(exp)[:-len(".report")]
		if not fixture_selected("report", name, only):
			continue
		base = exp[:-len(".report")]
		known = name.endswith("_failure")
		t = time.time()
		tmp = None
		try:
			if os.path.isdir(base):
				kdir = base
			elif os.path.isfile(base + ".c"):
				tmp = tempfile.mkdtemp(prefix="nestsleep-fx-")
				shutil.copy(base + ".c", tmp)
				kdir = tmp
			else:
				res.add("report/" + name, False, 0, "no %s.c or %s/ for %s" % (name, name, exp))
				continue
			proc = run_tool(kdir)
			with open(exp) as f:
				want = sorted(l.rstrip("\n") for l in f if l.strip())
			got = sorted(l for l in proc.stdout.splitlines() if l.strip())
			ok = proc.returncode == 0 and want == got and "Traceback" not in proc.stderr
			detail = ""
			if not ok:
				missing = [l for l in want if l not in got]
				extra = [l for l in got if l not in want]
				detail = "exit %d\n" % proc.returncode
				detail += "".join("missing: %s\n" % l for l in missing)
				detail += "".join("unexpected: %s\n" % l for l in extra)
				if proc.returncode != 0 or "Traceback" in proc.stderr:
					detail += proc.stderr[-2000:]
			res.add("report/" + name, ok, time.time() - t, detail, known)
		except subprocess.TimeoutExpired:
			res.add("report/" + name, False, time.time() - t, "timed out", known)
		finally:
			if tmp:
				shutil.rmtree(tmp, ignore_errors=True)


# Unit tests live next to the code they test.
UNIT_DIRS = ("scripts/tests", "kernel-boot")


CHECKPATCH_IGNORE = ("Missing commit description", "Missing Signed-off-by", "No Signed-off-by",
		     "added, moved or deleted file(s), does MAINTAINERS need updating")


def checkpatch(diff):
	"""checkpatch.pl --strict of the cached 6.1 tree on a bare diff, with
	the 80 columns of coding-style.rst: its complaints, or None when the
	tree is not there."""
	r = ktree.checkpatch(KTREE, text=diff, timeout=120, max_line=80, strict=True)
	if not r.ran:
		return None
	return [b for b in r.blocks() if not any(x in b.splitlines()[0] for x in CHECKPATCH_IGNORE)]


def patch_fixtures(res, only):
	for exp in sorted(glob.glob(os.path.join(TOP, "fixtures", "patch", "*.res"))):
		name = os.path.basename(exp)[:-len(".res")]
		if not fixture_selected("patch", name, only):
			continue
		base = exp[:-len(".res")]
		known = name.endswith("_failure")
		tmp = tempfile.mkdtemp(prefix="nestsleep-px-")
		t = time.time()
		try:
			tree = os.path.join(tmp, "tree")
			if os.path.isdir(base):
				shutil.copytree(base, tree)
			else:
				os.mkdir(tree)
				shutil.copy(base + ".c", tree)
			spec = {}
			if os.path.isfile(base + ".json"):
				with open(base + ".json") as f:
					spec = json.load(f)
			if spec.get("external"):
				# an external module: KDIR= the cached tree, an absolute M=
				if not os.path.isfile(os.path.join(KTREE, "Makefile")):
					res.add("patch/" + name, False, 0, "no kernel tree at %s (run make setup)" % KTREE, known)
					continue

				def tool(extra, tree=tree):
					return run_tool(KTREE, ["--m", tree] + extra, timeout=spec.get("timeout", 900), cache=CACHE)
			else:
				def tool(extra, tree=tree):
					return run_tool(tree, extra)
			j1 = os.path.join(tmp, "first.json")
			# every rewrite the fixture tests, whatever its confidence
			p1 = tool(["--mode", "patch", "--confidence", "low", "--json", j1])
			if p1.returncode != 0 or "Traceback" in p1.stderr:
				res.add("patch/" + name, False, time.time() - t, p1.stderr[-3000:], known)
				continue
			ap = subprocess.run(["patch", "-p1", "--no-backup-if-mismatch", "-s"], input=p1.stdout, cwd=tree,
					    capture_output=True, text=True)
			detail = ""
			if ap.returncode != 0:
				detail = "patch -p1 failed:\n" + ap.stdout + ap.stderr
			else:
				if os.path.isdir(exp):
					pairs = [(os.path.join(exp, r), os.path.join(tree, r))
						 for r in sorted(os.listdir(exp))]
				else:
					pairs = [(exp, os.path.join(tree, name + ".c"))]
				for want_p, got_p in pairs:
					with open(want_p) as f:
						want = f.read()
					with open(got_p) as f:
						got = f.read()
					if want != got:
						import difflib
						detail += "".join(difflib.unified_diff(
							want.splitlines(True), got.splitlines(True), "expected/" + os.path.basename(want_p),
							"got/" + os.path.basename(got_p)))
			res.add("patch/" + name, not detail, time.time() - t, detail, known)
			if detail:
				continue
			for what in ("fix", "missed"):
				if not spec.get(what):
					continue
				# each function's fix status, and a phrase its reason must hold:
				# "fix" for the wait sites, "missed" for the missed wakeups (by
				# the writer's function)
				with open(j1) as f:
					got_fix = {fd["function"]: fd["fix"] for fd in json.load(f)["findings"]
						   if (fd["kind"] == "missed_wakeup") == (what == "missed")}
				detail = ""
				for func, (status, phrase) in sorted(spec[what].items()):
					fx = got_fix.get(func)
					if fx is None:
						detail += "%s: no finding\n" % func
					elif fx["status"] != status or phrase not in fx["reason"] + " ".join(fx["caveats"]):
						detail += "%s: want %s with '%s', got %s: %s\n" % (func, status, phrase, fx["status"],
												  fx["reason"][:300])
				for func in sorted(set(got_fix) - set(spec[what])):
					detail += "%s: a finding the spec does not list (%s)\n" % (func, got_fix[func]["status"])
				res.add("patch/%s/%s" % (name, what), not detail, 0, detail, known)
			# idempotence: the patched code gives an empty diff, and only the
			# findings that had no patch remain
			t = time.time()
			with open(j1) as f:
				first = json.load(f)["findings"]
			j2 = os.path.join(tmp, "second.json")
			p2 = tool(["--mode", "patch", "--confidence", "low", "--json", j2])
			detail = ""
			if p2.returncode != 0:
				detail = p2.stderr[-2000:]
			else:
				if p2.stdout.strip():
					detail += "second MODE=patch is not empty:\n" + p2.stdout[:3000]
				with open(j2) as f:
					second = json.load(f)["findings"]
				# wait sites only: a missed wakeup is reported for a reported
				# wait, and goes with it when the wait is rewritten
				left = sorted((f["function"], f["primitive"]) for f in first
					      if f["fix"]["status"] != "patch" and f["kind"] != "missed_wakeup")
				again = sorted((f["function"], f["primitive"]) for f in second if f["kind"] != "missed_wakeup")
				if left != again:
					detail += "findings after patching: %s\nexpected (the unpatched ones): %s\n" % (again, left)
			res.add("patch/%s/idempotent" % name, not detail, time.time() - t, detail, known)
			t = time.time()
			cp = checkpatch(p1.stdout)
			if cp is None:
				res.skip("patch/%s/checkpatch" % name, "no kernel tree for checkpatch.pl")
			else:
				res.add("patch/%s/checkpatch" % name, not cp, time.time() - t, "\n\n".join(cp), known)
		except subprocess.TimeoutExpired:
			res.add("patch/" + name, False, time.time() - t, "timed out", known)
		finally:
			shutil.rmtree(tmp, ignore_errors=True)


class _Reporter(unittest.TestResult):
	"""unittest's own runner reports each test here as it ends; class and
	module fixtures (setUpClass, tearDownClass) run as unittest runs them."""

	def __init__(self, res):
		super().__init__()
		self.res = res
		self.t = time.time()

	@staticmethod
	def name(test):
		return "unit/" + test.id().split(".", 1)[-1]

	def startTest(self, test):
		super().startTest(test)
		self.t = time.time()

	def addSuccess(self, test):
		self.res.add(self.name(test), True, time.time() - self.t)

	def addFailure(self, test, err):
		super().addFailure(test, err)
		self.res.add(self.name(test), False, time.time() - self.t, self.failures[-1][1])

	def addError(self, test, err):
		super().addError(test, err)
		# a failing setUpClass/tearDownClass comes as an _ErrorHolder
		self.res.add(self.name(test), False, time.time() - self.t, self.errors[-1][1])

	def addSkip(self, test, reason):
		self.res.skip(self.name(test), reason)

	def addExpectedFailure(self, test, err):
		self.res.add(self.name(test), False, time.time() - self.t, known=True)

	def addUnexpectedSuccess(self, test):
		self.res.add(self.name(test), True, time.time() - self.t, known=True)


def unit_tests(res, only, dirs=None):
	"""scripts/tests/test_*.py and kernel-boot/test_*.py, one suite run by
	unittest (so class fixtures run), one result line per test."""
	loader = unittest.TestLoader()
	tests = []
	for d in dirs or [os.path.join(TOP, sub) for sub in UNIT_DIRS]:
		for path in sorted(glob.glob(os.path.join(d, "test_*.py"))):
			name = os.path.basename(path)[:-3]
			spec = importlib.util.spec_from_file_location(name, path)
			mod = importlib.util.module_from_spec(spec)
			sys.modules[name] = mod
			spec.loader.exec_module(mod)
			tests += _flatten(loader.loadTestsFromModule(mod))
	suite = unittest.TestSuite(t for t in tests if not only or only in _Reporter.name(t))
	suite.run(_Reporter(res))


def _flatten(s):
	for t in s:
		if isinstance(t, unittest.TestSuite):
			yield from _flatten(t)
		else:
			yield t


def standalone_fixtures(res, only):
	"""The rule alone, run by the kernel's own 'make coccicheck' (M=external
	dir).  NAME.report: MODE=report's lines.  NAME.patch and NAME.refused:
	MODE=patch's diff (paths a/NAME.c, b/NAME.c; none when the file is
	missing, and it must apply) and its INFO lines (none when missing)."""
	d = os.path.join(TOP, "fixtures", "standalone")
	bases = sorted(set(os.path.splitext(x)[0] for x in os.listdir(d)
			   if x.endswith((".report", ".patch", ".refused"))))
	for base in bases:
		for mode, kind in (("report", "report"), ("patch", "patch")):
			exps = [os.path.join(d, base + "." + e) for e in (("report",) if mode == "report" else ("patch", "refused"))]
			if not any(os.path.isfile(e) for e in exps):
				continue
			name = "standalone/%s%s" % (base, "" if mode == "report" else "/patch")
			if only and only not in name:
				continue
			standalone_one(res, name, os.path.join(d, base + ".c"), mode)


def standalone_one(res, name, src, mode):
	t = time.time()
	if not os.path.isfile(os.path.join(KTREE, "Makefile")):
		res.add(name, False, 0, "no kernel tree at %s (run make setup)" % KTREE)
		return
	tmp = tempfile.mkdtemp(prefix="nestsleep-sa-")
	try:
		shutil.copy(src, tmp)
		base = os.path.basename(src)
		cmd = ["make", "-s", "-C", KTREE, "coccicheck", "COCCI=" + os.path.join(TOP, "cocci", "nested_sleep.cocci"),
		       "MODE=" + mode, "M=" + tmp, "J=1"]
		proc = subprocess.run(cmd, capture_output=True, text=True, timeout=FIXTURE_TIMEOUT)
		detail = "exit %d\n" % proc.returncode if proc.returncode else ""
		# coccicheck puts spatch's stderr on stdout: a warning about the
		# rule would be in the diff a user pipes to patch(1)
		for l in (proc.stdout + proc.stderr).splitlines():
			if re.search(r"\bwarning:|\bnot used\b", l):
				detail += "spatch says: %s\n" % l

		def expected(ext):
			p = src[:-2] + "." + ext
			if not os.path.isfile(p):
				return []
			with open(p) as f:
				return [l.rstrip("\n") for l in f if l.strip()]

		def compare(got, want, what):
			out = "".join("missing %s: %s\n" % (what, l) for l in want if l not in got)
			out += "".join("unexpected %s: %s\n" % (what, l) for l in got if l not in want)
			if not out and got != want:
				out = "%s out of order\n" % what
			return out
		if mode == "report":
			got = sorted(l[len(tmp) + 1:] for l in proc.stdout.splitlines() if l.startswith(tmp + "/"))
			detail += compare(got, sorted(expected("report")), "line")
		else:
			lines = proc.stdout.splitlines()
			info = sorted(l[len(tmp) + 1:] for l in lines if l.startswith(tmp + "/") and ": INFO: " in l)
			# spatch's diff, its file headers made a/NAME.c and b/NAME.c
			diff, head = [], 0
			for l in lines:
				if l.startswith("diff -u -p "):
					head = 2
					continue
				if head == 2 and l.startswith("--- "):
					l, head = "--- a/" + base, 1
				elif head == 1 and l.startswith("+++ "):
					l, head = "+++ b/" + base, 0
				elif l.startswith(tmp + "/") or not diff:
					continue
				diff.append(l)
			detail += compare(info, sorted(expected("refused")), "INFO line")
			want = expected("patch")
			if [l for l in diff if l.strip()] != want:
				detail += "diff differs:\n" + "\n".join(difflib.unified_diff(want, diff, "expected", "got",
											   lineterm=""))[:3000] + "\n"
			if diff:
				with open(os.path.join(tmp, "fix.diff"), "w") as f:
					f.write("\n".join(diff) + "\n")
				ap = subprocess.run(["patch", "-p1", "--dry-run", "-d", tmp, "-i", os.path.join(tmp, "fix.diff")],
						    capture_output=True, text=True)
				if ap.returncode:
					detail += "the diff does not apply: %s\n" % (ap.stdout + ap.stderr)[-500:]
		ok = not detail
		if not ok:
			detail += proc.stderr[-1500:]
		res.add(name, ok, time.time() - t, detail)
	except subprocess.TimeoutExpired:
		res.add(name, False, time.time() - t, "timed out")
	finally:
		shutil.rmtree(tmp, ignore_errors=True)


def findings_in(tree, files, timeout):
	"""Run the checker on files of tree: (findings.json data, None), or
	(None, why) when it failed.  subprocess.TimeoutExpired passes on."""
	out_json = tempfile.mktemp(prefix="nestsleep-rt-", suffix=".json")
	try:
		proc = run_tool(tree, ["--only"] + files + ["--json", out_json], timeout=timeout, cache=CACHE)
		if proc.returncode != 0 or not os.path.exists(out_json):
			return None, proc.stderr[-3000:]
		with open(out_json) as f:
			return json.load(f), None
	finally:
		if os.path.exists(out_json):
			os.unlink(out_json)


def realtree_checks(res, only):
	"""Functions already fixed upstream must not be reported."""
	for spec_path in sorted(glob.glob(os.path.join(TOP, "fixtures", "realtree", "*.json"))):
		name = "realtree/" + os.path.basename(spec_path)[:-5]
		if only and only not in name:
			continue
		with open(spec_path) as f:
			spec = json.load(f)
		t = time.time()
		if not os.path.isfile(os.path.join(KTREE, "Makefile")):
			res.add(name, False, 0, "no kernel tree at %s (run make setup)" % KTREE)
			continue
		tree = KTREE
		try:
			if spec.get("apply"):
				tree, err = patched_copy(spec["apply"], spec["files"])
				if err:
					res.add(name, False, time.time() - t, err)
					continue
			data, err = findings_in(tree, spec["files"], spec.get("timeout", 1200))
			if data is None:
				res.add(name, False, time.time() - t, err)
				continue
			bad = [fd for fd in data["findings"] if fd["function"] in spec["must_not_report"]]
			for fd in data["findings"]:
				with open(os.path.join(tree, fd["file"]), errors="replace") as src:
					text = src.read().splitlines()[fd["line"] - 1]
				if any(s in text for s in spec.get("must_not_report_lines_containing", [])) and fd not in bad:
					bad.append(fd)
			detail = "".join("reported a fixed site: %s:%d %s\n" % (fd["file"], fd["line"], fd["message"])
					 for fd in bad)
			for want in spec.get("must_report", []):
				if not any(fd["file"] == want["file"] and
					   ("chain_contains" not in want or want["chain_contains"] in fd["chain"]) and
					   ("function" not in want or want["function"] == fd["function"])
					   for fd in data["findings"]):
					detail += "missed the positive control in %s (%s)\n" % (
						want["file"], want.get("chain_contains") or want.get("function"))
			cov = data["coverage"]
			if cov["failed"] or cov["timeout"]:
				detail += "note: parse failures %s, timeouts %s\n" % (cov["failed"], cov["timeout"])
			ok = not bad and "missed" not in detail
			detail += "findings in these files: %d\n" % len(data["findings"])
			res.add(name, ok, time.time() - t, detail)
		except subprocess.TimeoutExpired:
			res.add(name, False, time.time() - t, "timed out")
		finally:
			if tree != KTREE:
				shutil.rmtree(os.path.dirname(tree), ignore_errors=True)


def patched_copy(patch, files):
	"""A hard-link copy of KTREE with patch applied; the patched files are
	copied first, so the tree under the cache is never written.  Returns
	(tree, error)."""
	top = tempfile.mkdtemp(prefix="nestsleep-rt-tree-", dir=os.path.dirname(CACHE))
	tree = os.path.join(top, "linux")
	err = ktree.scratch_copy(KTREE, tree, files)
	if err:
		return tree, err
	p = subprocess.run(["patch", "-p1", "-s", "-d", tree, "-i", os.path.join(TOP, patch)],
			   capture_output=True, text=True)
	if p.returncode != 0:
		return tree, "%s does not apply to %s: %s" % (patch, KTREE, (p.stdout + p.stderr)[-500:])
	return tree, ""


def true_findings(findings, labels):
	"""The findings of a committed report that a hand label calls true."""
	return [f for f in findings if labels.get(f["fingerprint"], {}).get("verdict") == "true"]


def lost_true(want, got):
	"""The findings of want (true ones) with no finding at the same wait
	site (file and line) in got.  The site, not the fingerprint: a better
	chain for the same site is no loss."""
	sites = set((f["file"], f["line"]) for f in got)
	return [f for f in want if (f["file"], f["line"]) not in sites]


def labelled_checks(res, only):
	"""Every finding labelled true in reports/labels/ is still reported:
	the checker runs on the files of those findings (wait sites and chain
	hops) in the tree the labels were made on."""
	trees = {}
	for name in sorted(os.listdir(CACHE)):
		if name.startswith("linux-source-") and os.path.isfile(os.path.join(CACHE, name, "Makefile")):
			trees[treeid.tree_id(os.path.join(CACHE, name))] = os.path.join(CACHE, name)
	for lpath in sorted(glob.glob(os.path.join(TOP, "reports", "labels", "*.json"))):
		tid = os.path.basename(lpath)[:-5]
		name = "labelled/" + tid
		if only and only not in name:
			continue
		t = time.time()
		if tid not in trees:
			res.add(name, False, 0, "no tree %s under %s (run make setup)" % (tid, CACHE))
			continue
		with open(lpath) as f:
			labels = json.load(f)["labels"]
		with open(os.path.join(TOP, "reports", tid, "findings.json")) as f:
			want = true_findings(json.load(f)["findings"], labels)
		files = sorted(set([f["file"] for f in want] + [l.rsplit(":", 1)[0] for f in want for l in f["chain_locs"]]))
		try:
			data, err = findings_in(trees[tid], files, 1500)
		except subprocess.TimeoutExpired:
			res.add(name, False, time.time() - t, "timed out")
			continue
		if data is None:
			res.add(name, False, time.time() - t, err)
			continue
		lost = lost_true(want, data["findings"])
		detail = "".join("lost a true finding: %s:%d %s() (%s)\n" % (
			f["file"], f["line"], f["function"], " -> ".join(f["chain"])) for f in lost)
		detail += "%d true findings, %d files\n" % (len(want), len(files))
		res.add(name, not lost and bool(want), time.time() - t, detail)


CHECK_TIMEOUT = int(os.environ.get("NESTSLEEP_CHECK_TIMEOUT", "2400"))


def check_programs(res, only, fast):
	"""Run scripts/dev/check_*.py and kernel-boot/check_*.py; one result per
	KTAP line.  --fast is passed on: such a program may then skip its
	kernel builds."""
	import re
	progs = []
	for sub in ("scripts/dev", "kernel-boot"):
		progs += sorted(glob.glob(os.path.join(TOP, sub, "check_*.py")))
	for prog in progs:
		base = os.path.basename(prog)[:-3]
		t = time.time()
		cmd = [PY, prog] + (["--fast"] if fast else []) + (["--only", only] if only else [])
		try:
			proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
						cwd=TOP)
		except OSError as e:
			res.add(base, False, 0, str(e))
			continue
		seen = 0
		detail = []
		deadline = time.time() + CHECK_TIMEOUT
		t_case = time.time()
		import threading
		timer = threading.Timer(CHECK_TIMEOUT, proc.kill)
		timer.start()
		try:
			for line in proc.stdout:
				m = re.match(r"^(not ok|ok) \d+ - (\S+)(.*)$", line.rstrip("\n"))
				if not m:
					detail.append(line.rstrip("\n"))
					continue
				seen += 1
				name = "%s/%s" % (base.replace("check_", ""), m.group(2))
				rest = m.group(3)
				if "# SKIP" in rest:
					res.skip(name, rest.split("# SKIP", 1)[1].strip())
				else:
					ok = m.group(1) == "ok"
					res.add(name, ok, time.time() - t_case, "\n".join(detail[-40:]))
				detail = []
				t_case = time.time()
			proc.wait()
		finally:
			timer.cancel()
		if time.time() > deadline:
			res.add(base, False, time.time() - t, "timed out after %ds" % CHECK_TIMEOUT)
		elif proc.returncode != 0 or (not seen and not only):
			res.add(base, False, time.time() - t, "exit %s, %d results\n%s" % (
				proc.returncode, seen, "\n".join(detail[-40:])))


def main(argv):
	ap = argparse.ArgumentParser()
	ap.add_argument("--fast", action="store_true", help="skip the real-tree checks")
	ap.add_argument("--only", default="", help="run tests whose name contains this")
	a = ap.parse_args(argv)
	res = Results()
	t0 = time.time()
	for stage, fn in (("unit", unit_tests), ("report fixtures", report_fixtures), ("patch fixtures", patch_fixtures),
			  ("kernel coccicheck", standalone_fixtures), ("real tree", realtree_checks),
			  ("labelled findings", labelled_checks)):
		if a.fast and stage in ("real tree", "kernel coccicheck", "labelled findings"):
			continue
		t = time.time()
		print("== %s" % stage, flush=True)
		fn(res, a.only)
		print("== %s: %.1fs" % (stage, time.time() - t), flush=True)
	t = time.time()
	print("== checks", flush=True)
	check_programs(res, a.only, a.fast)
	print("== checks: %.1fs" % (time.time() - t), flush=True)
	print("total %.1fs" % (time.time() - t0))
	for line in res.summary():
		print(line)
	return 1 if res.failed else 0


if __name__ == "__main__":
	sys.exit(main(sys.argv[1:]))
