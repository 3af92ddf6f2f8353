# SPDX-License-Identifier: GPL-2.0-only
"""make fixes: patch series for the nested sleeps nestsleep can fix.

  nestsleep fixes --kdir K [--m M] --out DIR [--signoff 1|"Name <mail>"]
	   [--confidence high|medium|low] [--labels F] [--json F]
	   [--compiled reports/compile/X.json] [--build]
  nestsleep retest DIR         rewrite the testing records, paragraphs and
                               cover letters from DIR/boottest.json

Which findings get a patch: with hand labels for the tree
(reports/labels/<tree-id>.json, or --labels), only those labelled true;
without, only those whose fix has --confidence (default high) or better.
The rest go to DIR/report-only.txt with the reason.

One patch per fixed function, all its sites (with its wakers, which may be
in other files); the functions of one file whose chains end in the same
sleeping call go in one patch.  Patches are grouped into one series per
MAINTAINERS section, the most specific section that covers the patched file
(the tree's scripts/get_maintainer.pl); To:/Cc: are every maintainer and
list get_maintainer.pl names for the touched files.

The series are made with git, in order: a scratch repository of the touched
files (KDIR is only read; a git KDIR is cloned --shared), one commit per
patch on top of the earlier ones, then git format-patch --cover-letter
per series (threaded as --thread does, with Message-Ids made from the
series' text, not the clock), and git am of each series on a fresh copy
to prove it applies.  DIR/series.json is the manifest that make
boottest, retest and make triage read; it holds one test record per
finding, from which the testing paragraphs and the cover letters are
written.

The changelogs say only what happened (see effect.py).  No Signed-off-by
unless asked: --signoff 1 signs with the user's git identity, --signoff
"Name <mail>" with that one; without, From: is a marked placeholder and
the cover letter and stderr say the series must be signed before it is sent.
"""

import collections
import fnmatch
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

from nestsleep.analysis import pipeline
from nestsleep import TOP, exercisers, ktree
from nestsleep.series import effect
from nestsleep.series import passes
from nestsleep.series import reach
from nestsleep.fix import includes
from nestsleep.series.reach import reached_sentences
from nestsleep.triage import treeid
from nestsleep.common import CONFIDENCES, UserError, check_confidence, sha1, source_date
from nestsleep.knowledge import Knowledge

RULE = "cocci/nested_sleep.cocci"
MISSED_RULE = "cocci/fix_missed_wakeup.cocci"
MISSED_BOOTED = ("built and booted in QEMU with the patch; a missed wakeup prints no warning, so the boot shows "
		 "only that the kernel runs with it")
LWN = "https://lwn.net/Articles/628628/"
WOKEN_FORM = 'the wait_woken() form that "sched/wait: Provide infrastructure to deal with nested blocking" added'
# with a git KDIR the commit is cited by id, as submitting-patches.rst asks;
# checkpatch checks the id against the tree's history, and without one it
# reports every id as unknown
WOKEN_FORM_GIT = ('the wait_woken() form that commit 61ada528dea0 ("sched/wait: Provide infrastructure to deal '
		  'with nested blocking") added')
NOT_TESTED = "Not compiled or boot-tested."
# From: and the commits' identity when nobody has signed the series
PLACEHOLDER = "REPLACE WITH YOUR NAME <replace-with-your-address@example.invalid>"


def log(msg):
	print("fixes: " + msg, file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------
# Subject prefixes

# Most specific first.  The seeds' prefixes, and the custom of the
# subsystems the 6.1 findings fall in.
PREFIXES = [
	("net/bluetooth/hidp/", "Bluetooth: hidp:"),
	("net/bluetooth/cmtp/", "Bluetooth: cmtp:"),
	("net/bluetooth/bnep/", "Bluetooth: bnep:"),
	("net/bluetooth/rfcomm/", "Bluetooth: RFCOMM:"),
	("net/bluetooth/", "Bluetooth:"),
	("drivers/md/raid5", "md/raid5:"),
	("drivers/md/raid10", "md/raid10:"),
	("drivers/md/raid1", "md/raid1:"),
	("drivers/md/bcache/", "bcache:"),
	("drivers/md/", "md:"),
	("fs/ceph/", "ceph:"),
	("fs/bcachefs/", "bcachefs:"),
	("drivers/iio/", "iio:"),
	("drivers/vfio/", "vfio:"),
	("drivers/virtio/virtio_balloon.c", "virtio-balloon:"),
	("drivers/virtio/", "virtio:"),
	("drivers/gpu/drm/scheduler/", "drm/scheduler:"),
	("drivers/acpi/", "ACPI:"),
	("drivers/block/drbd/", "drbd:"),
	("drivers/cdx/", "cdx:"),
	("drivers/char/tpm/tpm_tis", "tpm: tpm_tis:"),
	("drivers/char/tpm/", "tpm:"),
	("drivers/char/hpet.c", "char: hpet:"),
	("drivers/nvme/host/", "nvme:"),
	("drivers/rpmsg/virtio_rpmsg_bus.c", "rpmsg: virtio:"),
	("drivers/rpmsg/", "rpmsg:"),
	("drivers/mtd/spi-nor/", "mtd: spi-nor:"),
	("drivers/mtd/", "mtd:"),
	("drivers/net/xen-netfront.c", "xen-netfront:"),
	("drivers/net/ethernet/netronome/nfp/", "nfp:"),
	("drivers/net/wireless/mediatek/mt76/", "wifi: mt76:"),
	("net/wireless/", "wifi: cfg80211:"),
	("net/mac80211/", "wifi: mac80211:"),
	("net/ieee802154/", "ieee802154:"),
	("drivers/mailbox/mailbox-test.c", "mailbox: mailbox-test:"),
	("drivers/mailbox/", "mailbox:"),
	("drivers/misc/ocxl/", "ocxl:"),
	("drivers/misc/ibmvmc.c", "misc: ibmvmc:"),
	("drivers/macintosh/via-pmu.c", "macintosh: via-pmu:"),
	("drivers/macintosh/", "macintosh:"),
	("drivers/media/pci/saa7164/", "media: saa7164:"),
	("drivers/media/radio/radio-cadet.c", "media: radio-cadet:"),
	("drivers/media/usb/pvrusb2/", "media: pvrusb2:"),
	("drivers/staging/pi433/", "staging: pi433:"),
	("drivers/tty/tty_port.c", "tty: tty_port:"),
	("drivers/video/fbdev/ps3fb.c", "fbdev: ps3fb:"),
	("io_uring/", "io_uring:"),
	("kernel/bpf/", "bpf:"),
	("kernel/trace/", "tracing:"),
	("sound/", "ALSA:"),
]


def table_prefix(rel):
	"""The subject prefix for a file from the table, or None."""
	for p, pre in PREFIXES:
		if rel.startswith(p):
			return pre
	return None


def path_prefix(rel):
	"""The subject prefix for a file from the table, or a guess from its
	directory in the common kernel form ("media: saa7164:", "staging:
	pi433:", "net: tap:")."""
	pre = table_prefix(rel)
	if pre:
		return pre
	parts = rel.split("/")
	stem = os.path.splitext(parts[-1])[0]
	if len(parts) >= 3 and parts[0] == "drivers" and parts[1] in ("media", "staging", "usb", "net", "scsi",
								     "crypto", "video", "input", "hid", "gpu"):
		top = {"video": "fbdev", "gpu": "drm"}.get(parts[1], parts[1])
		if parts[1] == "video" and len(parts) > 3:
			return "fbdev: %s:" % stem
		leaf = parts[-2] if len(parts) > 3 else stem
		return "%s: %s:" % (top, leaf)
	if parts[0] in ("drivers", "fs") and len(parts) >= 3:
		return "%s:" % parts[-2] if len(parts) > 3 else "%s:" % parts[1]
	if parts[0] == "net" and len(parts) >= 2:
		return "net: %s:" % parts[1]
	if parts[0] in ("kernel", "mm", "block", "lib"):
		return "%s:" % (parts[1] if len(parts) > 2 else parts[0])
	return "%s:" % stem


def git_prefix(kdir, rel):
	"""The most common prefix of the file's history, when KDIR is git."""
	if not os.path.isdir(os.path.join(kdir, ".git")):
		return None
	r = subprocess.run(["git", "-C", kdir, "log", "--no-merges", "-n", "200", "--format=%s", "--", rel],
			   capture_output=True, text=True)
	if r.returncode != 0:
		return None
	counts = collections.Counter()
	for s in r.stdout.splitlines():
		s = re.sub(r"^\s*(Revert\s+\")", "", s)
		m = re.match(r"^(.*):\s+\S", s)
		if m and len(m.group(1)) < 40:
			counts[m.group(1) + ":"] += 1
	if not counts:
		return None
	return counts.most_common(1)[0][0]


# ---------------------------------------------------------------------------
# MAINTAINERS and Kconfig

def _f_matches(pat, rel):
	if pat.endswith("/"):
		return rel.startswith(pat)
	if any(c in pat for c in "*?["):
		return fnmatch.fnmatch(rel, pat) or fnmatch.fnmatch(rel, pat.rstrip("/") + "/*")
	return rel == pat or rel.startswith(pat.rstrip("/") + "/")


def parse_sections(text):
	"""get_maintainer.pl --sections output -> [{name, M, R, L, F}]."""
	out = []
	for block in re.split(r"\n\s*\n", text.strip()):
		lines = block.strip().splitlines()
		if not lines or ":" in lines[0][:3]:
			continue
		sec = {"name": lines[0].strip(), "M": [], "R": [], "L": [], "F": [], "N": [], "T": []}
		for ln in lines[1:]:
			m = re.match(r"^([A-Z]):\s*(.*)$", ln)
			if m and m.group(1) in sec:
				sec[m.group(1)].append(m.group(2).strip())
		out.append(sec)
	return out


def most_specific(sections, rel):
	"""The section whose F: pattern that matches rel is longest (not THE REST)."""
	best, blen = None, -1
	for s in sections:
		if s["name"] == "THE REST":
			continue
		for f in s["F"]:
			if _f_matches(f, rel) and len(f) > blen:
				best, blen = s, len(f)
		if best is not s and s["N"]:
			for n in s["N"]:
				if re.search(n, rel) and blen < 0:
					best, blen = s, 0
	if best is None:
		for s in sections:
			if s["name"] == "THE REST":
				return s
	return best


def get_maintainer(kdir, args):
	"""scripts/get_maintainer.pl's output for args, or None without it."""
	gm = os.path.join(kdir, "scripts", "get_maintainer.pl")
	if not (os.path.isfile(gm) and os.path.isfile(os.path.join(kdir, "MAINTAINERS"))):
		return None
	r = subprocess.run(["perl", gm] + args, cwd=kdir, capture_output=True, text=True, timeout=300)
	return r.stdout if r.returncode == 0 else None


def file_sections(kdir, rel):
	"""Every section that covers rel, in get_maintainer.pl's order (the
	deepest F: pattern first), THE REST included; [] without MAINTAINERS."""
	out = get_maintainer(kdir, ["--nogit", "--nogit-fallback", "--sections", "-f", rel])
	return parse_sections(out) if out else []


def parent_section(kdir, rel):
	"""(directory, section): the nearest directory above rel that a section
	other than THE REST covers (get_maintainer.pl -f DIR matches a pattern
	such as drivers/cdx/* against DIR/, as for a file in it), or (None,
	None)."""
	d = os.path.dirname(rel)
	while d:
		if os.path.isdir(os.path.join(kdir, d)):
			sec = most_specific(file_sections(kdir, d), d + "/")
			if sec and sec["name"] != "THE REST":
				return d, sec
		d = os.path.dirname(d)
	return None, None


def section_of(kdir, rel, cache):
	"""The most specific section that covers rel; when only THE REST does
	(drivers/cdx/* covers the files of drivers/cdx/, not those of
	drivers/cdx/controller/), the section of the nearest parent directory,
	with "via": that directory."""
	if rel in cache:
		return cache[rel]
	secs = file_sections(kdir, rel)
	sec = most_specific(secs, rel) if secs else None
	if secs and (sec is None or sec["name"] == "THE REST"):
		d, up = parent_section(kdir, rel)
		if up:
			sec = dict(up, via=d)
	if sec is None:
		sec = {"name": "UNKNOWN (no MAINTAINERS entry found)", "M": [], "R": [], "L": [], "F": [], "T": []}
	cache[rel] = sec
	return sec


# ---------------------------------------------------------------------------
# The tree in the subject

with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "tree_tags.json")) as _f:
	TREE_TAGS = json.load(_f)["trees"]


def tree_match(sections):
	"""(row of tree_tags.json, section name, its T: line) of the first
	section, in get_maintainer.pl's order, whose T: lines name a tree of a
	row; None when none does.  A T: line of another tree (tty, media) makes
	no tag: those maintainers do not ask for one."""
	for sec in sections:
		for t in sec.get("T", []):
			url = t.split()[-1].rstrip("/")
			for row in TREE_TAGS:
				if any(url.endswith("/" + x) for x in row["t"]):
					return row, sec["name"], url
	return None


def tree_row(sections):
	m = tree_match(sections)
	return m[0] if m else None


def tree_of(kdir, files, why=None):
	"""The row of the tree the patched files go through: the same for
	every file, else None (and why, a list, says so)."""
	ms = [tree_match(file_sections(kdir, rel)) for rel in files]
	names = {m[0]["name"] if m else None for m in ms}
	if len(names) != 1 or None in names:
		if why is not None and len(names) > 1:
			why.append("the touched files go through different trees (%s)" % ", ".join(
				sorted(n or "none" for n in names)))
		return None
	if why is not None:
		why.append(ms[0])
	return ms[0][0]


def subject_prefix(row):
	"""[PATCH net], [PATCH wireless]: the fixes tree of the row, since every
	patch fixes a bug (tree_tags.json "why_fixes"); [PATCH] without a row."""
	return "PATCH %s" % row["fixes"] if row else "PATCH"


def kconfig_symbols(kdir, rel):
	"""The CONFIG_ symbols that put rel's object into the build: its own
	obj-$(CONFIG_X) line (through a composite object if needed) and those of
	the directories above it."""
	syms = []
	d, name = os.path.dirname(rel), os.path.splitext(os.path.basename(rel))[0]
	target = name + ".o"
	while True:
		mk = None
		for cand in ("Makefile", "Kbuild"):
			p = os.path.join(kdir, d, cand)
			if os.path.isfile(p):
				mk = p
				break
		if mk is None:
			if not d:
				break
			# built from the parent's Makefile: 'nfp-objs += nfpcore/x.o'
			target = os.path.basename(d) + "/" + target
			d = os.path.dirname(d)
			continue
		with open(mk, errors="replace") as f:
			text = re.sub(r"\\\n", " ", f.read())
		found = _obj_symbol(text, target, set())
		if found:
			syms += found.split()
		if not d:
			break
		target = os.path.basename(d) + "/"
		d = os.path.dirname(d)
	# the top-level Makefile and arch Makefiles list the first directories
	out = []
	for s in syms:
		if s not in out:
			out.append(s)
	return out


def _obj_symbol(text, target, seen):
	"""CONFIG_X for 'obj-$(CONFIG_X) += target', following composite
	objects ('foo-y += target', 'foo-objs := target').  '' when the object
	is always built (obj-y), None when it is not found."""
	if target in seen:
		return None
	seen.add(target)
	tre = re.escape(target)
	for m in re.finditer(r"^\s*obj-(\$\((CONFIG_\w+)\)|y)\s*[:+]?=([^\n]*)$", text, re.M):
		if re.search(r"(^|\s)%s(\s|$)" % tre, m.group(3)):
			return m.group(2) or ""
	for m in re.finditer(r"^\s*([\w-]+?)-(?:y|objs|\$\((CONFIG_\w+)\))\s*[:+]?=([^\n]*)$", text, re.M):
		if re.search(r"(^|\s)%s(\s|$)" % tre, m.group(3)) and m.group(1) not in ("obj", "lib", "ccflags",
											"subdir", "always"):
			outer = _obj_symbol(text, m.group(1) + ".o", seen)
			if outer is not None:
				return " ".join(x for x in (m.group(2), outer) if x)
	return None



ROLE_TO = ("maintainer", "supporter", "odd fixer", "chief penguin")
GIT_ROLES = ("commit_signer", "authored", "added_lines", "removed_lines")


def parse_people(out):
	"""[(who, role, section)] of get_maintainer.pl's output."""
	people = []
	for ln in (out or "").splitlines():
		m = re.match(r"^(.*?>|\S+@\S+)\s+\(([^:()]+)(?::(.*))?\)\s*$", ln.strip())
		if m:
			people.append((m.group(1).strip(), m.group(2).strip(), (m.group(3) or "").strip()))
	return people


def find_recipients(kdir, files):
	"""{to, cc, how} for the touched files: every maintainer and supporter
	get_maintainer.pl names goes to To, every reviewer and list to Cc.
	A file no section but THE REST covers (no one is addressed for it):
	with a git KDIR, the people of its git log, as get_maintainer.pl's
	--git-fallback does by default; without git, or when that finds no
	one, the people of the nearest section that covers a parent directory.
	how says which."""
	git = os.path.isdir(os.path.join(kdir, ".git"))
	out = get_maintainer(kdir, ["--no-git"] + ([] if git else ["--no-git-fallback"]) +
			     [x for rel in files for x in ("-f", rel)])
	if out is None:
		return {"to": [], "cc": [], "how": "Recipients: none found: KDIR has no MAINTAINERS or "
			"scripts/get_maintainer.pl."}
	people = parse_people(out)
	to, cc = [], []
	has_m = any(r in ROLE_TO for w, r, s in people)
	for who, role, sec in people:
		dest = to if role in ROLE_TO or (role in GIT_ROLES and not has_m) else cc
		if who not in to and who not in cc:
			dest.append(who)
	secs = list(dict.fromkeys(s for w, r, s in people if r in ROLE_TO + ("reviewer",) and s))
	how = ["Recipients: scripts/get_maintainer.pl %s -f on the touched files: the maintainers %s are To, the "
	       "reviewers and lists Cc." % ("(its default --git-fallback: KDIR is a git tree)" if git else
					    "--no-git-fallback (KDIR is not a git tree)",
					    "of " + ", ".join(secs) if secs else "it names")]
	orphans = [rel for rel in files if section_of(kdir, rel, seccache_of(kdir)).get("via") or
		   not any(s["name"] != "THE REST" for s in file_sections(kdir, rel))]
	gitp = [w for w, r, s in people if r in GIT_ROLES]
	for rel in orphans:
		how.append("No MAINTAINERS pattern covers %s (only THE REST, which addresses no one for it)." % rel)
	if orphans and gitp:
		how.append("As get_maintainer.pl does then, the people of the file's git log of the last year are "
			   "addressed: %s." % ", ".join(gitp))
	elif orphans and not any(r in ROLE_TO for w, r, s in people):
		for rel in orphans:
			d, sec = parent_section(kdir, rel)
			if not d:
				continue
			up = parse_people(get_maintainer(kdir, ["--no-git", "--no-git-fallback", "-f", d]))
			for who, role, s in up:
				dest = to if role in ROLE_TO else cc
				if who not in to and who not in cc:
					dest.append(who)
			how.append("%s, so the people of %s, the nearest section that covers a parent directory "
				   "(get_maintainer.pl -f %s), are addressed instead." % (
					   "KDIR's git log names no one for it" if git else "KDIR is not a git tree",
					   sec["name"], d))
	return {"to": to, "cc": cc, "how": " ".join(how)}


def recipients(kdir, files):
	"""(To, Cc) of find_recipients()."""
	r = find_recipients(kdir, files)
	return r["to"], r["cc"]


# ---------------------------------------------------------------------------
# How a wait is reached

# reached(), reached_text() and reached_sentences() are in reach.py: one sentence
# per wait for the changelog.


# ---------------------------------------------------------------------------
# Selection and grouping

def load_labels(kdir, path):
	"""(labels or None, the path they came from)."""
	if path:
		if not os.path.isfile(path):
			raise UserError("no labels file %s" % path)
	else:
		path = os.path.join(TOP, "reports", "labels", treeid.tree_id(kdir) + ".json")
		if not os.path.isfile(path):
			return None, ""
	with open(path) as f:
		try:
			return json.load(f).get("labels", {}), path
		except ValueError as e:
			raise UserError("%s: %s" % (path, e))


def select(findings, labels, lpath, confidence):
	"""(units: unit -> [findings], others: [(finding, why)]).  A function
	gets a patch only when every one of its findings is selected."""
	units = collections.OrderedDict()
	others = []
	rank = CONFIDENCES.index(confidence)
	lname = os.path.relpath(lpath, TOP) if lpath else ""
	for f in findings:
		fx = f.get("fix")
		if fx is None:
			raise UserError("the findings have no fix records (run nestsleep with --mode patch)")
		if fx["status"] != "patch":
			others.append((f, fx["reason"]))
			continue
		why = None
		if f.get("blocks") is False and f.get("kind") != "missed_wakeup":
			# drbd_alloc_pages(): the rewrite would only silence a debug
			# check, and its changelog could not name a sleep (a missed
			# wakeup has no sleeping chain: its fix is the wakeup)
			why = ("its chain ends in might_sleep() in %s(), and nothing on it is known to block: the only "
			       "effect is the CONFIG_DEBUG_ATOMIC_SLEEP warning, a debug check, not a nested sleep" % (
				       f["chain"][-2] if len(f["chain"]) > 1 else f["function"]))
		elif labels is not None:
			lab = labels.get(f["fingerprint"], {})
			v = lab.get("verdict")
			if not v:
				why = "not labelled in %s; only findings labelled true get a patch" % lname
			elif v != "true":
				why = "labelled %s in %s: %s" % (v, lname, lab.get("reason", "").split(". ")[0].rstrip("."))
			elif lab.get("no_patch"):
				# a hand review of the rewrite, not of the finding
				why = "labelled true, but its label in %s says the rewrite is not safe: %s" % (
					lname, lab["no_patch"]["reason"])
		elif CONFIDENCES.index(fx.get("confidence", "low")) > rank:
			why = "the fix has %s confidence, below CONFIDENCE=%s" % (fx.get("confidence"), confidence)
		if why:
			others.append((f, "a patch was generated but not put in a series: " + why))
		else:
			units.setdefault(fx["unit"], []).append(f)
	dropped = {f["fix"]["unit"] for f, w in others if f["fix"]["status"] == "patch"}
	for u in [u for u in units if u in dropped]:
		for f in units.pop(u):
			others.append((f, "a patch was generated but not put in a series: another site of %s() was "
				       "not selected, and the patch rewrites them together" % f["function"]))
	return units, others


def group_units(units):
	"""Patches: lists of units.  The units of one file whose first chains
	end in the same sleeping call are one patch."""
	groups = collections.OrderedDict()
	for name, fs in units.items():
		f0 = fs[0]
		key = (f0["file"], f0.get("kind"), f0["chain"][-1].split("=")[-1] if f0.get("chain") else name)
		groups.setdefault(key, []).append((name, fs))
	return list(groups.values())


# ---------------------------------------------------------------------------
# Changelogs

def waiters():
	return Knowledge().waiters


def task_state(name):
	"""The TASK_* expression of a waiters-table state name."""
	return Knowledge().states.get(name, ("a sleeping state",))[0]


def loop_state(kdir, f):
	"""The TASK_* expression an open-coded loop sets, from the call that
	starts on its source line (or the next one); the call's arguments may
	run over several lines (prepare_to_wait(&q, &w,\n\t\tTASK_...))."""
	try:
		with open(os.path.join(kdir, f["file"]), errors="replace") as fp:
			lines = fp.read().splitlines()
	except OSError:
		return None
	for i in range(max(0, f["line"] - 1), min(len(lines), f["line"] + 1)):
		m = re.search(r"(?:set_current_state|prepare_to_wait\w*)\s*\(", lines[i])
		if not m:
			continue
		text = "\n".join([lines[i][m.end():]] + lines[i + 1:i + 8])
		depth, end = 1, None
		for k, ch in enumerate(text):
			depth += {"(": 1, ")": -1}.get(ch, 0)
			if depth == 0:
				end = k
				break
		if end is None:
			return None
		parts = [" ".join(p.split()) for p in text[:end].split(",")]
		if parts and parts[-1].startswith("TASK_"):
			return parts[-1]
	return None


def finding_state(kdir, f, table):
	"""(the TASK_* expression, its hex as __might_sleep() prints it)."""
	v = table.get(f["primitive"])
	expr = task_state(v["state"]) if v else loop_state(kdir, f)
	return expr, effect.state_hex(kdir, expr) if expr else None


def chain_text(chain):
	out = []
	for hop in chain:
		if "=" in hop:
			ptr, target = hop.split("=", 1)
			out.append("%s() (through %s)" % (target, ptr))
		else:
			out.append(hop + "()")
	return " -> ".join(out)


def chain_lines(c, width=72):
	"""A chain, two spaces in, broken after '->' to stay within width; a
	'(only when ...)' tail goes on as words, broken at spaces."""
	tail = ""
	if " (only when " in c:
		c, tail = c.split(" (only when ", 1)
		tail = "(only when " + tail
	hops = c.split(" -> ")
	lines, cur = [], "  " + hops[0]
	for h in hops[1:]:
		if len(cur) + 4 + len(h) > width:
			lines.append(cur + " ->")
			cur = "    " + h
		else:
			cur += " -> " + h
	for w in tail.split():
		if len(cur) + 1 + len(w) > width:
			lines.append(cur)
			cur = "    " + w
		else:
			cur += " " + w
	lines.append(cur)
	return "\n".join(lines)


def wrap(text, width=72):
	words = text.split()
	lines, cur = [], ""
	for w in words:
		if cur and len(cur) + 1 + len(w) > width:
			lines.append(cur)
			cur = w
		else:
			cur = (cur + " " + w) if cur else w
	if cur:
		lines.append(cur)
	return "\n".join(lines)


def problem_paragraphs(kdir, fs, table):
	"""The wait, its state and the chains of one function."""
	f = fs[0]
	func, prim = f["function"], f["primitive"]
	expr, _ = finding_state(kdir, f, table)
	state = expr or "a sleeping state"
	if f.get("after_loop"):
		head = ("%s() leaves its %s() wait loop with the task state still %s, and then calls %s(), which "
			"may sleep:" % (func, prim, state, f["call"]))
	elif f["shape"] == "wait_event":
		if f.get("role") == "cmd":
			head = ("%s() waits with %s(). Its cmd runs on each pass of the wait loop after the task state "
				"has been set to %s, and it calls %s(), which may sleep:" % (func, prim, state, f["call"]))
		else:
			# (wait.h's macros test it once in TASK_RUNNING before the loop)
			head = ("%s() waits with %s(). On each pass of the wait loop, its condition is tested after the "
				"task state has been set to %s, and it calls %s(), which may sleep:" % (
					func, prim, state, f["call"]))
	else:
		head = ("%s() sets the task state to %s with %s() and, before it calls schedule(), calls %s(), "
			"which may sleep:" % (func, state, prim, f["call"]))
	chains = unit_chains(fs, kdir)
	if all(c.split(" (only when ")[0] == f["call"] + "()" for c in chains):
		# a chain of the one call named already (hpet's put_user())
		return [wrap(head[:-1] + ".")]
	return [wrap(head), "\n".join(chain_lines(c) for c in chains)]


def effect_inputs(kdir, fs, table):
	"""What the effect paragraph of one function depends on, besides the
	test records: kept in series.json so that retest can rewrite it."""
	_, hexs = finding_state(kdir, fs[0], table)
	out = {"shape": "after_loop" if fs[0].get("after_loop") else fs[0]["shape"],
	       "how": "warns" if any(x["effect"] == "warns" for x in fs) else "silent",
	       "state": hexs, "fingerprints": [x["fingerprint"] for x in fs]}
	if out["shape"] in ("set_current_state", "prepare_to_wait"):
		# only when every nested call of the function has that shape
		ps = [passes.fault_spin(kdir, x) for x in fs]
		if ps and all(ps) and all(p == ps[0] for p in ps):
			out["passes"] = ps[0]
	return out


def observed_warning(fps, records):
	"""A nested-sleep warning a boot printed for one of the findings: the
	trimmed splat with its exerciser ({"title", "splat", "exerciser"}) when
	make boottest recorded one, else its title, else None."""
	for fp in fps:
		b = (records.get(fp) or {}).get("boot") or {}
		if b.get("reproduced") and b.get("splat"):
			return {"title": (b.get("baseline_hits") or [""])[0], "splat": b["splat"],
				"exerciser": b.get("exerciser", "a test script")}
	for fp in fps:
		r = records.get(fp) or {}
		for s in list(r.get("splats") or []) + list((r.get("boot") or {}).get("baseline_hits") or []):
			return s
	return None


def effect_paragraphs(effs, records):
	"""One paragraph per shape of wait; the states of the functions of one
	shape are named together."""
	byshape = collections.OrderedDict()
	for e in effs:
		k = (e["shape"], e["how"], json.dumps(e.get("passes"), sort_keys=True))
		d = byshape.setdefault(k, {"states": [], "fps": [], "passes": e.get("passes")})
		if e["state"] and e["state"] not in d["states"]:
			d["states"].append(e["state"])
		d["fps"] += e["fingerprints"]
	out = []
	for (shape, how, _), d in byshape.items():
		st = " or state=".join(d["states"]) if d["states"] else None
		obs = observed_warning(d["fps"], records)
		t = effect.effect_text(shape, how, st, obs, passes=d["passes"])
		unseen = [fn for fn in dict.fromkeys((records.get(fp) or {}).get("function") for fp in d["fps"])
			  if fn and not observed_warning([fp for fp in d["fps"] if (records.get(fp) or {}).get("function") == fn],
							 records)]
		block = effect.splat_block(obs)
		tail = ""
		if obs and how == "warns" and unseen:
			tail = (" With CONFIG_DEBUG_ATOMIC_SLEEP=y the waits of %s warn the same way%s; no boot "
				"has printed that here." % (", ".join("%s()" % x for x in unseen),
							    " (state=%s)" % st if st else ""))
		if block:
			out.append(wrap(t) + "\n\n" + block + ("\n\n" + wrap(tail.strip()) if tail else ""))
		else:
			out.append(wrap(t + tail))
	return out


def unit_needs(fs):
	"""The parameter tests every sleeping path of a function's findings
	needs (findings.json paths 'needs'): a caller failing one of them
	cannot reach any of its nested sleeps."""
	sets = [set(tuple(x) for x in p.get("needs", ())) for f in fs for p in f.get("paths", [f])]
	return sorted(set.intersection(*sets)) if sets else []


def unit_impls(fs):
	"""[(pointer, implementation, its file)]: where every sleeping path of a
	function's findings goes through a function pointer, the first such
	hop of each (findings.json chain 'p->ops->m=impl', the file from the
	next chain_locs entry, which is in impl).  A caller reaches the sleep
	only with that implementation; [] when some path sleeps without a
	pointer (every caller reaches it) or a file is not known."""
	out = set()
	for f in fs:
		for p in f.get("paths", [f]):
			chain, locs = p.get("chain") or [], p.get("chain_locs") or []
			hop = next((i for i, x in enumerate(chain) if "=" in x), None)
			if hop is None or hop + 1 >= len(locs):
				return []
			ptr, impl = chain[hop].split("=", 1)
			out.add((ptr, impl, re.sub(r"^6\.12:", "", locs[hop + 1]).rsplit(":", 1)[0]))
	return sorted(out)


def first_test_sentence(kdir, fs):
	"""The sentence that the nested sleep needs the condition false when the
	wait starts: every finding is a call in the condition of a wait_event*()
	macro whose body in KDIR's include/linux/wait.h tests the condition
	('if (condition)' or 'if (!(condition))') before it sets the task
	state, so that first test runs in TASK_RUNNING; None otherwise."""
	prims = set(f.get("primitive") for f in fs)
	if len(prims) != 1 or any(f.get("shape") != "wait_event" or f.get("role") != "cond" for f in fs):
		return None
	prim = prims.pop()
	try:
		with open(os.path.join(kdir, "include", "linux", "wait.h"), errors="replace") as fp:
			t = fp.read()
	except OSError:
		return None
	m = re.search(r"^#define %s\(.*?(?<!\\)\n" % re.escape(prim), t, re.M | re.S)
	if not m:
		return None
	body = m.group(0)
	test = re.search(r"\bif\s*\(\s*(?:!\s*\(\s*)?condition\s*\)", body)
	if not test or re.search(r"\b_+wait_event\w*\(", body[:test.start()]):
		return None
	return ("%s() tests the condition once before it sets the task state (include/linux/wait.h), so the "
		"nested sleep runs only when the condition is false as %s() starts the wait." % (
			prim, fs[0]["function"]))


def first_test_sentences(kdir, group):
	"""first_test_sentence() of each unit of a patch, said once: with
	several waits, one sentence naming their macros and functions."""
	got = [(fs[0]["primitive"], fs[0]["function"], first_test_sentence(kdir, fs)) for name, fs in group]
	got = [g for g in got if g[2]]
	if len(got) <= 1:
		return [g[2] for g in got]
	prims = list(dict.fromkeys(p + "()" for p, fn, t in got))
	return ["%s test%s the condition once before %s the task state (include/linux/wait.h), so each nested "
		"sleep runs only when the condition is false as its wait starts (%s)." % (
			" and ".join([", ".join(prims[:-1]), prims[-1]] if len(prims) > 1 else prims),
			"s" if len(prims) == 1 else "", "it sets" if len(prims) == 1 else "they set",
			", ".join(fn + "()" for p, fn, t in got))]


NEED_WORDS = {"bit": "%s has %s", "nobit": "%s lacks %s", "nz": "%s is not 0", "z": "%s is 0",
	      "eq": "%s is %s", "ne": "%s is not %s"}


def needs_text(kdir, f, needs):
	"""' (only when flags has CS_SERIALIZE)': the tests of the waiting
	function's parameters a chain needs, by parameter name; '' if none
	or the names are not known."""
	names = reach.param_names(kdir, f["file"], f["function"]) if needs else None
	if not names:
		return ""
	parts = []
	for j, op, val in needs:
		if j >= len(names) or op not in NEED_WORDS:
			return ""
		parts.append(NEED_WORDS[op] % ((names[j], val) if NEED_WORDS[op].count("%s") == 2 else (names[j],)))
	return " (only when %s)" % " and ".join(parts)


def unit_chains(fs, kdir=None):
	"""The chains of a function's findings, each path's 'also' chain (one
	whose sleep does not hang on allocation flags or a fault) after it;
	with kdir, a chain that holds only for some parameter values says
	which."""
	seen = []
	for x in fs:
		for p in x.get("paths", [x]):
			for ch, needs in ((p["chain"], p.get("needs")), (p.get("also"), p.get("needs"))):
				c = chain_text(ch) + (needs_text(kdir, x, needs) if kdir else "") if ch else None
				if c and c not in seen:
					seen.append(c)
	return seen


def group_problem(kdir, group, table):
	"""The waits and chains of a patch that fixes several functions: one
	sentence per kind of wait, the chains named by function."""
	kinds = collections.OrderedDict()
	for name, fs in group:
		f = fs[0]
		expr, _ = finding_state(kdir, f, table)
		key = ("after_loop" if f.get("after_loop") else f["shape"], f["primitive"], f.get("role"),
		       expr or "a sleeping state")
		kinds.setdefault(key, []).append(fs)
	paras = []
	for (shape, prim, role, state), fss in kinds.items():
		names = [fs[0]["function"] + "()" for fs in fss]
		who = names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]
		if shape == "after_loop":
			head = ("%s leave%s a %s() wait loop with the task state still %s, and then call%s a function "
				"that may sleep:" % (who, "s" if len(names) == 1 else "", prim, state,
						    "s" if len(names) == 1 else ""))
		elif shape == "wait_event":
			part = "cmd" if role == "cmd" else "condition"
			if part == "cmd":
				head = ("%s wait%s with %s(). The cmd runs on each pass of the wait loop after the task "
					"state has been set to %s, and calls a function that may sleep:" % (
						who, "s" if len(names) == 1 else "", prim, state))
			else:
				head = ("%s wait%s with %s(). On each pass of the wait loop, the condition is tested after "
					"the task state has been set to %s, and calls a function that may sleep:" % (
						who, "s" if len(names) == 1 else "", prim, state))
		else:
			head = ("%s set%s the task state to %s with %s() and, before calling schedule(), call%s a "
				"function that may sleep:" % (who, "s" if len(names) == 1 else "", state, prim,
							      "s" if len(names) == 1 else ""))
		lines = []
		for fs in fss:
			for c in unit_chains(fs, kdir):
				lines.append(chain_lines("%s(): %s" % (fs[0]["function"], c)))
		paras += [wrap(head), "\n".join(lines)]
	return paras


def noline(text):
	"""A changelog holds no line numbers: file.c:123 becomes file.c, and
	'on line 123' goes."""
	text = re.sub(r"(\.[ch]):\d+\b", r"\1", text)
	return re.sub(r"\s+(?:on|at) line \d+\b|\s+line \d+\b", "", text)


def capital(c):
	"""'wakers: ...' -> 'Wakers: ...'; an identifier stays as it is."""
	m = re.match(r"^[a-z]+\b(?![_(])", c)
	return c[0].upper() + c[1:] if m else c


def shared(texts_by_func):
	"""[(text, [functions])]: each text with the function's own name made
	generic, and the functions it holds for, in first-seen order."""
	out = collections.OrderedDict()
	for func, texts in texts_by_func:
		for t in texts:
			g = re.sub(r"\b%s\(\)" % re.escape(func), "the function", t)
			out.setdefault(g, [])
			if func not in out[g]:
				out[g].append(func)
	return list(out.items())


# ---------------------------------------------------------------------------
# Queue wakers: what finding["wakers"] (analysis/wakecov.py) showed of the
# wake_up*() calls on a rewritten wait's queue, each read back from KDIR.

MAX_WAKERS = 3
WAKE_CALL = re.compile(r"\b(?:__)?wake_up\w*\s*\(")
# the fixer's sentence (fix/wakers.py check()) that the record's item
# replaces; kept for a wait without a record (wakecov names no queue for
# an add_wait_queue() + set_current_state() loop)
OLD_QUEUE_SENTENCE = re.compile(r" The wake_up\*\(\) calls on \S+ wake wait_woken\(\) too; whether one runs for "
				r"every change of the condition while it waits is not checked(?:; c(allers)|$)")
# the poll rule's reason (fix/polls.py check())
POLL_REASON = re.compile(r"the wait polls today \((.*)\); (its waker \w+\(\) \([^)]*\)) wakes (.*?) for the "
			 r"whole wait")


def queue_member(expr):
	"""The last member name of a queue expression: '&rdev->dev_wait' ->
	'dev_wait', '&g_wq' -> 'g_wq', '&d->wq[i]' -> 'wq'."""
	names = re.findall(r"[A-Za-z_]\w*", re.sub(r"\[[^\]]*\]", "", expr or ""))
	return names[-1] if names else ""


def waker_call(kdir, at, queue, files):
	"""The text of the wake_up*()/__wake_up*() call at 'file:line' in KDIR
	whose first argument names queue's last member, or None."""
	rel, _, ln = at.rpartition(":")
	if rel not in files:
		try:
			with open(os.path.join(kdir, rel), errors="replace") as f:
				files[rel] = f.read().split("\n")
		except OSError:
			files[rel] = []
	lines, n = files[rel], int(ln)
	if not 0 < n <= len(lines):
		return None
	text = "\n".join(lines[n - 1:n + 5])
	for mm in WAKE_CALL.finditer(lines[n - 1]):
		depth, args, cur = 0, [], mm.end() - 1
		for i in range(mm.end() - 1, len(text)):
			c = text[i]
			depth += c == "("
			depth -= c == ")"
			if (c == "," and depth == 1) or depth == 0:
				args.append(text[cur + 1:i])
				cur = i
			if depth == 0:
				call = re.sub(r"\s+", " ", text[mm.start():i + 1])
				if queue_member(args[0]) == queue_member(queue):
					return re.sub(r"\s+\)", ")", re.sub(r"\(\s+", "(", call))
				break
	return None


def input_change(w):
	"""'users drops' for a writer of the wakers record."""
	name = w["input"].partition(":")[2].split(".")[-1]
	wr = w.get("write") or ""
	if re.search(r"--|-=|\b(?:atomic\w*_(?:dec|sub)\w*|refcount_dec\w*)\s*\(", wr):
		return name + " drops"
	if re.search(r"\+\+|\+=|\batomic\w*_(?:inc|add)\w*\s*\(", wr):
		return name + " rises"
	if re.search(r"\bclear_bit\w*\s*\(", wr):
		return name + " is cleared"
	if re.search(r"\bset_bit\w*\s*\(", wr):
		return name + " is set"
	return name + " changes"


def waker_shown(kdir, f, files):
	"""The queue wakers of f["wakers"] that wake the wait's state, each
	(call read back from KDIR, function, file:line, [when...])."""
	rec = f["wakers"]
	shown, seen = [], set()
	for w in rec["wakers"]:
		if w.get("wakes") is not True or (w["at"], w["call"]) in seen:
			continue
		seen.add((w["at"], w["call"]))
		call = waker_call(kdir, w["at"], rec["queue"], files)
		if not call:
			continue
		# only the writes that can end the wait (acpi_dbg: the wakeup
		# after 'usages--' also follows 'usages++', which does not)
		whens = list(dict.fromkeys(input_change(x) for x in rec.get("writers") or []
					   if w["at"] in (x.get("woken_by") or []) and x.get("makes_true") is True))
		shown.append((call, w["function"], w["at"], whens))
	return shown


def woken_sentence(shown, waits=1):
	"""'Wakers: the wait is woken by X in f() (file:line) when n drops;
	it wakes wait_woken() too.' for the shown wakers of one wait, or of
	the waits of one function (waits > 1)."""
	named = ["%s in %s() (%s)%s" % (call, fn, at, " when " + " or ".join(whens[:2]) if whens else "")
		 for call, fn, at, whens in shown[:MAX_WAKERS]]
	head = "by " + named[0]
	for i, x in enumerate(named[1:]):
		head += (", and by " if i == len(named) - 2 else ", by ") + x
	# the search may miss wakers (a queue reached through another struct):
	# say there are others, claim no count
	return "Wakers: %s%s woken %s; %s wake%s wait_woken() too." % (
		"among others, " if len(shown) > len(named) else "",
		"the wait is" if waits == 1 else "its %s waits are" % NUMBERS.get(waits, str(waits)), head,
		"these" if len(shown) > 1 else "it", "" if len(shown) > 1 else "s")


NUMBERS = {2: "two", 3: "three", 4: "four"}


def waker_text(kdir, f, files, shown=None, waits=1):
	"""The changelog item of one rewritten wait's queue wakers, from
	f["wakers"] and the poll rule's reason in f["fix"]; None without a
	record (no queue, or findings from before wakecov).  shown and waits:
	the wakers of all the function's waits, said once for them."""
	rec = f.get("wakers")
	if not rec or not rec.get("queue"):
		return None
	shown = waker_shown(kdir, f, files) if shown is None else shown
	if shown:
		text = woken_sentence(shown, waits)
	else:
		other = sum(1 for w in rec["wakers"] if w.get("wakes") is False)
		unknown = sum(1 for w in rec["wakers"] if w.get("wakes") is None)
		notes = (["%d on it wake%s other states only" % (other, "s" if other == 1 else "")] if other else []) + \
			(["%d on it of a mode not known" % unknown] if unknown else [])
		text = "Wakers: no wake_up*() on %s that wakes %s was found%s." % (
			rec["queue"], rec["state"], " (%s)" % "; ".join(notes) if notes else "")
	p = rec.get("polls")
	if p:
		mm = POLL_REASON.search(f["fix"].get("reason") or "")
		text += " The wait polls today (%s)%s." % (p["reason"], "; the rewrite keeps %s, which wakes %s for the "
							    "whole wait" % (mm.group(2), mm.group(3)) if mm else "")
	return text


def waker_items(kdir, fs, later=None):
	"""The queue-waker items of one function's rewritten waits: one for
	all its waits when each has wakers that wake it (acpi_aml_release()'s
	two waits on one queue), and for a wait whose missed wakeup a later
	patch of the series fixes (later: "file:line" of the wait -> (what
	that finding says, the later patch's subject)), that patch."""
	if fs[0]["fix"].get("kind") == "restore":
		return []
	files = {}
	recs = [f for f in fs if (f.get("wakers") or {}).get("queue")]
	shown = [waker_shown(kdir, f, files) for f in recs]
	if len(recs) > 1 and all(shown) and not any(f["wakers"].get("polls") for f in recs):
		merged = {}
		for sh in shown:
			for call, fn, at, whens in sh:
				m = merged.setdefault((call, fn, at), [])
				m += [x for x in whens if x not in m]
		items = [waker_text(kdir, recs[0], files, [k + (v,) for k, v in merged.items()], len(recs))]
	else:
		items = list(dict.fromkeys(t for t in (waker_text(kdir, f, files) for f in fs) if t))
	for f in fs:
		what, subject = (later or {}).get("%s:%d" % (f["file"], f["line"]), (None, None))
		if what:
			items.append("%s; \"%s\", later in this series, fixes that." % (capital(what), subject))
	return list(dict.fromkeys(items))


def without_old_waker_sentence(caveat):
	return OLD_QUEUE_SENTENCE.sub(lambda m: " C" + m.group(1) if m.group(1) else "", caveat)


def without_poll_reason(reason):
	"""The fix's reason without the poll rule's clause, which the wakers
	item says with its file:line."""
	return re.sub(r";\s*" + POLL_REASON.pattern, "", reason)


def tree_lines(kdir, rel, first, last):
	"""Lines first..last (1-based) of KDIR/rel, or []."""
	try:
		with open(os.path.join(kdir, rel), errors="replace") as f:
			return f.read().split("\n")[first - 1:last]
	except OSError:
		return []


def quoted(lines):
	"""Code lines as a changelog quotes them: the indentation they share
	becomes one tab."""
	lead = min((len(x) - len(x.lstrip("\t")) for x in lines if x.strip()), default=0)
	return "\n".join("\t" + x[lead:].rstrip() if x.strip() else "" for x in lines)


def wait_condition(text):
	"""The condition argument of the first wait_event*(q, cond, ...) call
	in text, or None."""
	m = re.search(r"\bwait_event\w*\s*\(", text)
	if not m:
		return None
	depth, args, cur = 0, [], m.end()
	for i in range(m.end() - 1, len(text)):
		c = text[i]
		depth += c in "([{"
		depth -= c in ")]}"
		if (c == "," and depth == 1) or depth == 0:
			args.append(text[cur:i].strip())
			cur = i + 1
		if depth == 0:
			break
	return args[1] if len(args) > 1 and args[1] else None


def missed_changelog(kdir, f):
	"""The paragraphs of a missed wakeup's patch (analysis/wakecov.py):
	the wait, the write that ends it and the wakeup that does not wake it
	(both quoted from the tree: they are what shows the missed wakeup),
	the other wakeups of the queue, and the fix."""
	w = f["wait"]
	wrel, _, wln = f["wait_at"].rpartition(":")
	# the wait's condition, not its code: an earlier patch of the series
	# may rewrite that wait (acpi_dbg's nested sleeps)
	cond = wait_condition(" ".join(x.strip() for x in tree_lines(kdir, wrel, int(wln), int(wln) + 5)))
	paras = [wrap("%s() waits in %s on %s%s." % (w["function"], w["state"], w["queue"],
						   " until %s holds" % cond if cond else ""))]
	what = missed_what(f)
	last = int(w["waker_at"].rpartition(":")[2]) if w.get("waker_at") else f["line"]
	if w.get("waker_at", "").rpartition(":")[0] != f["file"] or not 0 <= last - f["line"] <= 8:
		last = f["line"]
	paras.append(wrap(what + ":") + "\n\n" + quoted(tree_lines(kdir, f["file"], f["line"], last)))
	verb = re.match(r"\w+\(\) (\w+) ", what)
	head = "The waiter is not woken when %s() %s it: " % (f["function"], verb.group(1) if verb else "changes")
	paras.append(wrap(head + sleeps_on(kdir, w)))
	paras.append(wrap("Fix the wakeup: %s." % f["fix"]["reason"].rstrip(".")))
	return paras


def missed_what(f, cond=None):
	"""What a missed wakeup's finding says, without line numbers: 'g()
	clears x, which ends that wait (the cond wait), but wakes it only
	with ...'."""
	what = re.sub(r"^WARNING: missed wakeup: |\s*\[confidence: \w+\]$", "", f["message"])
	return re.sub(r", which ends the \w+\(\) in \w+\(\) on line \d+,", ", which ends %s," % (
		"the %s wait" % cond if cond else "that wait"), what)


def missed_later(kdir, groups, subjects):
	"""For each group of a series, the missed wakeups a later patch of the
	series fixes: "file:line" of the wait -> (what the finding says,
	naming the wait by its condition; that patch's subject)."""
	found = []
	for j, (g, core) in enumerate(zip(groups, subjects)):
		for name, fs in g:
			for f in fs:
				if f.get("kind") == "missed_wakeup" and f.get("wait_at"):
					rel, _, ln = f["wait_at"].rpartition(":")
					cond = wait_condition(" ".join(x.strip() for x in tree_lines(kdir, rel, int(ln), int(ln) + 5)))
					found.append((j, f["wait_at"], (missed_what(f, cond), core)))
	return [dict((at, v) for j, at, v in found if j > i) for i in range(len(groups))]


def sleeps_on(kdir, w):
	"""How long the waiter of a missed wakeup's "wait" record sleeps on:
	until one of the other wakeups of its queue that wake its state (each
	read back from KDIR; at most MAX_WAKERS named), or for good."""
	files, others = {}, []
	for o in w.get("others") or []:
		call = waker_call(kdir, o["at"], w["queue"], files)
		if call:
			others.append((call, o["at"], o["function"]))
	if others:
		named = ["%s%s (%s)" % (c, " in %s()" % fn if fn else "", at) for c, at, fn in others[:MAX_WAKERS]]
		return "it sleeps on until another wakeup of %s that wakes %s, such as %s." % (
			w["queue"], w["state"], ", or ".join(named))
	return "no other wakeup of %s that wakes %s was found, so it may sleep on for good." % (
		w["queue"], w["state"])


def changelog(kdir, group, table, records, signoff, tags, git=False, later=None):
	"""The commit message body of one patch (a group of units); later:
	the missed wakeups that later patches of the series fix
	(missed_later())."""
	paras = []
	if all(f.get("kind") == "missed_wakeup" for name, fs in group for f in fs):
		for name, fs in group:
			paras += missed_changelog(kdir, fs[0])
		cav = list(dict.fromkeys(noline(capital(c)) for name, fs in group for c in fs[0]["fix"]["caveats"]))
		if cav:
			paras.append("\n".join(wrap("- " + c.rstrip(".") + ".").replace("\n", "\n  ") for c in cav))
		return closing(paras, group, records, signoff, tags)
	many = len(group) > 1
	if many:
		paras += group_problem(kdir, group, table)
	else:
		paras += problem_paragraphs(kdir, group[0][1], table)
	paras += effect_paragraphs([effect_inputs(kdir, fs, table) for name, fs in group], records)
	known = [noline(x) for x in reached_sentences(kdir, [(fs[0]["file"], fs[0]["function"], unit_needs(fs),
							       unit_impls(fs)) for name, fs in group])]
	known = [x for x in known if not is_tool_note(x)] + first_test_sentences(kdir, group)
	paras.append(wrap(" ".join(known)))
	wakers = [(name, waker_items(kdir, fs, later)) for name, fs in group]
	reasons = shared([(fs[0]["function"], [noline(without_poll_reason(fs[0]["fix"]["reason"]) if wk else
							fs[0]["fix"]["reason"])])
			  for (name, fs), (_, wk) in zip(group, wakers)])
	restore = all(fs[0]["fix"]["kind"] == "restore" for name, fs in group)
	how = "Set the task state back to TASK_RUNNING as soon as %s ends" % (
		"each wait loop" if many else "the wait loop") if restore else \
		"Rewrite %s in %s" % ("each wait" if many else "the wait", WOKEN_FORM_GIT if git else WOKEN_FORM)
	if restore and len(reasons) == 1 and not many:
		# 'the wait loop leaves with the task state still set, and X()
		# runs after it: TASK_RUNNING is now restored as soon as the loop
		# ends; the loop itself ... unchanged': say it once
		tail = reasons[0][0].rstrip(".").rpartition("; ")[2]
		paras.append(wrap("Set the task state back to TASK_RUNNING as soon as the wait loop ends, before %s() "
				  "runs; %s." % (group[0][1][0]["call"], tail)))
	elif len(reasons) == 1:
		paras.append(wrap("%s: %s." % (how, reasons[0][0].rstrip("."))))
	else:
		paras.append(wrap(how + ":") + "\n\n" + "\n".join(
			wrap("- %s: %s." % (", ".join("%s()" % x for x in funcs), r.rstrip("."))).replace("\n", "\n  ")
			for r, funcs in reasons))
	cav = []
	for (name, fs), (_, wk) in zip(group, wakers):
		fx = fs[0]["fix"]
		# a changelog holds no line numbers: file:line in a caveat becomes
		# file; only the queue wakers, read back from the tree, keep theirs
		cs = [noline(capital(without_old_waker_sentence(c) if wk else c)) for c in fx["caveats"]]
		cs = [c for c in cs if not is_tool_note(c)]
		if fx["wakers"]:
			cs.insert(0, "The wakers in %s are converted in the same patch, so that no wakeup goes around "
				  "the wait queue." % ", ".join("%s()" % w.split(":")[-1] for w in fx["wakers"]))
		cav.append((fs[0]["function"], cs + wk))
	if many:
		items = []
		for t, funcs in shared(cav):
			who = "each function" if len(funcs) == len(group) else ", ".join("%s()" % x for x in funcs)
			items.append("%s: %s" % (who, t[0].lower() + t[1:] if capital(t.lower()) != t.lower() else t)
				     if len(funcs) < len(group) else t)
	else:
		items = cav[0][1]
	if items:
		paras.append("\n".join(wrap("- " + c.rstrip(".") + ".").replace("\n", "\n  ") for c in items))
	return closing(paras, group, records, signoff, tags)


def closing(paras, group, records, signoff, tags):
	"""paras with how it was found and tested, and the trailers."""
	# the tool's confidence is in the cover letter, not in the commit; how
	# it was found and tested is one sentence in kernel terms, and the
	# tool's paths, exercisers and build details go below '---' (notes())
	paras.append(wrap(found_line(group_fps(group), records)))
	trailers = ["Fixes: " + t for t in tags]
	if signoff:
		trailers.append("Signed-off-by: " + signoff)
	return "\n\n".join(paras) + ("\n\n" + "\n".join(trailers) if trailers else "") + "\n"


# the tool's own reasoning: said below '---', not in the commit message
# (a reviewer asked for it to be trimmed from the changelogs)
TOOL_NOTE = re.compile(r"^(?:These paths follow the calls only|Wakers: no waker to convert was found)")


def is_tool_note(text):
	return bool(TOOL_NOTE.match(text.strip()))


def tool_notes(kdir, group):
	"""The sentences of one patch's changelog that are about the tool's
	search, not the code (is_tool_note()): they go below '---'."""
	known = reached_sentences(kdir, [(fs[0]["file"], fs[0]["function"], unit_needs(fs), unit_impls(fs))
					 for name, fs in group])
	cav = [capital(c) for name, fs in group for c in fs[0]["fix"]["caveats"]]
	return list(dict.fromkeys(noline(x) for x in known + cav if is_tool_note(capital(x))))


def notes(fps, records, kind="", extra=()):
	"""What goes below the '---' line of a patch (git am drops it): the
	tool's rule, what its search did not follow (extra), and the full
	testing paragraph, exercisers and objects named."""
	rule = ("Generated by: %s of nestsleep, which compares the writers of a wait's condition with the wakeups "
		"of its queue." % MISSED_RULE) if kind == "missed_wakeup" else (
		"Generated by: %s of nestsleep, which follows the calls in wait conditions and wait loops across the "
		"tree (background: %s)." % (RULE, LWN))
	return "%s\n\n%s%s\n" % (wrap(rule), "".join(wrap(x) + "\n\n" for x in extra),
				  wrap(tested_paragraph(fps, records)))


def below_dashes(text, note):
	"""A format-patch mail with note put right after its first '---' line,
	before the diffstat."""
	m = re.search(r"^---$\n", text, re.M)
	if not m:
		return text
	return text[:m.end()] + note.rstrip("\n") + "\n\n" + text[m.end():]


def group_fps(group):
	return [f["fingerprint"] for name, fs in group for f in fs]


# ---------------------------------------------------------------------------
# Test records: one per finding; the testing paragraph of a patch, its
# series.json entry and the cover letter are all written from them.

def compile_sentence(rec):
	"""From a record's in-order build ('build') or its lone compile
	('compile', scripts/dev/compile_patches.py)."""
	b = rec.get("build")
	if b:
		if b.get("status") == "ok":
			return "Built in series order: %s." % b.get("how", "the touched objects compiled")
		if b.get("status") == "not-built":
			return "Not compiled: %s." % b.get("reason", "no configuration here builds the file")
		return "The in-order build failed: %s." % b.get("reason", b.get("status"))
	c = rec.get("compile")
	if c:
		if c.get("status") == "ok":
			det = " ".join(str(v) for v in c.get("details", {}).values())
			arch = " for powerpc (powerpc64-linux-gnu-gcc)" if "for powerpc" in det else " (x86_64)"
			return ("Compiled alone on the tree%s, allmodconfig with CONFIG_WERROR=y and sparse (C=2): no new "
				"warnings." % arch)
		if c.get("status") == "not-built":
			return "Not compiled: the file is not built by x86_64 or powerpc allmodconfig."
		return "Compiling it alone on the tree gave: %s." % c.get("status")
	return None


PHASE = re.compile(r"^#?\s*([a-z_]+):")


def evidence_line(b):
	"""The line of the exerciser's output on the patched kernel that shows
	the wait of b's function ran: when the exerciser reports in phases
	('read: ...', 'write: ...'), the phase named by the end of the
	function's name, preferring a line that says it blocked; otherwise its
	last line.  None when a phased output has no phase for the function."""
	lines = [x.strip() for x in b.get("patched_output") or []]
	if not lines:
		return None
	phased = [x for x in lines if PHASE.match(x)]
	if not phased:
		return lines[-1].lstrip("# ")
	parts = (b.get("function") or "").split("_")
	for k in range(len(parts)):
		suf = "_".join(parts[k:])
		mine = [x for x in phased if PHASE.match(x).group(1) == suf]
		if mine:
			best = [x for x in mine if re.search(r"\b(blocked|slept|waited|took)\b", x)] or mine
			return best[-1].lstrip("# ")
	return None


def boot_sentence(b):
	if not b:
		return None
	if b.get("build") == "ok":
		after = b.get("applied_after")
		s = "Built and booted in QEMU (x86_64, CONFIG_DEBUG_ATOMIC_SLEEP=y) with %s" % (
			"the patch on top of the %d before it in its series" % len(after) if after else
			"the patch on top of the unpatched tree" if after is not None else
			"the rewrite of the function applied alone to the unpatched tree")
		if b.get("boot") == "ok":
			s += "; the kernel booted with no new splat"
		else:
			s += "; the boot %s" % b.get("boot", "was not run")
		if b.get("warning_gone"):
			s += (". The wait was driven from the initramfs by %s: the unpatched kernel warned in its boot %d "
			      "(of at most 5); the patched kernel ran the same exerciser in %d boot(s), the wait ran and "
			      "slept%s, and it did not warn" % (
				      b.get("exerciser", "a test script"), b.get("baseline_tries", 1), b.get("patched_tries", 1),
				      " (%s)" % evidence_line(b) if evidence_line(b) else ""))
		elif "warning_gone" not in b and b.get("exercised") and b.get("baseline_hits") and not b.get("patched_hits"):
			s += (". The patched path was exercised from the initramfs (%s): the unpatched kernel warned "
			      "\"%s\", the patched kernel did not" % (b.get("exerciser", "a test script"), b["baseline_hits"][0]))
		elif b.get("reproduced") and b.get("not_patched"):
			s += (". The unpatched kernel warned under %s (in its boot %d); the exerciser cannot run on "
			      "the patched kernel (%s), so the patched wait is not shown to have run" % (
				      b.get("exerciser", "a test script"), b.get("baseline_tries", 1), b["not_patched"]))
		elif b.get("reproduced"):
			s += (". The unpatched kernel warned under %s, but the exerciser did not pass on the patched "
			      "kernel, so the patched wait is not shown to have run" % b.get("exerciser", "a test script"))
		elif b.get("exercised"):
			s += (", and the patched path was exercised (%s), but the unpatched kernel did not warn there "
			      "either" % b.get("exerciser", "a test script"))
		else:
			s += ", but the patched path was not exercised"
		return s + "."
	if b.get("status") == "config failed":
		return "Not boot-tested: %s." % b.get("reason", "the driver cannot be configured on x86_64")
	if b.get("status"):
		return "Boot test: %s." % b.get("reason", b["status"])
	return None


def boot_class(b):
	"""A short class of one boot record, for a patch of several functions."""
	if b.get("build") == "ok" and b.get("boot") == "ok" and b.get("status") == "ok":
		if b.get("reproduced") and b.get("not_patched"):
			return ("reproduced in QEMU (%s); the exerciser cannot run on the patched kernel" %
				b.get("exerciser", ""))
		if b.get("warning_gone"):
			return ("reproduced in QEMU (%s: the unpatched kernel warned), exercised with the patch: the wait "
				"slept and the warning is gone" % b.get("exerciser", ""))
		if b.get("exercised") and b.get("baseline_hits") and not b.get("patched_hits"):
			return "exercised (%s): the unpatched kernel warned, the patched kernel did not" % b.get("exerciser", "")
		if b.get("exercised"):
			return "exercised (%s), but the unpatched kernel did not warn there either" % b.get("exerciser", "")
		return "booted with no new splat; the patched path was not exercised"
	return boot_sentence(b).rstrip(".")


def tested_paragraph(fps, records):
	"""Only what was done, from the records of the patch's findings: one
	sentence when the boot test showed the same for all of them, else what
	it showed for each wait (a function with two waits is named twice)."""
	c = None
	entries = []	# (function, boot record or None), one per finding
	if fps and all((records.get(fp) or {}).get("kind") == "missed_wakeup" for fp in fps):
		r = records.get(fps[0]) or {}
		b = r.get("boot") or {}
		ok = b.get("status") == "ok" and b.get("build") == "ok" and b.get("boot") == "ok"
		return " ".join([compile_sentence(r) or "Not compiled.", (capital(MISSED_BOOTED) + ".") if ok else
				 "Not boot-tested."])
	for fp in fps:
		r = records.get(fp) or {}
		c = c or compile_sentence(r)
		entries.append((r.get("function") or fp, r.get("boot")))
	booted = [b for _, b in entries if b]
	if not booted:
		return " ".join([c or "Not compiled.", "Not boot-tested."]) if c else NOT_TESTED
	classes = collections.OrderedDict()
	count = collections.Counter(fn for fn, _ in entries)
	seen = collections.Counter()
	for fn, b in entries:
		seen[fn] += 1
		label = "%s()" % fn if count[fn] == 1 else "%s() (wait %d of %d)" % (fn, seen[fn], count[fn])
		classes.setdefault(boot_class(b) if b else "not boot-tested", []).append(label)
	if len(classes) == 1:
		return " ".join([c or "Not compiled.", boot_sentence(booted[0]) or "Not boot-tested."])
	after = booted[0].get("applied_after")
	how = ("one function's rewrite at a time, each on the unpatched tree" if after is None else
	       "with the patch on top of the %d before it in its series" % len(after) if after else
	       "with the patch on top of the unpatched tree")
	b = ("Boot-tested in QEMU (x86_64, CONFIG_DEBUG_ATOMIC_SLEEP=y) %s: " % how + "; ".join(
		"%s: %s" % (", ".join(fns), cl) for cl, fns in classes.items()) + ".")
	return " ".join([c or "Not compiled.", b])


DEBUG_QEMU = "in QEMU with CONFIG_DEBUG_ATOMIC_SLEEP=y"


def drove(path):
	"""' by a test that ...': the '# drives:' line of the exerciser at
	path (kernel-boot/exercise/NAME.sh), or ''."""
	name = os.path.basename(path or "")[:-3]
	for ex in exercisers.read_all() if name else ():
		if ex["name"] == name and ex["drives"]:
			return " by a test that " + ex["drives"]
	return ""


def test_class(r):
	"""(rank, what one finding's record shows, in kernel terms): a boot
	that warned on the unpatched kernel is 'reproduced', nothing else is."""
	b = r.get("boot") or {}
	if b.get("status") == "ok" and b.get("build") == "ok" and b.get("boot") == "ok" and \
			r.get("kind") == "missed_wakeup":
		# the exerciser's warnings are the nested sleeps': they show
		# nothing about a wakeup
		return 3, MISSED_BOOTED
	if b.get("status") == "ok" and b.get("build") == "ok" and b.get("boot") == "ok":
		warned = b.get("reproduced") or (b.get("exercised") and b.get("baseline_hits"))
		gone = b.get("warning_gone") or (b.get("exercised") and b.get("baseline_hits") and
						 not b.get("patched_hits") and "warning_gone" not in b)
		by = drove(b.get("exerciser"))
		if warned and gone:
			return 0, "reproduced %s%s, and the patched kernel no longer warns" % (DEBUG_QEMU, by)
		if warned:
			return 1, "reproduced %s%s" % (DEBUG_QEMU, by)
		if b.get("exercised"):
			return 2, "exercised %s, where the unpatched kernel did not warn" % DEBUG_QEMU
		return 3, "built and booted in QEMU, but the path was not exercised"
	bd, c = r.get("build") or {}, r.get("compile") or {}
	if bd.get("status") == "ok" or c.get("status") == "ok":
		how = bd.get("how", "") + " ".join(str(v) for v in c.get("details", {}).values())
		arches = list(dict.fromkeys(re.findall(r"\bin (x86_64|powerpc|arm64) allmodconfig", how))) or \
			["powerpc" if "powerpc" in how else "x86_64"]
		return 4, "build-tested only (%s allmodconfig)" % " and ".join(arches)
	return 5, "not compiled or boot-tested"


def found_line(fps, records):
	"""The one sentence of a commit message on how the patch was found and
	tested; for waits that differ, what each class of them showed."""
	classes = collections.Counter(test_class(records.get(fp) or {}) for fp in fps)
	if len(classes) == 1:
		what = next(iter(classes))[1]
	else:
		# a finding is one nested sleep (a wait and a call in it)
		order = sorted(classes)
		what = "%s (%d of the %d nested sleeps); " % (order[0][1], classes[order[0]], len(fps)) + "; ".join(
			"%s (%d of %d)" % (c[1], classes[c], len(fps)) for c in order[1:])
	return "Found by nestsleep, a Coccinelle-based checker; %s." % what


def tested_text(unit, compiled, boot):
	"""The testing paragraph of a unit from a compile_patches result
	(compiled: unit -> record) and boottest.json (fingerprint -> record)."""
	fps = [f["fingerprint"] for f in unit["findings"]]
	records = {}
	for fp in fps:
		r = {}
		if compiled and compiled.get(unit["unit"]):
			r["compile"] = compiled[unit["unit"]]
		if boot and fp in boot:
			r["boot"] = boot[fp]
		records[fp] = r
	return tested_paragraph(fps, records)


def patch_status(fps, records):
	"""One short status for series.json and triage."""
	st = []
	for fp in fps:
		r = records.get(fp) or {}
		b, c, bo = r.get("build") or {}, r.get("compile") or {}, r.get("boot") or {}
		if b.get("status") == "ok" or c.get("status") == "ok":
			st.append("compiled")
		elif b.get("status") == "not-built" or c.get("status") == "not-built":
			st.append("not compiled (" + (b.get("reason") or "not built here") + ")")
		if bo.get("status") == "ok" and r.get("kind") == "missed_wakeup":
			st.append("booted (a missed wakeup prints no warning)")
		elif bo.get("status") == "ok":
			if bo.get("warning_gone"):
				st.append("booted, reproduced, exercised: warning gone")
			elif bo.get("exercised") and bo.get("baseline_hits") and not bo.get("patched_hits"):
				st.append("booted, exercised: warning gone")
			elif bo.get("exercised"):
				st.append("booted, exercised")
			else:
				st.append("booted, not exercised")
		elif bo.get("status"):
			st.append(bo["status"])
		if st:
			return ", ".join(st)
	return "not tested"


def boot_status(b, default, kind=""):
	"""One short status for a patch from its boottest.json record."""
	st = b.get("status", "")
	if st == "ok" and kind == "missed_wakeup":
		return "compiled, booted (a missed wakeup prints no warning)"
	if st == "ok":
		if b.get("warning_gone"):
			return "compiled, booted, reproduced, exercised: warning gone"
		if b.get("exercised") and b.get("baseline_hits") and not b.get("patched_hits"):
			return "compiled, booted, exercised: warning gone"
		if b.get("exercised"):
			return "compiled, booted, exercised"
		return "compiled, booted, not exercised"
	return st or default


def fixes_tag(kdir, unit):
	"""The later of the commits that added the wait and the sleeping hops
	of its chain, when KDIR is a git checkout: '<12 chars> ("subject")'."""
	if not os.path.isdir(os.path.join(kdir, ".git")):
		return None
	f = unit["findings"][0]
	cands = []
	locs = [f["file"] + ":" + str(f["line"])] + f.get("chain_locs", [])
	for loc in locs:
		rel, line = loc.rsplit(":", 1)
		try:
			with open(os.path.join(kdir, rel), errors="replace") as fp:
				text = fp.read().splitlines()[int(line) - 1].strip()
		except (OSError, IndexError, ValueError):
			continue
		if len(text) < 6:
			continue
		r = subprocess.run(["git", "-C", kdir, "log", "--format=%H", "-S", text, "--", rel],
				   capture_output=True, text=True)
		lines = r.stdout.split()
		if r.returncode == 0 and lines:
			h = lines[-1]   # the oldest: the one that added it
			n = subprocess.run(["git", "-C", kdir, "rev-list", "--count", h], capture_output=True, text=True)
			cands.append((int(n.stdout.strip() or 0), h))
	if not cands:
		return None
	# the later in history: the one with more ancestors
	n, h = max(cands)
	subj = subprocess.run(["git", "-C", kdir, "log", "-1", "--format=%s", h], capture_output=True,
			      text=True).stdout.strip()
	return '%s ("%s")' % (h[:12], subj)


# ---------------------------------------------------------------------------
# Identity and git

def identity(sign):
	"""(signoff or None, From: identity).  '' : nobody signs; '1': the
	user's git identity, as git commit -s; 'Name <mail>': that one."""
	if not sign:
		return None, PLACEHOLDER
	if sign == "1":
		get = lambda k: subprocess.run(["git", "config", k], capture_output=True, text=True).stdout.strip()
		name, email = get("user.name"), get("user.email")
		if not (name and email):
			raise UserError("SIGNOFF=1 signs with git config user.name/user.email, and they are not set; "
					"give SIGNOFF=\"Name <mail>\" instead")
		sign = "%s <%s>" % (name, email)
	if not re.match(r"^[^<>]+ <[^<>@\s]+@[^<>\s]+>$", sign):
		raise UserError("SIGNOFF must be 1 or \"Name <mail>\", not %r" % sign)
	return sign, sign


def split_ident(ident):
	m = re.match(r"^(.*?)\s*<([^>]*)>$", ident)
	return m.group(1), m.group(2)


class Repo:
	"""A scratch git repository that never reads or writes the user's git
	config: its identity and dates come from the environment."""

	def __init__(self, path, ident, date):
		self.path = path
		name, email = split_ident(ident)
		self.env = dict(os.environ, GIT_CONFIG_NOSYSTEM="1", GIT_CONFIG_GLOBAL=os.devnull,
				GIT_AUTHOR_NAME=name, GIT_AUTHOR_EMAIL=email, GIT_COMMITTER_NAME=name,
				GIT_COMMITTER_EMAIL=email, GIT_AUTHOR_DATE=date, GIT_COMMITTER_DATE=date)
		for k in ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE"):
			self.env.pop(k, None)

	def git(self, *args, check=True, inp=None):
		r = subprocess.run(["git", "-C", self.path, "-c", "core.hooksPath=" + os.devnull,
				    "-c", "core.abbrev=12"] + list(args), env=self.env, capture_output=True,
				   text=True, input=inp)
		if check and r.returncode != 0:
			raise UserError("git %s failed in the scratch repository: %s" % (args[0], r.stderr.strip()[-400:]))
		return r


def make_repo(kdir, files, path, ident, date):
	"""(Repo, base sha, KDIR's own commit or None): the touched files at
	KDIR's state.  A git KDIR is cloned --shared (nothing is written in it)
	with only the touched files checked out; otherwise they are copied."""
	os.makedirs(path)
	real = None
	if os.path.isdir(os.path.join(kdir, ".git")):
		r = subprocess.run(["git", "clone", "-q", "--shared", "--no-checkout", kdir, path],
				   capture_output=True, text=True, env=dict(os.environ, GIT_CONFIG_GLOBAL=os.devnull,
									   GIT_CONFIG_NOSYSTEM="1"))
		if r.returncode != 0:
			raise UserError("cannot clone KDIR: %s" % r.stderr.strip()[-300:])
		repo = Repo(path, ident, date)
		repo.git("sparse-checkout", "set", "--no-cone", *["/" + f for f in files])
		repo.git("checkout", "-q", "HEAD")
		real = repo.git("rev-parse", "HEAD").stdout.strip()
	else:
		repo = Repo(path, ident, date)
		repo.git("init", "-q")
	for rel in files:
		dst = os.path.join(path, rel)
		os.makedirs(os.path.dirname(dst), exist_ok=True)
		shutil.copyfile(os.path.join(kdir, rel), dst + ".tmp")
		os.replace(dst + ".tmp", dst)
	repo.git("add", "-A", "--sparse") if real else repo.git("add", "-A")
	if repo.git("status", "--porcelain").stdout.strip() or not real:
		repo.git("commit", "-q", "--allow-empty", "-m",
			 "base: the touched files of %s as they are in KDIR" % treeid.tree_id(kdir))
		if real:
			real = None     # KDIR has changes of its own: no commit of KDIR is the base
	return repo, repo.git("rev-parse", "HEAD").stdout.strip(), real


def split_diff(diff):
	"""[(file, [hunk lines...])] of a unified diff, the header lines apart."""
	files, cur = [], None
	for ln in diff.splitlines(True):
		m = re.match(r"^\+\+\+ b/(\S+)", ln)
		if m:
			cur = (m.group(1), [])
			files.append(cur)
		elif ln.startswith(("--- ", "diff ")) or cur is None:
			continue
		elif ln.startswith("@@"):
			cur[1].append([ln])
		elif cur[1]:
			cur[1][-1].append(ln)
	return files


INCLUDE_RE = re.compile(r"^\s*#\s*include\s")


def add_includes(path, lines):
	"""Insert the #include lines (without their '+') into the file's
	include block, each where Fixer.include() puts it (fix/includes.py:
	place()), on the file as the series' earlier patches left it; those
	already there are skipped.  Not after the hunk's context line: the
	line before a new include is often a blank one, and the file's last
	blank line may be in its last function."""
	with open(path, errors="surrogateescape") as f:
		text = f.read()
	have = {ln.strip() for ln in text.splitlines()}
	for ln in lines:
		if ln.strip() in have:
			continue
		have.add(ln.strip())
		ln = ln if ln.endswith("\n") else ln + "\n"
		m = re.match(r"^\s*#\s*include\s*<([^>]+)>", ln)
		at = includes.place(text, m.group(1)) if m else None
		if at is None:
			blk = includes.block(text)
			at = blk[-1][1] if blk else 0
		text = text[:at] + ln + text[at:]
	with open(path + ".tmp", "w", errors="surrogateescape") as f:
		f.write(text)
	os.replace(path + ".tmp", path)


def apply_unit(repo, diff):
	"""Apply one unit's diff, made on the pristine tree, to the repository
	with the earlier patches applied.  A hunk that only adds #include
	lines is applied by hand: the lines an earlier patch already added are
	not added again, and the others go where the fixer puts them in the
	file as it is now (its context may have changed).  None, or the error."""
	out = []
	incs = []
	for rel, hunks in split_diff(diff):
		keep = []
		for h in hunks:
			body = h[1:]
			adds = [ln for ln in body if ln.startswith("+")]
			if adds and not any(ln.startswith("-") for ln in body) and \
			   all(INCLUDE_RE.match(ln[1:]) for ln in adds):
				incs.append((rel, [ln[1:] for ln in adds]))
				continue
			keep.append(h)
		if keep:
			out.append("--- a/%s\n+++ b/%s\n" % (rel, rel) + "".join("".join(h) for h in keep))
	text = "".join(out)
	if text:
		r = repo.git("apply", "--recount", "--whitespace=nowarn", "-", check=False, inp=text)
		if r.returncode != 0:
			p = subprocess.run(["patch", "-p1", "-s", "-F3", "--no-backup-if-mismatch", "-r", "-"],
					   cwd=repo.path, input=text.encode("utf-8", "surrogateescape"), capture_output=True)
			if p.returncode != 0:
				return (r.stderr.strip() + " / patch: " + (p.stdout + p.stderr).decode(errors="replace").strip())[-600:]
	for rel, lines in incs:
		add_includes(os.path.join(repo.path, rel), lines)
	return None


def git_am(kdir, files, patches, tmp, ident, date):
	"""git am every patch, in order, on a fresh repository of the pristine
	touched files: {applied, total, failed}."""
	path = tempfile.mkdtemp(dir=tmp, prefix="am-")
	repo = Repo(path, ident, date)
	repo.git("init", "-q")
	for rel in files:
		dst = os.path.join(path, rel)
		os.makedirs(os.path.dirname(dst), exist_ok=True)
		shutil.copyfile(os.path.join(kdir, rel), dst)
	repo.git("add", "-A")
	repo.git("commit", "-q", "-m", "base")
	n = 0
	for p in patches:
		r = repo.git("am", "-q", p, check=False)
		if r.returncode != 0:
			return {"applied": n, "total": len(patches), "failed": os.path.basename(p),
				"output": (r.stdout + r.stderr)[-500:]}
		n += 1
	return {"applied": n, "total": len(patches), "failed": None}


def checkpatch(kdir, path, signoff):
	r = ktree.checkpatch(kdir, path=path, signoff=signoff)
	if not r.ran:
		return {"status": "not run", "output": "no scripts/checkpatch.pl in KDIR"}
	if r.returncode != 0 and not r.output:
		# checkpatch failed without a finding (it could not read the file)
		return {"status": "not run", "output": "checkpatch.pl failed: " + (r.stderr.strip() or "no output")[:300]}
	return checkpatch_status(kdir, path, r.output, signoff)


def checkpatch_status(kdir, path, out, signoff):
	"""checkpatch's counts, CHECKs included (checkpatch turns --strict on
	for drivers/net/ and net/ by itself), and what the CamelCase checks
	are about: names the file used before the patch are not the patch's."""
	errs = len(re.findall(r"^ERROR:", out, re.M))
	warns = len(re.findall(r"^WARNING:", out, re.M))
	checks = re.findall(r"^CHECK: (.*)$", out, re.M)
	camel = sorted(set(m for c in checks for m in re.findall(r"^Avoid CamelCase: <(\w+)>", c)))
	old = ""
	try:
		with open(path, errors="replace") as f:
			files = re.findall(r"^\+\+\+ b/(\S+)", f.read(), re.M)
		for rel in files:
			with open(os.path.join(kdir, rel), errors="replace") as f:
				old += f.read()
	except OSError:
		pass
	existing = [n for n in camel if re.search(r"\b%s\b" % n, old)]
	if not errs and not warns and not checks:
		status = "clean"
	else:
		status = "%d errors, %d warnings, %d checks" % (errs, warns, len(checks))
		if camel and existing == camel and all(c.startswith("Avoid CamelCase") for c in checks):
			status += " (CamelCase on names the file already uses: %s)" % ", ".join(existing)
	return {"status": status, "flags": "--no-tree" + ("" if signoff else " --no-signoff"), "output": out}


def slug(s):
	return re.sub(r"[^a-z0-9]+", "-", s.lower()).strip("-")[:52]


def subject_core(prefix, group):
	funcs = []
	for name, fs in group:
		if fs[0]["function"] not in funcs:
			funcs.append(fs[0]["function"])
	if len(funcs) == 1:
		fs0 = [f for n, fs in group for f in fs]
		if all(f.get("fix", {}).get("kind") == "restore" for f in fs0) and len(set(f["call"] for f in fs0)) == 1:
			# the call runs after the loop, not in it: say what the
			# patch does, not 'nested sleep'
			return "%s set TASK_RUNNING before %s() in %s()" % (prefix, fs0[0]["call"], funcs[0])
		what = "missed wakeup" if all(f.get("kind") == "missed_wakeup" for f in fs0) else "nested sleep"
		return "%s fix %s in %s()" % (prefix, what, funcs[0])
	two = "%s fix nested sleeps in %s() and %s()" % (prefix, funcs[0], funcs[1])
	if len(funcs) == 2 and len(two) <= 70:
		return two
	# too many names for a subject: say what the waits are, not "and N more"
	fs = [f for name, x in group for f in x]
	prims = set(f["primitive"] for f in fs)
	if len(prims) == 1 and all(f["shape"] == "wait_event" and f.get("role") != "cmd" for f in fs):
		what = "%d %s() conditions" % (len(fs), fs[0]["primitive"])
	elif len(prims) == 1:
		what = "%d %s() waits" % (len(fs), fs[0]["primitive"])
	else:
		what = "%d waits of %s" % (len(fs), os.path.basename(fs[0]["file"]))
	return "%s fix nested sleeps in %s" % (prefix, what)


SUBJECT_MAX = 75	# checkpatch's commit-log width; a subject line is read in it too


def series_subjects(prefixes, groups):
	"""The subjects of one series' patches, in order: two patches with the
	same subject (one function name in two files) say their file, as
	"... in fops_read() of saa7164-vbi.c", or only the file when that is
	longer than SUBJECT_MAX."""
	subs = [subject_core(p, g) for p, g in zip(prefixes, groups)]
	count = collections.Counter(subs)
	out = []
	for sub, p, g in zip(subs, prefixes, groups):
		if count[sub] > 1:
			base = os.path.basename(g[0][1][0]["file"])
			sub = "%s of %s" % (sub, base) if len(sub) + 4 + len(base) <= SUBJECT_MAX else \
				"%s fix nested sleep%s in %s" % (p, "s" if len(g) > 1 else "", base)
		out.append(sub)
	return out


# ---------------------------------------------------------------------------

def load_findings(a):
	"""The findings of MODE=patch (with each one's fix), from --json or a
	fresh run of the checker.  Every finding has its fix record whatever
	MODE=patch's CONFIDENCE=; select() picks the series' own, so the run
	takes them all (CONFIDENCE=low), and says nothing of a selection that
	is not the series'."""
	if a.json:
		with open(a.json) as f:
			return json.load(f)
	opts = pipeline.Options(kdir=a.kdir, mode="patch", m=a.m, jobs=a.jobs, verbose=a.verbose,
				spflags=getattr(a, "spflags", ""), confidence="low")
	try:
		res = pipeline.check(opts)
	except pipeline.UserError as e:
		raise UserError("the checker failed: %s" % e)
	return res.as_json(opts)


def build(a):
	kdir = os.path.realpath(a.kdir)
	if not os.path.isfile(os.path.join(kdir, "Makefile")):
		raise UserError("no kernel tree at KDIR=%s" % a.kdir)
	if not a.out:
		raise UserError("OUT= is required: the directory to write the series to")
	conf = check_confidence(getattr(a, "confidence", "") or "high")
	source_date()	# a bad SOURCE_DATE_EPOCH stops here, before the checker runs
	signoff, author = identity(getattr(a, "signoff", ""))
	labels, lpath = load_labels(kdir, getattr(a, "labels", ""))
	out = os.path.abspath(a.out)
	data = load_findings(a)
	compiled = {}
	if getattr(a, "compiled", ""):
		with open(a.compiled) as f:
			compiled = {r["unit"]: r for r in json.load(f)["results"]}
	table = waiters()
	tid = treeid.tree_id(kdir)
	units, others = select(data["findings"], labels, lpath, conf)
	seccache = seccache_of(kdir)
	series = collections.OrderedDict()
	for g in group_units(units):
		sec = section_of(kdir, g[0][1][0]["file"], seccache)
		series.setdefault(sec["name"], {"section": sec, "groups": []})["groups"].append(g)
	# a boottest.json already in OUT (make boottest of an earlier run) is
	# kept, and its results go into the test records
	boot, bootjson = {}, None
	if os.path.isfile(os.path.join(os.path.abspath(a.out), "boottest.json")):
		with open(os.path.join(os.path.abspath(a.out), "boottest.json")) as f:
			bootjson = json.load(f)
		boot = bootjson.get("results", bootjson)
	records = {}
	for name, fs in units.items():
		for f in fs:
			r = {"function": f["function"], "kind": f.get("kind", "nested_sleep")}
			if compiled.get(name):
				r["compile"] = compiled[name]
			if f["fingerprint"] in boot:
				r["boot"] = boot[f["fingerprint"]]
			records[f["fingerprint"]] = r
	tmp = out + ".tmp"
	shutil.rmtree(tmp, ignore_errors=True)
	os.makedirs(tmp)
	work = tempfile.mkdtemp(prefix="nestsleep-series-")
	try:
		manifest = make_series(a, kdir, tid, series, others, records, table, signoff, author, labels, lpath,
				       conf, tmp, work)
	finally:
		shutil.rmtree(work, ignore_errors=True)
	if getattr(a, "build", False):
		from nestsleep.series import inorder
		inorder.build_all(kdir, tmp, manifest, log)
		rewrite_tests(tmp, manifest, kdir)
	write_manifest(tmp, manifest)
	if bootjson is not None:
		with open(os.path.join(tmp, "boottest.json"), "w") as f:
			json.dump(bootjson, f, indent=1)
		# the kept records stand only for the code they booted: retest
		# compares their digests with the patches just written
		retest(tmp, None, kdir)
		with open(os.path.join(tmp, "series.json")) as f:
			manifest = json.load(f)
	if os.path.isdir(out):
		shutil.rmtree(out)
	os.rename(tmp, out)
	np = sum(len(s["patches"]) for s in manifest["series"])
	bad = [s for s in manifest["series"] if s["git_am"]["failed"]]
	dirty = [p for s in manifest["series"] for p in s["patches"] if p["checkpatch"]["status"] != "clean"]
	log("%d patches in %d series (%s), %d findings without a patch (OUT/report-only.txt); git am: %d of %d "
	    "series apply in order; checkpatch: %d clean, %d with complaints; written to %s" % (
		    np, len(manifest["series"]), manifest["selection"], len(manifest["report_only"]),
		    len(manifest["series"]) - len(bad), len(manifest["series"]), np - len(dirty), len(dirty), out))
	if not signoff:
		log("the patches carry no Signed-off-by: they must be signed before they are sent "
		    "(git am -s, or re-run with SIGNOFF=1 or SIGNOFF=\"Name <mail>\"); From: is a placeholder")
	return 1 if bad else 0


def make_series(a, kdir, tid, series, others, records, table, signoff, author, labels, lpath, conf, tmp, work):
	# SOURCE_DATE_EPOCH, when set, is every date: the commits', the
	# patches' Date: and series.json's "generated"
	date = source_date().strftime("%a, %d %b %Y %H:%M:%S +0000")
	files = []
	for s in series.values():
		for g in s["groups"]:
			for name, fs in g:
				for rel in fs[0]["fix"]["files"]:
					if rel not in files:
						files.append(rel)
	repo, base, real = make_repo(kdir, files, os.path.join(work, "repo"), author, date)
	git = real is not None
	sel = ("findings labelled true in %s" % os.path.relpath(lpath, TOP) if labels is not None else
	       "findings whose fix has %s confidence%s" % (conf, "" if conf == "high" else " or better"))
	manifest = {"tool": "nestsleep", "tree": tid, "signoff": signoff or "", "author": author,
		    "generated": date, "git": git, "base": real or "", "selection": sel, "series": [],
		    "report_only": [], "tests": records}
	for si, (sname, s) in enumerate(series.items()):
		sdir = slug(sname) or "unknown"
		sec = s["section"]
		repo.git("checkout", "-q", "-B", "series-%d" % si, base)
		sfiles = []
		entries = []
		prefixes = [git_prefix(kdir, g[0][1][0]["file"]) or path_prefix(g[0][1][0]["file"]) for g in s["groups"]]
		subjects = series_subjects(prefixes, s["groups"])
		for gi, (g, core) in enumerate(zip(s["groups"], subjects)):
			f0 = g[0][1][0]
			gfiles = []
			for name, fs in g:
				for rel in fs[0]["fix"]["files"]:
					if rel not in gfiles:
						gfiles.append(rel)
			tags = []
			for name, fs in g:
				t = fixes_tag(kdir, {"findings": fs})
				if t and t not in tags:
					tags.append(t)
			err = None
			for name, fs in g:
				err = err or apply_unit(repo, fs[0]["fix"]["diff"])
			if err:
				for name, fs in g:
					for f in fs:
						others.append((f, "a patch was generated but does not apply after the earlier "
							       "patches of its series: " + err))
				repo.git("reset", "-q", "--hard")
				repo.git("clean", "-qfd")
				continue
			body = changelog(kdir, g, table, records, signoff, tags, git,
					 missed_later(kdir, s["groups"], subjects)[gi])
			repo.git("add", "-A", "--sparse") if git else repo.git("add", "-A")
			repo.git("commit", "-q", "-F", "-", inp=core + "\n\n" + body)
			kcfg = []
			for rel in gfiles:
				for sym in kconfig_symbols(kdir, rel):
					if sym not in kcfg:
						kcfg.append(sym)
			for rel in gfiles:
				if rel not in sfiles:
					sfiles.append(rel)
			fps = group_fps(g)
			entries.append({"subject": core, "unit": g[0][0], "units": [n for n, fs in g],
					"functions": [fs[0]["function"] for n, fs in g], "fingerprints": fps,
					"files": gfiles, "wakers": [w for n, fs in g for w in fs[0]["fix"]["wakers"]],
					"kconfig": kcfg, "kind": f0["fix"]["kind"], "tool_notes": tool_notes(kdir, g),
					"confidence": min((fs[0]["fix"]["confidence"] for n, fs in g), key=CONFIDENCES.index,
							  default="low"),
					"caveats": [c for n, fs in g for c in fs[0]["fix"]["caveats"]],
					"fixes_tag": "; ".join(tags), "fixes_hint": fixes_hint(g),
					"tested_text": tested_paragraph(fps, records), "found_text": found_line(fps, records),
					# a missed wakeup's changelog has no nested-sleep effect
					"effects": [] if f0["fix"]["kind"] == "missed_wakeup" else
					[effect_inputs(kdir, fs, table) for n, fs in g],
					"effect_text": [] if f0["fix"]["kind"] == "missed_wakeup" else
					effect_paragraphs([effect_inputs(kdir, fs, table) for n, fs in g], records),
					"test_status": patch_status(fps, records)})
		if not entries:
			continue
		ent = format_series(kdir, tid, repo, base, real, sname, sec, sdir, sfiles, entries, others, manifest,
				    signoff, author, date, tmp, work, records)
		manifest["series"].append(ent)
	for f, why in others:
		manifest["report_only"].append({"fingerprint": f["fingerprint"], "file": f["file"],
						"function": f["function"], "status": f["fix"]["status"],
						"reason": why, "message": f["message"]})
	return manifest


def format_series(kdir, tid, repo, base, real, sname, sec, sdir, sfiles, entries, others, manifest, signoff,
		  author, date, tmp, work, records):
	"""git format-patch of one series, its checks and its cover letter: the
	series.json entry.  A series of one patch has no cover letter and no
	1/1: what the cover letter would say goes below its '---' line, and
	"cover" names the patch itself."""
	rcpt = find_recipients(kdir, sfiles)
	to, cc = rcpt["to"], rcpt["cc"]
	if not to:
		to, cc = cc[:1], cc[1:]
	tree = []
	row = tree_of(kdir, sfiles, tree)
	sprefix = subject_prefix(row)
	one = len(entries) == 1
	os.makedirs(os.path.join(tmp, sdir))
	cmd = ["format-patch", "-q", "--no-thread", "-o", os.path.join(tmp, sdir), "--subject-prefix=" + sprefix]
	cmd.append("--no-numbered" if one else "--cover-letter")
	if real:
		cmd.append("--base=" + real)
	cmd += ["--to=" + x for x in to] + ["--cc=" + x for x in cc] + ["%s..HEAD" % base]
	repo.git(*cmd, "--")
	made = sorted(os.listdir(os.path.join(tmp, sdir)))
	thread([os.path.join(tmp, sdir, m) for m in made], author, not one)
	pnames = [m for m in made if not m.startswith("0000-")]
	for e, pn in zip(entries, pnames):
		e["patch"] = os.path.join(sdir, pn)
		pp = os.path.join(tmp, sdir, pn)
		with open(pp, errors="surrogateescape") as f:
			text = below_dashes(f.read(), notes(e["fingerprints"], records, e.get("kind", ""),
							    e.get("tool_notes", ())))
		with open(pp, "w", errors="surrogateescape") as f:
			f.write(text)
		e["checkpatch"] = checkpatch(kdir, pp, bool(signoff))
	paths = [os.path.join(tmp, e["patch"]) for e in entries]
	am = git_am(kdir, sfiles, paths, work, author, date)
	cover = entries[0]["patch"] if one else os.path.join(sdir, [m for m in made if m.startswith("0000-")][0])
	ent = {"section": sname, "maintainers": sec["M"], "reviewers": sec["R"], "lists": sec["L"],
	       "to": to, "cc": cc, "recipients_how": rcpt["how"], "subject_prefix": sprefix,
	       "tree": tree_note(row, tree, one), "dir": sdir, "cover": cover, "cover_letter": not one, "files": sfiles,
	       "git_am": am, "patches": entries}
	ro = [(f, w) for f, w in others if section_of(kdir, f["file"], seccache_of(kdir))["name"] == sname]
	manifest.setdefault("woken_stops", woken_stops(kdir))
	fill_cover(os.path.join(tmp, cover), ent, ro, manifest, tid)
	if one:
		# the notes are in the patch now: git am must still take it
		ent["git_am"] = git_am(kdir, sfiles, paths, work, author, date)
		if ent["git_am"]["applied"] != am["applied"]:
			fix_note(os.path.join(tmp, cover), "git am:", am_note(ent, tid))
	for i, e in enumerate(entries):
		e["applies"] = i < ent["git_am"]["applied"]
	return ent


def thread(paths, author, cover):
	"""Thread the mails git format-patch wrote at paths, in order, as
	--thread does (a Message-Id on each; with a cover letter, the first,
	each patch In-Reply-To and References it), with Message-Ids made from
	their text, not the clock: <hash.N.nestsleep@domain>, N the patch's
	number (0 the cover letter), domain the sender's."""
	texts = []
	for p in paths:
		with open(p, errors="surrogateescape") as f:
			texts.append(f.read())
	h = sha1("".join(texts).encode("utf-8", "surrogateescape"))
	domain = split_ident(author)[1].rpartition("@")[2]
	ids = ["<%s.%d.nestsleep@%s>" % (h, i if cover else i + 1, domain) for i in range(len(paths))]
	for i, (p, text) in enumerate(zip(paths, texts)):
		head = "Message-Id: %s\n" % ids[i]
		if cover and i:
			head += "In-Reply-To: %s\nReferences: %s\n" % (ids[0], ids[0])
		first, nl, rest = text.partition("\n")
		with open(p, "w", errors="surrogateescape") as f:
			f.write(first + nl + head + rest)


def tree_note(row, tree, one=False):
	"""The cover letter's line on the tree in the subject (tree_tags.json)."""
	if not row:
		why = tree[0] if tree and isinstance(tree[0], str) else (
			"no MAINTAINERS section that covers the touched files names a tree whose maintainers ask for its name in the "
			"subject (scripts/nestsleep/series/tree_tags.json)")
		return "Tree: no tree in the subject: %s." % why
	_, secname, url = tree[0]
	return ("Tree: [PATCH %s]: %s names the %s tree (T: %s); %s. %s a bug, so %s for %s, not %s (%s)." % (
		row["fixes"], secname, row["name"], url, row["why_fixes"],
		"This patch fixes" if one else "These patches fix", "it is" if one else "they are", row["fixes"],
		row["next"], row["source"][0].split(" (")[0]))


def fixes_hint(g):
	"""How to find the commit a Fixes: tag of one patch (group) names."""
	out = []
	for name, fs in g:
		f = fs[0]
		call = f.get("call") or (f.get("chain") or ["?"])[0].split("=")[-1]
		out.append("%s(): the later of the commit that added its %s() wait (git log -L :%s:%s) and the one "
			   "that added its call to %s() (git log -S'%s(' -- %s)" % (
				   f["function"], f["primitive"], f["function"], f["file"], call, call, f["file"]))
	return "; ".join(out)


_SECCACHE = {}


def seccache_of(kdir):
	return _SECCACHE.setdefault(kdir, {})


def write_manifest(tmp, manifest):
	with open(os.path.join(tmp, "series.json"), "w") as fp:
		json.dump(manifest, fp, indent=1)
	with open(os.path.join(tmp, "report-only.txt"), "w") as fp:
		for r in manifest["report_only"]:
			kind = {"report-only": "report only", "manual": "manual fix needed"}.get(r["status"], "not in a series")
			fp.write("%s: %s(): %s: %s\n" % (r["file"], r["function"], kind, r["reason"]))


# ---------------------------------------------------------------------------
# Cover letters

def cover_prefix(ent):
	first = ent["patches"][0]["subject"]
	return first.split(" fix nested sleep")[0]


def checkpatch_note(ent):
	"""The cover letter's checkpatch line, from each patch's record."""
	n = len(ent["patches"])
	if n == 1 and ent["patches"][0]["checkpatch"]["status"] != "not run":
		return "checkpatch.pl: %s." % ent["patches"][0]["checkpatch"]["status"]
	if all(e["checkpatch"]["status"] == "not run" for e in ent["patches"]):
		return "checkpatch.pl: not run (%s)." % ent["patches"][0]["checkpatch"].get(
			"output", "KDIR has no scripts/checkpatch.pl")
	clean = sum(1 for e in ent["patches"] if e["checkpatch"]["status"] == "clean")
	dirty = [e for e in ent["patches"] if e["checkpatch"]["status"] != "clean"]
	return "checkpatch.pl: %d of %d patches clean%s." % (
		clean, n, "" if not dirty else "; the others: " + "; ".join(
			"%s: %s" % (e["subject"], e["checkpatch"]["status"]) for e in dirty))


def testing_note(ent, records):
	"""One sentence per different testing paragraph, naming its patches."""
	n = len(ent["patches"])
	texts = collections.OrderedDict()
	for i, e in enumerate(ent["patches"], 1):
		texts.setdefault(tested_paragraph(e["fingerprints"], records), []).append(i)
	if len(texts) == 1:
		return "Testing, from the records in series.json: %s%s" % (
			"the same for all %d patches: " % n if n > 1 else "", next(iter(texts)))
	return "Testing, from the records in series.json: " + " ".join(
		"%s %s: %s" % ("Patch" if len(ix) == 1 else "Patches", ", ".join("%d/%d" % (i, n) for i in ix), t)
		for t, ix in texts.items())


def woken_stops(kdir):
	"""(what, the test) for a kthread in which KDIR's wait_woken() does not
	sleep: 6.12 tests kthread_should_stop_or_park(), 6.1
	is_kthread_should_stop(); None when neither is found."""
	try:
		with open(os.path.join(kdir, "kernel", "sched", "wait.c"), errors="replace") as f:
			t = f.read()
	except OSError:
		return None
	m = re.search(r"long wait_woken\(.*?\n}\n", t, re.S)
	body = m.group(0) if m else ""
	if "kthread_should_stop_or_park()" in body:
		return ["stopped or parked", "kthread_should_stop_or_park()"]
	if "is_kthread_should_stop()" in body or "kthread_should_stop()" in body:
		return ["stopped", "kthread_should_stop()"]
	return None


WOKEN_KINDS = ("wait_event", "prepare_to_wait", "set_current_state")


def cover_kinds(ent):
	"""Patch numbers (1-based) by what the patch does, from each patch's
	own fix kind (its record in series.json): 'restore' only sets the
	task state back to TASK_RUNNING after the loop, 'woken' rewrites the
	wait into the wait_woken() form (fixer.kind_of()), 'other' anything
	else, which the cover does not describe beyond its changelog."""
	out = collections.OrderedDict()
	for i, e in enumerate(ent["patches"], 1):
		k = e.get("kind")
		out.setdefault("restore" if k == "restore" else "woken" if k in WOKEN_KINDS else
			       "missed" if k == "missed_wakeup" else "other", []).append(i)
	return out


def patch_numbers(ix, n):
	return "%s %s" % ("Patch" if len(ix) == 1 else "Patches", ", ".join("%d/%d" % (i, n) for i in ix))


def cover_how(kinds, n, git):
	"""The cover's sentence on what the patches do, one clause per kind."""
	form = WOKEN_FORM_GIT if git else WOKEN_FORM
	text = {"restore": ("sets the task state back to TASK_RUNNING as soon as the wait loop ends, before the "
			    "call that may sleep, and leaves the wait itself as it is", "set"),
		"woken": ("rewrites the wait into %s" % form, "rewrite"),
		"missed": ("adds the wakeup that a writer of the wait's condition misses (a missed wakeup, not a "
			   "nested sleep)", "add"),
		"other": ("changes the wait as its changelog says", "change")}
	if len(kinds) == 1:
		k = next(iter(kinds))
		return "Each patch " + text[k][0]
	parts = []
	for k, ix in kinds.items():
		verb = text[k][0] if len(ix) == 1 else text[k][1] + text[k][0][len(text[k][0].split()[0]):]
		parts.append("%s %s" % (patch_numbers(ix, n), verb))
	return ". ".join(parts)


def am_note(ent, tid):
	am = ent["git_am"]
	if am["total"] == 1:
		return "git am: the patch %s to the files of %s." % ("applies" if am["applied"] else "does not apply", tid)
	return "git am: %d of %d patches apply in order to the files of %s." % (am["applied"], am["total"], tid)


def fixes_note(ent, manifest):
	"""What a Fixes: tag should name, for the patches that have none."""
	n = len(ent["patches"])
	missing = [(i, e) for i, e in enumerate(ent["patches"], 1) if not e["fixes_tag"]]
	if not missing:
		return None
	why = ("KDIR is not a git tree, so there is no Fixes: tag" if not manifest["git"] else
	       "no commit was found for a Fixes: tag of %s" % ("this patch" if n == 1 else "%d of the patches" % len(missing)))
	return ("Fixes: %s. Before sending, add one naming %s" % (why, "; ".join(
		("" if n == 1 else "for %d/%d, " % (i, n)) + e.get("fixes_hint", "the commit that added the wait or its "
								  "sleeping call, whichever is later")
		for i, e in missing)) + ", run in the maintainer's tree.")


def cover_notes(ent, manifest, tid):
	notes = []
	if manifest["git"]:
		notes.append("Made with git format-patch on %s (base-commit below)." % tid)
	else:
		notes.append("Base: %s, which is not a git tree, so there is no base-commit and no Fixes: tag. The %s "
			     "must be rebased onto the maintainer's tree before it is sent." % (
				     tid, "series" if ent["cover_letter"] else "patch"))
	notes.append(ent["tree"])
	f = fixes_note(ent, manifest)
	if f:
		notes.append(f)
	notes.append(ent["recipients_how"])
	if not manifest["signoff"]:
		notes.append("Not signed off: %s no sign-off line, and From: is a placeholder to replace with the "
			     "sender. %s: git am -s, or re-run make fixes with SIGNOFF=1 or SIGNOFF=\"Name <mail>\"." % (
				     ("these patches carry", "They must be signed before they are sent") if ent["cover_letter"]
				     else ("this patch carries", "It must be signed before it is sent")))
	notes.append(am_note(ent, tid))
	notes.append(checkpatch_note(ent))
	notes.append(testing_note(ent, manifest["tests"]))
	return "\n".join(wrap("- " + x).replace("\n", "\n  ") for x in notes)


def cover_blurb(ent, ro, manifest, tid):
	"""The cover letter's text; for a lone patch, the notes below its
	'---' line (no list of patches, the same facts)."""
	n = len(ent["patches"])
	one = not ent["cover_letter"]
	kinds = cover_kinds(ent)
	paras = []
	if not one:
		paras.append(wrap("This series fixes nested sleeps in the %s section of MAINTAINERS: in each, a "
				  "function that may sleep is called while the task state is already set for an outer "
				  "wait. %s; each changelog says what the nested sleep does for that shape of wait (%s)." % (
					  ent["section"], cover_how(kinds, n, manifest["git"]), LWN)))
		items = []
		for i, e in enumerate(ent["patches"], 1):
			x = "  %d/%d %s (confidence: %s)" % (i, n, e["subject"], e["confidence"])
			items.append(x if len(x) <= 75 else "  %d/%d %s\n      (confidence: %s)" % (
				i, n, e["subject"], e["confidence"]))
		paras.append("\n".join(items))
	paras.append(wrap("The findings and the patch%s were generated by nestsleep (%s); %s chosen from the %s%s. "
			  "The tool resolves calls through function pointers by struct type, and it follows calls, not "
			  "the conditions around them, so a chain can name a path that does not run while the state "
			  "is set; %s says which chain it saw." % (
				  "" if one else "es", RULE, "this patch was" if one else "the patches in this series were",
				  manifest["selection"], " (confidence: %s)" % ent["patches"][0]["confidence"] if one else "",
				  "the changelog" if one else "each changelog")))
	if manifest.get("woken_stops") and kinds.get("woken"):
		who = "this patch" if one else "every patch" if len(kinds["woken"]) == n else \
			patch_numbers(kinds["woken"], n).lower()
		verb = "make" if not one and 1 < len(kinds["woken"]) < n else "makes"
		paras.append(wrap("One change %s %s: wait_woken() does not sleep in a kthread that is being %s (it "
				  "tests %s, kernel/sched/wait.c), so such a kthread waiting in %s tests the condition "
				  "again without sleeping until the condition holds, where the old wait slept between "
				  "wakeups." % ((who, verb) + tuple(manifest["woken_stops"]) +
						("this loop" if one else "one of these loops",))))
	paras.append(cover_notes(ent, manifest, tid))
	if ro:
		paras.append(wrap("Also found in this section, with no patch here:") + "\n" + "\n".join(
			"  %s: %s(): %s" % (f["file"], f["function"], noline(w)) for f, w in ro))
	return "\n\n".join(paras)


def fill_cover(path, ent, ro, manifest, tid):
	"""Fill the cover letter; for a lone patch, put the same text below its
	'---' line (git am does not take it into the commit)."""
	with open(path, errors="surrogateescape") as f:
		text = f.read()
	if ent["cover_letter"]:
		missed = any(e.get("kind") == "missed_wakeup" for e in ent["patches"])
		text = text.replace("*** SUBJECT HERE ***", "%s fix nested sleeps%s found by nestsleep" % (
			cover_prefix(ent), " and a missed wakeup" if missed else ""))
		text = text.replace("*** BLURB HERE ***", cover_blurb(ent, ro, manifest, tid))
	else:
		head, sep, rest = text.partition("\n---\n")
		text = head + sep + cover_blurb(ent, ro, manifest, tid) + "\n\n" + rest
	with open(path, "w", errors="surrogateescape") as f:
		f.write(text)


def fix_note(path, head, note):
	"""Replace the note that starts with head in a cover letter (or in the
	notes of a lone patch)."""
	with open(path, errors="surrogateescape") as f:
		text = f.read()
	m = re.search(r"- %s.*?(?=\n\n|\n- |\Z)" % re.escape(head), text, re.S)
	if m:
		text = text[:m.start()] + wrap("- " + note).replace("\n", "\n  ") + text[m.end():]
		with open(path, "w", errors="surrogateescape") as f:
			f.write(text)


# ---------------------------------------------------------------------------
# retest

def rewrite_tests(out, man, kdir=None):
	"""Rewrite each patch's testing paragraph, its series.json entry and the
	cover letters' testing notes from the records; the number of patches.
	With KDIR every patch is checked again with its checkpatch (a quoted
	splat may bring its own complaints); without, the record of a patch
	whose text changed says that checkpatch has not seen the new text."""
	n = 0
	recs = man["tests"]
	for s in man["series"]:
		for e in s["patches"]:
			new = tested_paragraph(e["fingerprints"], recs)
			path = os.path.join(out, e["patch"])
			with open(path, errors="surrogateescape") as f:
				text = f.read()
			old = e["tested_text"]
			changed = False
			if wrap(old) in text and old != new:
				text = text.replace(wrap(old), wrap(new), 1)
				changed = True
			newfound = found_line(e["fingerprints"], recs)
			if e.get("found_text") and wrap(e["found_text"]) in text and e["found_text"] != newfound:
				text = text.replace(wrap(e["found_text"]), wrap(newfound), 1)
				changed = True
			e["found_text"] = newfound
			if e.get("effects"):
				neweff = effect_paragraphs(e["effects"], recs)
				for o, nw in zip(e.get("effect_text", []), neweff):
					if o in text and o != nw:
						text = text.replace(o, nw, 1)
						changed = True
				e["effect_text"] = neweff
			if changed:
				with open(path + ".tmp", "w", errors="surrogateescape") as f:
					f.write(text)
				os.replace(path + ".tmp", path)
				n += 1
			if kdir:
				e["checkpatch"] = checkpatch(kdir, path, bool(man.get("signoff")))
			elif changed:
				e["checkpatch"] = {"status": "not run",
						   "output": "the changelog changed after checkpatch ran; retest had no KDIR"}
			e["tested_text"] = new
			e["test_status"] = patch_status(e["fingerprints"], recs)
		cp = os.path.join(out, s["cover"])
		s.setdefault("cover_letter", True)
		for head, note in (("Testing, from the records in series.json:", testing_note(s, recs)),
				   ("checkpatch.pl:", checkpatch_note(s))):
			fix_note(cp, head, note)
	return n


def code_digest(paths):
	"""A digest of the code the patches at paths change, in order: their
	added, removed and context lines, without the changelogs, the index
	lines and the hunk positions (which move when an earlier patch of the
	series changes elsewhere in the file)."""
	h = []
	for p in paths:
		with open(p, errors="surrogateescape") as f:
			lines = f.read().split("\n")
		start = next((i for i, x in enumerate(lines) if x.startswith("diff --git ")), len(lines))
		for x in lines[start:]:
			if x == "-- ":
				break
			if x.startswith(("diff --git ", "--- ", "+++ ", "+", "-", " ")) and not x.startswith("index "):
				h.append(x)
	return sha1("\n".join(h).encode("utf-8", "surrogateescape"))[:16]


STALE = ("not run on the patch as it is now: the boot record is of another version of it or of its series "
	 "(make boottest has not run since)")


def retest(out, build_kdir=None, kdir=None):
	"""Put boottest.json's results into the test records (and, with
	build_kdir, build the series in order), then rewrite the testing
	paragraphs and cover letters from them; kdir (or build_kdir) runs
	checkpatch on the patches whose text changed."""
	sp = os.path.join(out, "series.json")
	bp = os.path.join(out, "boottest.json")
	if not os.path.isfile(sp):
		raise UserError("no series.json in %s" % out)
	if not os.path.isfile(bp) and not build_kdir:
		raise UserError("no boottest.json in %s (run make boottest)" % out)
	with open(sp) as f:
		man = json.load(f)
	boot = {}
	if os.path.isfile(bp):
		with open(bp) as f:
			boot = json.load(f)
	results = boot.get("results", boot)
	man.setdefault("tests", {})
	if build_kdir:
		kdir = os.path.realpath(build_kdir)
		if not os.path.isfile(os.path.join(kdir, "Makefile")):
			raise UserError("no kernel tree at KDIR=%s" % build_kdir)
		from nestsleep.series import inorder
		inorder.build_all(kdir, out, man, log)
	for s in man["series"]:
		for i, e in enumerate(s["patches"]):
			code = None
			for fp in e["fingerprints"]:
				if fp not in results:
					continue
				b = results[fp]
				if b.get("build") == "ok":
					# a record that built something is kept only for the
					# code it built; one made before records had digests
					# cannot be tied to any code
					if code is None:
						code = code_digest([os.path.join(out, q["patch"]) for q in s["patches"][:i + 1]])
					if b.get("code") != code:
						b = {"status": "not run", "build": "not run", "boot": "not run", "reason": STALE}
				man["tests"].setdefault(fp, {})["boot"] = b
	# a finding with no patch has only what its exerciser showed
	for r in man.get("report_only", []):
		if r["fingerprint"] in results:
			man["tests"].setdefault(r["fingerprint"], {"function": r["function"]})["boot"] = results[r["fingerprint"]]
	n = rewrite_tests(out, man, build_kdir or kdir)
	with open(sp + ".tmp", "w") as f:
		json.dump(man, f, indent=1)
	os.replace(sp + ".tmp", sp)
	log("rewrote the testing paragraph of %d patches" % n)
	return 0
