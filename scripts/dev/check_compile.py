#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-only
"""Compile check of real code: MODE=patch on real 6.1 functions.

  check_compile.py [--fast] [--only X] [--kdir K] [--keep] [-v]

Each fixtures/realcompile/NAME.patch is an "unfix" patch: it turns a
function that upstream fixed (one of the seeds) back into its nested-sleep
form.  Its header (the lines before the diff) names the upstream commit it
reverts and carries these keys:

  Kind:     wait_event | prepare_to_wait | set_current_state
  Function: the function that must be found and fixed
  File:     the file that holds it (relative to the tree)
  Config:   the Kconfig symbols that build the touched objects

For each fixture, in one scratch copy of the tree and with one build
directory (both under ~/.cache/nestsleep/compile-build/, kept between
runs, so a warm run is incremental), this prints one KTAP result per step:

  applies         the unfix patch applies (patch -p1 -F0); the scratch
                  file is a new inode, the cached tree is unchanged
  detected        nestsleep.py --mode report finds the function
  patched         nestsleep.py --mode patch gives a diff with a fix for
                  the function, and the diff applies
  unfixed-builds  the unfixed objects compile with KCFLAGS=-Werror; their
                  sparse warnings (C=2) are the baseline
  compiles        the patched objects compile with KCFLAGS=-Werror
  sparse          and sparse prints no warning that the baseline lacks
  checkpatch      the diff, as a mail with a description, passes the
                  tree's checkpatch.pl --no-tree --no-signoff with no
                  error or warning
  quiet           on the patched tree, the function is not reported
  idempotent      and a second MODE=patch prints an empty diff

--fast skips the kernel build: the three build steps print '# SKIP'.

The scratch tree is a hard-link copy ('cp -al') of the cached tree.  GNU
patch writes a new file and renames it over the old name, so a patched
file stops being a link to the cached one; every step checks that, and
that the cached file's content did not change.  Files are restored by
copying (a new inode again) before and after each case, and after a run
that was killed (the list of changed files is kept in dirty.json).

The build directory starts from tinyconfig plus the union of the
fixtures' Config symbols (scripts/kconfig/merge_config.sh, then
olddefconfig); the script checks that each symbol is set in the .config.
Every make in the kernel tree runs under 'flock ~/.cache/nestsleep/
kbuild.lock', since other checks of this project build kernels too, and
uses every CPU.  A whole run also holds compile-build/run.lock.
"""

import argparse
import collections
import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
import time

from nestsleep import TOP, cache_dir
from nestsleep import ktree
from nestsleep.analysis import pipeline

FIXTURES = os.path.join(TOP, "fixtures", "realcompile")
CACHE = cache_dir()
KTREE = os.path.join(CACHE, "linux-source-6.1")
ROOT = os.path.join(CACHE, "compile-build")
SRC = os.path.join(ROOT, "src")
OBJ = os.path.join(ROOT, "obj")
KBUILD_LOCK = os.path.join(CACHE, "kbuild.lock")
KCFLAGS = "KCFLAGS=-Werror"
JOBS = os.cpu_count() or 1

STEPS = ("applies", "detected", "patched", "unfixed-builds", "compiles", "sparse", "checkpatch", "quiet",
	 "idempotent")
BUILD_STEPS = ("unfixed-builds", "compiles", "sparse")
KINDS = ("wait_event", "prepare_to_wait", "set_current_state")
# Always in the build's config: a 64-bit x86 kernel.
BASE_CONFIG = ("CONFIG_64BIT",)
TOOL_TIMEOUT = 900
MAKE_TIMEOUT = 3600


class Fatal(Exception):
	"""The run cannot go on (for example, the cached tree was written)."""


class StepFailed(Exception):
	pass


def diag(msg):
	for line in str(msg).rstrip("\n").splitlines() or [""]:
		print("# " + line, flush=True)


class Ktap:
	def __init__(self, planned):
		self.n = 0
		print("KTAP version 1", flush=True)
		print("1..%d" % planned, flush=True)

	def result(self, name, ok, detail="", skip=""):
		"""detail is printed before the result line: run_tests.py shows the
		lines before a failed result as its explanation."""
		self.n += 1
		if detail:
			diag(detail)
		if skip:
			print("ok %d - %s # SKIP %s" % (self.n, name, skip), flush=True)
		else:
			print("%s %d - %s" % ("ok" if ok else "not ok", self.n, name), flush=True)


# ---- fixtures ---------------------------------------------------------------

DIFF_START = re.compile(r"^(diff |--- |\+\+\+ |@@ )")


class Case:
	def __init__(self, path):
		self.path = path
		self.name = os.path.basename(path)[:-len(".patch")]
		self.error = ""
		self.keys = {}
		self.reverts = ""
		self.files = []
		with open(path, encoding="utf-8", errors="replace") as f:
			self.text = f.read()
		lines = self.text.splitlines()
		header = []
		for i, line in enumerate(lines):
			if DIFF_START.match(line):
				break
			header.append(line)
		for line in header:
			m = re.match(r"^(Kind|Function|File|Config|Reverts|Shape):\s*(.*?)\s*$", line)
			if m:
				self.keys[m.group(1)] = m.group(2)
		for line in lines[len(header):]:
			m = re.match(r"^\+\+\+ (\S+)", line)
			if m:
				p = m.group(1)
				self.files.append(p[2:] if p.startswith("b/") else p)
		self.kind = self.keys.get("Kind", "")
		self.function = self.keys.get("Function", "")
		self.file = self.keys.get("File", "")
		self.config = self.keys.get("Config", "").split()
		self.reverts = self.keys.get("Reverts", "")
		missing = [k for k in ("Reverts", "Kind", "Function", "File", "Config") if not self.keys.get(k)]
		if missing:
			self.error = "%s: the header (the lines before the diff) lacks %s" % (
				os.path.relpath(path, TOP), ", ".join(k + ":" for k in missing))
		elif self.kind not in KINDS:
			self.error = "%s: Kind: %r is not one of %s" % (os.path.relpath(path, TOP), self.kind,
								       ", ".join(KINDS))
		elif not self.files:
			self.error = "%s: no '+++ b/PATH' line: not a unified diff" % os.path.relpath(path, TOP)
		elif self.file not in self.files:
			self.error = "%s: File: %s is not one of the files the diff changes (%s)" % (
				os.path.relpath(path, TOP), self.file, ", ".join(self.files))
		elif any(not re.match(r"^CONFIG_[A-Za-z0-9_]+$", c) for c in self.config):
			self.error = "%s: Config: wants CONFIG_ symbols, got %r" % (
				os.path.relpath(path, TOP), self.keys["Config"])
		elif any(os.path.isabs(p) or ".." in p.split("/") for p in self.files):
			self.error = "%s: a path in the diff leaves the tree" % os.path.relpath(path, TOP)

	def selected(self, only):
		return (not only or only in "compile/" + self.name or only in self.file or only == self.function
			or only in "compile/%s/" % self.name)


def load_cases():
	if not os.path.isdir(FIXTURES):
		return []
	return [Case(os.path.join(FIXTURES, f)) for f in sorted(os.listdir(FIXTURES)) if f.endswith(".patch")]


# ---- the scratch tree -------------------------------------------------------

def sha1_file(path):
	h = hashlib.sha1()
	with open(path, "rb") as f:
		for chunk in iter(lambda: f.read(1 << 20), b""):
			h.update(chunk)
	return h.hexdigest()


class Scratch:
	"""A hard-link copy of KDIR at SRC.  Changed files are listed in
	dirty.json before they are changed, and restored by copying."""

	def __init__(self, kdir):
		self.kdir = kdir
		self.stamp_path = os.path.join(ROOT, "src.stamp")
		self.dirty_path = os.path.join(ROOT, "dirty.json")
		self.pristine = {}

	def stamp(self):
		st = os.stat(os.path.join(self.kdir, "Makefile"))
		return {"kdir": self.kdir, "makefile": [st.st_ino, st.st_size, st.st_mtime_ns]}

	def ensure(self):
		"""Returns True when the tree was (re)made: the build directory is
		then stale too."""
		want = self.stamp()
		have = None
		if os.path.isfile(self.stamp_path):
			try:
				with open(self.stamp_path) as f:
					have = json.load(f)
			except (OSError, ValueError):
				have = None
		if have == want and os.path.isfile(os.path.join(SRC, "Makefile")):
			also = []
			for c in load_cases():
				also += c.files
			self.restore(also=also)
			return False
		if os.path.isdir(SRC):
			diag("the scratch tree is stale (%s changed): making it again" % self.kdir)
			shutil.rmtree(SRC)
		if os.path.exists(self.dirty_path):
			os.unlink(self.dirty_path)
		t = time.time()
		tmp = SRC + ".tmp"
		if os.path.isdir(tmp):
			shutil.rmtree(tmp)
		err = ktree.scratch_copy(self.kdir, tmp)
		if err:
			shutil.rmtree(tmp, ignore_errors=True)
			raise Fatal("%s (in %s)" % (err, ROOT))
		os.rename(tmp, SRC)
		with open(self.stamp_path, "w") as f:
			json.dump(want, f)
		diag("scratch tree: cp -al %s %s (%.1fs)" % (self.kdir, SRC, time.time() - t))
		return True

	def dirty(self):
		try:
			with open(self.dirty_path) as f:
				return json.load(f)
		except (OSError, ValueError):
			return []

	def mark(self, files):
		"""Before changing files: remember them, and the cached tree's
		content of each."""
		d = self.dirty()
		for f in files:
			if f not in d:
				d.append(f)
			src = os.path.join(self.kdir, f)
			if f not in self.pristine:
				self.pristine[f] = sha1_file(src) if os.path.isfile(src) else None
		with open(self.dirty_path + ".tmp", "w") as fp:
			json.dump(d, fp)
		os.replace(self.dirty_path + ".tmp", self.dirty_path)

	def check_links(self, files):
		"""The scratch copies of files are not the cached files, and the
		cached files did not change."""
		for f in files:
			src = os.path.join(self.kdir, f)
			dst = os.path.join(SRC, f)
			if not os.path.isfile(src):
				continue
			if os.path.isfile(dst) and os.path.samefile(src, dst) and self.pristine.get(f) is not None:
				# still a link: allowed only when the content is unchanged
				if sha1_file(dst) != self.pristine[f]:
					raise Fatal("%s was written through a hard link: the cached tree %s is changed; "
						    "unpack it again (make setup)" % (f, self.kdir))
			if self.pristine.get(f) is not None and sha1_file(src) != self.pristine[f]:
				raise Fatal("the cached tree's %s changed while it was patched in the scratch copy; "
					    "unpack it again (make setup)" % f)

	def restore(self, also=()):
		"""Put back the cached tree's content of every changed file, as a
		new inode with a new mtime (so make rebuilds its objects).  The
		files in also are put back too when they differ from the cached
		tree, whatever dirty.json says (it may have been lost)."""
		todo = self.dirty()
		for f in also:
			src = os.path.join(self.kdir, f)
			dst = os.path.join(SRC, f)
			if f in todo or not os.path.isfile(src):
				continue
			if not os.path.isfile(dst) or (not os.path.samefile(src, dst) and sha1_file(src) != sha1_file(dst)):
				diag("%s differs from the cached tree, but dirty.json does not list it: put back" % f)
				todo.append(f)
		for f in todo:
			src = os.path.join(self.kdir, f)
			dst = os.path.join(SRC, f)
			for junk in (dst + ".orig", dst + ".rej"):
				if os.path.lexists(junk):
					os.unlink(junk)
			if os.path.isfile(src):
				os.makedirs(os.path.dirname(dst), exist_ok=True)
				shutil.copyfile(src, dst + ".nestsleep-tmp")
				os.replace(dst + ".nestsleep-tmp", dst)
			elif os.path.lexists(dst):
				os.unlink(dst)
		if os.path.exists(self.dirty_path):
			os.unlink(self.dirty_path)


def apply_patch(text, dry):
	cmd = ["patch", "-p1", "-F0", "--no-backup-if-mismatch", "-s"] + (["--dry-run"] if dry else [])
	r = subprocess.run(cmd, cwd=SRC, input=text, capture_output=True, text=True, timeout=120)
	return r.returncode == 0, (r.stdout + r.stderr).strip()


def diff_files(text):
	out = []
	for line in text.splitlines():
		m = re.match(r"^\+\+\+ (\S+)", line)
		if m:
			p = m.group(1)
			p = p[2:] if p.startswith("b/") else p
			if p not in out:
				out.append(p)
	return out


# ---- the checker ------------------------------------------------------------

def nestsleep(files, mode, verbose):
	"""The checker on the scratch tree, in this process:
	(0 or 2, the mode's output, the error, findings).  MODE=patch
	rewrites every fix, whatever its confidence (CONFIDENCE=low): each
	case is compiled."""
	opts = pipeline.Options(kdir=SRC, mode=mode, only=list(files), confidence="low")
	if verbose:
		diag("$ nestsleep coccicheck --kdir %s --mode %s%s --only %s" % (
			SRC, mode, " --confidence low" if mode == "patch" else "", " ".join(files)))
	try:
		res = pipeline.check(opts)
	except pipeline.UserError as e:
		return 2, "", str(e), []
	return 0, res.output, "", res.findings


def tail(text, n=12):
	lines = [l for l in text.rstrip().splitlines() if l.strip()]
	return "\n".join(lines[-n:])


def in_function(fd, case):
	return fd.get("file") == case.file and fd.get("function") == case.function


# ---- kernel builds ----------------------------------------------------------

def make(targets, extra=(), timeout=MAKE_TIMEOUT, verbose=False):
	cmd = ["flock", KBUILD_LOCK, "make", "-C", SRC, "O=" + OBJ, "-j%d" % JOBS, KCFLAGS] + list(extra) + list(targets)
	if verbose:
		diag("$ " + " ".join(cmd))
	try:
		r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
		return r.returncode, r.stdout + r.stderr
	except subprocess.TimeoutExpired:
		return -1, "make %s timed out after %ds" % (" ".join(targets), timeout)


def config_symbols(cases):
	syms = list(BASE_CONFIG)
	for c in cases:
		for s in c.config:
			if s not in syms:
				syms.append(s)
	return syms


def read_config():
	vals = {}
	try:
		with open(os.path.join(OBJ, ".config")) as f:
			for line in f:
				m = re.match(r"^(CONFIG_\w+)=(.*)$", line)
				if m:
					vals[m.group(1)] = m.group(2)
	except OSError:
		pass
	return vals


def prepare_build(cases, fresh, verbose):
	"""Configure the build directory (tinyconfig + the fixtures' symbols)
	and run 'make prepare'.  Returns (error or "", {phase: seconds})."""
	times = {}
	if fresh and os.path.isdir(OBJ):
		diag("the scratch tree was made again: so is the build directory")
		shutil.rmtree(OBJ)
	os.makedirs(OBJ, exist_ok=True)
	syms = config_symbols(cases)
	frag = "".join("%s=y\n" % s for s in syms)
	stamp = os.path.join(OBJ, ".nestsleep-fragment")
	have = ""
	if os.path.isfile(stamp):
		with open(stamp) as f:
			have = f.read()
	t = time.time()
	if have != frag or not os.path.isfile(os.path.join(OBJ, ".config")):
		if os.path.exists(stamp):
			os.unlink(stamp)
		rc, out = make(["tinyconfig"], verbose=verbose)
		if rc != 0:
			return "make tinyconfig failed:\n" + tail(out, 30), times
		fpath = os.path.join(OBJ, ".nestsleep-fragment.config")
		with open(fpath, "w") as f:
			f.write(frag)
		cmd = ["flock", KBUILD_LOCK, os.path.join(SRC, "scripts", "kconfig", "merge_config.sh"), "-m", "-O", OBJ,
		       os.path.join(OBJ, ".config"), fpath]
		r = subprocess.run(cmd, cwd=OBJ, capture_output=True, text=True, timeout=600)
		if r.returncode != 0:
			return "merge_config.sh failed:\n" + tail(r.stdout + r.stderr, 30), times
		rc, out = make(["olddefconfig"], verbose=verbose)
		if rc != 0:
			return "make olddefconfig failed:\n" + tail(out, 30), times
		with open(stamp, "w") as f:
			f.write(frag)
		times["config"] = time.time() - t
	vals = read_config()
	unset = [s for s in syms if vals.get(s) != "y"]
	if unset:
		if os.path.exists(stamp):
			os.unlink(stamp)
		return ("the build's .config lacks %s (=y): a dependency is missing from a fixture's Config: line"
			% ", ".join(unset)), times
	t = time.time()
	rc, out = make(["prepare"], verbose=verbose)
	times["prepare"] = time.time() - t
	if rc != 0:
		return "make prepare failed:\n" + tail(out, 30), times
	return "", times


CHECK_LINE = re.compile(r"^(\S+?):(\d+):(\d+): (warning|error): (.*)$")


def compile_objects(files, verbose):
	"""Compile the objects of the .c files with -Werror and sparse (C=2).
	Returns (ok, message, Counter of sparse warnings without line
	numbers, seconds)."""
	objs = [f[:-2] + ".o" for f in files if f.endswith(".c")]
	t = time.time()
	warns = collections.Counter()
	msgs = []
	ok = True
	for o in objs:
		rc, out = make([o], ["C=2"], verbose=verbose)
		if rc != 0:
			ok = False
			if re.search(r"No rule to make target '%s'" % re.escape(o), out):
				msgs.append("%s: not built by this config (is a Kconfig symbol missing from Config:?)" % o)
			else:
				errs = [l for l in out.splitlines() if ": error:" in l or "Error " in l or ": warning:" in l]
				msgs.append("%s does not compile:\n%s" % (o, "\n".join(errs[-20:]) or tail(out, 20)))
			continue
		src = os.path.join(SRC, o[:-2] + ".c")
		if not re.search(r"^\s*CHECK\s+%s$" % re.escape(src), out, re.M):
			ok = False
			msgs.append("%s: compiled, but sparse did not check %s (no CHECK line)" % (o, src))
			continue
		n = 0
		for line in out.splitlines():
			m = CHECK_LINE.match(line)
			if m:
				path = m.group(1)
				if path.startswith(SRC + "/"):
					path = path[len(SRC) + 1:]
				warns[(path, m.group(4), m.group(5))] += 1
				n += 1
		msgs.append("%s: compiled with -Werror, %d sparse warnings" % (o, n))
	return ok, "\n".join(msgs), warns, time.time() - t


def format_warn(w):
	return "%s: %s: %s" % w


# ---- checkpatch -------------------------------------------------------------

def as_mail(case, fix, diff):
	"""The diff as a patch mail, so that checkpatch checks a description
	too instead of complaining that there is none."""
	subject = "%s: fix nested sleep in %s()" % (os.path.dirname(case.file).split("/")[-1], case.function)
	body = fix.get("reason") or "Rewrite the wait into the wait_woken() form."
	paras = [textwrap.fill(body, 72)]
	for c in fix.get("caveats") or []:
		paras.append(textwrap.fill("Caveat: " + c, 72))
	paras.append("Generated by: cocci/nested_sleep.cocci (nestsleep MODE=patch)")
	return "From: nestsleep <nestsleep@example.org>\nSubject: [PATCH] %s\n\n%s\n---\n%s" % (
		subject, "\n\n".join(paras), diff)


def checkpatch(mail):
	r = ktree.checkpatch(SRC, text=mail, show_types=True)
	if not r.ran:
		return False, "no scripts/checkpatch.pl in the tree"
	bad = r.blocks()
	if r.returncode != 0 or bad:
		return False, "\n\n".join(bad) or tail(r.output + r.stderr, 20)
	return True, "checkpatch.pl: no errors, no warnings"


# ---- one case ---------------------------------------------------------------

class CaseRun:
	"""The state of one case's steps, and the steps that print its KTAP results."""

	def __init__(self, case, ktap, scratch, build_error, fast, verbose, times):
		self.case = case
		self.ktap = ktap
		self.scratch = scratch
		self.build_error = build_error
		self.fast = fast
		self.verbose = verbose
		self.times = times
		self.name = "%s/%%s" % case.name
		self.done = {}
		self.diff = ""
		self.fix = {}
		self.patch_error = ""
		self.fix_files = []
		self.build_files = []
		self.base = None
		self.base_msg = ""

	def res(self, step, ok, detail="", skip=""):
		"""Prints the KTAP result of one step of the case."""
		self.done[step] = ok and not skip
		self.ktap.result(self.name % step, ok, detail, skip)

	def skip_rest(self, reason):
		"""Prints a skipped result for every step not printed yet."""
		for s in STEPS:
			if s not in self.done:
				self.res(s, True, skip=reason)

	def run_steps(self):
		"""Runs the steps in order, on a scratch tree that the caller restores."""
		if not self.step_applies():
			return
		self.step_detected()
		self.make_fix()
		self.build_baseline()
		self.step_patched()
		self.step_unfixed_builds()
		self.step_compiles()
		if self.patch_error:
			for s in ("checkpatch", "quiet", "idempotent"):
				self.res(s, True, skip="no patch")
			return
		self.step_checkpatch()
		self.step_quiet()
		self.step_idempotent()

	def step_applies(self):
		"""The applies step: applies the unfix patch; False when the case stops."""
		case = self.case
		missing = [f for f in case.files if not os.path.isfile(os.path.join(SRC, f))]
		if missing:
			self.res("applies", False, "not in the tree: %s" % ", ".join(missing))
			self.skip_rest("the unfix patch does not apply")
			return False
		ok, out = apply_patch(case.text, dry=True)
		if ok:
			self.scratch.mark(case.files)
			ok, out = apply_patch(case.text, dry=False)
		if not ok:
			self.res("applies", False, "patch -p1 -F0 %s:\n%s" % (os.path.relpath(case.path, TOP), tail(out)))
			self.skip_rest("the unfix patch does not apply")
			return False
		self.scratch.check_links(case.files)
		self.res("applies", True)
		return True

	def step_detected(self):
		"""The detected step: MODE=report finds the function, with the case's kind."""
		case = self.case
		rc, out, err, findings = nestsleep([case.file], "report", self.verbose)
		hits = [f for f in findings if in_function(f, case)]
		lines = [l for l in out.splitlines() if l.startswith(case.file + ":")]
		if rc != 0 or not hits:
			self.res("detected", False, "nestsleep coccicheck --mode report --only %s (exit %d): no finding in %s()\n%s" % (
				case.file, rc, case.function, "\n".join(lines) or tail(err)))
			return
		shapes = sorted(set(f.get("shape", "") for f in hits))
		detail = "\n".join(f.get("message", "") for f in hits)
		if case.kind not in shapes:
			self.res("detected", False, "found, but as %s, not %s:\n%s" % ("/".join(shapes), case.kind, detail))
		else:
			self.res("detected", True, detail if self.verbose else "")

	def make_fix(self):
		"""Makes the MODE=patch diff and dry-runs it; it is applied after the baseline build."""
		case = self.case
		rc, diff, err, findings = nestsleep([case.file], "patch", self.verbose)
		fix = {}
		for f in findings:
			if in_function(f, case) and (f.get("fix") or {}).get("status") == "patch":
				fix = f["fix"]
		patch_error = self.fix_error(rc, diff, err, findings, fix)
		fix_files = diff_files(diff) if not patch_error else []
		if not patch_error:
			ok, out = apply_patch(diff, dry=True)
			if not ok:
				patch_error = "the generated diff does not apply with patch -p1 -F0:\n%s" % tail(out)
		self.diff = diff
		self.fix = fix
		self.patch_error = patch_error
		self.fix_files = fix_files
		self.build_files = list(case.files) + [f for f in fix_files if f not in case.files]

	def fix_error(self, rc, diff, err, findings, fix):
		"""Why the MODE=patch output is no fix of the case's function, or ""."""
		case = self.case
		if rc != 0:
			return "nestsleep coccicheck --mode patch --only %s exits %d: %s" % (case.file, rc, tail(err, 3))
		if not diff.strip():
			reasons = ["%s: %s" % ((f.get("fix") or {}).get("status", "?"), (f.get("fix") or {}).get("reason", "?"))
				   for f in findings if in_function(f, case)]
			return "MODE=patch gives an empty diff; the finding's fix: %s" % ("; ".join(reasons) or "none")
		if not fix:
			return "the diff has no fix for %s() (fix statuses: %s)" % (case.function, ", ".join(
				sorted(set(str((f.get("fix") or {}).get("status")) for f in findings if in_function(f, case)))))
		if fix.get("kind") and fix["kind"] != case.kind:
			return "the fix is a %s rewrite, the fixture wants %s" % (fix["kind"], case.kind)
		return ""

	def build_baseline(self):
		"""Compiles the unfixed objects (the baseline), unless --fast or the build is not ready."""
		if self.fast or self.build_error:
			return
		ok, msg, warns, secs = compile_objects(self.build_files, self.verbose)
		self.times.setdefault("unfixed", []).append(secs)
		self.base = warns if ok else None
		self.base_msg = msg

	def step_patched(self):
		"""The patched step: applies the generated diff."""
		if self.patch_error:
			self.res("patched", False, self.patch_error)
			return
		self.scratch.mark(self.fix_files)
		ok, out = apply_patch(self.diff, dry=False)
		if not ok:
			self.res("patched", False, "the generated diff does not apply:\n%s" % tail(out))
			self.patch_error = "not applied"
			return
		self.scratch.check_links(self.fix_files)
		fix = self.fix
		detail = "fix: %s, confidence %s; files: %s; wakers: %s" % (
			fix.get("kind"), fix.get("confidence"), ", ".join(self.fix_files),
			", ".join(str(w) for w in fix.get("wakers") or []) or "none")
		self.res("patched", True, detail if self.verbose else "")

	def step_unfixed_builds(self):
		"""The unfixed-builds step: the result of the baseline build."""
		if self.fast:
			self.res("unfixed-builds", True, skip="--fast: no kernel build")
		elif self.build_error:
			self.res("unfixed-builds", False, self.build_error)
		else:
			self.res("unfixed-builds", self.base is not None, self.base_msg)

	def step_compiles(self):
		"""The compiles and sparse steps: builds the patched objects."""
		if self.fast:
			self.res("compiles", True, skip="--fast: no kernel build")
			self.res("sparse", True, skip="--fast: no kernel build")
		elif self.build_error:
			self.res("compiles", True, skip="the build directory is not ready")
			self.res("sparse", True, skip="the build directory is not ready")
		elif self.patch_error:
			self.res("compiles", True, skip="no patch to compile")
			self.res("sparse", True, skip="no patch to compile")
		else:
			ok, msg, warns, secs = compile_objects(self.build_files, self.verbose)
			self.times.setdefault("patched", []).append(secs)
			self.res("compiles", ok, msg)
			self.step_sparse(ok, warns)

	def step_sparse(self, ok, warns):
		"""The sparse step: no sparse warning that the baseline lacks."""
		base = self.base
		if not ok:
			self.res("sparse", True, skip="the patched objects do not compile")
		elif base is None:
			self.res("sparse", True, skip="no baseline: the unfixed objects do not compile")
		else:
			new = warns - base
			if new:
				self.res("sparse", False, "new sparse warnings after the patch:\n" + "\n".join(
					"%s (x%d)" % (format_warn(w), n) if n > 1 else format_warn(w)
					for w, n in sorted(new.items())))
			else:
				self.res("sparse", True, "sparse: %d warnings before, %d after, none new" % (
					sum(base.values()), sum(warns.values())) if self.verbose else "")

	def step_checkpatch(self):
		"""The checkpatch step: the diff, as a mail, passes checkpatch.pl."""
		ok, msg = checkpatch(as_mail(self.case, self.fix, self.diff))
		self.res("checkpatch", ok, "" if ok else msg)

	def step_quiet(self):
		"""The quiet step: the patched function is not reported."""
		case = self.case
		rc, out, err, findings = nestsleep([case.file], "report", self.verbose)
		left = [f for f in findings if in_function(f, case)]
		if rc != 0:
			self.res("quiet", False, "nestsleep.py --mode report on the patched tree exits %d: %s" % (rc, tail(err, 3)))
		else:
			self.res("quiet", not left, "still reported after the patch:\n" + "\n".join(
				f.get("message", "") for f in left) if left else "")

	def step_idempotent(self):
		"""The idempotent step: a second MODE=patch prints an empty diff."""
		rc, out, err, findings = nestsleep([self.case.file], "patch", self.verbose)
		if rc != 0:
			self.res("idempotent", False, "a second MODE=patch exits %d: %s" % (rc, tail(err, 3)))
		else:
			self.res("idempotent", not out.strip(), "a second MODE=patch is not empty:\n" + tail(out, 30)
				 if out.strip() else "")


def run_case(case, ktap, scratch, build_error, fast, verbose, keep, times):
	"""Runs one case's steps and prints a KTAP result for each."""
	run = CaseRun(case, ktap, scratch, build_error, fast, verbose, times)
	if case.error:
		run.res("applies", False, case.error)
		run.skip_rest("bad fixture")
		return
	diag("%s: %s in %s() of %s; reverts %s" % (case.name, case.kind, case.function, case.file, case.reverts))
	scratch.restore(also=case.files)
	t0 = time.time()
	try:
		run.run_steps()
	finally:
		if not keep:
			scratch.restore()
		diag("%s: %.1fs" % (case.name, time.time() - t0))


# ---- main -------------------------------------------------------------------

def main(argv):
	ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
				     epilog="Fixtures: fixtures/realcompile/*.patch.  Scratch tree and build: " + ROOT)
	ap.add_argument("--fast", action="store_true", help="no kernel build: the build steps print # SKIP")
	ap.add_argument("--only", default="", help="only cases whose name, file or function contains this")
	ap.add_argument("--kdir", default=KTREE, help="the tree to copy (default: %(default)s); it is only read")
	ap.add_argument("--keep", action="store_true", help="leave the last case patched in the scratch tree")
	ap.add_argument("-v", "--verbose", action="store_true", help="print commands and passing details")
	a = ap.parse_args(argv)

	cases = [c for c in load_cases() if c.selected(a.only)]
	kdir = os.path.realpath(a.kdir)
	if not cases:
		ktap = Ktap(1)
		ktap.result("selection", True, skip="no fixtures/realcompile case matches --only %r" % a.only
			    if a.only else "no fixtures/realcompile/*.patch")
		return 0
	problems = []
	if not os.path.isfile(os.path.join(kdir, "Makefile")):
		problems.append("no kernel tree at %s (run make setup)" % kdir)
	for tool in ("patch", "perl", "cp") + (() if a.fast else ("make", "gcc", "sparse", "flock")):
		if shutil.which(tool) is None:
			problems.append("%s is not installed (run make setup)" % tool)
	if problems:
		ktap = Ktap(1)
		ktap.result("setup", False, "\n".join(problems))
		return 0

	os.makedirs(ROOT, exist_ok=True)
	lockf = open(os.path.join(ROOT, "run.lock"), "w")
	try:
		fcntl.flock(lockf, fcntl.LOCK_EX | fcntl.LOCK_NB)
	except OSError:
		diag("another check_compile.py holds %s: waiting" % os.path.join(ROOT, "run.lock"))
		fcntl.flock(lockf, fcntl.LOCK_EX)

	ktap = Ktap(len(cases) * len(STEPS))
	t_all = time.time()
	times = {}
	scratch = Scratch(kdir)
	try:
		fresh = scratch.ensure()
		build_error = ""
		if not a.fast:
			# the config has every fixture's symbols, whatever --only
			# selects, so that the build directory is not reconfigured
			real = [c for c in load_cases() if not c.error]
			build_error, ptimes = prepare_build(real, fresh, a.verbose)
			times.update(ptimes)
			for k, v in ptimes.items():
				diag("build directory %s: %s %.1fs" % (OBJ, k, v))
		for case in cases:
			run_case(case, ktap, scratch, build_error, a.fast, a.verbose, a.keep, times)
	except Fatal as e:
		diag("error: %s" % e)
		while ktap.n < len(cases) * len(STEPS):
			ktap.result("aborted", False, "" if ktap.n else str(e))
		return 0
	except KeyboardInterrupt:
		diag("interrupted; the scratch tree is restored on the next run")
		return 130
	summary = ["total %.1fs" % (time.time() - t_all)]
	for k in ("config", "prepare"):
		if k in times:
			summary.append("%s %.1fs" % (k, times[k]))
	for k in ("unfixed", "patched"):
		if k in times:
			summary.append("%s objects %.1fs" % (k, sum(times[k])))
	diag("times: " + ", ".join(summary))
	return 0


if __name__ == "__main__":
	try:
		sys.exit(main(sys.argv[1:]))
	except BrokenPipeError:
		sys.exit(1)
