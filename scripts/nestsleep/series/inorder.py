# SPDX-License-Identifier: GPL-2.0-only
"""make fixes BUILD=1: build the touched objects after each patch of a
series, in series order, and put the result in each finding's test record.

A scratch hard-link copy of KDIR (patch(1) writes a new file and renames
it, so KDIR is never written through) under NESTSLEEP_CACHE/series-build/
<tree-id>/, an x86_64 allmodconfig build directory (CONFIG_WERROR=y, so a
new compiler warning fails the build) and, for an object x86_64 does not
build (the powerpc-only drivers), a powerpc allmodconfig with Debian's
powerpc64-linux-gnu-gcc, then an arm64 one with aarch64-linux-gnu-gcc.  An
arch builds an object only when the .config of its allmodconfig has the
object's Kconfig symbols (series.json "kconfig") on: make builds a single
object whatever the .config says, and that proves nothing.  Every make
runs under flock
NESTSLEEP_CACHE/kbuild.lock.  Each series starts from the pristine tree:
its patches are applied one after another with patch -p1, each followed by
a build of the objects of the files it touches, and reverted at the end.
"""

import fcntl
import os
import re
import shutil
import subprocess

from nestsleep import cache_dir, ktree
from nestsleep.triage import treeid

CROSS = {"powerpc": "powerpc64-linux-gnu-", "arm64": "aarch64-linux-gnu-"}
# the order the arches are tried in: the cheapest set-up first
ARCHES = ("x86_64", "powerpc", "arm64")


class Builder:
	def __init__(self, kdir, log):
		self.kdir = kdir
		self.log = log
		self.root = os.path.join(cache_dir(), "series-build", treeid.tree_id(kdir))
		self.lock = os.path.join(cache_dir(), "kbuild.lock")
		self.tree = os.path.join(self.root, "tree")
		self.builds = {}

	def run(self, cmd, timeout=3600, lock=False):
		if lock:
			cmd = ["flock", self.lock] + cmd
		return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)

	def fresh_tree(self):
		os.makedirs(self.root, exist_ok=True)
		if os.path.isdir(self.tree):
			shutil.rmtree(self.tree)
		err = ktree.scratch_copy(self.kdir, self.tree)
		if err:
			raise RuntimeError(err)

	def make(self, arch, target, extra=()):
		b = self.builds[arch]
		flags = ["ARCH=" + arch, "CROSS_COMPILE=" + CROSS[arch]] if arch != "x86_64" else []
		return self.run(["make", "-C", self.tree, "O=" + b, "-j%d" % (os.cpu_count() or 1)] + flags +
				list(extra) + [target], lock=True)

	def build_dir(self, arch):
		"""The arch's allmodconfig build directory, prepared on first use;
		None when it cannot be (no cross compiler)."""
		if arch in self.builds:
			return self.builds[arch]
		self.builds[arch] = None
		if arch != "x86_64" and not shutil.which(CROSS[arch] + "gcc"):
			return None
		b = os.path.join(self.root, "build-%s-allmodconfig" % arch)
		os.makedirs(b, exist_ok=True)
		self.builds[arch] = b
		if not os.path.isfile(os.path.join(b, ".config")):
			self.log("in-order build: %s allmodconfig" % arch)
			r = self.make(arch, "allmodconfig")
			if r.returncode != 0:
				self.builds[arch] = None
				return None
		self.log("in-order build: %s modules_prepare" % arch)
		r = self.make(arch, "modules_prepare")
		if r.returncode != 0:
			self.log("in-order build: %s modules_prepare failed: %s" % (arch, (r.stdout + r.stderr)[-300:]))
			self.builds[arch] = None
		return self.builds[arch]

	def off(self, arch, syms):
		"""The first of syms that the arch's .config does not have on."""
		try:
			with open(os.path.join(self.builds[arch], ".config")) as f:
				conf = f.read()
		except OSError:
			return None
		names = [x[len("CONFIG_"):] if x.startswith("CONFIG_") else x for x in syms]
		return next((x for x in names if not re.search(r"^CONFIG_%s=[ym]$" % re.escape(x), conf, re.M)), None)

	def compile(self, obj, arches, syms=()):
		"""(status, arch, output tail): the first arch that builds obj
		with its Kconfig symbols syms on."""
		last = ""
		for arch in arches:
			if not self.build_dir(arch):
				continue
			off = self.off(arch, syms)
			if off:
				last = "CONFIG_%s is not set in %s allmodconfig" % (off, arch)
				continue
			r = self.make(arch, obj)
			out = r.stdout + r.stderr
			if r.returncode == 0:
				return "ok", arch, ""
			last = out[-1500:]
			if not re.search(r"No rule to make target|error: ", out):
				return "failed", arch, last
		return "not-built", None, last


def build_all(kdir, out, manifest, log):
	"""Build every series in order; each finding's record gets 'build'."""
	if not shutil.which("make") or not shutil.which("gcc") or not shutil.which("flock"):
		log("in-order build: make, gcc or flock missing; not built")
		return
	out = os.path.abspath(out)     # patch(1) runs in the scratch tree
	b = Builder(kdir, log)
	# one in-order build of a tree at a time: a second one would remake
	# the scratch tree under the first
	os.makedirs(b.root, exist_ok=True)
	with open(os.path.join(b.root, "lock"), "w") as lockf:
		try:
			fcntl.flock(lockf, fcntl.LOCK_EX | fcntl.LOCK_NB)
		except OSError:
			log("in-order build: waiting for another in-order build of %s" % b.root)
			fcntl.flock(lockf, fcntl.LOCK_EX)
		build_series(b, out, manifest, log)


def build_series(b, out, manifest, log):
	b.fresh_tree()
	recs = manifest["tests"]
	for s in manifest["series"]:
		applied = []
		# which arch builds each object, found on the pristine tree, so
		# that a patched object that fails is a failure, not another arch
		arch_of, pristine = {}, {}
		for f in s.get("files", []):
			if f.endswith(".c"):
				o = f[:-2] + ".o"
				syms = [x for e in s["patches"] if f in e.get("files", []) for x in e.get("kconfig", [])]
				st, arch, tail = b.compile(o, ARCHES, list(dict.fromkeys(syms)))
				if st == "ok":
					arch_of[o] = arch
				else:
					pristine[o] = tail
		try:
			for i, e in enumerate(s["patches"], 1):
				path = os.path.join(out, e["patch"])
				ap = subprocess.run(["patch", "-p1", "-s", "--no-backup-if-mismatch", "-i", path], cwd=b.tree,
						    capture_output=True, text=True)
				if ap.returncode != 0:
					res = {"status": "failed", "reason": "the patch does not apply%s: %s" % (
						" after the %d before it in its series" % (i - 1) if i > 1 else "",
						(ap.stdout + ap.stderr)[-300:])}
				else:
					applied.append(path)
					res = build_patch(b, e, i, arch_of, pristine)
				log("in-order build: %s: %s" % (e["patch"], res["status"]))
				for fp in e["fingerprints"]:
					recs.setdefault(fp, {})["build"] = res
		finally:
			for path in reversed(applied):
				r = subprocess.run(["patch", "-p1", "-R", "-s", "--no-backup-if-mismatch", "-i", path],
						   cwd=b.tree, capture_output=True, text=True)
				if r.returncode != 0:
					log("in-order build: cannot revert %s; making a fresh tree" % path)
					b.fresh_tree()
					break


def build_patch(b, e, i, arch_of, pristine):
	objs = [f[:-2] + ".o" for f in e["files"] if f.endswith(".c")]
	done, notbuilt, failed = [], [], []
	for o in objs:
		if o not in arch_of:
			notbuilt.append((o, pristine.get(o, "")))
			continue
		st, arch, tail = b.compile(o, [arch_of[o]])
		if st == "not-built":
			st = "failed"
		if st == "ok":
			arch_of[o] = arch
			done.append((o, arch))
		elif st == "not-built":
			notbuilt.append((o, tail))
		else:
			failed.append((o, arch, tail))
	after = "after patch%s of the series" % (" 1" if i == 1 else "es 1-%d" % i)
	res = {"objects": {o: a for o, a in done}, "after": i}
	if failed:
		res.update(status="failed", reason="%s does not compile (%s allmodconfig) %s: %s" % (
			failed[0][0], failed[0][1], after, failed[0][2][-400:]))
	elif notbuilt and not done:
		res.update(status="not-built", reason="%s, unpatched, is built by none of %s allmodconfig here%s" % (
			", ".join(o for o, t in notbuilt), ", ".join(ARCHES),
			": " + notbuilt[0][1] if notbuilt[0][1].startswith("CONFIG_") else ""))
	else:
		how = []
		for arch in ARCHES:
			os_ = [o for o, a in done if a == arch]
			if os_:
				how.append("%s in %s allmodconfig (CONFIG_WERROR=y%s)" % (
					", ".join(os_), arch, ", %sgcc" % CROSS[arch] if arch in CROSS else ""))
		res.update(status="ok", how="%s compiled %s" % ("; ".join(how), after))
		if notbuilt:
			res["not_built"] = [o for o, t in notbuilt]
	return res
