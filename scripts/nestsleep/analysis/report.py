# SPDX-License-Identifier: GPL-2.0-only
"""Report: one finding per wait site, in the kernel's coccicheck formats
(report, org, context) and MODE=patch's diff."""

import os
import shutil
import subprocess
import tempfile

from nestsleep.analysis.match import cocci_options
from nestsleep.analysis.summarize import confidence
from nestsleep.common import CONFIDENCES, fingerprint, log
from nestsleep.cache import Cache
from nestsleep.fix import fixer, missed


def describe_site(r):
	"""Where in its wait the call of Site r is, for the message."""
	if r.shape == "wait_event":
		if r.role == "cmd":
			return "in the cmd of %s(), which runs before schedule()" % r.site
		return "in the condition of %s()" % r.site
	if r.shape == "prepare_to_wait":
		return "between %s() and schedule()" % r.site
	if r.shape == "thread_exit":
		return "after %s() returns to kthread() with the state set in %s(%s)" % (
			r.func, r.site, r.state.replace(" ", ""))
	if r.shape == "set_current_state":
		return "between %s(%s) and schedule()" % (r.site, r.state.replace(" ", ""))
	return "while the task state set in %s() is still non-running" % r.site


EFFECT_TEXT = {"warns": "warns", "silent": "resets the task state silently"}


def make_finding(key, paths, kn, loop=None):
	"""The finding (a findings.json record) of the wait at key, from its
	SitePaths, best first.  loop: the (keyword line, last line) of the
	wait loop when the first path's call runs after it has ended."""
	first = paths[0]
	r = first.site
	pen = first.penalty
	conf = confidence(pen)
	seen = []
	for p in paths:
		txt = "%s (%s)" % (" -> ".join(p.chain), EFFECT_TEXT[p.effect])
		if txt not in seen:
			seen.append(txt)
	where = describe_site(r)
	after = None
	if loop is not None:
		where = "on line %d, after the wait loop on line %d has ended and before the state set by " \
			"%s is restored" % (r.cline, loop[0], "%s(%s)" % (r.site, r.state.replace(" ", ""))
					    if r.state else r.site + "()")
		if all(p.site.cline > loop[1] for p in paths):
			after = loop[0]
	if r.locked:
		kind = "sleep_in_atomic"
		msg = "ERROR: sleep in atomic context: %s() may sleep %s, which runs under spinlock %s" % (
			r.call, where, r.locked)
	else:
		kind = "nested_sleep"
		msg = "WARNING: nested sleep: %s() may sleep %s" % (r.call, where)
		if loop is None and (r.shape != "wait_event" or r.cline != r.line):
			msg += " on line %d" % r.cline
	msg += " (%s)" % "; ".join(seen)
	msg += " [confidence: %s]" % conf
	return {
		"fingerprint": fingerprint(key[0], r.func, r.site, first.chain),
		"file": key[0], "line": key[1], "col": key[2], "colend": key[3],
		"function": r.func, "shape": r.shape, "primitive": r.site,
		"role": r.role, "locked": r.locked, "kind": kind,
		"call": r.call, "call_line": r.cline, "effect": first.effect,
		"group": first.group, "chain": list(first.chain), "confidence": conf, "doubts": pen,
		"chain_locs": ["%s:%d" % l for l in first.locs],
		"paths": [{"call": p.site.call, "line": p.site.cline, "col": p.site.ccol, "chain": list(p.chain),
			   "chain_locs": ["%s:%d" % l for l in p.locs],
			   "effect": p.effect, "confidence": confidence(p.penalty),
			   **({"also": list(p.also)} if p.also else {}),
			   **({"needs": [list(x) for x in p.needs]} if p.needs else {})} for p in paths],
		"message": msg, "after_loop": after, "blocks": any(p.blocks for p in paths),
	}


def report_text(mode, findings):
	"""MODE=report and MODE=org: one line per finding."""
	out = []
	for f in findings:
		if mode == "org":
			out.append("* TODO [[view:%s::face=ovl-face1::linb=%d::colb=%d::cole=%d][%s]]\n" % (
				f["file"], f["line"], f["col"], f["colend"],
				f["message"].replace("[", "@(").replace("]", ")")))
		else:
			out.append("%s:%d:%d-%d: %s\n" % (f["file"], f["line"], f["col"], f["colend"], f["message"]))
	return "".join(out)


def context_text(a, findings, tree):
	"""Context mode: spatch marks the sleeping calls with '*'."""
	marks = missed_context(a, [f for f in findings if f["kind"] == "missed_wakeup"], tree)
	findings = [f for f in findings if f["kind"] != "missed_wakeup"]
	if not findings:
		return marks
	return context_spatch(a, findings, tree) + marks


def missed_context(a, findings, tree, ctx=3):
	"""Context mode for the missed wakeups: spatch's context format, in
	which a matched line is a '-' line (there is no call to match with a
	rule's '*'): the write, and the wakeup after it that does not wake
	the waiter ("wait"'s waker_at), one hunk per run of nearby lines."""
	out = []
	for f in findings:
		marks = {f["file"]: {f["line"]}}
		at = (f.get("wait") or {}).get("waker_at")
		if at:
			rel, _, ln = at.rpartition(":")
			marks.setdefault(rel, set()).add(int(ln))
		for rel in [f["file"]] + sorted(set(marks) - {f["file"]}):
			try:
				with open(tree.abs[rel], errors="replace") as fp:
					lines = fp.read().split("\n")
			except (OSError, KeyError):
				continue
			lns = sorted(n for n in marks[rel] if 0 < n <= len(lines))
			if not lns:
				continue
			runs = [[lns[0]]]
			for n in lns[1:]:
				if n - ctx <= runs[-1][-1] + ctx + 1:
					runs[-1].append(n)
				else:
					runs.append([n])
			out.append("diff -u -p %s /tmp/nothing/%s\n--- %s\n+++ /tmp/nothing/%s\n" % ((rel,) * 4))
			gone = 0
			for run in runs:
				lo, hi = max(1, run[0] - ctx), min(len(lines), run[-1] + ctx)
				out.append("@@ -%d,%d +%d,%d @@\n" % (lo, hi - lo + 1, lo - gone, hi - lo + 1 - len(run)))
				gone += len(run)
				for n in range(lo, hi + 1):
					out.append("%s%s\n" % ("-" if n in run else " ", lines[n - 1]))
	return "".join(out)


def context_spatch(a, findings, tree):
	"""Context mode for the nested sleeps: spatch marks the calls."""
	tmp = tempfile.mkdtemp(prefix="nestsleep-")
	try:
		pos = os.path.join(tmp, "positions")
		files = sorted(set(f["file"] for f in findings))
		with open(pos, "w") as f:
			for fd in findings:
				for p in fd["paths"]:
					f.write("%s:%d:%d\n" % (tree.abs[fd["file"]], p["line"], p["col"]))
		cmd = ["spatch", "--sp-file", a.cocci, "-D", "context", "--very-quiet"] + cocci_options(a.cocci)
		cmd += ["--timeout", str(a.timeout)] + a.spflags + [tree.abs[f] for f in files]
		env = dict(os.environ, NESTSLEEP_POSITIONS=pos)
		if a.verbose:
			log("$ " + " ".join(cmd))
		proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
		out = proc.stdout.decode("utf-8", "replace")
		k = os.path.realpath(a.kdir) + "/"
		return out.replace(k, "")
	finally:
		shutil.rmtree(tmp, ignore_errors=True)


def below_confidence(findings, conf):
	"""The rewrites that MODE=patch leaves out at CONFIDENCE=conf:
	{finding's index: why}, and the units ("file:function") left out.
	As 'make fixes' selects without hand labels (series.select): a fix
	below conf is left out, and so is every other fix of its unit, which
	is one patch there."""
	rank = CONFIDENCES.index(conf)
	why, low = {}, {}
	for i, f in enumerate(findings):
		fx = f["fix"]
		if fx["status"] == "patch" and CONFIDENCES.index(fx["confidence"]) > rank:
			why[i] = "confidence %s below CONFIDENCE=%s" % (fx["confidence"], conf)
			low.setdefault(fx["unit"], f)
	for i, f in enumerate(findings):
		fx = f["fix"]
		if fx["status"] == "patch" and i not in why and fx["unit"] in low:
			g = low[fx["unit"]]
			why[i] = ("confidence %s, but the fix on line %d of the same function has confidence %s, below "
				  "CONFIDENCE=%s, and they are one patch" % (fx["confidence"], g["line"], g["fix"]["confidence"],
									    conf))
	return why, set(low)


def patch_text(a, findings, tree, facts, kn):
	"""Patch mode: one unified diff for every finding with a safe rewrite
	whose fix has confidence a.confidence or better.  The findings without
	one, and those left out, are listed on stderr with the reason; their
	fix records stay as they are (make fixes --json reads them)."""
	fx = fixer.Fixer(a.kdir, kn, tree, facts, m_abs=a.m_abs)
	units = fx.run([f for f in findings if f["kind"] != "missed_wakeup"])
	# the missed wakeups: the waker's mode, or a wakeup after the write
	units += missed.plan(fx, findings, Cache(a.cache))
	conf = getattr(a, "confidence", "low")
	left, dropped = below_confidence(findings, conf)
	kept = [u for u in units if "%s:%s" % (u.rel, u.func) not in dropped]
	diff = fixer.combined_diff(fx, kept)
	counts = {}
	for i, f in enumerate(findings):
		fix = f["fix"]
		counts[fix["status"]] = counts.get(fix["status"], 0) + 1
		if fix["status"] != "patch":
			log("%s:%d: %s: %s" % (f["file"], f["line"], "report only" if fix["status"] == "report-only"
					       else "manual fix needed", fix["reason"]))
		elif i in left:
			log("%s:%d: %s: %s" % (f["file"], f["line"], f["function"], left[i]))
	log("patch: %d functions rewritten%s; findings: %s" % (
		len(kept), ", %d left out below CONFIDENCE=%s" % (len(units) - len(kept), conf) if dropped else "",
		", ".join("%d %s" % (n, k) for k, n in sorted(counts.items())) or "none"))
	return diff
