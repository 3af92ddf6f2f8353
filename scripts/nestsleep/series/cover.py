# SPDX-License-Identifier: GPL-2.0-only
"""The cover letter of a series (for a lone patch, the notes below its
'---' line): what the patches do, how they were made, the tree, Fixes:,
recipients, sign-off, git am, checkpatch and testing notes."""

import collections
import os
import re

from nestsleep.series.changelog_tested import tested_paragraph
from nestsleep.series.text import LWN, RULE, WOKEN_FORM, WOKEN_FORM_GIT, noline, wrap


# ---------------------------------------------------------------------------
# Cover letters

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
	task state back to TASK_RUNNING after the loop, 'finish_wait' calls
	finish_wait() after it (fix/finish_wait.py), 'setter' moves or
	drops a set_current_state() (fix/setter.py), 'woken' rewrites the
	wait into the wait_woken() form (fixer.kind_of()), 'other' anything
	else, which the cover does not describe beyond its changelog."""
	out = collections.OrderedDict()
	for i, e in enumerate(ent["patches"], 1):
		k = e.get("kind")
		out.setdefault(k if k in ("restore", "finish_wait", "restore_call", "setter") else "woken" if k in WOKEN_KINDS else
			       "missed" if k == "missed_wakeup" else "other", []).append(i)
	return out


def patch_numbers(ix, n):
	return "%s %s" % ("Patch" if len(ix) == 1 else "Patches", ", ".join("%d/%d" % (i, n) for i in ix))


def cover_how(kinds, n, git):
	"""The cover's sentence on what the patches do, one clause per kind."""
	form = WOKEN_FORM_GIT if git else WOKEN_FORM
	text = {"restore": ("sets the task state back to TASK_RUNNING as soon as the wait loop ends, before the "
			    "call that may sleep, and leaves the wait itself as it is", "set"),
		"finish_wait": ("calls finish_wait() as soon as the wait loop ends, before the call that may sleep, "
				"which sets TASK_RUNNING and takes the wait entry off its queue", "call"),
		"restore_call": ("sets the task state back to TASK_RUNNING before the call that may sleep, and "
				 "leaves the wait and its wait entry as they are", "set"),
		"setter": ("moves or drops the set_current_state() that put a call that may sleep in the wait's "
			   "window, and leaves the wait itself as it is", "move"),
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
