# SPDX-License-Identifier: GPL-2.0-only
"""make fixes as a maintainer gets it (issue 17): series made with git, in
order, that 'git am' takes; selection by labels and confidence; sign-off
only when asked; changelogs that say only what happened; recipients and
prefixes; the committed series apply in order."""

import json
import os
import re
import shutil
import subprocess
import tempfile
import unittest

from nestsleep import TOP, cache_dir
from nestsleep.series import changelog, recipients, records, subjects
from nestsleep.series.text import noline
from nestsleep.series import effect

T61 = os.path.join(cache_dir(), "linux-source-6.1")
T612 = os.path.join(cache_dir(), "linux-source-6.12")
TREES = {"linux-6.1.192": T61, "linux-6.12.118": T612}


def read(path):
	with open(path, errors="surrogateescape") as f:
		return f.read()


def read_json(path):
	with open(path) as f:
		return json.load(f)


def clean_env(home, identity=None):
	"""No system or global git config, unless identity gives one."""
	cfg = os.devnull
	if identity:
		cfg = os.path.join(home, "gitconfig")
		with open(cfg, "w") as f:
			f.write("[user]\n\tname = %s\n\temail = %s\n" % identity)
	return dict(os.environ, HOME=home, GIT_CONFIG_NOSYSTEM="1", GIT_CONFIG_GLOBAL=cfg,
		    NESTSLEEP_CACHE=os.path.join(cache_dir(), "test-cache"))


def git(repo, env, *args, check=True):
	return subprocess.run(["git", "-C", repo] + list(args), env=env, capture_output=True, text=True,
			      check=check)


def am_series(out, sdir, files_from, env, tmp):
	"""git am every patch of OUT/sdir, in order, on a fresh git repository
	of the touched files copied from files_from; the failures."""
	repo = tempfile.mkdtemp(dir=tmp)
	patches = sorted(p for p in os.listdir(os.path.join(out, sdir)) if not p.startswith("0000-"))
	files = set()
	for p in patches:
		files |= set(re.findall(r"^diff --git a/(\S+) ", read(os.path.join(out, sdir, p)), re.M))
	for rel in files:
		os.makedirs(os.path.dirname(os.path.join(repo, rel)) or repo, exist_ok=True)
		shutil.copyfile(os.path.join(files_from, rel), os.path.join(repo, rel))
	git(repo, env, "init", "-q")
	git(repo, env, "add", "-A")
	git(repo, env, "-c", "user.name=T", "-c", "user.email=t@example.org", "commit", "-q", "-m", "base")
	bad = []
	for p in patches:
		r = git(repo, env, "-c", "user.name=T", "-c", "user.email=t@example.org", "am", "-q",
			os.path.join(out, sdir, p), check=False)
		if r.returncode != 0:
			bad.append(p)
			git(repo, env, "am", "--abort", check=False)
			break
	return bad, len(patches)


def fixture_tree(tmp):
	"""The set_current_state fixture as a small tree, in tmp/tree."""
	kdir = os.path.join(tmp, "tree")
	shutil.copytree(os.path.join(TOP, "fixtures", "patch", "set_current_state_wakers"), kdir)
	with open(os.path.join(kdir, "Makefile"), "w") as f:
		f.write("obj-$(CONFIG_SESS) += core.o capi.o\n")
	return kdir


class FixtureSeries(unittest.TestCase):
	"""make fixes on the set_current_state fixture: four functions of
	core.c, each of whose rewrites adds the same #include lines."""

	def setUp(self):
		self.tmp = tempfile.mkdtemp(prefix="nestsleep-series-git-")
		self.addCleanup(shutil.rmtree, self.tmp)
		self.kdir = fixture_tree(self.tmp)
		self.out = os.path.join(self.tmp, "out")

	def run_fixes(self, *extra, env=None):
		return subprocess.run(["/usr/bin/python3", "-m", "nestsleep", "fixes", "--kdir", self.kdir, "-j", "2",
				       "--out", self.out] + list(extra), capture_output=True, text=True,
				      env=env or clean_env(self.tmp), cwd=self.tmp, timeout=300)

	def patches(self):
		man = read_json(os.path.join(self.out, "series.json"))
		return man, [p for s in man["series"] for p in s["patches"]]

	def findings_json(self, split=True):
		"""The fixture's MODE=patch findings; with split, each function's
		chain ends in a sleeping call of its own, so that no two functions
		share a patch and the series has one patch per function."""
		jp = os.path.join(self.tmp, "findings.json")
		r = subprocess.run(["/usr/bin/python3", "-m", "nestsleep", "coccicheck", "--kdir", self.kdir, "--mode",
				    "patch", "-j", "2", "--json", jp], capture_output=True, text=True,
				   env=clean_env(self.tmp), cwd=self.tmp, timeout=300)
		self.assertEqual(r.returncode in (0, 1), True, r.stderr)
		data = read_json(jp)
		if split:
			for f in data["findings"]:
				f["chain"] = f["chain"][:-1] + ["sleeper_of_" + f["function"]]
		with open(jp, "w") as f:
			json.dump(data, f)
		return jp

	def test_series_one_patch_per_shared_sleeper(self):
		r = self.run_fixes("--confidence", "low")
		self.assertEqual(r.returncode, 0, r.stderr)
		man, ps = self.patches()
		# the four functions of core.c all end in mutex_lock(): one patch
		self.assertEqual(len(ps), 1)
		self.assertEqual(len(ps[0]["units"]), 4)
		self.assertIn("fix nested sleeps in", ps[0]["subject"])

	def test_series_git_am_in_order(self):
		r = self.run_fixes("--confidence", "low", "--json", self.findings_json())
		self.assertEqual(r.returncode, 0, r.stderr)
		man, ps = self.patches()
		self.assertGreaterEqual(len(ps), 2)
		env = clean_env(self.tmp)
		for s in man["series"]:
			bad, n = am_series(self.out, s["dir"], self.kdir, env, self.tmp)
			self.assertEqual(bad, [], "git am stops in %s" % s["dir"])
			self.assertEqual(s["git_am"]["applied"], n)
			# real git format-patch output, threaded, cover letter filled
			cover = read(os.path.join(self.out, s["cover"]))
			self.assertNotIn("*** SUBJECT HERE ***", cover)
			self.assertNotIn("*** BLURB HERE ***", cover)
			self.assertRegex(cover, r"(?m)^Message-Id: <")
			for p in s["patches"]:
				text = read(os.path.join(self.out, p["patch"]))
				self.assertRegex(text, r"(?m)^In-Reply-To: <")
				self.assertRegex(text, r"(?m)^From [0-9a-f]{40} Mon Sep 17 00:00:00 2001$")
		# one #include hunk in the whole series, not one per patch
		allp = "".join(read(os.path.join(self.out, p["patch"])) for p in ps)
		self.assertLessEqual(allp.count("+#include <linux/sched/signal.h>"), 1)
		self.assertNotIn(".git", os.listdir(self.kdir))

	def test_retest_rewrites_patch_cover_and_manifest(self):
		r = self.run_fixes("--confidence", "low")
		self.assertEqual(r.returncode, 0, r.stderr)
		man, ps = self.patches()
		fp = ps[0]["fingerprints"][0]
		code = records.code_digest([os.path.join(self.out, ps[0]["patch"])])
		with open(os.path.join(self.out, "boottest.json"), "w") as f:
			json.dump({"results": {fp: {"status": "ok", "build": "ok", "boot": "ok", "exercised": True,
						    "exerciser": "kernel-boot/exercise/x.sh", "applied_after": [], "code": code,
						    "baseline_hits": ["do not call blocking ops in sess_busy"],
						    "patched_hits": []}}}, f)
		r = subprocess.run(["/usr/bin/python3", "-m", "nestsleep", "retest", self.out], capture_output=True,
				   text=True, env=clean_env(self.tmp), timeout=300)
		self.assertEqual(r.returncode, 0, r.stderr)
		man, ps = self.patches()
		self.assertIn("the unpatched kernel warned", ps[0]["tested_text"])
		self.assertIn("booted", ps[0]["test_status"])
		patch = re.sub(r"\s+", " ", read(os.path.join(self.out, ps[0]["patch"])))
		cover = re.sub(r"\s+", " ", read(os.path.join(self.out, man["series"][0]["cover"])))
		self.assertIn(re.sub(r"\s+", " ", ps[0]["tested_text"]), patch)
		# no copy of the old testing paragraph is left (a lone patch has
		# one in its notes' bullet and one closing them)
		self.assertNotIn("Not compiled or boot-tested.", patch)
		self.assertIn("the unpatched kernel warned", cover)
		# the warning a boot printed is now quoted, and only that one
		self.assertIn("printed the warning \"do not call blocking ops in sess_busy\"", patch)
		# the commit message says it in one sentence; the exerciser is below '---'
		msg, below = patch.split(" --- ", 1)
		n = len(ps[0]["fingerprints"])
		self.assertIn("Found by nestsleep, a Coccinelle-based checker; reproduced in QEMU with "
			      "CONFIG_DEBUG_ATOMIC_SLEEP=y, and the patched kernel no longer warns%s." % (
				      " (1 of the %d nested sleeps); not compiled or boot-tested (%d of %d)" % (n, n - 1, n)
				      if n > 1 else ""), msg)
		self.assertNotIn("kernel-boot/", msg)
		self.assertIn("kernel-boot/exercise/x.sh", below)
		self.assertEqual(man["tests"][fp]["boot"]["baseline_hits"], ["do not call blocking ops in sess_busy"])
		# checkpatch has not seen the new text: its record and the cover say so
		self.assertEqual(ps[0]["checkpatch"]["status"], "not run")
		self.assertIn("the changelog changed after checkpatch ran", ps[0]["checkpatch"]["output"])
		self.assertNotIn("patches clean.", cover)

	def test_retest_drops_the_record_of_other_code(self):
		"""A boot record made with other code (its digest differs from
		the patch's now) is not claimed: the patch says it was not run."""
		r = self.run_fixes("--confidence", "low")
		self.assertEqual(r.returncode, 0, r.stderr)
		man, ps = self.patches()
		fp = ps[0]["fingerprints"][0]
		path = os.path.join(self.out, ps[0]["patch"])
		rec = {"status": "ok", "build": "ok", "boot": "ok", "exercised": False, "applied_after": [],
		       "code": records.code_digest([path])}
		bp = os.path.join(self.out, "boottest.json")
		run = lambda: subprocess.run(["/usr/bin/python3", "-m", "nestsleep", "retest", self.out],
					     capture_output=True, text=True, env=clean_env(self.tmp), timeout=300)
		with open(bp, "w") as f:
			json.dump({"results": {fp: rec}}, f)
		self.assertEqual(run().returncode, 0)
		man, ps = self.patches()
		self.assertIn("booted with no new splat", ps[0]["tested_text"])
		# the changelog is not code: rewriting it keeps the digest
		self.assertEqual(records.code_digest([path]), rec["code"])
		with open(bp, "w") as f:
			json.dump({"results": {fp: dict(rec, code="0" * 16)}}, f)
		self.assertEqual(run().returncode, 0)
		man, ps = self.patches()
		self.assertNotIn("booted with no new splat", ps[0]["tested_text"])
		# a record from before the digests cannot be tied to the code either
		with open(bp, "w") as f:
			json.dump({"results": {fp: {k: v for k, v in rec.items() if k != "code"}}}, f)
		self.assertEqual(run().returncode, 0)
		man, ps = self.patches()
		self.assertNotIn("booted with no new splat", ps[0]["tested_text"])
		self.assertIn("the boot record is of another version", ps[0]["tested_text"])

	def test_fixes_keeps_boot_records_only_for_their_code(self):
		"""make fixes run again over an OUT with a boottest.json: a record
		of other code is not claimed in the new patches; one of the same
		code is."""
		r = self.run_fixes("--confidence", "low")
		self.assertEqual(r.returncode, 0, r.stderr)
		man, ps = self.patches()
		fp = ps[0]["fingerprints"][0]
		rec = {"status": "ok", "build": "ok", "boot": "ok", "exercised": False, "applied_after": []}
		for code, claimed in (("0" * 16, False), (records.code_digest([os.path.join(self.out, ps[0]["patch"])]), True)):
			with open(os.path.join(self.out, "boottest.json"), "w") as f:
				json.dump({"results": {fp: dict(rec, code=code)}}, f)
			r = self.run_fixes("--confidence", "low")
			self.assertEqual(r.returncode, 0, r.stderr)
			man, ps = self.patches()
			text = read(os.path.join(self.out, ps[0]["patch"]))
			self.assertEqual("booted with no new splat" in ps[0]["tested_text"], claimed)
			self.assertEqual("booted with no new splat" in " ".join(text.split()), claimed)

	def test_series_no_signoff_by_default(self):
		# a configured identity is not used to sign unless asked
		env = clean_env(self.tmp, ("Machine Placeholder", "placeholder@example.org"))
		r = self.run_fixes("--confidence", "low", env=env)
		self.assertEqual(r.returncode, 0, r.stderr)
		self.assertIn("must be signed", r.stderr)
		man, ps = self.patches()
		self.assertEqual(man["signoff"], "")
		for p in ps:
			text = read(os.path.join(self.out, p["patch"]))
			self.assertNotIn("Signed-off-by", text)
			self.assertNotIn("Machine Placeholder", text)
			self.assertRegex(text, r"(?m)^From: .*REPLACE")
		cover = read(os.path.join(self.out, man["series"][0]["cover"]))
		self.assertIn("must be signed", cover.replace("\n", " "))
		self.assertIn("git am -s", cover)
		# the user's git config is read, never written
		self.assertEqual(read(os.path.join(self.tmp, "gitconfig")),
				 "[user]\n\tname = Machine Placeholder\n\temail = placeholder@example.org\n")

	def test_series_signoff_1_uses_git_identity(self):
		env = clean_env(self.tmp, ("Ada Tester", "ada@example.org"))
		r = self.run_fixes("--confidence", "low", "--signoff", "1", env=env)
		self.assertEqual(r.returncode, 0, r.stderr)
		man, ps = self.patches()
		for p in ps:
			text = read(os.path.join(self.out, p["patch"]))
			self.assertIn("Signed-off-by: Ada Tester <ada@example.org>", text)
			self.assertRegex(text, r"(?m)^From: Ada Tester <ada@example.org>$")

	def test_series_signoff_1_without_identity_is_bad_input(self):
		r = self.run_fixes("--signoff", "1")
		self.assertEqual(r.returncode, 2, r.stderr)
		self.assertNotIn("Traceback", r.stderr)

	def test_series_signoff_named(self):
		r = self.run_fixes("--confidence", "low", "--signoff", "B Person <b@example.org>")
		self.assertEqual(r.returncode, 0, r.stderr)
		man, ps = self.patches()
		self.assertEqual(man["signoff"], "B Person <b@example.org>")
		for p in ps:
			text = read(os.path.join(self.out, p["patch"]))
			self.assertEqual(text.count("Signed-off-by: B Person <b@example.org>"), 1)
			self.assertRegex(text, r"(?m)^From: B Person <b@example.org>$")

	def test_series_selection_labels_and_confidence(self):
		r = self.run_fixes("--confidence", "low")
		self.assertEqual(r.returncode, 0, r.stderr)
		man, ps = self.patches()
		fps = [fp for p in ps for fp in p["fingerprints"]]
		self.assertGreaterEqual(len(fps), 2)
		# label one finding false-positive, the others true: it leaves the series
		labels = os.path.join(self.tmp, "labels.json")
		with open(labels, "w") as f:
			json.dump({"labels": dict([(fp, {"verdict": "true", "reason": "t"}) for fp in fps[1:]] +
						  [(fps[0], {"verdict": "false-positive", "reason": "not reachable"})])}, f)
		r = self.run_fixes("--labels", labels)
		self.assertEqual(r.returncode, 0, r.stderr)
		man, ps = self.patches()
		got = [fp for p in ps for fp in p["fingerprints"]]
		self.assertNotIn(fps[0], got)
		ro = [x for x in man["report_only"] if x["fingerprint"] == fps[0]]
		self.assertEqual(len(ro), 1)
		self.assertIn("false-positive", ro[0]["reason"])
		# without labels: only high confidence
		r = self.run_fixes()
		self.assertEqual(r.returncode, 0, r.stderr)
		man, ps = self.patches()
		self.assertTrue(all(p["confidence"] == "high" for p in ps))
		for x in man["report_only"]:
			if x["status"] == "patch":
				self.assertIn("confidence", x["reason"])
		r = self.run_fixes("--confidence", "bogus")
		self.assertEqual(r.returncode, 2)


class GitKdirSeries(unittest.TestCase):
	"""make fixes on a git KDIR: the prefix from its history, a Fixes: tag,
	--base, and KDIR left as it was."""

	def test_git_kdir(self):
		tmp = tempfile.mkdtemp(prefix="nestsleep-series-gitkdir-")
		self.addCleanup(shutil.rmtree, tmp)
		kdir = fixture_tree(tmp)
		env = clean_env(tmp)
		git(kdir, env, "init", "-q")
		git(kdir, env, "add", "-A")
		git(kdir, env, "-c", "user.name=T", "-c", "user.email=t@example.org", "commit", "-q", "-m",
		    "sess: add the session core")
		head = git(kdir, env, "rev-parse", "HEAD").stdout.strip()
		before = git(kdir, env, "count-objects", "-v").stdout
		out = os.path.join(tmp, "out")
		r = subprocess.run(["/usr/bin/python3", "-m", "nestsleep", "fixes", "--kdir", kdir, "-j", "2", "--out", out,
				    "--confidence", "low"], capture_output=True, text=True, env=env, cwd=tmp, timeout=300)
		self.assertEqual(r.returncode, 0, r.stderr)
		man = read_json(os.path.join(out, "series.json"))
		self.assertTrue(man["git"])
		self.assertEqual(man["base"], head)
		for s in man["series"]:
			self.assertEqual(s["git_am"]["failed"], None)
			cover = read(os.path.join(out, s["cover"]))
			self.assertIn("base-commit: " + head, cover)
			for p in s["patches"]:
				text = read(os.path.join(out, p["patch"]))
				self.assertIn('Fixes: %s ("sess: add the session core")' % head[:12], text)
				self.assertRegex(text, r"(?m)^Subject: \[PATCH[^\]]*\] sess: ")
		# KDIR: no new objects, nothing changed in its work tree
		self.assertEqual(git(kdir, env, "count-objects", "-v").stdout, before)
		self.assertEqual(git(kdir, env, "status", "--porcelain").stdout, "")
		self.assertEqual(git(kdir, env, "rev-parse", "HEAD").stdout.strip(), head)


class StateTest(unittest.TestCase):
	def test_state_as_the_kernel_prints_it(self):
		for t in (T61, T612):
			if not os.path.isdir(t):
				self.skipTest("no tree")
			self.assertEqual(effect.state_hex(t, "TASK_KILLABLE"), "102")
			self.assertEqual(effect.state_hex(t, "TASK_INTERRUPTIBLE"), "1")
			self.assertEqual(effect.state_hex(t, "TASK_UNINTERRUPTIBLE"), "2")
			self.assertEqual(effect.state_hex(t, "TASK_IDLE"), "402")
			self.assertEqual(effect.state_hex(t, "TASK_INTERRUPTIBLE | TASK_FREEZABLE"), "2001")


class EffectTest(unittest.TestCase):
	def test_wait_event_no_lost_wakeup(self):
		t = effect.effect_text("wait_event", "warns", "102")
		self.assertNotRegex(t, r"can (miss|lose)|can be lost|miss its")
		self.assertIn("extra pass", t)
		self.assertIn("state=102", t)
		self.assertNotIn("[<", t)
		self.assertRegex(t, r"(?i)with CONFIG_DEBUG_ATOMIC_SLEEP=y this path warns")

	def test_rearmed_before_the_sleep_no_extra_pass(self):
		# io_uring (round-4 review): the call runs before the
		# prepare_to_wait*() that sets the state again in its pass, and
		# the condition is tested after it: the effect is the warning
		f = {"shape": "prepare_to_wait", "effect": "warns", "fingerprint": "x", "after_loop": None,
		     "fix": {"kind": "restore_call"}}
		self.assertEqual(changelog.effect_shape(f), "rearmed")
		self.assertEqual(changelog.effect_shape(dict(f, fix={"kind": "prepare_to_wait"})), "prepare_to_wait")
		t = effect.effect_text("rearmed", "warns", "1")
		self.assertNotIn("busy-polls", t)
		self.assertNotIn("extra pass", t)
		self.assertIn("nothing polls and no wakeup is lost", t)

	def test_open_coded_no_lost_wakeup(self):
		# the inner sleep returns in TASK_RUNNING, the schedule() after it
		# returns at once and the loop tests its condition again: the
		# effects are the warning and extra passes, not a lost wakeup
		for shape in ("set_current_state", "prepare_to_wait"):
			t = effect.effect_text(shape, "warns", "1")
			self.assertNotRegex(t, r"(?i)can (miss|lose)|can be lost|lose (a|the|its) wakeup|lost wakeup")
			self.assertIn("is not lost", t)
			self.assertIn("extra pass", t)
			self.assertIn("busy-polls", t)
			self.assertIn("state=1", t)
			self.assertNotIn("[<", t)

	def test_after_loop(self):
		t = effect.effect_text("after_loop", "warns", "1")
		self.assertNotRegex(t, r"can (miss|lose)|can be lost|polls for")
		self.assertIn("no wakeup is lost", t)

	def test_no_line_numbers(self):
		self.assertEqual(noline("the wait loop on line 282 leaves; see drivers/x.c:12 and core.c:3"),
				 "the wait loop leaves; see drivers/x.c and core.c")

	def test_silent(self):
		t = effect.effect_text("wait_event", "silent", "2")
		self.assertNotIn("warns", t.replace("no warning", ""))

	def test_observed_quoted(self):
		t = effect.effect_text("wait_event", "warns", "1", observed="do not call blocking ops in acpi_aml_kern_readable")
		self.assertIn("acpi_aml_kern_readable", t)
		self.assertIn("printed", t)


class PrefixTableTest(unittest.TestCase):
	def test_prefix_fixes(self):
		self.assertEqual(subjects.path_prefix("drivers/cdx/controller/mcdi.c"), "cdx:")
		self.assertEqual(subjects.path_prefix("drivers/mtd/spi-nor/core.c"), "mtd: spi-nor:")
		self.assertEqual(subjects.path_prefix("drivers/media/radio/radio-cadet.c"), "media: radio-cadet:")

	def test_table_covers_committed_series(self):
		n = 0
		for tid in TREES:
			man = read_json(os.path.join(TOP, "reports", "fixes", tid, "series.json"))
			for s in man["series"]:
				for p in s["patches"]:
					for rel in p["files"]:
						self.assertIsNotNone(subjects.table_prefix(rel), rel)
						n += 1
		self.assertGreater(n, 0)


class RecipientsTest(unittest.TestCase):
	def test_every_section(self):
		if not os.path.isfile(os.path.join(T612, "scripts", "get_maintainer.pl")):
			self.skipTest("no 6.12 tree")
		to, cc = recipients.recipients(T612, ["drivers/net/xen-netfront.c"])
		self.assertIn("netdev@vger.kernel.org", cc)
		self.assertIn("xen-devel@lists.xenproject.org", " ".join(cc))
		# NETWORKING DRIVERS' maintainers, not only XEN's
		self.assertTrue(any("davem@davemloft.net" in x for x in to), to)
		self.assertFalse(set(to) & set(cc))
		# a section name with parentheses: MEMORY TECHNOLOGY DEVICES (MTD)
		to, cc = recipients.recipients(T612, ["drivers/mtd/spi-nor/core.c"])
		self.assertTrue(any("miquel.raynal@bootlin.com" in x for x in to), to)
		self.assertIn("linux-mtd@lists.infradead.org", cc)


class NetPrefixTest(unittest.TestCase):
	def test_fixes_go_to_the_fixes_tree(self):
		# every patch fixes a bug: [PATCH net] (maintainer-netdev.rst), with
		# or without a Fixes: tag found here; the notes say what to name
		row = [r for r in recipients.TREE_TAGS if r["name"] == "netdev"][0]
		self.assertEqual(recipients.subject_prefix(row), "PATCH net")
		self.assertEqual(recipients.subject_prefix(None), "PATCH")


class FixesTagTest(unittest.TestCase):
	"""Fixes: names the later of the commit that added the wait and the
	one that added the sleeping hop."""

	def test_fixes_tag(self):
		tmp = tempfile.mkdtemp()
		self.addCleanup(shutil.rmtree, tmp)
		env = clean_env(tmp)
		git(tmp, env, "init", "-q")
		p = os.path.join(tmp, "a.c")
		steps = [("a: add the wait", "int f(void)\n{\n\twait_event(q, ready(d));\n}\n"),
			 ("a: take the lock in ready()", "static int ready(struct d *d)\n{\n\tmutex_lock(&d->m);\n}\n"
			  "int f(void)\n{\n\twait_event(q, ready(d));\n}\n"),
			 ("a: unrelated", "/* x */\nstatic int ready(struct d *d)\n{\n\tmutex_lock(&d->m);\n}\n"
			  "int f(void)\n{\n\twait_event(q, ready(d));\n}\n")]
		shas = []
		for subj, text in steps:
			with open(p, "w") as f:
				f.write(text)
			git(tmp, env, "add", "-A")
			git(tmp, env, "-c", "user.name=T", "-c", "user.email=t@example.org", "commit", "-q", "-m", subj)
			shas.append(git(tmp, env, "rev-parse", "HEAD").stdout.strip())
		unit = {"findings": [{"file": "a.c", "line": 8, "chain_locs": ["a.c:4"]}]}
		old = dict(os.environ)
		os.environ.update(GIT_CONFIG_NOSYSTEM="1", GIT_CONFIG_GLOBAL=os.devnull)
		try:
			tag = changelog.fixes_tag(tmp, unit)
		finally:
			os.environ.clear()
			os.environ.update(old)
		self.assertEqual(tag, '%s ("a: take the lock in ready()")' % shas[1][:12])


class CommittedSeriesApply(unittest.TestCase):
	"""Every committed series applies with git am, in order, to the
	pristine files of its tree."""

	def test_committed_series_git_am(self):
		tmp = tempfile.mkdtemp()
		self.addCleanup(shutil.rmtree, tmp)
		env = clean_env(tmp)
		fails, total = [], 0
		for tid, tree in TREES.items():
			if not os.path.isfile(os.path.join(tree, "Makefile")):
				self.skipTest("no %s tree (make setup)" % tid)
			out = os.path.join(TOP, "reports", "fixes", tid)
			man = read_json(os.path.join(out, "series.json"))
			for s in man["series"]:
				bad, n = am_series(out, s["dir"], tree, env, tmp)
				total += n
				fails += ["%s/%s" % (tid, b) for b in bad]
		self.assertGreater(total, 0)
		self.assertEqual(fails, [])

	def test_committed_series_unsigned_and_true(self):
		for tid in TREES:
			out = os.path.join(TOP, "reports", "fixes", tid)
			man = read_json(os.path.join(out, "series.json"))
			lp = os.path.join(TOP, "reports", "labels", tid + ".json")
			labels = read_json(lp)["labels"] if os.path.isfile(lp) else {}
			for s in man["series"]:
				for p in s["patches"]:
					self.assertNotIn("Signed-off-by:", read(os.path.join(out, p["patch"])), p["patch"])
					for fp in p["fingerprints"]:
						if labels:
							self.assertEqual(labels.get(fp, {}).get("verdict"), "true", (tid, p["patch"]))


class ReportTextTest(unittest.TestCase):
	def test_patch_holds_realigned_diff(self):
		from nestsleep.triage import reports
		fixer = "--- a/x.c\n+++ b/x.c\n@@ -1,3 +1,4 @@\n+#include <linux/wait.h>\n-\t}\n-old();\n+new();\n+\t}\n"
		# git aligned the same change differently, and an earlier patch
		# of the series added the #include
		git_patch = ["-old();", "+new();", "+other();"]
		self.assertTrue(reports.patch_holds(git_patch, fixer))
		self.assertFalse(reports.patch_holds(["-old();", "+other();"], fixer))

	def test_reports_reproduce_names_tree_id(self):
		from nestsleep.triage import reports
		r = {"file": "drivers/x/y.c", "line": 3, "col": 1, "function": "f", "message": "m", "fingerprint": "ab",
		     "chain": ["g", "mutex_lock"], "chain_locs": ["drivers/x/y.c:2", "y:1"], "confidence": "high",
		     "confidence_reason": "r", "effect": "warns", "shape": "wait_event", "primitive": "wait_event_killable",
		     "call": "g", "maintainers": [], "lists": [], "kind": "nested_sleep"}
		md = reports.section_md("S", [r], "/nonexistent/tree", {}, "/root/.cache/nestsleep/linux-source-6.12",
					tid="linux-6.12.118")
		self.assertIn("linux-6.12.118", md)
		self.assertNotIn("/root/", md)
		self.assertNotIn("[<", md)
		self.assertNotRegex(md, r"miss its wakeup|lose its wakeup")
		self.assertIn("state=102", md)


if __name__ == "__main__":
	unittest.main()


class InorderTest(unittest.TestCase):
	"""How one patch's in-order build is judged (series/inorder.py), with a
	stand-in for make."""

	class Fake:
		def __init__(self, results):
			self.results = results
			self.calls = []

		def compile(self, obj, arches):
			self.calls.append((obj, tuple(arches)))
			return self.results[obj]

	def test_ok_failed_not_built(self):
		from nestsleep.series import inorder
		e = {"files": ["drivers/a.c", "drivers/b.c", "include/x.h"]}
		b = self.Fake({"drivers/a.o": ("ok", "x86_64", "")})
		r = inorder.build_patch(b, e, 2, {"drivers/a.o": "x86_64"}, {"drivers/b.o": "No rule"})
		self.assertEqual(r["status"], "ok")
		self.assertIn("after patches 1-2 of the series", r["how"])
		self.assertEqual(r["not_built"], ["drivers/b.o"])
		# only the arch that built the unpatched object is tried
		self.assertEqual(b.calls, [("drivers/a.o", ("x86_64",))])
		b = self.Fake({"drivers/a.o": ("not-built", None, "error: x")})
		r = inorder.build_patch(b, {"files": ["drivers/a.c"]}, 1, {"drivers/a.o": "powerpc"}, {})
		self.assertEqual(r["status"], "failed")
		r = inorder.build_patch(b, {"files": ["drivers/b.c"]}, 1, {}, {"drivers/b.o": "x"})
		self.assertEqual(r["status"], "not-built")
		self.assertIn("unpatched", r["reason"])


class InorderConfigTest(unittest.TestCase):
	"""An object is built only where its Kconfig symbols are on: make
	compiles a single object whatever the .config says (drivers/cdx/
	controller/ on x86_64, whose CDX_BUS depends on OF && ARM64), so that
	build would prove nothing."""

	def test_arch_without_the_symbol_is_skipped(self):
		from nestsleep.series import inorder
		tmp = tempfile.mkdtemp()
		self.addCleanup(shutil.rmtree, tmp)
		b = inorder.Builder.__new__(inorder.Builder)
		b.builds = {}
		for arch, conf in (("x86_64", "# CONFIG_CDX_CONTROLLER is not set\nCONFIG_PCI=y\n"),
				   ("arm64", "CONFIG_CDX_CONTROLLER=m\nCONFIG_PCI=y\n")):
			os.makedirs(os.path.join(tmp, arch))
			with open(os.path.join(tmp, arch, ".config"), "w") as f:
				f.write(conf)
			b.builds[arch] = os.path.join(tmp, arch)
		made = []

		def make(arch, target, extra=()):
			made.append((arch, target))
			return subprocess.CompletedProcess([], 0, "", "")
		b.make = make
		st = b.compile("drivers/cdx/controller/mcdi.o", ["x86_64", "arm64"], ["CDX_CONTROLLER"])
		self.assertEqual(st, ("ok", "arm64", ""))
		self.assertEqual(made, [("arm64", "drivers/cdx/controller/mcdi.o")])
		# no arch has it: not built, and the reason says why
		st = b.compile("drivers/cdx/controller/mcdi.o", ["x86_64"], ["CDX_CONTROLLER"])
		self.assertEqual(st[0], "not-built")
		self.assertIn("CONFIG_CDX_CONTROLLER is not set in x86_64 allmodconfig", st[2])
		# series.json names them with their CONFIG_ prefix
		self.assertEqual(b.compile("drivers/cdx/controller/mcdi.o", ["x86_64", "arm64"],
					   ["CONFIG_CDX_CONTROLLER"]), ("ok", "arm64", ""))
		# an object with no symbol known is built as before
		self.assertEqual(b.compile("drivers/a.o", ["x86_64"], [])[:2], ("ok", "x86_64"))
