#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-only
"""Compile check of the patch fixtures: each .c and its .res build.

  check_fixture_build.py [--fast] [--only X] [--fixtures DIR] [--standalone DIR]
                         [--kdir K] [--build-dir B] [-v]

A patch fixture (fixtures/patch/NAME.c with NAME.res, or the tree NAME/
with NAME.res/) is C that a maintainer would compile: the code before
MODE=patch and the code after it.  Both forms are built here as an
external module (M=) against the 6.1 build directory of the runtime proof
(kernel-boot/nsboot: tinyconfig + configs/base, debug and lockdep), with
KCFLAGS=-Werror and sparse (C=2).  Per fixture and form (c, res) it prints:

  NAME/FORM         the objects compile with -Werror
  NAME/FORM/sparse  sparse prints no warning about the fixture's files

The res form is the source tree with the .res files put over it (a .res/
tree holds the files that MODE=patch changes).  A tree with a Kbuild keeps
it; otherwise each .c file is a module of its own.  Only the objects are
built (no modpost, no link): a fixture need not be a whole module.

The fixtures of the rule run alone (fixtures/standalone, --standalone; ""
for none) are built too, as standalone/NAME: the c form is NAME.c, and
where NAME.patch is (MODE=patch's expected diff) the res form is NAME.c
with that diff applied by patch(1).

The build directory is prepared when it is missing ('make tinyconfig',
the proof's fragments, 'make olddefconfig modules_prepare'; about 60 s);
the runtime proof's kernel build reuses it.  The kernel tree is only
read; the module copies live under ~/.cache/nestsleep/fixture-build/.
Every make runs under 'flock ~/.cache/nestsleep/kbuild.lock'.

--fast builds nothing: each result prints '# SKIP'.
"""

import argparse
import contextlib
import fcntl
import io
import os
import re
import shutil
import subprocess
import sys
import time

from nestsleep import TOP, cache_dir

CACHE = cache_dir()
FIXTURES = os.path.join(TOP, "fixtures", "patch")
STANDALONE = os.path.join(TOP, "fixtures", "standalone")
KTREE = os.path.join(CACHE, "linux-source-6.1")
ROOT = os.path.join(CACHE, "fixture-build")
KBUILD_LOCK = os.path.join(CACHE, "kbuild.lock")
FORMS = ("c", "res")
MAKE_TIMEOUT = 1800
# the lines of a failed build that a result shows
MAX_DETAIL = 30
# what 'make modules_prepare' leaves in a build directory
PREPARED = (".config", "include/generated/autoconf.h", "include/config/auto.conf", "scripts/mod/modpost")


class Fixture:
	"""A patch fixture: src is NAME.c or the tree NAME/, res its NAME.res.
	A standalone one has no res: its res form is src with the diff patch
	applied (none: it has only the c form).  base names its file."""

	def __init__(self, name, src, res, patch=None, base=None):
		self.name = name
		self.src = src
		self.res = res
		self.patch = patch
		self.base = base or name
		self.standalone = base is not None

	def forms(self):
		return FORMS if self.res or self.patch else FORMS[:1]


def load_fixtures(fdir):
	"""The fixtures of fdir, by name, and the .res that have no source."""
	fxs, errors = [], []
	for entry in sorted(os.listdir(fdir)):
		if not entry.endswith(".res"):
			continue
		name = entry[:-len(".res")]
		res = os.path.join(fdir, entry)
		if os.path.isdir(res) and os.path.isdir(os.path.join(fdir, name)):
			fxs.append(Fixture(name, os.path.join(fdir, name), res))
		elif os.path.isfile(res) and os.path.isfile(os.path.join(fdir, name + ".c")):
			fxs.append(Fixture(name, os.path.join(fdir, name + ".c"), res))
		else:
			errors.append("%s: no %s.c or %s/ beside it" % (os.path.relpath(res, TOP), name, name))
	return fxs, errors


def load_standalone(sdir):
	"""The standalone fixtures of sdir (each NAME.c, and NAME.patch when
	MODE=patch rewrites it), and the diffs that have no source."""
	fxs, errors = [], []
	for entry in sorted(os.listdir(sdir)):
		base, ext = os.path.splitext(entry)
		src = os.path.join(sdir, base + ".c")
		if ext == ".c":
			patch = os.path.join(sdir, base + ".patch")
			fxs.append(Fixture("standalone/" + base, src, None, patch if os.path.isfile(patch) else None, base))
		elif ext == ".patch" and not os.path.isfile(src):
			errors.append("%s: no %s.c beside it" % (os.path.relpath(os.path.join(sdir, entry), TOP), base))
	return fxs, errors


def _tree_files(d):
	out = {}
	for top, dirs, files in os.walk(d):
		dirs.sort()
		for f in files:
			p = os.path.join(top, f)
			out[os.path.relpath(p, d)] = p
	return out


def form_files(fx, form):
	"""{name in the module dir: the file to copy there} for a form."""
	if os.path.isfile(fx.src):
		return {fx.base + ".c": fx.src if form == "c" or fx.patch else fx.res}
	files = _tree_files(fx.src)
	if form == "res":
		files.update(_tree_files(fx.res))
	return files


def objects(files):
	"""The objects to build: one per .c file."""
	return sorted(f[:-2] + ".o" for f in files if f.endswith(".c"))


def goal_clash(fx):
	"""Why the kernel's make cannot build an object of fx as a goal, or
	"": it takes a goal 'help%' (helper.o) for its help target, reads no
	.config for it, and the compile then fails on an empty
	-Wframe-larger-than=."""
	bad = [o for o in objects(form_files(fx, "c")) if os.path.basename(o).startswith("help")]
	if bad:
		return "%s: the kernel's make reads no .config for a goal named help%% (%s): rename it" % (
			fx.name, ", ".join(bad))
	return ""


def kbuild_text(files, read):
	"""The module's Kbuild: the fixture's own, else one module per .c file."""
	if "Kbuild" in files:
		return read(files["Kbuild"])
	return "obj-m += %s\n" % " ".join(objects(files))


def _read(path):
	with open(path) as f:
		return f.read()


def selected(only, name, standalone=False):
	"""--only X selects by 'fixture_build/NAME' (run_tests.py's name of the
	results) or 'patch/NAME' (a patch fixture's own results; a standalone
	one's NAME says standalone/ already)."""
	return not only or only in "fixture_build/%s/" % name or \
		(not standalone and only in "patch/%s/" % name)


DIAG = re.compile(r"^(?P<path>[^\s:]+):(?P<line>\d+):(?P<col>\d+): (?P<kind>warning|(?:fatal )?error): (?P<msg>.*)$")


def judge(rc, output, moddir, files):
	"""A build's result: (compiled, the lines that say why not, the sparse
	warnings about the fixture's own files).  A compiler warning is an error
	under -Werror, so a warning line of a build that succeeded is sparse's."""
	mine = {os.path.join(moddir, f): f for f in files}
	warns, why, other = [], [], []
	for line in output.splitlines():
		m = DIAG.match(line)
		if m and m.group("path") in mine:
			short = "%s:%s:%s: %s: %s" % (mine[m.group("path")], m.group("line"), m.group("col"),
						      m.group("kind"), m.group("msg"))
			if rc == 0:
				warns.append(short)
			elif short not in why:
				why.append(short)
		elif rc != 0 and (m or re.search(r"\*\*\*|Error \d|No rule|undefined", line)):
			# a kernel header's errors, and make's: after the fixture's own
			line = line.replace(moddir + "/", "")
			if line not in other:
				other.append(line)
	why += other
	if rc != 0 and not why:
		why = output.strip().splitlines()[-15:]
	if len(why) > MAX_DETAIL:
		why = why[:MAX_DETAIL] + ["... and %d more lines" % (len(why) - MAX_DETAIL)]
	return rc == 0, "\n".join(why), warns


def proof_build_dir(kdir):
	"""The runtime proof's build directory, and the nsboot tree that
	configures it."""
	from nsboot import config as nsboot_config
	from nsboot import kernel as nsboot_kernel
	arch = nsboot_kernel.load_arch("x86_64")
	names = list(nsboot_config.DEFAULT_FRAGMENTS)
	request = nsboot_config.load_fragments(names)
	build = nsboot_kernel.default_build_dir(kdir, request, arch, nsboot_config.fragment_names(names))
	return nsboot_kernel.LinuxSourceTree(kdir, build, request, arch, jobs=os.cpu_count() or 1)


def diag(text):
	for line in str(text).rstrip("\n").splitlines():
		print("# " + line, flush=True)


def make(kdir, build, args, timeout=MAKE_TIMEOUT):
	cmd = ["flock", KBUILD_LOCK, "make", "-C", kdir, "O=" + build, "ARCH=x86_64",
	       "-j%d" % (os.cpu_count() or 1)] + list(args)
	try:
		r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
		return r.returncode, r.stdout + r.stderr
	except subprocess.TimeoutExpired:
		return -1, "make %s timed out after %ds" % (" ".join(args), timeout)


def is_prepared(build):
	return all(os.path.exists(os.path.join(build, p)) for p in PREPARED)


def prepare(tree, verbose):
	"""Configure the build directory as the runtime proof does and run
	'make modules_prepare', unless that was done: an error or ""."""
	build = tree.build_dir
	if is_prepared(build):
		return ""
	t = time.time()
	from nsboot import config as nsboot_config
	from nsboot import kernel as nsboot_kernel
	diag("preparing %s (tinyconfig + %s, olddefconfig, modules_prepare)" % (
		build, "+".join(nsboot_config.DEFAULT_FRAGMENTS)))
	out = io.StringIO()
	os.makedirs(os.path.dirname(KBUILD_LOCK), exist_ok=True)
	with open(KBUILD_LOCK, "a") as lockf:
		# the same lock as flock(1): flock(2) on the file
		fcntl.flock(lockf, fcntl.LOCK_EX)
		try:
			with contextlib.redirect_stdout(out):
				tree.build_config()
		except nsboot_kernel.ConfigError as e:
			return "configuring %s failed: %s" % (build, e)
		finally:
			fcntl.flock(lockf, fcntl.LOCK_UN)
	if verbose:
		diag(out.getvalue())
	rc, text = make(tree.kdir, build, ["modules_prepare"])
	if rc != 0:
		return "make modules_prepare in %s failed:\n%s" % (build, "\n".join(text.strip().splitlines()[-20:]))
	diag("prepared %s in %.1fs" % (build, time.time() - t))
	return ""


def fill_moddir(fx, form, files, moddir):
	"""Put a form's files and its Kbuild in moddir (made anew); a
	standalone fixture's res form gets its diff applied.  An error or ""."""
	if os.path.isdir(moddir):
		shutil.rmtree(moddir)
	os.makedirs(moddir)
	for rel, src in files.items():
		os.makedirs(os.path.dirname(os.path.join(moddir, rel)), exist_ok=True)
		shutil.copyfile(src, os.path.join(moddir, rel))
	if form == "res" and fx.patch:
		r = subprocess.run(["patch", "-p1", "-s", "--no-backup-if-mismatch", "-d", moddir, "-i", fx.patch],
				   capture_output=True, text=True, stdin=subprocess.DEVNULL)
		if r.returncode:
			return "%s does not apply: %s" % (os.path.relpath(fx.patch, TOP), (r.stdout + r.stderr).strip()[-500:])
	if "Kbuild" not in files:
		with open(os.path.join(moddir, "Kbuild"), "w") as f:
			f.write(kbuild_text(files, _read))
	return ""


def build_form(fx, form, kdir, build, verbose):
	"""Copy a form into its module directory and build its objects:
	(compiled, why not, sparse warnings, seconds)."""
	files = form_files(fx, form)
	moddir = os.path.join(ROOT, "%s-%s" % (fx.name.replace("/", "-"), form))
	error = fill_moddir(fx, form, files, moddir)
	if error:
		return False, error, [], 0.0
	args = ["M=" + moddir, "KCFLAGS=-Werror", "C=2"] + objects(files)
	if verbose:
		diag("$ flock %s make -C %s O=%s %s" % (KBUILD_LOCK, kdir, build, " ".join(args)))
	t = time.time()
	rc, out = make(kdir, build, args)
	ok, why, warns = judge(rc, out, moddir, files)
	if ok and not re.search(r"^\s*CHECK\s", out, re.M):
		ok, why = False, "sparse did not run (no CHECK line): is sparse installed?"
	return ok, why, warns, time.time() - t


class Ktap:
	def __init__(self):
		self.n = 0

	def result(self, name, ok, detail="", skip=""):
		"""The detail comes before the result line: run_tests.py shows the
		lines before a failed result as its explanation."""
		self.n += 1
		if detail and (not ok or skip):
			diag(detail)
		if skip:
			print("ok %d - %s # SKIP %s" % (self.n, name, skip), flush=True)
		else:
			print("%s %d - %s" % ("ok" if ok else "not ok", self.n, name), flush=True)


def main(argv):
	ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
	ap.add_argument("--fast", action="store_true", help="build nothing: every result is a SKIP")
	ap.add_argument("--only", default="", help="only the fixtures whose result names contain this")
	ap.add_argument("--fixtures", default=FIXTURES, help="the patch fixtures (default: %(default)s)")
	ap.add_argument("--standalone", default=STANDALONE,
			help="the fixtures of the rule run alone, \"\" for none (default: %(default)s)")
	ap.add_argument("--kdir", default=KTREE, help="the kernel tree, only read (default: %(default)s)")
	ap.add_argument("--build-dir", default="", help="the prepared build directory (default: the runtime proof's)")
	ap.add_argument("-v", "--verbose", action="store_true")
	a = ap.parse_args(argv)
	for d in (a.fixtures, a.standalone):
		if d and not os.path.isdir(d):
			print("check_fixture_build: no fixture directory %s" % d, file=sys.stderr)
			return 2
	fxs, errors = load_fixtures(a.fixtures)
	if a.standalone:
		more, errs = load_standalone(a.standalone)
		fxs, errors = fxs + more, errors + errs
	fxs = [f for f in fxs if selected(a.only, f.name, f.standalone)]
	errors += [goal_clash(f) for f in fxs if goal_clash(f)]
	fxs = [f for f in fxs if not goal_clash(f)]
	ktap = Ktap()
	print("KTAP version 1", flush=True)
	print("1..%d" % (sum(2 * len(f.forms()) for f in fxs) + len(errors)), flush=True)
	for e in errors:
		ktap.result("fixtures", False, e)
	if not fxs:
		return 0
	if a.fast:
		for fx in fxs:
			for form in fx.forms():
				ktap.result("%s/%s" % (fx.name, form), True, skip="--fast: no kernel build")
				ktap.result("%s/%s/sparse" % (fx.name, form), True, skip="--fast: no kernel build")
		return 0
	kdir = os.path.realpath(a.kdir)
	problems = []
	if not os.path.isfile(os.path.join(kdir, "Makefile")):
		problems.append("no kernel tree at %s (run make setup)" % kdir)
	for tool in ("make", "gcc", "sparse", "flock"):
		if shutil.which(tool) is None:
			problems.append("%s is not installed (run make setup)" % tool)
	error = "\n".join(problems)
	build = ""
	if not error:
		tree = proof_build_dir(kdir)
		if a.build_dir:
			tree.build_dir = os.path.abspath(a.build_dir)
		build = tree.build_dir
		error = prepare(tree, a.verbose)
	t0 = time.time()
	for fx in fxs:
		for form in fx.forms():
			name = "%s/%s" % (fx.name, form)
			if error:
				ktap.result(name, False, error)
				ktap.result(name + "/sparse", True, skip="no build directory")
				continue
			ok, why, warns, secs = build_form(fx, form, kdir, build, a.verbose)
			ktap.result(name, ok, why)
			if not ok:
				ktap.result(name + "/sparse", True, skip="does not compile")
			else:
				ktap.result(name + "/sparse", not warns, "sparse warnings:\n" + "\n".join(warns))
			diag("%s: %.1fs" % (name, secs))
	diag("%d fixtures, %d forms built against %s in %.1fs" % (len(fxs), sum(len(f.forms()) for f in fxs), build,
								   time.time() - t0))
	return 0


if __name__ == "__main__":
	sys.exit(main(sys.argv[1:]))
