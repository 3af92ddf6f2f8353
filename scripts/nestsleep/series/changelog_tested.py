# SPDX-License-Identifier: GPL-2.0-only
"""What a patch's test records say, in words: the testing paragraph below
'---' (tested_paragraph()) and the one line of the commit message on how
it was found and tested (found_line()).  A record is one per finding:
its in-order build or lone compile, and its boot in QEMU."""

import collections
import os
import re

from nestsleep import exercisers
from nestsleep.series.text import capital


MISSED_BOOTED = ("built and booted in QEMU with the patch; a missed wakeup prints no warning, so the boot shows "
		 "only that the kernel runs with it")


NOT_TESTED = "Not compiled or boot-tested."


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
