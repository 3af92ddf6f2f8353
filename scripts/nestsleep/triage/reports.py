# SPDX-License-Identifier: GPL-2.0-only
"""make triage: reports for subsystem maintainers.

  nestsleep triage --kdir K [--m M] [--out DIR] [--baseline OLD/findings.json]
		   [--series DIR] [--labels FILE] [--json FINDINGS]

Writes, to DIR (default reports/<tree-id>), through DIR.tmp and a rename:

  index.md          tree, versions, command, parse coverage, precision by
                    confidence from the hand labels (in-sample, and held-out:
                    heldout.py), and one row per MAINTAINERS section (the
                    most specific one of each file)
  <section>.md      each finding laid out like a kernel test robot mail
  findings.json     one record per finding
  findings.sarif    SARIF 2.1.0, for code-scanning front ends

Fingerprints do not depend on line numbers (file, function, wait primitive,
chain), so BASELINE= marks what is new (">>", as the test robot does) and
lists what has gone.  A finding whose fingerprint is not in the baseline is
still "changed", not new, when a gone one has the same file and wait
primitive, a sleeping path with the same first call and final sleeping
primitive, and the same or a renamed function (match_baseline()).  Hand
labels live in reports/labels/<tree-id>.json (fingerprint -> verdict and
reason) and survive a new run.

The held-out precision compares KDIR with the comparison tree of
--heldout-base (HELDOUT_BASE=), by default linux-source-6.1 in the cache
dir, the tree `make setup` unpacks and the one sleep_info.json is checked
against: a knob, so a test or another pair of trees can name the tree, with
a default that needs nothing on the command line.  It is computed only when
KDIR is a later kernel than that tree (6.12 against 6.1); otherwise index.md
says in one line why not.
"""

import collections
import difflib
import glob
import json
import os
import re
import shutil
import subprocess
import sys

from nestsleep import TOP, VERSION, cache_dir
from nestsleep import exercisers
from nestsleep.common import UserError, source_date
from nestsleep.knowledge import Knowledge
from nestsleep.series import changelog, recipients, records
from nestsleep.series import series as fixes
from nestsleep.series import effect
from nestsleep.triage import heldout as heldout_mod
from nestsleep.triage import missed as missed_mod
from nestsleep.triage import treeid

RULE = "cocci/nested_sleep.cocci"
SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
VERDICTS = ("true", "false-positive", "harmless")


# How a hand label is chosen; written into every index.md.
VERDICT_RULES = [
	"How a verdict is chosen:", "",
	"- `true`: on a path the code means to take, a call in the window blocks, or warns "
	"`do not call blocking ops when !TASK_RUNNING` under CONFIG_DEBUG_ATOMIC_SLEEP, while the state set "
	"for the outer wait is still non-running. The loop then makes extra passes (a busy poll while the call "
	"keeps sleeping), or the kernel warns. "
	"How rare the path is (resume, error recovery, the first pass of a kthread loop) does not matter.",
	"- `harmless`: the state is really overwritten in the window, but nothing warns or spins: "
	"the call replaces the pending sleep by design (kthread_parkme(), msleep() or usleep_range() with no "
	"schedule() after it), or the nesting is only on a path the code itself flags as a bug with WARN(). "
	"Nothing needs fixing, or `sched_annotate_sleep()` documents it.",
	"- `false-positive`: no path reaches a sleeping call in the window: the state is restored first, the "
	"callee cannot sleep with the flags or arguments it gets, the two branches never combine, or the code "
	"is not built.", ""]


is_missed = missed_mod.is_missed
missed_fix = missed_mod.suggested_fix
missed_effect = missed_mod.effect
missed_lines = missed_mod.lines
MISSED_CONFIDENCE = missed_mod.MISSED_CONFIDENCE
MISSED_RUNTIME = missed_mod.MISSED_RUNTIME


def log(msg):
	print("triage: " + msg, file=sys.stderr, flush=True)


def tool_versions(version=""):
	"""(nestsleep's version, spatch's): version (NESTSLEEP_VERSION=, so
	that two runs at different commits can be compared), else
	0.1+<the checkout's commit>."""
	sp = subprocess.run(["spatch", "--version"], capture_output=True, text=True).stdout
	m = re.search(r"spatch version (\S+)", sp)
	version = version or os.environ.get("NESTSLEEP_VERSION", "")
	if not version:
		rev = subprocess.run(["git", "-C", TOP, "rev-parse", "--short", "HEAD"], capture_output=True,
				     text=True).stdout.strip()
		version = VERSION + ("+" + rev if rev else "")
	return version, (m.group(1) if m else "unknown")


def slug(s):
	return re.sub(r"[^a-z0-9]+", "-", s.lower()).strip("-")[:60] or "unknown"


# ---------------------------------------------------------------------------

def changed_lines(diff):
	"""The removed and added lines of a diff or a mailed patch, in order,
	from its first file header on: what it changes, whatever its
	changelog, context and line numbers."""
	lines = diff.split("\n")
	start = next((i for i in range(len(lines) - 1)
		      if lines[i].startswith("--- ") and lines[i + 1].startswith("+++ ")), len(lines))
	return [l for l in lines[start:] if l[:1] in "+-" and l[:1] and not l.startswith(("+++ ", "--- "))
		and l != "-- "]	# a mail's signature mark


def net_change(lines):
	"""(lines added, lines removed) of a diff's +/- lines, a line both
	added and removed cancelling out: two diffs of the same change that
	align it differently (git's and the fixer's) agree on it."""
	plus = collections.Counter(l[1:] for l in lines if l.startswith("+"))
	minus = collections.Counter(l[1:] for l in lines if l.startswith("-"))
	return plus - minus, minus - plus


def patch_holds(changed, diff):
	"""Whether a series patch's changes hold every change of this finding's
	diff (a patch may fix several functions, and an #include that an
	earlier patch of the series added is not added again)."""
	if changed is None:
		return False
	want = net_change([l for l in changed_lines(diff) if not re.match(r"^\+\s*#\s*include\s", l)])
	have = net_change(changed)
	return not (want[0] - have[0]) and not (want[1] - have[1])


def suggested_fix(f):
	fx = f.get("fix") or {}
	st = fx.get("status")
	if is_missed(f):
		return missed_fix(f)
	if st == "patch" and fx.get("kind") == "finish_wait":
		return ("Call `finish_wait()` right after the wait loop (the patch below): %s." % fx.get("reason", ""))
	if st == "patch" and fx.get("kind") == "restore":
		return ("Restore `TASK_RUNNING` right after the wait loop (the patch below): %s." % fx.get("reason", ""))
	if st == "patch" and fx.get("kind") == "restore_call":
		return ("Restore `TASK_RUNNING` before the sleeping call (the patch below): %s." % fx.get("reason", ""))
	if st == "patch" and fx.get("kind") == "setter":
		return ("Move or drop the `set_current_state()` and leave the wait as it is (the patch below): %s."
			% fx.get("reason", ""))
	if st == "patch":
		return ("Rewrite the wait into the wait_woken() form (the patch below): %s. Where the inner sleep "
			"is rare and a re-loop harmless, `sched_annotate_sleep()` in the sleeping callee is the "
			"lighter fix maintainers have also accepted." % fx.get("reason", ""))
	if f.get("kind") == "sleep_in_atomic" or "spinlock" in fx.get("reason", "") or "atomic" in fx.get("reason", ""):
		return ("No wait_woken() rewrite: %s. Move the sleeping call out of the locked condition "
			"(evaluate it before taking the lock, or use a non-sleeping variant)." % fx.get("reason", ""))
	if f["shape"] == "thread_exit":
		return ("Manual fix: %s. Put the thread back in `TASK_RUNNING` (`__set_current_state(TASK_RUNNING)`) "
			"on the way out of the thread function, as 36225a7c72e9 did for w1_process()." % fx.get("reason", ""))
	if f["shape"] == "carried_state":
		return ("Manual fix: %s. Set `__set_current_state(TASK_RUNNING)` on the path before the sleeping "
			"call (as io_uring's io_rsrc_ref_quiesce() fix did), or restructure the helper so that it "
			"does not return with the state set." % fx.get("reason", ""))
	return ("Manual fix: %s. Options: a wait_woken() conversion done by hand (the thread needs a wait queue "
		"its wakers use); `set_current_state(TASK_RUNNING)` before the blocking call and the state set "
		"again after it (the mmc/vub300 fix); or `sched_annotate_sleep()` where a spurious re-loop is "
		"harmless." % fx.get("reason", "no safe mechanical rewrite"))


def confidence_reason(f):
	if is_missed(f):
		return MISSED_CONFIDENCE
	why = []
	if any("=" in h for h in f["chain"]):
		why.append("the chain goes through a function pointer, resolved by struct type and member: the "
			   "target may never be reached from this site")
	if f["shape"] == "carried_state":
		why.append("the state is carried out of a helper that may return without sleeping")
	if f["shape"] == "thread_exit":
		why.append("the path to the thread function's return is the rule's, which assumes that every loop "
			   "may end (a for (;;) left only by a return that restores the state is not told apart)")
	if f["shape"] in ("set_current_state", "prepare_to_wait") and f.get("group") == "schedule":
		why.append("the inner sleep is a schedule*() call, which may be the loop's own wait")
	if f["effect"] == "silent":
		why.append("the inner sleep resets the state silently (no might_sleep() warning)")
	if f.get("blocks") is False:
		why.append("the chain ends in might_sleep() itself: nothing on it is known to block")
	if not why and f["confidence"] == "high":
		why.append("a direct call chain to a primitive that sleeps unconditionally")
	if not why:
		why.append("a callee with several possible definitions, or a conditional sleep (might_sleep_if)")
	return "; ".join(why)


def warning_text(f, kdir="", observed=None):
	"""What the nested sleep does for this shape of wait (series/effect.py,
	the same text as the changelogs)."""
	if f.get("kind") == "sleep_in_atomic":
		return ("The condition runs under a spinlock: with CONFIG_DEBUG_ATOMIC_SLEEP=y a sleep there is "
			"reported as \"BUG: sleeping function called from invalid context\".")
	if is_missed(f):
		return missed_effect(kdir, f)
	_, hexs = changelog.finding_state(kdir, f, changelog.waiters())
	return effect.effect_text(f["shape"], "warns" if f["effect"] == "warns" else "silent", hexs, observed,
				  blocks=f.get("blocks", True))


def excerpt(kdir, f, ctx=3):
	try:
		with open(os.path.join(kdir, f["file"]), errors="replace") as fp:
			lines = fp.read().splitlines()
	except OSError:
		return ""
	marks = {f["line"]: ">", f.get("call_line", f["line"]): "*"}
	lo = max(1, min(marks) - ctx)
	hi = min(len(lines), max(marks) + ctx)
	if hi - lo > 24:
		hi = lo + 24
	out = []
	for n in range(lo, hi + 1):
		out.append("%s%5d  %s" % (marks.get(n, " "), n, lines[n - 1].replace("\t", "        ")))
	return "\n".join(out)


# ---------------------------------------------------------------------------

def to_sarif(findings, tid, nver):
	rules = [
		{"id": "nested-sleep", "name": "NestedSleep",
		 "shortDescription": {"text": "A call that may sleep runs while the task state is not TASK_RUNNING"},
		 "fullDescription": {"text": "A wait_event*() condition, a prepare_to_wait() window or a "
					     "set_current_state() window calls something that may sleep; the inner "
					     "sleep resets the task state to TASK_RUNNING: a wait_event*() makes an "
					     "extra pass or polls (its condition is tested again, so no wakeup is "
					     "lost); an open-coded loop the same, on a pass that does not end the "
					     "wait."},
		 "helpUri": "https://lwn.net/Articles/628628/",
		 "defaultConfiguration": {"level": "warning"}},
		{"id": "sleep-in-atomic", "name": "SleepInAtomic",
		 "shortDescription": {"text": "A wait condition that runs under a spinlock may sleep"},
		 "fullDescription": {"text": "The _locked and _lock_irq wait_event forms evaluate the condition "
					     "with a spinlock held; a sleeping call there is a sleep in atomic context."},
		 "defaultConfiguration": {"level": "error"}},
		{"id": "missed-wakeup", "name": "MissedWakeup",
		 "shortDescription": {"text": "A write that ends a reported wait is not followed by a wakeup that wakes it"},
		 "fullDescription": {"text": "A function makes the wait's condition true (clears the flag it tests, "
					     "decrements the count it compares with zero) and then wakes the queue only "
					     "in a mode that does not wake the waiter's state (wake_up_interruptible() "
					     "for a TASK_UNINTERRUPTIBLE waiter), or not at all on its or its caller's "
					     "path: the waiter sleeps on until another wakeup comes."},
		 "defaultConfiguration": {"level": "warning"}},
	]
	results = []
	for f in findings:
		rid = {"sleep_in_atomic": "sleep-in-atomic", "missed_wakeup": "missed-wakeup"}.get(f.get("kind"), "nested-sleep")
		steps = []
		for i, loc in enumerate(f.get("chain_locs", [])):
			rel, line = loc.rsplit(":", 1)
			steps.append({"location": {"physicalLocation": {
				"artifactLocation": {"uri": rel, "uriBaseId": "KDIR"},
				"region": {"startLine": max(1, int(line))}},
				"message": {"text": "calls %s" % f["chain"][i] if i < len(f["chain"]) else "call"}}})
		r = {
			"ruleId": rid,
			"level": "error" if rid == "sleep-in-atomic" else "warning",
			"message": {"text": f["message"]},
			"locations": [{"physicalLocation": {
				"artifactLocation": {"uri": f["file"], "uriBaseId": "KDIR"},
				"region": {"startLine": f["line"], "startColumn": f["col"] + 1,
					   "endColumn": max(f["colend"] + 1, f["col"] + 2)}},
				"logicalLocations": [{"name": f["function"], "kind": "function"}]}],
			"partialFingerprints": {"nestsleep/v1": f["fingerprint"]},
			"properties": {"confidence": f["confidence"], "shape": f["shape"], "primitive": f["primitive"],
				       "fix": (f.get("fix") or {}).get("status", "none")},
		}
		if f.get("baseline"):
			r["baselineState"] = {"changed": "updated"}.get(f["baseline"], f["baseline"])
		if is_missed(f):
			# the chain of a missed wakeup is the writer and its waker
			# call, not a call path: its places are related locations
			steps = []
			r["relatedLocations"] = missed_mod.sarif_related(f)
			r["properties"]["missed"] = f.get("missed", "")
		if steps:
			r["codeFlows"] = [{"threadFlows": [{"locations": steps}]}]
		results.append(r)
	return {
		"$schema": SARIF_SCHEMA,
		"version": "2.1.0",
		"runs": [{
			"tool": {"driver": {"name": "nestsleep", "version": nver,
					    "informationUri": "https://coccinelle.gitlabpages.inria.fr/website",
					    "rules": rules}},
			"originalUriBaseIds": {"KDIR": {"description": {"text": "the kernel tree (%s)" % tid}}},
			"results": results,
		}],
	}


# ---------------------------------------------------------------------------

def load(a):
	"""The checker's findings: --json, else the same as series.load_findings."""
	return fixes.load_findings(a)


def precision(findings):
	rows = {}
	for c in ("high", "medium", "low"):
		fs = [f for f in findings if f["confidence"] == c]
		lab = [f for f in fs if f.get("verdict")]
		tp = sum(1 for f in lab if f["verdict"] in ("true", "harmless"))
		rows[c] = (len(fs), len(lab), tp, sum(1 for f in lab if f["verdict"] == "harmless"))
	return rows


def kind_lines(recs):
	"""index.md's precision per level of the missed wakeups, apart from
	the nested sleeps they are counted with above; [] when there are
	none."""
	mw = [r for r in recs if r.get("kind") == "missed_wakeup"]
	if not mw:
		return []
	L = ["### Missed wakeups (hand labels)", "",
	     "A writer that makes a reported wait's condition true with no wakeup that can wake the waiter's state "
	     "(`WARNING: missed wakeup`).", "",
	     "| confidence | findings | labelled | correct | of which harmless | precision |", "|---|---|---|---|---|---|"]
	for c, (n, nl, tp, hl) in precision(mw).items():
		L.append("| %s | %d | %d | %d | %d | %s |" % (c, n, nl, tp, hl, ("%.0f%%" % (100.0 * tp / nl)) if nl else "n/a"))
	return L + [""]


TARGET_HIGH = 0.92	# what "high" must reach (issue 16; DSAC's 92 %)


def labelled_doubts(recs):
	"""(doubts, correct) of the labelled findings of recs."""
	return [(r["doubts"], r["verdict"] in ("true", "harmless")) for r in recs
		if r.get("verdict") and "doubts" in r]


def threshold(pairs, target=TARGET_HIGH):
	"""The largest h such that findings with at most h doubts are correct
	at least target of the time (None if not even h = 0 is)."""
	best = None
	for h in sorted(set(d for d, _ in pairs)):
		sel = [ok for d, ok in pairs if d <= h]
		if sel and sum(sel) >= target * len(sel):
			best = h
	return best


def calibration_md(tid, recs):
	"""The calibration of "high" across trees: the doubt threshold chosen
	on one tree's labels, and the precision it gives on the other's
	(reports/<other>/findings.json with reports/labels/<other>.json)."""
	trees = {tid: labelled_doubts(recs)}
	for path in sorted(glob.glob(os.path.join(TOP, "reports", "*", "findings.json"))):
		other = os.path.basename(os.path.dirname(path))
		lp = os.path.join(TOP, "reports", "labels", other + ".json")
		if other == tid or not os.path.isfile(lp):
			continue
		with open(path) as f:
			orecs = json.load(f).get("findings", [])
		with open(lp) as f:
			olab = json.load(f).get("labels", {})
		for r in orecs:
			r["verdict"] = olab.get(r["fingerprint"], {}).get("verdict", "")
		if any("doubts" in r for r in orecs):
			trees[other] = labelled_doubts(orecs)
	L = ["## Calibration", "",
	     "Each finding counts its doubts (`doubts` in findings.json): a function-pointer hop 2 (3 past eight "
	     "targets), a callee name with several definitions 1, `might_sleep_if()` 1, a gfp the checker cannot "
	     "follow 1; a state carried out of a helper, or a thread function's return, makes it at least 1, "
	     "and a `schedule()` chain in a window at least 3.  The levels are thresholds on that count: high 0, medium 1-2, low 3 or more.  The high "
	     "threshold is calibrated on one tree's labels (the largest number of doubts whose findings are "
	     "still %d %% correct) and checked on the other's:" % round(100 * TARGET_HIGH), "",
	     "| calibrated on | high = doubts at most | precision there | checked on | precision there |",
	     "|---|---|---|---|---|"]
	for a in sorted(trees):
		h = threshold(trees[a])
		for b in sorted(trees):
			if b == a:
				continue
			def prec(pairs):
				sel = [ok for d, ok in pairs if h is not None and d <= h]
				return "%d/%d (%s)" % (sum(sel), len(sel), pct(sum(sel), len(sel)))
			L.append("| %s | %s | %s | %s | %s |" % (a, "none" if h is None else h, prec(trees[a]), b,
								prec(trees[b])))
	if len(trees) < 2:
		L.append("| %s | %s | | (no other labelled tree with doubts) | |" % (tid, threshold(trees[tid])))
	L.append("")
	return L


def _version(tid):
	m = re.match(r"linux-(\d+)\.(\d+)\.(\d+)", tid)
	return tuple(int(x) for x in m.groups()) if m else None


def knowledge_lines(kn):
	"""index.md's count of the sleep_info.json entries that rest on hand
	labels alone (a chain that ends in one of them gets one doubt)."""
	counts = kn.source_counts()
	total = sum(c["entries"] for c in counts.values())
	kernel = sum(c["kernel"] for c in counts.values())
	only = [sec for sec, c in sorted(counts.items()) for _ in range(c["label_only"])]
	lonely = ("%d rests on hand labels alone" if len(only) == 1 else "%d rest on hand labels alone") % len(only)
	if only:
		lonely += " (%s: %s)" % ("groups" if set(only) == {"groups"} else "sections",
					 ", ".join(sorted(kn.label_only_groups)) or ", ".join(sorted(set(only))))
	return ["Knowledge sources: `cocci/sleep_info.json` has %d entries; %d name a kernel file:line, %s. "
		"A chain that ends in an entry taught only by a label gets one doubt." % (total, kernel, lonely), ""]


def heldout_lines(kdir, tid, base, recs, labels):
	"""index.md's held-out precision (heldout.py) of recs against the
	earlier tree base, or one line that says why it is not computed."""
	def no(why):
		return ["Held-out precision: not computed: %s." % why, ""]
	if not base or not os.path.isfile(os.path.join(base, "Makefile")):
		return no("no comparison tree (`linux-source-6.1` in the cache dir, or HELDOUT_BASE=)")
	bid = treeid.tree_id(base)
	if _version(tid) is None or _version(bid) is None or _version(tid) <= _version(bid):
		return no("%s is not a later kernel than the comparison tree %s" % (tid, bid))
	if not labels:
		return no("no hand labels for %s" % tid)
	return heldout_mod.markdown(heldout_mod.compute(recs, kdir, base, labels))


def read_labels(path):
	"""The labels of a labels file ({} when there is none), each verdict
	checked."""
	if not os.path.isfile(path):
		return {}
	with open(path) as f:
		labels = json.load(f).get("labels", {})
	for fp, lab in labels.items():
		if lab.get("verdict") not in VERDICTS and not (lab.get("later") and "verdict" not in lab):
			raise UserError("%s: %s: verdict must be one of %s" % (path, fp, ", ".join(VERDICTS)))
	return labels


def build(a):
	kdir = os.path.realpath(a.kdir)
	if not os.path.isfile(os.path.join(kdir, "Makefile")):
		raise UserError("no kernel tree at KDIR=%s" % a.kdir)
	tid = treeid.tree_id(kdir)
	out = os.path.abspath(a.out or os.path.join(TOP, "reports", tid))
	labels_path = a.labels or os.path.join(TOP, "reports", "labels", tid + ".json")
	source_date()	# a bad SOURCE_DATE_EPOCH stops here, before the checker runs
	data = load(a)
	findings = data["findings"]
	labels = read_labels(labels_path)
	base = None
	if a.baseline:
		with open(a.baseline) as f:
			bd = json.load(f)
		base = {r["fingerprint"]: r for r in (bd["findings"] if isinstance(bd, dict) else bd)}
	series = {}
	boot = {}
	if not a.series and os.path.isfile(os.path.join(TOP, "reports", "fixes", tid, "series.json")):
		a.series = os.path.join(TOP, "reports", "fixes", tid)
	if a.series:
		sp = os.path.join(a.series, "series.json")
		if not os.path.isfile(sp):
			raise UserError("no series.json in %s" % a.series)
		with open(sp) as f:
			man = json.load(f)
		boot = {}
		bp = os.path.join(a.series, "boottest.json")
		if os.path.isfile(bp):
			with open(bp) as f:
				bj = json.load(f)
			boot = bj.get("results", bj)
		for s in man["series"]:
			for p in s["patches"]:
				try:
					with open(os.path.join(a.series, p["patch"]), errors="replace") as fp:
						changed = changed_lines(fp.read())
				except OSError:
					changed = None
				missed = p.get("kind") == "missed_wakeup"
				for fp in p["fingerprints"]:
					st = p.get("test_status", "not tested")
					if fp in boot and isinstance(boot[fp], dict):
						st = boot_status(boot[fp], st, p.get("kind", ""))
					obs = changelog.observed_warning([fp], man.get("tests", {}))
					if obs is None and isinstance(boot.get(fp), dict) and boot[fp].get("baseline_hits"):
						obs = boot[fp]["baseline_hits"][0]
					if missed:
						# the exerciser's warnings are the file's nested
						# sleeps': a missed wakeup prints none
						obs = None
					series[fp] = {"status": st, "patch": p["patch"], "checkpatch": p["checkpatch"]["status"],
						      "tested": p.get("tested_text", ""), "changed": changed, "observed": obs}
	runtime = {fp: r for fp, r in (boot if a.series else {}).items() if isinstance(r, dict)}
	reasons = load_reasons()
	exercised_files = exerciser_files()
	seccache = {}
	recs = []
	for f in findings:
		sec = recipients.section_of(kdir, f["file"], seccache)
		lab = labels.get(f["fingerprint"], {})
		fx = f.get("fix") or {}
		rec = dict(f)
		tested = series.get(f["fingerprint"])
		if tested and fx.get("status") == "patch" and not patch_holds(tested["changed"], fx.get("diff", "")):
			# the series tested another patch for this finding: its
			# status says nothing of this one
			tested = dict(tested, status="generated, not tested (the series in reports/fixes/ holds "
				      "an older patch for this finding)", checkpatch="")
			series[f["fingerprint"]] = tested
		rec.update({"section": sec["name"], "maintainers": sec["M"], "lists": sec["L"],
			    "verdict": lab.get("verdict", ""), "verdict_reason": lab.get("reason", ""),
			    "later": lab.get("later", []),
			    "patch_status": series.get(f["fingerprint"], {}).get("status",
							("generated, not tested" if fx.get("status") == "patch" else "")),
			    "confidence_reason": confidence_reason(f)})
		rec["runtime"] = None if is_missed(f) else runtime_summary(runtime.get(f["fingerprint"]))
		if rec["verdict"] == "true" and not (rec["runtime"] or {}).get("reproduced"):
			rec["runtime_reason"] = runtime_reason(rec, reasons, exercised_files)
		recs.append(rec)
	gone = []
	if base is not None:
		gone = match_baseline(base, recs)
	nver, sver = tool_versions(getattr(a, "nestsleep_version", ""))
	tmp = out + ".tmp"
	shutil.rmtree(tmp, ignore_errors=True)
	os.makedirs(tmp)
	with open(os.path.join(tmp, "findings.json"), "w") as f:
		json.dump({"tree": tid, "tool": "nestsleep", "version": nver, "coverage": data.get("coverage", {}),
			   "findings": recs, "gone": gone}, f, indent=1)
	with open(os.path.join(tmp, "findings.sarif"), "w") as f:
		json.dump(to_sarif(recs, tid, nver), f, indent=1)
	bysec = collections.OrderedDict()
	for r in sorted(recs, key=lambda r: (r["section"], r["file"], r["line"])):
		bysec.setdefault(r["section"], []).append(r)
	cmd = "make triage KDIR=%s%s%s" % (a.kdir_shown or "<a %s tree>" % tid, (" M=" + a.m) if a.m else "",
					   (" BASELINE=" + os.path.relpath(a.baseline, TOP)) if a.baseline else "")
	for sname, rs in bysec.items():
		with open(os.path.join(tmp, slug(sname) + ".md"), "w") as f:
			f.write(section_md(sname, rs, kdir, series, a.kdir_shown or "<a %s tree>" % tid, tid))
	now = set(r["fingerprint"] for r in recs)
	stale = {fp: lab for fp, lab in labels.items() if fp not in now and lab.get("verdict")}
	hbase = getattr(a, "heldout_base", "") or os.path.join(cache_dir(), "linux-source-6.1")
	held = heldout_lines(kdir, tid, os.path.realpath(hbase), recs, labels)
	log(held[0] if held[0].startswith("Held-out") else "held-out precision against %s" % hbase)
	with open(os.path.join(tmp, "index.md"), "w") as f:
		f.write(index_md(tid, kdir, nver, sver, cmd, data.get("coverage", {}), recs, bysec, gone, labels_path,
				 base is not None, stale, heldout=held))
	if os.path.isdir(out):
		shutil.rmtree(out)
	os.rename(tmp, out)
	log("%d findings in %d sections%s; written to %s" % (
		len(recs), len(bysec), ("; %d new, %d changed, %d gone since the baseline" % (
			sum(1 for r in recs if r.get("baseline") == "new"),
			sum(1 for r in recs if r.get("baseline") == "changed"), len(gone))) if base is not None else "", out))
	return 0


def pct(a, b):
	return "%.1f%%" % (100.0 * a / b) if b else "n/a"


def index_md(tid, kdir, nver, sver, cmd, cov, recs, bysec, gone, labels_path, has_base, stale=None, heldout=None):
	L = ["# nestsleep triage report: %s" % tid, ""]
	L += ["| | |", "|---|---|",
	      "| tree | `%s` (%s) |" % (tid, os.path.basename(kdir)),
	      "| nestsleep | %s |" % nver, "| spatch | %s |" % sver,
	      "| date | %s |" % source_date().strftime("%Y-%m-%d %H:%M UTC"),
	      "| command | `%s` |" % cmd, ""]
	L += ["## Parse coverage", "",
	      "spatch parsed %s of %s files that hold wait sites; %d failed, %d timed out." % (
		      cov.get("parsed", "?"), cov.get("files", "?"), len(cov.get("failed", [])), len(cov.get("timeout", []))), ""]
	if "functions" in cov:
		L += ["In the parsed files, spatch saw %d of the %d functions that nestsleep's own scanner found "
		      "(%s); of the %d functions that use `scoped_guard()`/`scoped_cond_guard()`, it saw %d. "
		      "spatch 1.1.1 cannot parse the guards and drops such a function whole; "
		      "`cocci/nestsleep.macros.h` is passed with `--macro-file` to keep them." % (
			      cov["functions_parsed"], cov["functions"], pct(cov["functions_parsed"], cov["functions"]),
			      cov["guard_functions"], cov["guard_functions_parsed"]), ""]
		if cov.get("functions_blanked"):
			L += ["Not counted: %d functions that hold no wait, no state setter and no state-carrying call; "
			      "spatch matches a copy of each file with their bodies blanked, as the rule finds "
			      "nothing in them." % cov["functions_blanked"], ""]
		if cov.get("functions_dropped"):
			L += ["Functions spatch did not parse (first %d): " % min(20, len(cov["functions_dropped"]))
			      + ", ".join("`%s`" % x for x in cov["functions_dropped"][:20]), ""]
	if cov.get("failed"):
		L += ["Could not parse: " + ", ".join("`%s`" % x for x in cov["failed"][:40]), ""]
	if cov.get("timeout"):
		L += ["Timed out: " + ", ".join("`%s`" % x for x in cov["timeout"][:40]), ""]
	by = collections.Counter(r["confidence"] for r in recs)
	patched = sum(1 for r in recs if (r.get("fix") or {}).get("status") == "patch")
	L += ["## Summary", "",
	      "%d findings (high %d, medium %d, low %d); %d with a generated patch; %d sections." % (
		      len(recs), by["high"], by["medium"], by["low"], patched, len(bysec)), ""]
	shapes = collections.Counter(r["shape"] for r in recs)
	L += ["By shape: " + ", ".join("%s %d" % kv for kv in sorted(shapes.items())), ""]
	L += ["## Precision (hand labels)", "",
	      "Labels: `%s` (fingerprint -> verdict, reason). A finding counts as correct when the nested "
	      "sleep is real (`true`) or real but harmless (`harmless`)." % os.path.relpath(labels_path, TOP), ""]
	L += VERDICT_RULES
	L += ["| confidence | findings | labelled | correct | of which harmless | precision |", "|---|---|---|---|---|---|"]
	for c, (n, nl, tp, hl) in precision(recs).items():
		L.append("| %s | %d | %d | %d | %d | %s |" % (c, n, nl, tp, hl,
							  ("%.0f%%" % (100.0 * tp / nl)) if nl else "n/a"))
	L.append("")
	L += kind_lines(recs)
	L += heldout or []
	L += knowledge_lines(Knowledge())
	L += calibration_md(tid, recs)
	if stale:
		v = collections.Counter(lab["verdict"] for lab in stale.values())
		L += ["%d labelled findings are no longer reported by this version of nestsleep (%s); they are not "
		      "in the table: %s." % (len(stale), ", ".join("%s %d" % kv for kv in sorted(v.items())),
					      ", ".join("`%s` %s" % (fp, stale[fp].get("site", "")) for fp in sorted(stale))), ""]
	L += ["## Subsystems", "",
	      "Grouped by the most specific MAINTAINERS section of each file (`scripts/get_maintainer.pl --sections`).",
	      "", "| section | maintainers | list | high | medium | low | patches | patch status |",
	      "|---|---|---|---|---|---|---|---|"]
	for sname, rs in bysec.items():
		c = collections.Counter(r["confidence"] for r in rs)
		pt = [r for r in rs if (r.get("fix") or {}).get("status") == "patch"]
		st = collections.Counter(r["patch_status"] for r in pt)
		L.append("| [%s](%s.md) | %s | %s | %d | %d | %d | %d | %s |" % (
			sname, slug(sname), "; ".join(re.sub(r"\s*<.*>", "", m) for m in rs[0]["maintainers"][:3]) or "-",
			"; ".join(re.sub(r"\s*\(.*\)", "", x) for x in rs[0]["lists"][:2]) or "-",
			c["high"], c["medium"], c["low"], len(pt), ", ".join("%s %d" % kv for kv in st.items()) or "-"))
	L.append("")
	L += runtime_md(recs)
	ready = [r for r in recs if ready_for_mainline(r)]
	if ready:
		L += ["## Ready to rebase onto mainline", "",
		      "Real nested sleeps by hand review whose generated patch built and booted on this tree "
		      "(a distribution tree, not mainline):", ""]
		for r in ready:
			L.append("- `%s:%d` %s() - %s" % (r["file"], r["line"], r["function"], r["patch_status"]))
		L.append("")
	later = [(r, lt) for r in recs for lt in r.get("later", [])]
	if later:
		L += ["## In later trees", "",
		      "What became of these findings in a later tree (from the labels file):", ""]
		for r, lt in later:
			L.append("- `%s:%d` %s(): in `%s` **%s** - %s" % (r["file"], r["line"], r["function"], lt["tree"],
									 lt["class"], lt["evidence"]))
		L.append("")
	if has_base:
		new = [r for r in recs if r.get("baseline") == "new"]
		changed = [r for r in recs if r.get("baseline") == "changed"]
		L += ["## Since the baseline", "", "%d new (marked `>>`), %d changed, %d unchanged, %d gone." % (
			len(new), len(changed), sum(1 for r in recs if r.get("baseline") == "unchanged"), len(gone)), "",
		      CHANGED_RULE, ""]
		for r in changed:
			m = r["baseline_match"]
			L.append("- changed: `%s` %s() (%s): %s (was `%s`)" % (r["file"], r["function"], r["primitive"],
									       m["why"], m["fingerprint"]))
		for r in gone:
			L.append("- gone: `%s` %s() (%s)" % (r["file"], r["function"], r.get("primitive", "")))
		L.append("")
	return "\n".join(L) + "\n"


boot_status = records.boot_status


# ---------------------------------------------------------------------------
# Runtime evidence (make boottest's exercisers)

REASONS = os.path.join(TOP, "kernel-boot", "exercise", "reasons.json")
SILENT = "silent primitive: no warning to observe"


def load_reasons(path=REASONS):
	"""kernel-boot/exercise/reasons.json: why a QEMU guest cannot reach a wait."""
	if not os.path.isfile(path):
		return []
	with open(path) as f:
		return json.load(f)["reasons"]


def exerciser_files():
	"""The source files the exercisers of kernel-boot/exercise/ drive."""
	return set(f for e in exercisers.read_all() for f in e["files"])


def runtime_summary(b):
	"""What the runtime evidence of one finding's boottest record says, or None."""
	if not b or not b.get("exerciser") or "reproduced" not in b:
		return None
	out = {k: b[k] for k in ("exerciser", "reproduced", "baseline_tries", "patched_tries", "warning_gone",
				 "evidence", "splat", "patched_output") if k in b}
	if b.get("baseline_hits"):
		out["title"] = b["baseline_hits"][0]
	return out


def runtime_reason(r, reasons, exercised):
	"""Why a true finding has not been reproduced in QEMU."""
	rt = r.get("runtime") or {}
	if rt:
		return "exercised (%s), but the unpatched kernel did not warn in %d boot(s)" % (
			rt["exerciser"], rt.get("baseline_tries", 0))
	for x in reasons:
		if (r["file"] == x["path"] or (x["path"].endswith("/") and r["file"].startswith(x["path"]))) \
				and x.get("function", r["function"]) == r["function"]:
			return x["reason"]
	if is_missed(r):
		return MISSED_RUNTIME
	paths = r.get("paths") or [r]
	if all(p.get("effect") == "silent" for p in paths):
		return SILENT
	if r["file"] in exercised:
		return "an exerciser drives the file, but make boottest has not run it for this finding"
	return "no exerciser yet, and no reason recorded in kernel-boot/exercise/reasons.json"


def evidence_text(r):
	rt = r.get("runtime") or {}
	if rt.get("reproduced"):
		t = "**reproduced in QEMU** (%s, warned in boot %d of at most 5)" % (rt["exerciser"], rt.get("baseline_tries", 1))
		if rt.get("warning_gone"):
			t += "; **exercised: warning gone** with the patch (%d boot(s), the wait ran and slept)" % rt.get("patched_tries", 1)
		elif "warning_gone" in rt:
			t += "; with the patch: %s" % rt.get("evidence", "")
		return t
	if r.get("runtime_reason"):
		return "not reproduced: " + r["runtime_reason"]
	if rt:
		return rt.get("evidence", "exercised")
	return "none"


def runtime_md(recs):
	"""The index's table: the true findings, reproduced or not, and why not."""
	true = [r for r in recs if r.get("verdict") == "true"]
	if not true:
		return []
	rep = [r for r in true if (r.get("runtime") or {}).get("reproduced")]
	gone = [r for r in rep if r["runtime"].get("warning_gone")]
	why = collections.OrderedDict()
	for r in sorted(true, key=lambda r: (r.get("runtime_reason") or "", r["file"])):
		if r.get("runtime_reason"):
			why.setdefault(r["runtime_reason"], []).append(r)
	L = ["## Runtime evidence (QEMU)", "",
	     "`make boottest` boots the unpatched kernel with the exercisers of `kernel-boot/exercise/` (at most 5 "
	     "boots until each exercised wait warns), then each patch, with the same exerciser as many times. "
	     "Reproduced: the unpatched kernel printed `do not call blocking ops when !TASK_RUNNING` with a call "
	     "trace through the function of the wait. Warning gone: with the patch, the exerciser passed (the wait "
	     "ran and slept) and no boot printed it.", "",
	     "| true findings | reproduced in QEMU | exercised: warning gone | not reproduced |", "|---|---|---|---|",
	     "| %d | %d | %d | %d |" % (len(true), len(rep), len(gone), len(true) - len(rep)), ""]
	if rep:
		L += ["| reproduced | exerciser | boots to warn | with the patch |", "|---|---|---|---|"]
		for r in rep:
			rt = r["runtime"]
			L.append("| `%s:%d` %s() | `%s` | %d | %s |" % (
				r["file"], r["line"], r["function"], rt["exerciser"], rt.get("baseline_tries", 1),
				"warning gone (%d boot(s))" % rt.get("patched_tries", 1) if rt.get("warning_gone")
				else rt.get("evidence", "") if "warning_gone" in rt else "no patch"))
		L.append("")
	if why:
		L += ["| cannot be reproduced here: reason | findings |", "|---|---|"]
		for reason, rs in why.items():
			L.append("| %s | %s |" % (reason.replace("|", "/"), ", ".join(
				"`%s` %s()" % (os.path.basename(x["file"]), x["function"]) for x in rs)))
		L.append("")
	return L


CHANGED_RULE = ("A changed finding has a new fingerprint but the same file, wait primitive and a sleeping "
		"path (first call and final primitive) as a baseline finding, in the same or a renamed function.")


def _ends(f):
	"""(first call, final sleeping primitive) of each sleeping path."""
	paths = f.get("paths") or [{"chain": f.get("chain", [])}]
	return set((p["chain"][0], p["chain"][-1]) for p in paths if p.get("chain"))


def _renamed(a, b):
	return a == b or difflib.SequenceMatcher(None, a, b).ratio() >= 0.8


def match_baseline(base, recs):
	"""Mark recs new, unchanged or changed against the baseline records.

	The same fingerprint is "unchanged".  A finding left over is "changed"
	when a left-over baseline finding has the same file and wait primitive,
	shares a sleeping path's first call and final primitive, and its function
	has the same or a close name (a rename like io_wqe_worker ->
	io_wq_worker): the same bug, reached by an edited chain.  Pairs are taken
	one to one, same function name first.  Returns the baseline records that
	match nothing (gone)."""
	left = {fp: r for fp, r in base.items()}
	todo = []
	for r in recs:
		if r["fingerprint"] in base:
			r["baseline"] = "unchanged"
			left.pop(r["fingerprint"], None)
		else:
			todo.append(r)
	pairs = []
	for r in todo:
		for fp, b in left.items():
			if b["file"] != r["file"] or b.get("primitive") != r.get("primitive"):
				continue
			shared = _ends(b) & _ends(r)
			if shared and _renamed(b["function"], r["function"]):
				pairs.append((b["function"] != r["function"], -len(shared), r["fingerprint"], fp, r, b))
	pairs.sort(key=lambda x: x[:4])
	for _, _, _, fp, r, b in pairs:
		if r.get("baseline") or fp not in left:
			continue
		del left[fp]
		r["baseline"] = "changed"
		why = []
		if b["function"] != r["function"]:
			why.append("function renamed from %s()" % b["function"])
		if b.get("chain") != r.get("chain"):
			why.append("first chain was %s" % " -> ".join(b.get("chain", [])))
		r["baseline_match"] = {"fingerprint": fp, "function": b["function"], "line": b.get("line"),
				       "why": "; ".join(why) or "same wait site"}
	for r in todo:
		r.setdefault("baseline", "new")
	return list(left.values())


def ready_for_mainline(r):
	"""A real nested sleep (hand review) whose patch built and booted."""
	return r.get("verdict") == "true" and r.get("patch_status", "").startswith("compiled, booted")


def chain_lines(kdir, r):
	"""A nested sleep's excerpt and sleeping chain."""
	L = []
	ex = excerpt(kdir, r)
	if ex:
		L += ["```c", ex, "```", "", "`>` the wait site, `*` the call that may sleep.", ""]
	L += ["Sleeping chain:", ""]
	for i, hop in enumerate(r["chain"]):
		loc = r["chain_locs"][i] if i < len(r.get("chain_locs", [])) else ""
		L.append("%d. `%s` at `%s`" % (i + 1, hop, loc))
	return L


def section_md(sname, rs, kdir, series, kshown, tid=None):
	L = ["# %s" % sname, ""]
	if rs[0]["maintainers"]:
		L += ["Maintainers: " + "; ".join(rs[0]["maintainers"]), ""]
	if rs[0]["lists"]:
		L += ["List: " + "; ".join(rs[0]["lists"]), ""]
	for r in rs:
		mark = ">> " if r.get("baseline") == "new" else ""
		L += ["## %s%s:%d %s()" % (mark, r["file"], r["line"], r["function"]), ""]
		L += ["**%s**" % r["message"].split(" [confidence")[0].replace("*", "\\*"), ""]
		L += ["- location: `%s:%d:%d` in `%s()`" % (r["file"], r["line"], r["col"], r["function"]),
		      "- fingerprint: `%s`" % r["fingerprint"]]
		if r.get("baseline") == "changed":
			m = r["baseline_match"]
			L.append("- since the baseline: changed (%s; was `%s`)" % (m["why"], m["fingerprint"]))
		if r.get("verdict"):
			L.append("- hand review: **%s** - %s" % (r["verdict"], r["verdict_reason"]))
		for lt in r.get("later", []):
			L.append("- in `%s`: **%s** - %s" % (lt["tree"], lt["class"], lt["evidence"]))
		if ready_for_mainline(r):
			L.append("- **ready to rebase onto mainline**: a real nested sleep by hand review, and the patch "
				 "built and booted here; this tree is a distribution tree, not mainline, so rebase and "
				 "re-test before sending")
		L.append("")
		if is_missed(r):
			L += missed_lines(kdir, r)
		else:
			L += chain_lines(kdir, r)
		obs = (series.get(r["fingerprint"]) or {}).get("observed")
		rt = r.get("runtime") or {}
		if rt.get("reproduced") and rt.get("splat"):
			obs = {"title": rt.get("title", ""), "splat": rt["splat"], "exerciser": rt["exerciser"]}
		L += ["", "Why it matters: " + warning_text(r, kdir, obs).replace("\n", " "), ""]
		block = effect.splat_block(obs)
		if block:
			L += ["```", block, "```", ""]
		L += ["Confidence: **%s** - %s. Runtime evidence: %s." % (r["confidence"], r["confidence_reason"],
									   evidence_text(r)), "",
		      "Suggested fix: " + suggested_fix(r), ""]
		fx = r.get("fix") or {}
		if fx.get("status") == "patch":
			s = series.get(r["fingerprint"], {})
			L += ["Generated patch (%s%s):" % (r["patch_status"], (", checkpatch: " + s["checkpatch"]) if s.get("checkpatch") else ""),
			      "", "```diff", fx["diff"].rstrip(), "```", ""]
		tree = tid or os.path.basename(kshown.rstrip("/"))
		L += ["Reproduce on %s: `make coccicheck MODE=report KDIR=<a %s tree> M=%s`" % (
			tree, tree, os.path.dirname(r["file"])), "", "---", ""]
	return "\n".join(L)
