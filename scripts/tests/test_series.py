# SPDX-License-Identifier: GPL-2.0-only
"""Unit tests for nestsleep.series (make fixes): series.py and the modules it calls."""

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

from nestsleep import TOP, cache_dir
from nestsleep.series import changelog, changelog_tested, cover, gitrepo, recipients, series, subjects
from nestsleep.series import reach

KTREE = os.path.join(cache_dir(), "linux-source-6.1")

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_series_wakers import check_listed_wakers  # noqa: E402


def read(path):
	with open(path) as f:
		return f.read()


def read_json(path):
	with open(path) as f:
		return json.load(f)


def clean_env(home):
	env = dict(os.environ, HOME=home, GIT_CONFIG_NOSYSTEM="1", GIT_CONFIG_GLOBAL=os.devnull,
		   NESTSLEEP_CACHE=os.path.join(cache_dir(), "test-cache"))
	return env


class PrefixTest(unittest.TestCase):
	def test_fixes_seed_prefixes(self):
		self.assertEqual(subjects.path_prefix("net/bluetooth/hidp/core.c"), "Bluetooth: hidp:")
		self.assertEqual(subjects.path_prefix("net/bluetooth/cmtp/capi.c"), "Bluetooth: cmtp:")
		self.assertEqual(subjects.path_prefix("drivers/md/raid5.c"), "md/raid5:")
		self.assertEqual(subjects.path_prefix("fs/ceph/caps.c"), "ceph:")
		self.assertEqual(subjects.path_prefix("drivers/iio/industrialio-buffer.c"), "iio:")
		self.assertEqual(subjects.path_prefix("drivers/vfio/vfio.c"), "vfio:")
		self.assertEqual(subjects.path_prefix("drivers/virtio/virtio_balloon.c"), "virtio-balloon:")

	def test_fixes_fallbacks(self):
		self.assertEqual(subjects.path_prefix("drivers/media/pci/saa7164/saa7164-vbi.c"), "media: saa7164:")
		self.assertEqual(subjects.path_prefix("drivers/staging/pi433/pi433_if.c"), "staging: pi433:")
		self.assertEqual(subjects.path_prefix("net/tipc/socket.c"), "net: tipc:")
		# sctp has its own prefix in the table now, as its maintainers write it
		self.assertEqual(subjects.path_prefix("net/sctp/socket.c"), "sctp:")

	def test_fixes_git_prefix(self):
		tmp = tempfile.mkdtemp()
		try:
			env = clean_env(tmp)
			run = lambda *c: subprocess.run(["git", "-C", tmp] + list(c), env=env, capture_output=True,
							check=True)
			run("init", "-q")
			os.makedirs(os.path.join(tmp, "drivers", "foo"))
			p = os.path.join(tmp, "drivers", "foo", "bar.c")
			for i, subj in enumerate(["foo: bar: fix a leak", "foo: bar: add a quirk", "treewide: rename x"]):
				with open(p, "a") as f:
					f.write("int x%d;\n" % i)
				run("add", "-A")
				run("-c", "user.name=T", "-c", "user.email=t@example.org", "commit", "-q", "-m", subj)
			self.assertEqual(subjects.git_prefix(tmp, "drivers/foo/bar.c"), "foo: bar:")
			self.assertIsNone(subjects.git_prefix(os.path.join(tmp, "drivers"), "foo/bar.c"))
		finally:
			shutil.rmtree(tmp)


class TestedTextTest(unittest.TestCase):
	"""The changelog says only what was done, from boottest.json."""

	unit = {"unit": "drivers/acpi/acpi_dbg.c:acpi_aml_read", "findings": [{"fingerprint": "f1"}]}

	def text(self, rec):
		return changelog_tested.tested_text(self.unit, {}, {"f1": rec} if rec else {})

	def test_fixes_tested_text_boot_states(self):
		self.assertIn("booted in QEMU", self.text({"build": "ok", "boot": "ok"}))
		# nothing says it was compiled when no compile record says so
		self.assertIn("Not compiled.", self.text({"build": "ok", "boot": "ok"}))
		self.assertIn("the patched path was not exercised", self.text({"build": "ok", "boot": "ok"}))
		t = self.text({"build": "ok", "boot": "ok", "exercised": True, "exerciser": "kernel-boot/exercise/acpi_dbg.sh",
			       "baseline_hits": ["do not call blocking ops in acpi_aml_read"], "patched_hits": []})
		self.assertIn("the unpatched kernel warned \"do not call blocking ops in acpi_aml_read\"", t)
		self.assertIn("the patched kernel did not", t)
		t = self.text({"build": "ok", "boot": "ok", "exercised": True, "baseline_hits": [], "patched_hits": []})
		self.assertIn("did not warn there either", t)
		t = self.text({"status": "config failed", "build": "not run",
			       "reason": "CONFIG_ADB_PMU cannot be enabled on x86_64: depends on PPC_PMAC"})
		self.assertIn("Not boot-tested: CONFIG_ADB_PMU cannot be enabled", t)
		self.assertEqual(self.text(None), changelog_tested.NOT_TESTED)


class TestingNoteTest(unittest.TestCase):
	def test_fixes_testing_note_names_the_patches(self):
		"""The cover letter says which patch each testing text is for."""
		recs = {"f1": {"boot": {"build": "ok", "boot": "ok", "status": "ok"}}}
		ent = {"patches": [{"fingerprints": ["f1"]}, {"fingerprints": ["f2"]}, {"fingerprints": ["f3"]}]}
		t = cover.testing_note(ent, recs)
		self.assertRegex(t, r"Patch 1/3: [^:]*booted")
		self.assertIn("Patches 2/3, 3/3: ", t)
		self.assertNotIn("of 3)", t)
		one = cover.testing_note({"patches": [{"fingerprints": ["f2"]}, {"fingerprints": ["f3"]}]}, recs)
		self.assertIn("the same for all 2 patches", one)


class WokenStopsTest(unittest.TestCase):
	def test_fixes_woken_stops_reads_the_tree(self):
		"""The cover names what KDIR's wait_woken() tests (review21: 6.12
		tests kthread_should_stop_or_park(), not kthread_should_stop())."""
		tmp = tempfile.mkdtemp()
		self.addCleanup(shutil.rmtree, tmp)
		os.makedirs(os.path.join(tmp, "kernel", "sched"))
		body = "long wait_woken(struct wait_queue_entry *w, unsigned mode, long timeout)\n{\n\tif (!%s)\n\t\tx();\n}\n"
		for test, want in (("kthread_should_stop_or_park()", ["stopped or parked", "kthread_should_stop_or_park()"]),
				   ("is_kthread_should_stop()", ["stopped", "kthread_should_stop()"]), ("y()", None)):
			with open(os.path.join(tmp, "kernel", "sched", "wait.c"), "w") as f:
				f.write(body % test)
			self.assertEqual(cover.woken_stops(tmp), want)


def woken_in_diff(patch_text):
	"""Whether a patch's diff writes the wait_woken() form."""
	diff = patch_text[patch_text.find("\ndiff --git"):]
	return bool(re.search(r"^\+.*\b(?:wait_woken|woken_wake_function)\b", diff, re.M))


class CoverKindTest(unittest.TestCase):
	"""The cover letter says what each patch does from the patch's own fix
	kind: a patch that only sets TASK_RUNNING back after the loop does not
	rewrite the wait into the wait_woken() form."""

	@staticmethod
	def ent(kinds):
		pats = [{"subject": "x: fix nested sleep in f%d()" % i, "confidence": "high", "kind": k,
			 "fingerprints": ["f%d" % i], "checkpatch": {"status": "clean"}, "fixes_tag": "",
			 "fixes_hint": "the commit"} for i, k in enumerate(kinds)]
		return {"section": "X DRIVER", "patches": pats, "to": [], "cc": [], "cover_letter": len(kinds) > 1,
			"tree": "Tree: no tree in the subject.", "recipients_how": "Recipients: get_maintainer.pl.",
			"git_am": {"applied": len(kinds), "total": len(kinds)}}

	@staticmethod
	def manifest():
		return {"git": False, "selection": "findings labelled true", "signoff": False, "tests": {},
			"woken_stops": ["stopped", "kthread_should_stop()"]}

	def test_restore_only_cover_does_not_claim_wait_woken(self):
		t = cover.cover_blurb(self.ent(["restore", "restore"]), [], self.manifest(), "linux-6.1.192")
		self.assertNotIn("wait_woken", t)
		self.assertIn("TASK_RUNNING", t)

	def test_mixed_cover_names_the_patches_of_each_kind(self):
		t = " ".join(cover.cover_blurb(self.ent(["restore", "prepare_to_wait", "wait_event"]), [],
					       self.manifest(), "linux-6.1.192").split())
		self.assertRegex(t, r"Patch 1/3 sets the task state back to TASK_RUNNING")
		self.assertRegex(t, r"Patches 2/3, 3/3 rewrite the wait into the wait_woken\(\) form")
		self.assertRegex(t, r"One change patches 2/3, 3/3 make: wait_woken\(\)")
		self.assertNotIn("Each patch", t)

	def test_missed_wakeup_patch_is_not_called_a_rewrite(self):
		t = " ".join(cover.cover_blurb(self.ent(["wait_event", "missed_wakeup"]), [], self.manifest(),
					       "linux-6.1.192").split())
		self.assertIn("Patch 2/2 adds the wakeup that a writer of the wait's condition misses", t)
		self.assertIn("One change patch 1/2 makes: wait_woken()", t)

	def test_woken_only_cover_unchanged(self):
		t = " ".join(cover.cover_blurb(self.ent(["prepare_to_wait", "wait_event"]), [], self.manifest(),
					       "linux-6.1.192").split())
		self.assertIn("Each patch rewrites the wait into the wait_woken() form", t)
		self.assertIn("One change every patch makes: wait_woken()", t)

	def test_committed_covers_match_their_patches(self):
		"""Each committed cover letter says wait_woken() of a patch only if
		that patch's diff writes it."""
		bad = []
		for d in sorted(os.listdir(os.path.join(TOP, "reports", "fixes"))):
			top = os.path.join(TOP, "reports", "fixes", d)
			for sec in sorted(os.listdir(top)) if os.path.isdir(top) else []:
				sd = os.path.join(top, sec)
				if not os.path.isfile(os.path.join(sd, "0000-cover-letter.patch")):
					continue
				cover = " ".join(read(os.path.join(sd, "0000-cover-letter.patch")).split())
				pats = sorted(p for p in os.listdir(sd) if p.endswith(".patch") and not p.startswith("0000-"))
				woken = [woken_in_diff(read(os.path.join(sd, p))) for p in pats]
				every = "Each patch rewrites the wait into" in cover or "One change every patch makes: wait_woken()" in cover
				if (every and not all(woken)) or ("wait_woken" in cover and not any(woken)):
					bad.append("%s/%s" % (d, sec))
		self.assertEqual(bad, [])


class SubjectTest(unittest.TestCase):
	@staticmethod
	def unit(func, prim="wait_event_killable", shape="wait_event", role="cond", file="drivers/mtd/spi-nor/core.c"):
		return ("%s:%s" % (file, func), [{"function": func, "primitive": prim, "shape": shape, "role": role,
						 "file": file}])

	def test_fixes_subject_says_what_the_waits_are(self):
		"""No "and 3 more": a subject that cannot name every function
		names the kind of wait and how many."""
		g = [self.unit(n) for n in ("spi_nor_lock_device", "spi_nor_rww_start_exclusive", "spi_nor_prep_and_lock_pe",
					    "spi_nor_prep_and_lock_rd")]
		self.assertEqual(subjects.subject_core("mtd: spi-nor:", g),
				 "mtd: spi-nor: fix nested sleeps in 4 wait_event_killable() conditions")
		g = [self.unit("_drbd_request_state", "wait_event_interruptible", file="drivers/block/drbd/drbd_state.c"),
		     self.unit("drbd_request_detach_interruptible", "wait_event_interruptible_timeout",
			       file="drivers/block/drbd/drbd_state.c")]
		self.assertEqual(subjects.subject_core("drbd:", g), "drbd: fix nested sleeps in 2 waits of drbd_state.c")
		self.assertEqual(subjects.subject_core("x:", [self.unit("a"), self.unit("b")]),
				 "x: fix nested sleeps in a() and b()")


class RestoreSubjectTest(unittest.TestCase):
	"""A patch that only restores TASK_RUNNING after the loop says so: the
	call runs after the wait, not in it (a reviewer: 'the subject calls it
	a nested sleep although the sleep comes after the loop')."""

	def test_restore_subject(self):
		f = {"function": "hpet_read", "call": "put_user", "primitive": "set_current_state",
		     "shape": "set_current_state", "fix": {"kind": "restore"}}
		self.assertEqual(subjects.subject_core("char: hpet:", [("u", [f])]),
				 "char: hpet: set TASK_RUNNING before put_user() in hpet_read()")
		g = dict(f, fix={"kind": "wait_event"})
		self.assertEqual(subjects.subject_core("char: hpet:", [("u", [g])]),
				 "char: hpet: fix nested sleep in hpet_read()")


class SelectTest(unittest.TestCase):
	"""Which findings get a patch."""

	@staticmethod
	def finding(fp, func, blocks=True, conf="high"):
		return {"fingerprint": fp, "function": func, "chain": ["drbd_reclaim_net_peer_reqs", "__drbd_free_peer_req",
									 "might_sleep"],
			"blocks": blocks, "fix": {"status": "patch", "unit": "a.c:" + func, "confidence": conf,
						  "reason": "r"}}

	def test_fixes_label_no_patch_is_report_only(self):
		"""A true finding whose label records a hand review against the
		rewrite (xen-netfront's probe wait, woken only once probe has
		returned) gets no patch, with that reason."""
		fs = [self.finding("a1", "xennet_create_dev"), self.finding("b2", "xennet_xdp_set")]
		labels = {"a1": {"verdict": "true", "no_patch": {"reason": "nothing wakes it during probe", "by": "x"}},
			  "b2": {"verdict": "true"}}
		units, others = series.select(fs, labels, os.path.join(TOP, "reports", "labels", "x.json"), "high")
		self.assertEqual(list(units), ["a.c:xennet_xdp_set"])
		self.assertIn("says the rewrite is not safe: nothing wakes it during probe", others[0][1])

	def test_fixes_annotation_only_is_report_only(self):
		"""A chain that only reaches might_sleep() gets no patch, even
		labelled true: nothing blocks, so there is no nested sleep to fix."""
		fs = [self.finding("a1", "drbd_alloc_pages", blocks=False), self.finding("b2", "other")]
		labels = {"a1": {"verdict": "true"}, "b2": {"verdict": "true"}}
		for lab in (labels, None):
			units, others = series.select(fs, lab, os.path.join(TOP, "reports", "labels", "x.json"), "high")
			self.assertEqual(list(units), ["a.c:other"])
			self.assertEqual(len(others), 1)
			self.assertIn("ends in might_sleep() in __drbd_free_peer_req()", others[0][1])
			self.assertIn("nothing on it is known to block", others[0][1])

	def test_fixes_missed_wakeup_is_not_an_annotation(self):
		"""A missed wakeup has no sleeping chain (blocks is false: its
		'chain' is the writer and its waker); the might_sleep() rule is
		about nested sleeps, so a true one gets its patch, and a harmless
		one is left out by its label."""
		fs = [dict(self.finding("a1", "acpi_aml_unlock_fifo", blocks=False), kind="missed_wakeup",
			   chain=["acpi_aml_unlock_fifo", "wake_up_interruptible"]),
		      dict(self.finding("b2", "cfg80211_stop_nan", blocks=False), kind="missed_wakeup",
			   chain=["cfg80211_stop_nan"])]
		labels = {"a1": {"verdict": "true"}, "b2": {"verdict": "harmless", "reason": "no one waits then. x"}}
		units, others = series.select(fs, labels, os.path.join(TOP, "reports", "labels", "x.json"), "high")
		self.assertEqual(list(units), ["a.c:acpi_aml_unlock_fifo"])
		self.assertEqual(len(others), 1)
		self.assertIn("labelled harmless in reports/labels/x.json: no one waits then", others[0][1])


class CheckpatchStatusTest(unittest.TestCase):
	def test_fixes_checks_are_counted(self):
		"""A CHECK is not clean (checkpatch turns --strict on for
		drivers/net/); CamelCase on a name the file already had is said."""
		tmp = tempfile.mkdtemp()
		self.addCleanup(shutil.rmtree, tmp)
		os.makedirs(os.path.join(tmp, "drivers", "net"))
		with open(os.path.join(tmp, "drivers", "net", "x.c"), "w") as f:
			f.write("int f(void) { return XenbusStateClosed; }\n")
		p = os.path.join(tmp, "0001.patch")
		with open(p, "w") as f:
			f.write("--- a/drivers/net/x.c\n+++ b/drivers/net/x.c\n@@ -1 +1 @@\n")
		out = "CHECK: Avoid CamelCase: <XenbusStateClosed>\n#20: FILE: drivers/net/x.c:1:\n"
		st = gitrepo.checkpatch_status(tmp, p, out, False)["status"]
		self.assertEqual(st, "0 errors, 0 warnings, 1 checks (CamelCase on names the file already uses: "
				 "XenbusStateClosed)")
		st = gitrepo.checkpatch_status(tmp, p, out.replace("XenbusStateClosed", "NewName"), False)["status"]
		self.assertEqual(st, "0 errors, 0 warnings, 1 checks")
		self.assertEqual(gitrepo.checkpatch_status(tmp, p, "", False)["status"], "clean")


class CheckpatchPathTest(unittest.TestCase):
	@unittest.skipUnless(os.path.isfile(os.path.join(KTREE, "scripts", "checkpatch.pl")), "no 6.1 tree")
	def test_fixes_relative_patch_path_is_checked(self):
		"""retest DIR with a relative DIR: checkpatch runs in the temp dir,
		and a relative path once made every patch 'clean' unread."""
		tmp = tempfile.mkdtemp(dir=os.getcwd())
		self.addCleanup(shutil.rmtree, tmp)
		p = os.path.join(tmp, "0001.patch")
		with open(p, "w") as f:
			f.write("From: A <a@example.org>\nSubject: [PATCH] x: y\n\nbody\n---\n"
				"diff --git a/drivers/x.c b/drivers/x.c\n--- a/drivers/x.c\n+++ b/drivers/x.c\n"
				"@@ -1 +1,2 @@\n int a;\n+int  b ;\n")
		st = gitrepo.checkpatch(KTREE, os.path.relpath(p), False)
		self.assertRegex(st["status"], r"^\d+ errors, [1-9]\d* warnings", st)


class KconfigTest(unittest.TestCase):
	def tree(self, files):
		tmp = tempfile.mkdtemp()
		self.addCleanup(shutil.rmtree, tmp)
		for rel, text in files.items():
			os.makedirs(os.path.dirname(os.path.join(tmp, rel)), exist_ok=True)
			with open(os.path.join(tmp, rel), "w") as f:
				f.write(text)
		return tmp

	def test_fixes_direct_and_parents(self):
		t = self.tree({"drivers/Makefile": "obj-$(CONFIG_FOO_BUS) += foo/\n",
			       "drivers/foo/Makefile": "obj-$(CONFIG_FOO) += a.o b.o \\\n\tc.o\n",
			       "drivers/foo/c.c": ""})
		self.assertEqual(recipients.kconfig_symbols(t, "drivers/foo/c.c"), ["CONFIG_FOO", "CONFIG_FOO_BUS"])

	def test_fixes_composite(self):
		t = self.tree({"drivers/bar/Makefile": "obj-$(CONFIG_BAR) += bar.o\nbar-y := core.o\n"
							 "bar-$(CONFIG_BAR_EXTRA) += extra.o\n"})
		self.assertEqual(recipients.kconfig_symbols(t, "drivers/bar/core.c"), ["CONFIG_BAR"])
		self.assertEqual(recipients.kconfig_symbols(t, "drivers/bar/extra.c"), ["CONFIG_BAR_EXTRA", "CONFIG_BAR"])

	def test_fixes_subdir_without_makefile(self):
		t = self.tree({"drivers/nfp/Makefile": "obj-$(CONFIG_NFP) += nfp.o\nnfp-objs := core/x.o\n"})
		self.assertEqual(recipients.kconfig_symbols(t, "drivers/nfp/core/x.c"), ["CONFIG_NFP"])

	def test_fixes_always_built(self):
		t = self.tree({"kernel/Makefile": "obj-y += sched.o\n"})
		self.assertEqual(recipients.kconfig_symbols(t, "kernel/sched.c"), [])


class SectionTest(unittest.TestCase):
	TEXT = """MEDIA INPUT INFRASTRUCTURE (V4L/DVB)
M:	Mauro <m@example.org>
L:	linux-media@vger.kernel.org
F:	drivers/media/

SAA7164 VIDEO4LINUX DRIVER
M:	Someone <s@example.org>
F:	drivers/media/pci/saa7164/

THE REST
M:	Linus Torvalds <torvalds@linux-foundation.org>
F:	*
F:	*/
"""

	def test_fixes_most_specific(self):
		secs = recipients.parse_sections(self.TEXT)
		self.assertEqual([s["name"] for s in secs][:2], ["MEDIA INPUT INFRASTRUCTURE (V4L/DVB)",
								  "SAA7164 VIDEO4LINUX DRIVER"])
		self.assertEqual(recipients.most_specific(secs, "drivers/media/pci/saa7164/a.c")["name"],
				 "SAA7164 VIDEO4LINUX DRIVER")
		self.assertEqual(recipients.most_specific(secs, "drivers/media/usb/b.c")["name"],
				 "MEDIA INPUT INFRASTRUCTURE (V4L/DVB)")
		self.assertEqual(recipients.most_specific(secs, "mm/x.c")["name"], "THE REST")


class TextTest(unittest.TestCase):
	def test_fixes_chain_lines_wrap(self):
		c = changelog.chain_text(["check_locality", "tpm_tis_read8", "data->phy_ops->read_bytes=tpm_tis_i2c_read_bytes",
				      "usleep_range"])
		out = changelog.chain_lines(c)
		self.assertIn("(through data->phy_ops->read_bytes)", out)
		self.assertTrue(all(len(x) <= 72 for x in out.splitlines()), out)


class FilesTree(unittest.TestCase):
	"""A small tree written from the class's FILES (path -> text), shared by
	the tests of one class."""
	FILES = {}

	@classmethod
	def setUpClass(cls):
		cls.tmp = tempfile.mkdtemp(prefix="nestsleep-reached-test-")
		for rel, text in cls.FILES.items():
			os.makedirs(os.path.dirname(os.path.join(cls.tmp, rel)), exist_ok=True)
			with open(os.path.join(cls.tmp, rel), "w") as f:
				f.write(text)

	@classmethod
	def tearDownClass(cls):
		shutil.rmtree(cls.tmp)


class ReachedSyscallTest(FilesTree):
	"""A function called from a SYSCALL_DEFINEn() body is reached from that
	system call (io_uring's io_cqring_wait() from io_uring_enter), not
	from wherever else the macro's name appears."""

	FILES = {
		"io_foo/io_foo.c": """
static int foo_cqring_wait(int n)
{
	return n;
}

SYSCALL_DEFINE6(foo_enter, unsigned int, fd, u32, to_submit, u32, min_complete,
		u32, flags, const void __user *, argp, size_t, argsz)
{
	return foo_cqring_wait(min_complete);
}
""",
		"io_foo/Makefile": "obj-y += io_foo.o\n",
		"arch/bar/kernel/sys_bar32.c": """
#define BAR32_SYSCALL_DEFINE6 SYSCALL_DEFINE6
""",
	}

	def test_reached_from_the_system_call(self):
		self.assertEqual(reach.reached_text(self.tmp, "io_foo/io_foo.c", "foo_cqring_wait"),
				 "foo_cqring_wait() is called from the foo_enter() system call "
				 "(SYSCALL_DEFINE6(foo_enter, ...) in io_foo.c).")
		self.assertEqual(reach.reached(self.tmp, "io_foo/io_foo.c", "foo_cqring_wait")[0], "syscall")


class ReachedTest(FilesTree):
	"""How a wait is reached: callers across files, each entry named."""

	FILES = {
		"drivers/foo/wait.c": """
#include "foo.h"
/* shared_wait() is mentioned here: commented_out(shared_wait); */
static int local_wait(void)
{
	return 0;
}

static int local_mid(void)
{
	return local_wait();
}

static ssize_t foo_read(struct file *f, char __user *b, size_t n, loff_t *p)
{
	return local_mid();
}

static const struct file_operations foo_fops = {
	.owner = THIS_MODULE,
	.read = foo_read,
};

int shared_wait(void)
{
	return 0;
}

int read_wait(void)
{
	return 0;
}

static int foo_read_op(struct foo_ops *ops)
{
	return read_wait();
}

void foo_setup(struct foo_ops *ops)
{
	ops->_read = foo_read_op;
}

int cmd_wait(void)
{
	return 0;
}

int foo_cmd_doit(void)
{
	return cmd_wait();
}

int exported_wait(void)
{
	return 0;
}
EXPORT_SYMBOL_GPL(exported_wait);

int err_wait(void)
{
	return 0;
}

int unused_wait(void)
{
	return 0;
}

int lonely_wait(void)
{
	return 0;
}

int lonely_a(void)
{
	return lonely_wait();
}

static int kt_wait(void)
{
	return 0;
}

static int kt_fn(void *data)
{
	while (!kthread_should_stop())
		kt_wait();
	return 0;
}

void kt_start(void)
{
	kthread_run(kt_fn, NULL, "kt");
}
""",
		"drivers/foo/other.c": """
#include "foo.h"
static int local_wait(void)
{
	return 1;
}

void other_init(struct foo_ops *ops)
{
	ops->read = local_wait;
}

int helper(void)
{
	return shared_wait();
}

int lonely_b(void)
{
	return lonely_wait();
}
""",
		"drivers/foo/probe.c": """
#include "foo.h"
static int bar_probe(struct platform_device *pdev)
{
	return helper();
}

static int baz_probe(struct platform_device *pdev)
{
	if (helper())
		goto fail;
	return 0;
fail:
	err_wait();
	return -1;
}

static int baz_remove(struct platform_device *pdev)
{
	err_wait();
	return 0;
}

static struct platform_driver baz_driver = {
	.probe = baz_probe,
	.remove = baz_remove,
};

static struct platform_driver bar_driver = {
	.driver = {
		.name = "bar",
	},
	.probe = bar_probe,
};
""",
		"drivers/foo/flags.c": """
#include "foo.h"
enum { F_VERBOSE = 1 << 1, F_SERIAL = 1 << 3, F_ORDERED = F_SERIAL + 4 };

int flag_wait(struct foo *f, int mask, int val, int flags)
{
	return 0;
}

static int quiet_caller(struct foo *f)
{
	return flag_wait(f, NS(a, b), F_VERBOSE);
}

static int ordered_caller(struct foo *f)
{
	return flag_wait(f, NS(a, b), F_VERBOSE + F_ORDERED);
}

static const struct file_operations quiet_fops = { .read = quiet_caller, };
static const struct file_operations flag_fops = { .write = ordered_caller, };
""",
		"drivers/foo/foo.h": """
int helper(void);
int foo_cmd_doit(void);
FOO_op(FOO_CMD, 1,
       FOO_doit(foo_cmd_doit), 0)
""",
		"net/baz/baz.c": """
static void baz_work_fn(struct work_struct *w)
{
	exported_wait();
}

void baz_init(struct baz *b)
{
	INIT_WORK(&b->work, baz_work_fn);
}
""",
	}


	def text(self, func):
		return reach.reached_text(self.tmp, "drivers/foo/wait.c", func)

	def test_reached_static_in_own_file(self):
		# other.c has a static local_wait() of its own, assigned to ops->read: not this one
		self.assertEqual(self.text("local_wait"),
				 "local_wait() is called from the .read member of foo_fops (struct file_operations): "
				 "foo_read() -> local_mid() -> local_wait().")
		self.assertEqual(reach.reached(self.tmp, "drivers/foo/wait.c", "local_wait")[0], "fops")

	def test_reached_probe_in_a_third_file(self):
		self.assertEqual(self.text("shared_wait"),
				 "shared_wait() is called from the .probe member of bar_driver (struct platform_driver) "
				 "in drivers/foo/probe.c: bar_probe() -> helper() -> shared_wait().")

	def test_reached_not_after_a_label_first(self):
		# baz_probe() calls it after the label fail:, baz_remove() on its way
		self.assertEqual(self.text("err_wait"),
				 "err_wait() is called from the .remove member of baz_driver (struct platform_driver) "
				 "in drivers/foo/probe.c: baz_remove() -> err_wait().")

	def test_reached_assignment(self):
		self.assertEqual(self.text("read_wait"),
				 "read_wait() is called through ops->_read (assigned in wait.c): "
				 "foo_read_op() -> read_wait().")
		self.assertEqual(self.text("foo_read_op"), "foo_read_op() is assigned to ops->_read (wait.c).")

	def test_reached_macro_argument(self):
		self.assertEqual(self.text("cmd_wait"),
				 "cmd_wait() is called from foo_cmd_doit(), named as an argument of FOO_doit() at "
				 "drivers/foo/foo.h:5 (\"FOO_doit(foo_cmd_doit), 0)\"): foo_cmd_doit() -> cmd_wait().")

	def test_reached_exported_from_another_dir(self):
		self.assertEqual(self.text("exported_wait"),
				 "exported_wait() is called from a work item function set up with INIT_WORK() in "
				 "net/baz/baz.c: baz_work_fn() -> exported_wait().")

	def test_reached_only_through_callers_whose_constants_may_sleep(self):
		"""drbd: abw_start_sync() passes CS_VERBOSE, the chain needs
		CS_SERIALIZE; the way in is drbd_request_state(), whose
		CS_ORDERED holds it (a macro argument standing for two)."""
		self.assertIn("quiet_caller()", reach.reached_text(self.tmp, "drivers/foo/flags.c", "flag_wait"))
		t = reach.reached_text(self.tmp, "drivers/foo/flags.c", "flag_wait", [(3, "bit", "F_SERIAL")])
		self.assertEqual(t, "flag_wait() is called from the .write member of flag_fops (struct file_operations): "
				 "ordered_caller() -> flag_wait().")

	def test_chain_says_the_parameter_test_it_needs(self):
		"""drbd: 'drbd_req_state() -> mutex_lock() (only when f has
		CS_SERIALIZE)': the chain line names the test by parameter."""
		f = {"file": "drivers/foo/flags.c", "function": "flag_wait",
		     "paths": [{"chain": ["take", "mutex_lock"], "needs": [[3, "bit", "F_SERIAL"]]}]}
		self.assertEqual(changelog.unit_chains([f], self.tmp), ["take() -> mutex_lock() (only when flags has F_SERIAL)"])
		self.assertEqual(changelog.unit_chains([f]), ["take() -> mutex_lock()"])
		long = changelog.chain_lines("rpmsg_send_offchannel_raw(): mutex_lock() (only when src is not RPMSG_ADDR_ANY "
					 "and dst is not RPMSG_ADDR_ANY)")
		self.assertTrue(all(len(x) <= 72 for x in long.split("\n")), long)
		self.assertIn("dst is not RPMSG_ADDR_ANY)", long)

	def test_reached_kthread(self):
		self.assertEqual(self.text("kt_wait"),
				 "kt_wait() is called from a kthread function started with kthread_run(): "
				 "kt_fn() -> kt_wait().")

	def test_reached_callers_but_no_entry(self):
		self.assertEqual(self.text("lonely_wait"),
				 "How lonely_wait() is reached at run time is not known; it is called from lonely_a() "
				 "(wait.c) and lonely_b() (drivers/foo/other.c).")

	def test_reached_no_caller(self):
		self.assertIsNone(reach.reached(self.tmp, "drivers/foo/wait.c", "unused_wait"))
		self.assertEqual(self.text("unused_wait"),
				 "No caller of unused_wait() was found in the tree; it may be called through a pointer.")

	def test_reached_paragraph_of_many(self):
		out = reach.reached_sentences(self.tmp, [("drivers/foo/wait.c", "kt_wait"),
							 ("drivers/foo/wait.c", "unused_wait"),
							 ("drivers/foo/wait.c", "lonely_wait")])
		self.assertEqual(out, [
			"kt_wait() is called from a kthread function started with kthread_run(): kt_fn() -> kt_wait().",
			"These paths follow the calls only: the conditions around the wait on them are not evaluated.",
			"How lonely_wait() is reached at run time is not known; it is called from lonely_a() "
			"(wait.c) and lonely_b() (drivers/foo/other.c).",
			"No caller of unused_wait() was found in the tree; it may be called through a pointer."])


class ReachedImplTest(FilesTree):
	"""An example caller must reach the sleep: when the sleeping chain goes
	through a function pointer, the caller named is one from the file of
	the implementation the chain resolved (tty_port_block_til_ready():
	sdio_uart's uart_carrier_raised() sleeps, synclink_cs's and
	amiserial's carrier_raised() do not)."""

	FILES = {
		"drivers/tty/port.c": """
int port_block(struct port *port)
{
	return port->ops->carrier(port);
}

int port_open(struct port *port)
{
	return port_block(port);
}
""",
		"include/linux/port.h": "int port_block(struct port *port);\nint port_open(struct port *port);\n",
		"drivers/a/quiet.c": """
#include <linux/port.h>
static int quiet_carrier(struct port *port)
{
	return 1;
}

static int quiet_open(struct tty_struct *tty)
{
	return port_block(tty->port);
}

static const struct port_ops quiet_port_ops = { .carrier = quiet_carrier, };
static const struct tty_operations quiet_ops = { .open = quiet_open, };
""",
		"drivers/b/sleepy.c": """
#include <linux/port.h>
static int sleepy_carrier(struct port *port)
{
	mutex_lock(&port->lock);
	return 1;
}

static int sleepy_open(struct tty_struct *tty)
{
	return port_open(tty->port);
}

static const struct port_ops sleepy_port_ops = { .carrier = sleepy_carrier, };
static const struct tty_operations sleepy_ops = { .open = sleepy_open, };
""",
	}
	FINDING = {"file": "drivers/tty/port.c", "function": "port_block",
		   "paths": [{"chain": ["port->ops->carrier=sleepy_carrier", "mutex_lock"],
			      "chain_locs": ["drivers/tty/port.c:4", "drivers/b/sleepy.c:5"]}]}


	def test_unit_impls_from_the_chain(self):
		self.assertEqual(changelog.unit_impls([self.FINDING]),
				 [("port->ops->carrier", "sleepy_carrier", "drivers/b/sleepy.c")])

	def test_example_caller_reaches_the_sleeping_implementation(self):
		# without the implementation, the nearest entry is quiet_open()
		self.assertIn("quiet_open()", reach.reached_text(self.tmp, "drivers/tty/port.c", "port_block"))
		items = [("drivers/tty/port.c", "port_block", (), changelog.unit_impls([self.FINDING]))]
		t = " ".join(" ".join(reach.reached_sentences(self.tmp, items)).split())
		self.assertNotIn("quiet", t)
		self.assertIn("port_block() is called from the .open member of sleepy_ops (struct tty_operations) in "
			      "drivers/b/sleepy.c: sleepy_open() -> port_open() -> port_block()", t)
		self.assertIn("port->ops->carrier is sleepy_carrier()", t)

	def test_no_caller_from_the_implementation_file(self):
		impl = [("port->ops->carrier", "lonely_carrier", "drivers/c/lonely.c")]
		t = " ".join(reach.reached_sentences(self.tmp, [("drivers/tty/port.c", "port_block", (), impl)]))
		self.assertNotIn("quiet", t)
		self.assertIn("only through port->ops->carrier when it is lonely_carrier() (drivers/c/lonely.c)", t)


class CommittedReachTest(unittest.TestCase):
	def test_committed_example_callers_reach_the_implementation(self):
		"""A committed changelog whose wait sleeps only through a function
		pointer (unit_impls() of its findings) names an entry in the file of
		that implementation, or says none was found."""
		bad = []
		for tid in sorted(os.listdir(os.path.join(TOP, "reports", "fixes"))):
			man = os.path.join(TOP, "reports", "fixes", tid, "series.json")
			fnd = os.path.join(TOP, "reports", tid, "findings.json")
			if not (os.path.isfile(man) and os.path.isfile(fnd)):
				continue
			found = read_json(fnd)
			byfp = {f["fingerprint"]: f for f in (found["findings"] if isinstance(found, dict) else found)}
			for ser in read_json(man)["series"]:
				for e in ser["patches"]:
					text = " ".join(read(os.path.join(TOP, "reports", "fixes", tid, e["patch"])).split())
					units = {}
					for fp in e["fingerprints"]:
						if fp in byfp:
							units.setdefault((byfp[fp]["file"], byfp[fp]["function"]), []).append(byfp[fp])
					for (rel, func), fs in units.items():
						impls = changelog.unit_impls(fs)
						if not impls or "%s() sleeps here only through" % func in text:
							continue
						m = re.search(r"\b%s\(\) is (?:called from|named|assigned) (.*?): " % re.escape(func), text)
						where = re.search(r" in (\S+\.[ch])$", m.group(1)) if m else None
						at = where.group(1) if where else rel
						if m is None or at not in set(x[2] for x in impls):
							bad.append("%s %s(): %s" % (tid, func, m.group(0) if m else "no entry sentence"))
		self.assertEqual(bad, [])


class FirstTestTest(unittest.TestCase):
	"""wait_event() tests its condition once in TASK_RUNNING before it sets
	the state: a sleep in the condition nests only when that first test
	fails (wiphy_unregister(): the callers close the interfaces first)."""

	def test_first_test_sentence_from_the_macro(self):
		tmp = tempfile.mkdtemp()
		self.addCleanup(shutil.rmtree, tmp)
		os.makedirs(os.path.join(tmp, "include", "linux"))
		with open(os.path.join(tmp, "include", "linux", "wait.h"), "w") as f:
			f.write("#define wait_event(wq_head, condition)\t\\\ndo {\t\\\n\tmight_sleep();\t\\\n"
				"\tif (condition)\t\\\n\t\tbreak;\t\\\n\t__wait_event(wq_head, condition);\t\\\n"
				"} while (0)\n#define wait_event_cmd(wq_head, condition, cmd1, cmd2)\t\\\n"
				"\t___wait_event(wq_head, condition, cmd1, cmd2)\n")
		f = {"function": "phy_unregister", "shape": "wait_event", "primitive": "wait_event", "role": "cond"}
		t = changelog.first_test_sentence(tmp, [f])
		self.assertEqual(t, "wait_event() tests the condition once before it sets the task state "
				 "(include/linux/wait.h), so the nested sleep runs only when the condition is false "
				 "as phy_unregister() starts the wait.")
		self.assertIsNone(changelog.first_test_sentence(tmp, [dict(f, primitive="wait_event_cmd")]))
		self.assertIsNone(changelog.first_test_sentence(tmp, [dict(f, role="body")]))
		# several waits of one patch: said once (a reviewer counted five
		# copies in acpi_dbg's changelog)
		g = [("a", [f]), ("b", [dict(f, function="phy_close")]), ("c", [dict(f, primitive="wait_event_cmd")])]
		self.assertEqual(changelog.first_test_sentences(tmp, g), [
			"wait_event() tests the condition once before it sets the task state (include/linux/wait.h), so "
			"each nested sleep runs only when the condition is false as its wait starts (phy_unregister(), "
			"phy_close())."])
		self.assertEqual(changelog.first_test_sentences(tmp, g[:1]), [t])


class SeriesTest(unittest.TestCase):
	"""make fixes on a small tree: the set_current_state fixture."""

	def setUp(self):
		self.tmp = tempfile.mkdtemp(prefix="nestsleep-fixes-test-")
		self.addCleanup(shutil.rmtree, self.tmp)
		self.kdir = os.path.join(self.tmp, "tree")
		shutil.copytree(os.path.join(TOP, "fixtures", "patch", "set_current_state_wakers"), self.kdir)
		with open(os.path.join(self.kdir, "Makefile"), "w") as f:
			f.write("obj-$(CONFIG_SESS) += core.o capi.o\n")
		self.env = clean_env(self.tmp)

	def run_fixes(self, *extra):
		return subprocess.run(["/usr/bin/python3", "-m", "nestsleep", "fixes", "--kdir", self.kdir,
				       "-j", "2"] + list(extra), capture_output=True, text=True, env=self.env, cwd=self.tmp,
				      timeout=300)

	def test_fixes_out_required(self):
		r = self.run_fixes()
		self.assertEqual(r.returncode, 2)
		self.assertIn("OUT= is required", r.stderr)
		self.assertNotIn("Traceback", r.stderr)

	def test_fixes_no_tree(self):
		r = subprocess.run(["/usr/bin/python3", "-m", "nestsleep", "fixes", "--kdir",
				    os.path.join(self.tmp, "nope"), "--out", os.path.join(self.tmp, "o")],
				   capture_output=True, text=True, env=self.env)
		self.assertEqual(r.returncode, 2)
		self.assertIn("no kernel tree", r.stderr)

	def test_fixes_series(self):
		out = os.path.join(self.tmp, "out")
		r = self.run_fixes("--out", out, "--confidence", "low")
		self.assertEqual(r.returncode, 0, r.stderr)
		man = read_json(os.path.join(out, "series.json"))
		self.assertEqual(man["signoff"], "")
		patches = [p for s in man["series"] for p in s["patches"]]
		units = sorted(u for p in patches for u in p["units"])
		# lone_thread() waits on no queue: it gets one of its own (issue 15 item 3)
		self.assertEqual(units, ["core.c:copied_thread", "core.c:lone_thread", "core.c:sess_read",
					 "core.c:sess_thread"])
		thread = [p for p in patches if "core.c:sess_thread" in p["units"]][0]
		self.assertEqual(sorted(thread["files"]), ["capi.c", "core.c"])
		self.assertEqual(thread["kconfig"], ["CONFIG_SESS"])
		self.assertTrue(thread["applies"])
		text = read(os.path.join(out, thread["patch"])).split("\n---\n")[0].replace("\n  ", " ")
		self.assertIn("sess_thread(): the wakers in sess_reset(), sess_stop() are converted", text)
		self.assertEqual(thread["test_status"], "not tested")
		self.assertEqual(man["tests"][thread["fingerprints"][0]], {"function": "sess_thread", "kind": "nested_sleep"})
		# lone_thread(), the one left unfixed before the own-queue form
		self.assertEqual(len(man["report_only"]), 0)
		for s in man["series"]:
			self.assertTrue(os.path.isfile(os.path.join(out, s["cover"])))
			cover = read(os.path.join(out, s["cover"]))
			self.assertIn("no Fixes: tag", re.sub(r"\s+", " ", cover))
			# a lone patch carries the cover letter's text below its '---' line
			self.assertRegex(re.sub(r"\s+", " ", cover), "must be signed before (they are|it is) sent")
		for p in patches:
			text = read(os.path.join(out, p["patch"]))
			body, below = text.split("\n---\n", 1)
			self.assertNotIn("Signed-off-by", body)
			# the tool's paths and the testing details are below '---'
			self.assertNotIn("cocci/", body)
			self.assertIn("Found by nestsleep, a Coccinelle-based checker; not compiled or boot-tested.",
				      body.replace("\n", " "))
			self.assertIn("Generated by: cocci/nested_sleep.cocci", below.split("\ndiff --git")[0])
			self.assertIn(changelog_tested.NOT_TESTED, below.split("\ndiff --git")[0].replace("\n", " "))
			self.assertNotIn("()()", body)
			# no line numbers in the changelog but the queue wakers', each
			# read back as a wake_up*() on the wait's queue
			listed, problems = check_listed_wakers(text, self.kdir)
			self.assertEqual(problems, [], body)
			rest = body.split("Subject:", 1)[1]
			for w in listed:
				rest = re.sub(r"\(%s\)" % re.escape(w).replace(":", r"\s*:\s*"), "", rest)
			self.assertIsNone(re.search(r"(:\d+\b|\bline \d+)", rest), body)
			self.assertTrue(p["subject"].startswith("core: fix nested sleep"), p["subject"])
		self.assertFalse(os.path.exists(out + ".tmp"))

	def test_fixes_signoff_and_checkpatch(self):
		if not os.path.isfile(os.path.join(KTREE, "scripts", "checkpatch.pl")):
			self.skipTest("no 6.1 tree for checkpatch.pl")
		shutil.copytree(os.path.join(KTREE, "scripts"), os.path.join(self.kdir, "scripts"),
				ignore=shutil.ignore_patterns("*.o", "coccinelle", "dtc", "gcc-plugins", "kconfig"))
		out = os.path.join(self.tmp, "out")
		r = self.run_fixes("--out", out, "--signoff", "A Tester <tester@example.org>", "--confidence", "low")
		self.assertEqual(r.returncode, 0, r.stderr)
		man = read_json(os.path.join(out, "series.json"))
		for s in man["series"]:
			for p in s["patches"]:
				body = read(os.path.join(out, p["patch"]))
				self.assertIn("Signed-off-by: A Tester <tester@example.org>", body)
				self.assertEqual(p["checkpatch"]["status"], "clean", p["checkpatch"]["output"])


if __name__ == "__main__":
	unittest.main()
