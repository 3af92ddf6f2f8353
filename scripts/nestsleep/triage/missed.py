# SPDX-License-Identifier: GPL-2.0-only
"""How make triage lays out a missed wakeup (analysis/wakecov.py), in
<section>.md and findings.sarif: a write that ends a reported wait and the
wakeup after it that does not wake the waiter, or none; not a sleeping
chain.

A finding of kind "missed_wakeup" is at the write; its "wait" record names
the waiter (function, primitive, task state, queue), the wakeup found after
the write ("waker_at", None when there is none) and the other wakeups of the
queue that do wake the waiter's state ("others"); "missed" says which case:

  wrong_mode  the wakeups after the write use a mode that does not wake the
              waiter's state (wake_up_interruptible() for
              TASK_UNINTERRUPTIBLE)
  guarded     the wakeup runs only under a parameter test that a caller
              passes as a value that may be false
  unwoken     no wakeup of the queue follows the write in the writer or in
              a caller

The effect sentence is the patch changelog's (changelog_missed.sleeps_on())."""

import os
import re

from nestsleep.series import changelog_missed

MISSED_CONFIDENCE = (
	"missed wakeups are reported at medium until hand labels say otherwise: the rule takes a wakeup as "
	"following the write by token order, not along paths, and reads the writer and its callers one level "
	"up only (a wakeup on another branch after the write counts as following it; a caller's caller is "
	"not read, nor whom a direct task wakeup wakes)")
MISSED_RUNTIME = (
	"no exerciser for missed wakeups yet: one would have to run the writer while the waiter sleeps and "
	"watch for a task left asleep, as no warning reports it")
NOT_RECORDED = "not recorded in this findings.json (made before findings had a \"wait\" record)"
CTX = 3


def is_missed(f):
	return f.get("kind") == "missed_wakeup"


def split_at(at):
	rel, _, ln = (at or "").rpartition(":")
	return rel, int(ln) if ln.isdigit() else 0


def wait_of(f):
	"""The finding's "wait" record, or what the message of an older
	findings.json (without one) still says of it."""
	w = f.get("wait")
	if w:
		return w
	msg = f.get("message", "")
	m = re.search(r"ends the (\w+)\(\) in (\w+)\(\)", msg)
	st = re.search(r"does not wake (TASK_\w+)", msg)
	q = re.search(r"(?:nor a caller wakes|, but wakes) (\S+?)(?: only if | \[|$)", msg)
	# others None: not recorded (an older checker's findings.json)
	return {"function": m.group(2) if m else "?", "primitive": m.group(1) if m else f.get("primitive", "?"),
		"state": st.group(1) if st else "its state", "queue": q.group(1) if q else "its queue",
		"waker_at": None, "others": None}


def queue_shown(w):
	return w["queue"].lstrip("&").strip()


def read_lines(kdir, rel, files):
	if rel not in files:
		try:
			with open(os.path.join(kdir, rel), errors="replace") as fp:
				files[rel] = fp.read().splitlines()
		except OSError:
			files[rel] = []
	return files[rel]


def marks_of(f):
	"""{(file, line): mark}: '*' the write, 'w' the wakeup after it, '>'
	the wait."""
	w = wait_of(f)
	marks = {(f["file"], f["line"]): "*"}
	if w.get("waker_at"):
		marks.setdefault(split_at(w["waker_at"]), "w")
	if f.get("wait_at"):
		marks.setdefault(split_at(f["wait_at"]), ">")
	return marks


def excerpt(kdir, f, ctx=CTX):
	"""The lines around the write, the wakeup and the wait, each file's in
	one or more runs ('...' between runs; a file other than the writer's
	is named before its lines)."""
	marks = marks_of(f)
	files, out = {}, []
	order = [f["file"]] + sorted(set(rel for rel, _ in marks) - {f["file"]})
	for rel in order:
		lines = read_lines(kdir, rel, files)
		lns = sorted(ln for r, ln in marks if r == rel and 0 < ln <= len(lines))
		if not lns:
			continue
		runs = [[lns[0], lns[0]]]
		for ln in lns[1:]:
			if ln - ctx <= runs[-1][1] + ctx + 1:
				runs[-1][1] = ln
			else:
				runs.append([ln, ln])
		if rel != f["file"]:
			out.append("        /* %s */" % rel)
		for i, (a, b) in enumerate(runs):
			if out and (i or rel == f["file"]):
				out.append("        ...")
			for n in range(max(1, a - ctx), min(len(lines), b + ctx) + 1):
				out.append("%s%5d  %s" % (marks.get((rel, n), " "), n, lines[n - 1].replace("\t", "        ")))
	return "\n".join(out)


def legend(f):
	marks = set(marks_of(f).values())
	parts = ["`*` the write that ends the wait"]
	if "w" in marks:
		parts.append("`w` the wakeup after it")
	if ">" in marks:
		parts.append("`>` the wait")
	return ", ".join(parts) + "."


def waker_item(f, w):
	q = queue_shown(w)
	if f.get("missed") == "unwoken":
		return "no wakeup of `%s` after the write, in %s() or a caller" % (q, f["function"])
	what = "the wakeup `%s()` at `%s`" % (f["call"], w["waker_at"]) if w.get("waker_at") else \
		"the wakeup `%s()` after it" % f["call"]
	if f.get("missed") == "guarded":
		return what + ", which runs only under a parameter test that a caller passes false"
	return what + ", which does not wake %s" % w["state"]


def lines(kdir, f):
	"""The excerpt, its legend and the "Writer and wakeup" list of a
	missed wakeup's entry in <section>.md."""
	w = wait_of(f)
	q = queue_shown(w)
	L = []
	ex = excerpt(kdir, f)
	if ex:
		L += ["```c", ex, "```", "", legend(f), ""]
	src = read_lines(kdir, f["file"], {})
	write = src[f["line"] - 1].strip() if 0 < f["line"] <= len(src) else ""
	L += ["Writer and wakeup:", "",
	      "1. the write%s in %s() at `%s:%d`" % (" `%s`" % write if write else "", f["function"], f["file"], f["line"]),
	      "2. " + waker_item(f, w),
	      "3. the wait `%s()` in %s() at `%s`, in %s on `%s`" % (w["primitive"], w["function"], f.get("wait_at", "?"),
								  w["state"], q)]
	others = w.get("others")
	if others is None:
		L.append("4. the other wakeups of `%s`: %s" % (q, NOT_RECORDED))
	elif others:
		L.append("4. the other wakeups of `%s` that wake %s: %s" % (q, w["state"], ", ".join(
			"`%s()` in %s() at `%s`" % (o["call"], o["function"], o["at"]) for o in others)))
	else:
		L.append("4. no other wakeup of `%s` that wakes %s was found" % (q, w["state"]))
	return L


def effect(kdir, f):
	"""Why it matters: the waiter sleeps on until another wakeup, or for
	good (the changelog's sentence)."""
	w = wait_of(f)
	rest = changelog_missed.sleeps_on(kdir, w) if w["others"] is not None else \
		"whether another wakeup of %s wakes it: %s." % (queue_shown(w), NOT_RECORDED)
	return "The waiter in %s() sleeps in %s on %s, and this write is not followed by a wakeup that wakes it: %s" % (
		w["function"], w["state"], queue_shown(w), rest)


def suggested_fix(f):
	fx = f.get("fix") or {}
	reason = fx.get("reason", "").rstrip(".")
	if fx.get("status") == "patch":
		how = "Add the wakeup" if f.get("missed") == "unwoken" else "Change the wakeup"
		return "%s (the patch below): %s." % (how, reason)
	w = wait_of(f)
	return ("Manual fix: %s. Make a wakeup that wakes %s follow the write on every path: `wake_up()` on %s "
		"after it, or `wake_up()` for a `wake_up_interruptible()` there." % (
			reason or "no safe mechanical change", w["state"], queue_shown(w)))


def location(at, text):
	rel, line = split_at(at)
	return {"physicalLocation": {"artifactLocation": {"uri": rel, "uriBaseId": "KDIR"},
				     "region": {"startLine": max(1, line)}},
		"message": {"text": text}}


def sarif_related(f):
	"""findings.sarif relatedLocations of a missed wakeup: the wakeup after
	the write, the wait, and the other wakeups of the queue."""
	w = wait_of(f)
	q = queue_shown(w)
	out = []
	if w.get("waker_at"):
		how = ("which runs only under a parameter test that a caller passes false" if f.get("missed") == "guarded"
		       else "which does not wake %s" % w["state"])
		out.append(location(w["waker_at"], "the wakeup: %s(), %s" % (f["call"], how)))
	if f.get("wait_at"):
		out.append(location(f["wait_at"], "the wait: %s() in %s(), in %s on %s" % (
			w["primitive"], w["function"], w["state"], q)))
	for o in w["others"] or []:
		out.append(location(o["at"], "another wakeup of %s: %s() in %s()" % (q, o["call"], o["function"])))
	for i, x in enumerate(out):
		x["id"] = i
	return out
