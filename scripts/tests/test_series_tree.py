# SPDX-License-Identifier: GPL-2.0-only
"""The tree a series names in its subject, a lone patch without a cover
letter, and recipients for a file that no MAINTAINERS pattern covers
(issue 32 items 5 and 6)."""

import json
import os
import re
import shutil
import subprocess
import tempfile
import unittest

from nestsleep import TOP
from nestsleep.series import recipients
from test_series_git import T61, T612, TREES, read, read_json, clean_env, git, am_series, fixture_tree

NETDEV = """NETWORKING DRIVERS
M:	Jakub Kicinski <kuba@kernel.org>
L:	netdev@vger.kernel.org
S:	Maintained
T:	git git://git.kernel.org/pub/scm/linux/kernel/git/netdev/net.git
T:	git git://git.kernel.org/pub/scm/linux/kernel/git/netdev/net-next.git
F:	drivers/net/
"""
XEN = """XEN HYPERVISOR INTERFACE
M:	Juergen Gross <jgross@suse.com>
L:	xen-devel@lists.xenproject.org (moderated for non-subscribers)
S:	Supported
T:	git git://git.kernel.org/pub/scm/linux/kernel/git/xen/tip.git
F:	drivers/*/xen-*front.c
"""
WIRELESS = """802.11 (including CFG80211/NL80211)
M:	Johannes Berg <johannes@sipsolutions.net>
L:	linux-wireless@vger.kernel.org
S:	Maintained
T:	git git://git.kernel.org/pub/scm/linux/kernel/git/wireless/wireless.git
T:	git git://git.kernel.org/pub/scm/linux/kernel/git/wireless/wireless-next.git
F:	net/wireless/
"""
NETGEN = """NETWORKING [GENERAL]
M:	Jakub Kicinski <kuba@kernel.org>
L:	netdev@vger.kernel.org
S:	Maintained
T:	git git://git.kernel.org/pub/scm/linux/kernel/git/netdev/net.git
T:	git git://git.kernel.org/pub/scm/linux/kernel/git/netdev/net-next.git
F:	net/
"""
TTY = """TTY LAYER AND SERIAL DRIVERS
M:	Greg Kroah-Hartman <gregkh@linuxfoundation.org>
L:	linux-serial@vger.kernel.org
S:	Supported
T:	git git://git.kernel.org/pub/scm/linux/kernel/git/gregkh/tty.git
F:	drivers/tty/
"""
REST = """THE REST
M:	Linus Torvalds <torvalds@linux-foundation.org>
L:	linux-kernel@vger.kernel.org
S:	Buried alive in reporters
T:	git git://git.kernel.org/pub/scm/linux/kernel/git/torvalds/linux.git
F:	*
F:	*/
"""


def secs(*blocks):
	"""get_maintainer.pl --sections output: the most specific first."""
	return recipients.parse_sections("\n".join(blocks))


class TreeTagTest(unittest.TestCase):
	def test_netdev_section(self):
		row = recipients.tree_row(secs(NETDEV, REST))
		self.assertEqual(row["name"], "netdev")
		self.assertEqual(recipients.subject_prefix(row), "PATCH net")

	def test_xen_netfront_goes_through_netdev(self):
		# the most specific section names a tree of no row: the next does
		self.assertEqual(recipients.tree_row(secs(XEN, NETDEV, REST))["fixes"], "net")

	def test_wireless_section(self):
		# netdev covers net/ too (6.1), but 802.11 is more specific
		row = recipients.tree_row(secs(WIRELESS, NETGEN, REST))
		self.assertEqual(row["name"], "wireless")
		self.assertEqual(recipients.subject_prefix(row), "PATCH wireless")

	def test_tty_section_has_no_tag(self):
		# a T: line does not make a tag
		self.assertIsNone(recipients.tree_row(secs(TTY, REST)))
		self.assertEqual(recipients.subject_prefix(None), "PATCH")

	def test_table_rows_have_sources(self):
		with open(os.path.join(TOP, "scripts", "nestsleep", "series", "tree_tags.json")) as f:
			rows = json.load(f)["trees"]
		self.assertEqual(sorted(r["name"] for r in rows), ["bpf", "netdev", "wireless", "wpan"])
		for r in rows:
			self.assertTrue(r["source"], r["name"])
			for s in r["source"]:
				m = re.match(r"^(6\.12:)?([\w./-]+):(\d+)$", s)
				if not m:
					self.assertRegex(s, r"^(https://|commit [0-9a-f]{12})", s)
					continue
				tree = T612 if m.group(1) else T61
				if not os.path.isdir(tree):
					continue
				with open(os.path.join(tree, m.group(2)), errors="replace") as f:
					line = f.read().split("\n")[int(m.group(3)) - 1]
				self.assertTrue(any(x in line for x in [r["fixes"], r["next"]] + r["t"]), (s, line))

	def test_real_trees(self):
		if not (os.path.isfile(os.path.join(T61, "MAINTAINERS")) and os.path.isfile(os.path.join(T612, "MAINTAINERS"))):
			self.skipTest("no trees")
		self.assertEqual(recipients.tree_of(T612, ["net/ieee802154/socket.c"])["fixes"], "wpan")
		self.assertEqual(recipients.tree_of(T61, ["net/ieee802154/socket.c"])["fixes"], "wpan")
		self.assertEqual(recipients.tree_of(T61, ["net/wireless/core.c"])["fixes"], "wireless")
		self.assertEqual(recipients.tree_of(T612, ["net/wireless/core.c"])["fixes"], "wireless")
		self.assertEqual(recipients.tree_of(T612, ["drivers/net/xen-netfront.c"])["fixes"], "net")
		self.assertIsNone(recipients.tree_of(T612, ["drivers/tty/tty_port.c"]))
		self.assertIsNone(recipients.tree_of(T612, ["drivers/media/pci/saa7164/saa7164-encoder.c"]))


class OnePatchTest(unittest.TestCase):
	"""A series of one patch: [PATCH], no 1/1, no cover letter; what the
	cover letter said goes below the '---' line, and git am takes it."""

	def test_one_patch_no_cover(self):
		tmp = tempfile.mkdtemp(prefix="nestsleep-onepatch-")
		self.addCleanup(shutil.rmtree, tmp)
		kdir = fixture_tree(tmp)
		out = os.path.join(tmp, "out")
		env = clean_env(tmp)
		r = subprocess.run(["/usr/bin/python3", "-m", "nestsleep", "fixes", "--kdir", kdir, "-j", "2", "--out", out,
				    "--confidence", "low"], capture_output=True, text=True, env=env, cwd=tmp, timeout=300)
		self.assertEqual(r.returncode, 0, r.stderr)
		man = read_json(os.path.join(out, "series.json"))
		self.assertEqual(len(man["series"]), 1)
		s = man["series"][0]
		self.assertEqual(len(s["patches"]), 1)
		self.assertEqual([x for x in os.listdir(os.path.join(out, s["dir"])) if x.startswith("0000-")], [])
		text = read(os.path.join(out, s["patches"][0]["patch"]))
		self.assertRegex(text, r"(?m)^Subject: \[PATCH\] core: fix nested sleeps")
		self.assertNotIn("1/1", text.split("\n\n")[0])
		below = text.split("\n---\n", 1)[1].split("\ndiff --git ")[0]
		flat = re.sub(r"\s+", " ", below)
		for what in ("It must be signed before it is sent", "git am: the patch applies", "no Fixes: tag",
			     "git log -L", "Recipients:"):
			self.assertIn(what, flat)
		self.assertNotIn("This series", flat)
		bad, n = am_series(out, s["dir"], kdir, env, tmp)
		self.assertEqual((bad, n), ([], 1))
		self.assertEqual(s["git_am"]["applied"], 1)


def fake_tree(tmp, gitted):
	"""A tree with MAINTAINERS whose CDX section covers drivers/cdx/* (the
	files of drivers/cdx/, not those of drivers/cdx/controller/)."""
	kdir = os.path.join(tmp, "k")
	for d in ("Documentation", "arch", "include", "fs", "init", "ipc", "kernel", "lib", "scripts",
		  "drivers/cdx/controller"):
		os.makedirs(os.path.join(kdir, d))
	for f in ("COPYING", "CREDITS", "Kbuild", "Makefile", "README", "drivers/cdx/cdx.c",
		  "drivers/cdx/controller/mcdi.c"):
		with open(os.path.join(kdir, f), "w") as fp:
			fp.write("/* %s */\n" % f)
	shutil.copyfile(os.path.join(T612, "scripts", "get_maintainer.pl"), os.path.join(kdir, "scripts", "get_maintainer.pl"))
	with open(os.path.join(kdir, "MAINTAINERS"), "w") as f:
		f.write("List of maintainers\n===================\n\n"
			"AMD CDX BUS DRIVER\nM:\tNipun Gupta <nipun.gupta@amd.com>\nS:\tMaintained\nF:\tdrivers/cdx/*\n\n"
			+ REST)
	if gitted:
		env = clean_env(tmp)
		git(kdir, env, "init", "-q")
		git(kdir, env, "add", "-A")
		git(kdir, env, "-c", "user.name=Cdx Author", "-c", "user.email=author@example.org", "commit", "-q", "-m",
		    "cdx: add the controller\n\nSigned-off-by: Cdx Author <author@example.org>")
	return kdir


class NobodyAddressedTest(unittest.TestCase):
	def setUp(self):
		if not os.path.isfile(os.path.join(T612, "scripts", "get_maintainer.pl")):
			self.skipTest("no 6.12 tree")
		self.tmp = tempfile.mkdtemp(prefix="nestsleep-rcpt-")
		self.addCleanup(shutil.rmtree, self.tmp)

	def test_parent_section_without_git(self):
		kdir = fake_tree(self.tmp, False)
		r = recipients.find_recipients(kdir, ["drivers/cdx/controller/mcdi.c"])
		self.assertTrue(any("nipun.gupta@amd.com" in x for x in r["to"]), r)
		self.assertIn("linux-kernel@vger.kernel.org", " ".join(r["cc"]))
		self.assertIn("drivers/cdx", r["how"])
		self.assertIn("AMD CDX BUS DRIVER", r["how"])
		sec = recipients.section_of(kdir, "drivers/cdx/controller/mcdi.c", {})
		self.assertEqual(sec["name"], "AMD CDX BUS DRIVER")

	def test_git_log_with_git(self):
		kdir = fake_tree(self.tmp, True)
		old = dict(os.environ)
		os.environ.update(GIT_CONFIG_NOSYSTEM="1", GIT_CONFIG_GLOBAL=os.devnull)
		try:
			r = recipients.find_recipients(kdir, ["drivers/cdx/controller/mcdi.c"])
		finally:
			os.environ.clear()
			os.environ.update(old)
		self.assertTrue(any("author@example.org" in x for x in r["to"]), r)
		self.assertIn("git log", r["how"])

	def test_section_name_with_parentheses(self):
		# (maintainer:802.11 (including CFG80211/NL80211))
		r = recipients.find_recipients(T612, ["net/wireless/core.c"])
		self.assertTrue(any("johannes@sipsolutions.net" in x for x in r["to"]), r)
		self.assertIn("802.11 (including CFG80211/NL80211)", r["how"])

	def test_cdx_in_612(self):
		r = recipients.find_recipients(T612, ["drivers/cdx/controller/mcdi.c"])
		self.assertTrue(any("nipun.gupta@amd.com" in x for x in r["to"]), r)


if __name__ == "__main__":
	unittest.main()


class CommittedSeriesTreeTest(unittest.TestCase):
	"""The committed series follow the rule: the subject names the tree
	tree_of() finds for the series' files (or none), and a series of one
	patch has no cover letter and no 1/1.  Fails until the lead makes
	the series again."""

	def test_committed_subjects(self):
		bad = []
		for tid, tree in TREES.items():
			if not os.path.isfile(os.path.join(tree, "MAINTAINERS")):
				self.skipTest("no %s tree" % tid)
			out = os.path.join(TOP, "reports", "fixes", tid)
			man = read_json(os.path.join(out, "series.json"))
			for s in man["series"]:
				want = recipients.subject_prefix(recipients.tree_of(tree, s["files"]))
				one = len(s["patches"]) == 1
				if one and any(x.startswith("0000-") for x in os.listdir(os.path.join(out, s["dir"]))):
					bad.append("%s/%s: a cover letter for one patch" % (tid, s["dir"]))
				for p in s["patches"]:
					subj = re.search(r"(?m)^Subject: (\[[^\]]*\])", read(os.path.join(out, p["patch"]))).group(1)
					exp = r"\[%s\]" % re.escape(want) if one else r"\[%s \d+/%d\]" % (re.escape(want),
													len(s["patches"]))
					if not re.match("^%s$" % exp, subj):
						bad.append("%s/%s: %s, not %s" % (tid, p["patch"], subj, want))
		self.assertEqual(bad, [], "\n".join(bad))
