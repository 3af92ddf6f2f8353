# SPDX-License-Identifier: GPL-2.0-only
"""The records of a series: series.json (the manifest make boottest,
retest and make triage read), the short statuses of each patch, and
retest, which puts boottest.json's results into the test records and
rewrites the testing paragraphs and cover letters from them."""

import json
import os

from nestsleep.common import UserError, sha1
from nestsleep.series.gitrepo import checkpatch
from nestsleep.series.changelog import effect_paragraphs
from nestsleep.series.changelog_tested import found_line, tested_paragraph
from nestsleep.series.cover import checkpatch_note, fix_note, testing_note
from nestsleep.series.text import log, wrap


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


def write_manifest(tmp, manifest):
	with open(os.path.join(tmp, "series.json"), "w") as fp:
		json.dump(manifest, fp, indent=1)
	with open(os.path.join(tmp, "report-only.txt"), "w") as fp:
		for r in manifest["report_only"]:
			kind = {"report-only": "report only", "manual": "manual fix needed"}.get(r["status"], "not in a series")
			fp.write("%s: %s(): %s: %s\n" % (r["file"], r["function"], kind, r["reason"]))


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
				# the closing paragraph of the notes: the last copy (a lone
				# patch's notes also quote it in their testing bullet,
				# which the loop over the covers below rewrites)
				at = text.rfind(wrap(old))
				text = text[:at] + wrap(new) + text[at + len(wrap(old)):]
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
