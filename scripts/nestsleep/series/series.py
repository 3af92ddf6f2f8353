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

This module is the driver: build() selects the findings, groups them into
patches and series, and makes each series (make_series(), format_series()).
What it calls:

  subjects.py          each patch's subject and its prefix
  recipients.py        MAINTAINERS sections, To:/Cc:, the tree tag, Kconfig
  gitrepo.py           the scratch repository, git format-patch, git am,
                       checkpatch.pl
  changelog.py         the commit message of a patch; its queue wakers'
                       items (changelog_wakers.py), a missed wakeup's text
                       (changelog_missed.py), the testing lines
                       (changelog_tested.py)
  cover.py             the cover letter
  records.py           series.json, the patches' statuses, retest
  text.py              the wrap and the phrases they share
"""

import collections
import json
import os
import re
import shutil
import tempfile

from nestsleep.analysis import pipeline
from nestsleep import TOP
from nestsleep.triage import treeid
from nestsleep.common import CONFIDENCES, UserError, check_confidence, source_date
from nestsleep.series.subjects import git_prefix, path_prefix, series_subjects
from nestsleep.series.recipients import (find_recipients, kconfig_symbols, seccache_of, section_of, subject_prefix,
					 tree_of)
from nestsleep.series.gitrepo import apply_unit, checkpatch, format_patch, git_am, identity, make_repo
from nestsleep.series.changelog import (below_dashes, changelog, effect_inputs, effect_paragraphs, fixes_hint,
					fixes_tag, group_fps, notes, tool_notes, waiters)
from nestsleep.series.changelog_missed import missed_later
from nestsleep.series.changelog_tested import found_line, tested_paragraph
from nestsleep.series.cover import am_note, fill_cover, fix_note, tree_note, woken_stops
from nestsleep.series.records import patch_status, retest, rewrite_tests, write_manifest
from nestsleep.series.text import log


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


def slug(s):
	return re.sub(r"[^a-z0-9]+", "-", s.lower()).strip("-")[:52]


# ---------------------------------------------------------------------------
# The series: build() is where make fixes starts

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
		later = missed_later(kdir, s["groups"], subjects)
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
			body = changelog(kdir, g, table, records, signoff, tags, git, later[gi])
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
	made = format_patch(repo, os.path.join(tmp, sdir), sprefix, one, real, base, to, cc, author)
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
