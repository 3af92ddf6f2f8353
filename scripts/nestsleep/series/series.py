# SPDX-License-Identifier: GPL-2.0-only
"""make fixes: patch series for the nested sleeps nestsleep can fix.

  nestsleep fixes --kdir K [--m M] --out DIR [--signoff "Name <mail>"]
	   [--json F] [--compiled reports/compile/X.json]
  nestsleep retest DIR         rewrite the "how tested" paragraphs from
                               DIR/boottest.json (written by make boottest)

One patch per fixed function (with its wakers, which may be in other
files), in git format-patch form, grouped into one series per MAINTAINERS
section: the most specific section that covers the patched file, found with
the tree's own scripts/get_maintainer.pl.  Each series has a cover letter.
DIR/series.json is the manifest that make boottest and make triage read.

The changelogs answer Documentation/process/researcher-guidelines.rst: the
problem and the sleeping chain, the warning it causes, why the rewrite is
correct, how it was found, and how it was tested -- only what was done.
They hold no line numbers.  A Signed-off-by is written only from SIGNOFF=
or git config user.name/user.email; it is never made up.
"""

import collections
import datetime
import fnmatch
import json
import os
import re
import shutil
import subprocess
import sys

from nestsleep.analysis import pipeline
from nestsleep import ktree
from nestsleep.common import UserError
from nestsleep.knowledge import Knowledge

RULE = "cocci/nested_sleep.cocci"
LWN = "https://lwn.net/Articles/628628/"
WOKEN_FORM = 'the wait_woken() form that "sched/wait: Provide infrastructure to deal with nested blocking" added'
NOT_TESTED = "Not build-tested or boot-tested yet."


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
	("drivers/iio/", "iio:"),
	("drivers/vfio/", "vfio:"),
	("drivers/virtio/virtio_balloon.c", "virtio-balloon:"),
	("drivers/virtio/", "virtio:"),
	("drivers/gpu/drm/scheduler/", "drm/scheduler:"),
	("drivers/acpi/", "ACPI:"),
	("drivers/block/drbd/", "drbd:"),
	("drivers/char/tpm/", "tpm:"),
	("drivers/nvme/host/", "nvme:"),
	("drivers/rpmsg/", "rpmsg:"),
	("drivers/net/xen-netfront.c", "xen-netfront:"),
	("drivers/net/ethernet/netronome/nfp/", "nfp:"),
	("drivers/net/wireless/mediatek/mt76/", "wifi: mt76:"),
	("net/wireless/", "wifi: cfg80211:"),
	("net/mac80211/", "wifi: mac80211:"),
	("net/ieee802154/", "ieee802154:"),
	("drivers/mailbox/", "mailbox:"),
	("drivers/misc/ocxl/", "ocxl:"),
	("drivers/macintosh/", "macintosh:"),
	("drivers/char/hpet.c", "char: hpet:"),
	("io_uring/", "io_uring:"),
	("kernel/bpf/", "bpf:"),
	("kernel/trace/", "tracing:"),
	("sound/", "ALSA:"),
]


def path_prefix(rel):
	"""The subject prefix for a file from the table, or a guess from its
	directory in the common kernel form ("media: saa7164:", "staging:
	pi433:", "net: tap:")."""
	for p, pre in PREFIXES:
		if rel.startswith(p):
			return pre
	parts = rel.split("/")
	stem = os.path.splitext(parts[-1])[0]
	if len(parts) >= 3 and parts[0] == "drivers" and parts[1] in ("media", "staging", "usb", "net", "scsi",
								     "crypto", "video", "input", "hid", "gpu"):
		top = {"video": "fbdev", "gpu": "drm"}.get(parts[1], parts[1])
		if parts[1] == "video" and len(parts) > 3:
			return "fbdev: %s:" % stem
		leaf = parts[-2] if len(parts) > 3 else stem
		if parts[1] in ("media",) and len(parts) > 3:
			leaf = parts[-2]
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
		sec = {"name": lines[0].strip(), "M": [], "R": [], "L": [], "F": [], "N": []}
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


def section_of(kdir, rel, cache):
	if rel in cache:
		return cache[rel]
	gm = os.path.join(kdir, "scripts", "get_maintainer.pl")
	sec = None
	if os.path.isfile(gm) and os.path.isfile(os.path.join(kdir, "MAINTAINERS")):
		r = subprocess.run(["perl", gm, "--nogit", "--nogit-fallback", "--sections", "-f", rel], cwd=kdir,
				   capture_output=True, text=True, timeout=120)
		if r.returncode == 0:
			sec = most_specific(parse_sections(r.stdout), rel)
	if sec is None:
		sec = {"name": "UNKNOWN (no MAINTAINERS entry found)", "M": [], "R": [], "L": [], "F": []}
	cache[rel] = sec
	return sec


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


# ---------------------------------------------------------------------------
# Changelogs

def waiters():
	return Knowledge().waiters


def task_state(name):
	"""The TASK_* expression of a waiters-table state name."""
	return Knowledge().states.get(name, ("a sleeping state",))[0]


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
	"""A chain, two spaces in, broken after '->' to stay within width."""
	hops = c.split(" -> ")
	lines, cur = [], "  " + hops[0]
	for h in hops[1:]:
		if len(cur) + 4 + len(h) > width:
			lines.append(cur + " ->")
			cur = "    " + h
		else:
			cur += " -> " + h
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


def problem_paragraph(fs, table):
	f = fs[0]
	func = f["function"]
	prim = f["primitive"]
	v = table.get(prim)
	state = task_state(v["state"]) if v else "a sleeping state"
	if f["shape"] == "wait_event":
		part = "cmd" if f.get("role") == "cmd" else "condition"
		head = ("%s() waits with %s(). Its %s runs after the task state has been set to %s, and it "
			"calls %s(), which may sleep:" % (func, prim, part, state, f["call"]))
	else:
		head = ("%s() sets the task state with %s() and, before it calls schedule(), calls %s(), "
			"which may sleep:" % (func, prim, f["call"]))
	paras = [wrap(head)]
	seen = []
	for x in fs:
		for p in x.get("paths", [x]):
			c = chain_text(p["chain"])
			if c not in seen:
				seen.append(c)
	paras.append("\n".join(chain_lines(c) for c in seen))
	why = ("The inner sleep sets the task state back to TASK_RUNNING, so the outer wait can miss its "
	       "wakeup, or spin.")
	if any(x["effect"] == "warns" for x in fs):
		st = "2" if state == "TASK_UNINTERRUPTIBLE" else "1"
		paras.append(wrap(why + " With CONFIG_DEBUG_ATOMIC_SLEEP=y the kernel warns:") +
			     "\n\n  do not call blocking ops when !TASK_RUNNING; state=%s set at [<...>]" % st)
	else:
		paras.append(wrap(why + " Here the inner sleep does not go through might_sleep(), so no warning "
				  "reports it at run time."))
	return paras


def changelog(unit, table, tested, signoff, fixes_tag):
	fs = unit["findings"]
	fx = fs[0]["fix"]
	paras = problem_paragraph(fs, table)
	fix = "Rewrite the wait in %s: %s." % (WOKEN_FORM, fx["reason"])
	paras.append(wrap(fix))
	# a changelog holds no line numbers: file:line in a caveat becomes file
	cav = [re.sub(r"(\.[ch]):\d+\b", r"\1", c[0].upper() + c[1:]) for c in fx["caveats"]]
	if fx["wakers"]:
		cav.insert(0, "The wakers in %s are converted in the same patch, so that no wakeup goes around the "
			   "wait queue." % ", ".join("%s()" % w.split(":")[-1] for w in fx["wakers"]))
	if cav:
		paras.append("\n".join(wrap("- " + c.rstrip(".") + ".").replace("\n", "\n  ") for c in cav))
	paras.append(wrap("Found by nestsleep, a Coccinelle check (%s) that follows the calls in wait conditions "
			  "and wait loops across the tree. The tool rates this finding and its fix %s "
			  "confidence; see %s for the background." % (RULE, fx["confidence"], LWN)))
	paras.append(wrap(tested))
	trailers = []
	if fixes_tag:
		trailers.append("Fixes: " + fixes_tag)
	trailers.append("Generated by: " + RULE)
	if signoff:
		trailers.append("Signed-off-by: " + signoff)
	return "\n\n".join(paras) + "\n\n" + "\n".join(trailers) + "\n"


def tested_text(unit, compiled, boot):
	"""Only what was done."""
	fps = [f["fingerprint"] for f in unit["findings"]]
	b = None
	for fp in fps:
		if boot and fp in boot:
			b = boot[fp]
			break
	c = compiled.get(unit["unit"]) if compiled else None
	parts = []
	if b and b.get("build") == "ok":
		s = "Build- and boot-tested in QEMU (x86_64, DEBUG_ATOMIC_SLEEP=y)"
		if b.get("boot") == "ok":
			s += "; the kernel booted with no new splat"
		else:
			s += "; the boot %s" % b.get("boot", "was not run")
		if b.get("exercised") and b.get("baseline_hits") and not b.get("patched_hits"):
			s += (". The patched path was exercised from the initramfs (%s): the unpatched kernel warned "
			      "\"%s\", the patched kernel did not" % (b.get("exerciser", "a test script"), b["baseline_hits"][0]))
		elif b.get("exercised"):
			s += (", and the patched path was exercised (%s), but the unpatched kernel did not warn there "
			      "either" % b.get("exerciser", "a test script"))
		else:
			s += ", but the patched path was not exercised"
		parts.append(s + ".")
	elif b and b.get("status") == "config failed":
		parts.append("Not boot-tested: %s." % b.get("reason", "the driver cannot be configured on x86_64"))
	if c and c.get("status") == "ok":
		parts.append("Compile-tested with an x86_64 allmodconfig (CONFIG_WERROR=y) and sparse (C=2): no new "
			     "warnings.")
	elif c and c.get("status") == "not-built":
		parts.append("Not compile-tested: the file is not built on x86_64.")
	if not parts:
		return NOT_TESTED
	if not b:
		parts.append("Not boot-tested.")
	return " ".join(parts)


def fixes_tag(kdir, unit):
	"""The newer of the commits that added the wait site and the sleeping
	calls of the chain, when KDIR is a git checkout."""
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
		r = subprocess.run(["git", "-C", kdir, "log", "--format=%H %ct", "-S", text, "--", rel],
				   capture_output=True, text=True)
		lines = r.stdout.split()
		if r.returncode == 0 and len(lines) >= 2:
			cands.append((int(lines[-1]), lines[-2]))   # oldest: the one that added it
	if not cands:
		return None
	ct, h = max(cands)
	subj = subprocess.run(["git", "-C", kdir, "log", "-1", "--format=%s", h], capture_output=True,
			      text=True).stdout.strip()
	return '%s ("%s")' % (h[:12], subj)


# ---------------------------------------------------------------------------
# Patch files

def with_git_headers(diff):
	out = []
	for ln in diff.splitlines(True):
		m = re.match(r"^--- a/(\S+)", ln)
		if m:
			out.append("diff --git a/%s b/%s\n" % (m.group(1), m.group(1)))
		out.append(ln)
	return "".join(out)


def diffstat(diff):
	stats = collections.OrderedDict()
	cur = None
	for ln in diff.splitlines():
		m = re.match(r"^\+\+\+ b/(\S+)", ln)
		if m:
			cur = m.group(1)
			stats[cur] = [0, 0]
			continue
		if cur is None or ln.startswith(("--- ", "diff ")):
			continue
		if ln.startswith("+"):
			stats[cur][0] += 1
		elif ln.startswith("-"):
			stats[cur][1] += 1
	if not stats:
		return ""
	w = max(len(k) for k in stats)
	lines = []
	for k, (a, d) in stats.items():
		lines.append(" %-*s | %d %s" % (w, k, a + d, "+" * a + "-" * d))
	ta = sum(a for a, d in stats.values())
	td = sum(d for a, d in stats.values())
	lines.append(" %d file%s changed, %d insertion%s(+), %d deletion%s(-)" % (
		len(stats), "s" if len(stats) != 1 else "", ta, "s" if ta != 1 else "", td, "s" if td != 1 else ""))
	return "\n".join(lines) + "\n"


def mail(author, date, subject, body, diff="", to=(), cc=()):
	out = "From 0000000000000000000000000000000000000000 Mon Sep 17 00:00:00 2001\n"
	out += "From: %s\nDate: %s\nSubject: %s\n" % (author, date, subject)
	if to:
		out += "To: %s\n" % ",\n    ".join(to)
	if cc:
		out += "Cc: %s\n" % ",\n    ".join(cc)
	out += "\n"
	out += body
	if diff:
		out += "---\n" + diffstat(diff) + "\n" + with_git_headers(diff)
	out += "-- \nnestsleep\n"
	return out


def checkpatch(kdir, path, signoff):
	r = ktree.checkpatch(kdir, path=path, signoff=signoff)
	if not r.ran:
		return {"status": "not run", "output": "no scripts/checkpatch.pl in KDIR"}
	out = r.output
	errs = len(re.findall(r"^ERROR:", out, re.M))
	warns = len(re.findall(r"^WARNING:", out, re.M))
	return {"status": "clean" if not errs and not warns else "%d errors, %d warnings" % (errs, warns),
		"flags": "--no-tree" + ("" if signoff else " --no-signoff"), "output": out}


def slug(s):
	return re.sub(r"[^a-z0-9]+", "-", s.lower()).strip("-")[:52]


def identity(kdir, signoff):
	if signoff:
		return signoff
	name = subprocess.run(["git", "config", "user.name"], capture_output=True, text=True).stdout.strip()
	email = subprocess.run(["git", "config", "user.email"], capture_output=True, text=True).stdout.strip()
	if name and email:
		return "%s <%s>" % (name, email)
	return None


# ---------------------------------------------------------------------------

def load_findings(a):
	"""The findings of MODE=patch (with each one's fix), from --json or a
	fresh run of the checker."""
	if a.json:
		with open(a.json) as f:
			return json.load(f)
	opts = pipeline.Options(kdir=a.kdir, mode="patch", m=a.m, jobs=a.jobs, verbose=a.verbose,
				spflags=getattr(a, "spflags", ""))
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
	out = os.path.abspath(a.out)
	data = load_findings(a)
	compiled = {}
	if a.compiled:
		with open(a.compiled) as f:
			compiled = {r["unit"]: r for r in json.load(f)["results"]}
	table = waiters()
	signoff = identity(kdir, a.signoff)
	author = signoff or "nestsleep <nestsleep@localhost>"
	units = collections.OrderedDict()
	others = []
	for f in data["findings"]:
		fx = f.get("fix")
		if fx is None:
			raise UserError("the findings have no fix records (run nestsleep with --mode patch)")
		if fx["status"] == "patch":
			units.setdefault(fx["unit"], {"unit": fx["unit"], "findings": []})["findings"].append(f)
		else:
			others.append(f)
	seccache = {}
	series = collections.OrderedDict()
	for name, u in units.items():
		sec = section_of(kdir, u["findings"][0]["file"], seccache)
		series.setdefault(sec["name"], {"section": sec, "units": []})["units"].append(u)
	tmp = out + ".tmp"
	shutil.rmtree(tmp, ignore_errors=True)
	os.makedirs(tmp)
	date = datetime.datetime.now(datetime.timezone.utc).strftime("%a, %d %b %Y %H:%M:%S +0000")
	manifest = {"tool": "nestsleep", "kdir": kdir, "signoff": signoff or "", "generated": date,
		    "git": os.path.isdir(os.path.join(kdir, ".git")), "series": [], "report_only": []}
	for sname, s in series.items():
		sdir = slug(sname) or "unknown"
		os.makedirs(os.path.join(tmp, sdir))
		n = len(s["units"])
		entries = []
		for i, u in enumerate(s["units"], 1):
			f0 = u["findings"][0]
			fx = f0["fix"]
			prefix = git_prefix(kdir, f0["file"]) or path_prefix(f0["file"])
			subj_core = "%s fix nested sleep in %s()" % (prefix, f0["function"])
			subject = "[PATCH %d/%d] %s" % (i, n, subj_core) if n > 1 else "[PATCH] %s" % subj_core
			tag = fixes_tag(kdir, u)
			tested = tested_text(u, compiled, None)
			body = changelog(u, table, tested, signoff, tag)
			fname = "%04d-%s.patch" % (i, slug(subj_core))
			path = os.path.join(tmp, sdir, fname)
			sec0 = s["section"]
			to, cc = sec0["M"], sec0["R"] + [re.sub(r"\s*\(.*\)$", "", x) for x in sec0["L"]]
			# the diff carries the file's own bytes, UTF-8 or not
			with open(path, "w", errors="surrogateescape") as fp:
				fp.write(mail(author, date, subject, body, fx["diff"], to, cc))
			ap = subprocess.run(["patch", "-p1", "--dry-run", "-s", "-d", kdir],
					    input=fx["diff"].encode("utf-8", "surrogateescape"),
					    capture_output=True)
			ap.stdout, ap.stderr = ap.stdout.decode(errors="replace"), ap.stderr.decode(errors="replace")
			cp = checkpatch(kdir, path, signoff)
			kcfg = []
			for rel in fx["files"]:
				for sym in kconfig_symbols(kdir, rel):
					if sym not in kcfg:
						kcfg.append(sym)
			entries.append({"patch": os.path.join(sdir, fname), "subject": subj_core, "unit": u["unit"],
					"fingerprints": [f["fingerprint"] for f in u["findings"]],
					"files": fx["files"], "wakers": fx["wakers"], "kconfig": kcfg,
					"kind": fx["kind"], "confidence": fx["confidence"], "caveats": fx["caveats"],
					"applies": ap.returncode == 0, "apply_output": (ap.stdout + ap.stderr)[-500:],
					"checkpatch": cp, "fixes_tag": tag or "",
					"test_status": "compiled" if tested.startswith("Compile-tested") else "not tested",
					"tested_text": tested})
		sec = s["section"]
		ro = [f for f in others if section_of(kdir, f["file"], seccache)["name"] == sname]
		cover = cover_letter(sname, sec, entries, ro, signoff, manifest["git"], n)
		cpath = os.path.join(sdir, "0000-cover-letter.patch")
		with open(os.path.join(tmp, cpath), "w") as fp:
			fp.write(mail(author, date, "[PATCH 0/%d] %s fix nested sleeps found by nestsleep" % (
				n, entries[0]["subject"].split(" fix nested sleep")[0]), cover, "", to, cc))
		manifest["series"].append({"section": sname, "maintainers": sec["M"], "reviewers": sec["R"],
					   "lists": sec["L"], "dir": sdir, "cover": cpath, "patches": entries})
	for f in others:
		manifest["report_only"].append({"fingerprint": f["fingerprint"], "file": f["file"],
						"function": f["function"], "status": f["fix"]["status"],
						"reason": f["fix"]["reason"], "message": f["message"]})
	with open(os.path.join(tmp, "series.json"), "w") as fp:
		json.dump(manifest, fp, indent=1)
	with open(os.path.join(tmp, "report-only.txt"), "w") as fp:
		for r in manifest["report_only"]:
			fp.write("%s: %s(): %s: %s\n" % (r["file"], r["function"], "report only" if r["status"] ==
							    "report-only" else "manual fix needed", r["reason"]))
	if os.path.isdir(out):
		shutil.rmtree(out)
	os.rename(tmp, out)
	np = sum(len(s["patches"]) for s in manifest["series"])
	bad = [p for s in manifest["series"] for p in s["patches"] if not p["applies"]]
	dirty = [p for s in manifest["series"] for p in s["patches"] if p["checkpatch"]["status"] != "clean"]
	log("%d patches in %d series, %d findings without a patch (OUT/report-only.txt); %d do not apply; "
	    "checkpatch: %d clean, %d with complaints; written to %s" % (
		    np, len(manifest["series"]), len(others), len(bad), np - len(dirty), len(dirty), out))
	if not signoff:
		log("no Signed-off-by: set SIGNOFF= or git config user.name/user.email")
	return 1 if bad else 0


def cover_letter(sname, sec, entries, ro, signoff, git, n):
	paras = []
	paras.append(wrap("This series fixes %d nested sleep%s in the %s section of MAINTAINERS: in each, a "
			  "function that may sleep is called while the task state is already set for an outer "
			  "wait, so the inner sleep resets it and the wait can lose its wakeup or spin (%s). "
			  "Each patch rewrites one function into %s." % (
				  n, "s" if n != 1 else "", sname, LWN, WOKEN_FORM)))
	paras.append("\n".join("  %d/%d %s (confidence: %s)" % (i, n, e["subject"], e["confidence"])
			       for i, e in enumerate(entries, 1)))
	paras.append(wrap("The findings and the patches were generated by nestsleep (%s); please check each "
			  "chain before applying: the tool resolves calls through function pointers by struct "
			  "type and may name paths that cannot run while the state is set." % RULE))
	notes = []
	if not git:
		notes.append("The tree is not a git checkout (Debian's linux-source), so the patches carry no Fixes: "
			     "tags and were made against that tree, not mainline: rebase before sending.")
	if not signoff:
		notes.append("No Signed-off-by: nobody has signed these patches off yet (checkpatch.pl was run "
			     "with --no-signoff).")
	dirty = [e for e in entries if e["checkpatch"]["status"] != "clean"]
	notes.append("checkpatch.pl: %d of %d patches clean%s." % (
		n - len(dirty), n, "" if not dirty else "; complaints: " + "; ".join(
			"%s: %s" % (e["subject"], e["checkpatch"]["status"]) for e in dirty)))
	tested = collections.Counter(e["tested_text"] for e in entries)
	notes.append("Testing: " + " / ".join("%s (%d)" % (t, c) for t, c in tested.items()))
	paras.append("\n".join(wrap("- " + x).replace("\n", "\n  ") for x in notes))
	if ro:
		paras.append(wrap("Also found in this section, with no patch (fix by hand):") + "\n" + "\n".join(
			"  %s: %s(): %s" % (f["file"], f["function"], f["fix"]["reason"]) for f in ro))
	if signoff:
		paras.append("Signed-off-by: " + signoff)
	return "\n\n".join(paras) + "\n\n"


def boot_status(b, default):
	"""One short status for a patch from its boottest.json record."""
	st = b.get("status", "")
	if st == "ok":
		if b.get("exercised") and b.get("baseline_hits") and not b.get("patched_hits"):
			return "compiled, booted, exercised: warning gone"
		if b.get("exercised"):
			return "compiled, booted, exercised"
		return "compiled, booted, not exercised"
	return st or default


def retest(out):
	"""Rewrite the 'how tested' paragraph of every patch from boottest.json."""
	sp = os.path.join(out, "series.json")
	bp = os.path.join(out, "boottest.json")
	if not os.path.isfile(sp):
		raise UserError("no series.json in %s" % out)
	if not os.path.isfile(bp):
		raise UserError("no boottest.json in %s (run make boottest)" % out)
	with open(sp) as f:
		man = json.load(f)
	with open(bp) as f:
		boot = json.load(f)
	results = boot.get("results", boot)
	n = 0
	for s in man["series"]:
		for e in s["patches"]:
			unit = {"unit": e["unit"], "findings": [{"fingerprint": fp} for fp in e["fingerprints"]]}
			comp = {e["unit"]: {"status": "ok"}} if e["test_status"] == "compiled" else {}
			new = tested_text(unit, comp, results)
			path = os.path.join(out, e["patch"])
			with open(path) as f:
				text = f.read()
			old = e["tested_text"]
			if wrap(old) in text:
				text = text.replace(wrap(old), wrap(new), 1)
				with open(path + ".tmp", "w") as f:
					f.write(text)
				os.replace(path + ".tmp", path)
				e["tested_text"] = new
				fp0 = e["fingerprints"][0]
				if fp0 in results:
					e["test_status"] = boot_status(results[fp0], e["test_status"])
					e["boottest"] = results[fp0]
				n += 1
	with open(sp + ".tmp", "w") as f:
		json.dump(man, f, indent=1)
	os.replace(sp + ".tmp", sp)
	log("rewrote the testing paragraph of %d patches" % n)
	return 0
