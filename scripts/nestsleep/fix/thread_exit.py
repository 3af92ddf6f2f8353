# SPDX-License-Identifier: GPL-2.0-only
"""A thread function that leaves its wait loop with the task state set.

The thread sets TASK_(UN)INTERRUPTIBLE, tests kthread_should_stop() and
breaks (or returns) before schedule() or a restore, and returns to
kthread(), which calls kthread_exit() (kernel/kthread.c:376-378 in 6.1);
do_exit() then calls exit_signals() (kernel/exit.c:834), whose
cgroup_threadgroup_change_begin() (kernel/signal.c:2980) may sleep in
percpu_down_read() (include/linux/cgroup-defs.h:751) or calls
might_sleep() without cgroups (:771).  Upstream's fix of w1_process()
(36225a7c72e9; drivers/w1/w1.c:1196-1199 in 6.1) restores TASK_RUNNING
before the break.  plan_thread_exit() finds the exits of the wait loop,
checks what the rule cannot, and runs cocci/restore_thread_exit.cocci,
which puts __set_current_state(TASK_RUNNING) before each exit a path from
the setter reaches with the state set, and remove_wait_queue() there too
when every path to that exit holds the thread's entry on its queue.
"""

import os
import re

from nestsleep import COCCI_DIR
from nestsleep.analysis import cfacts
from nestsleep.fix.ctext import function_body
from nestsleep.fix.edits import Refuse
from nestsleep.fix.spatch import spatch_edits

RULE = os.path.join(COCCI_DIR, "restore_thread_exit.cocci")
ADDS = ("add_wait_queue", "add_wait_queue_exclusive")
BREAKABLE = ("for", "while", "do", "switch")
REMOVE = re.compile(r"remove_wait_queue\((.*)\);")


def _body_span(toks, j):
	"""(first, last) token indexes of the statement that the for, while,
	do or switch at toks[j] governs (a do loop's body ends at its
	'while (...);')."""
	n = len(toks)
	if toks[j][1] == "do":
		return j + 1, cfacts.stmt_end(toks, j, n)
	if j + 1 >= n or toks[j + 1][1] != "(":
		return None
	rp = cfacts._match_close(toks, j + 1, "(", ")")
	if rp + 1 >= n or toks[rp + 1][1] == ";":
		return None
	return rp + 1, cfacts.stmt_end(toks, rp + 1, n)


def loop_exits(toks, loop):
	"""The exits of the wait loop loop (keyword line, last line):
	{"break": [lines], "return": [lines], "goto": [(line, label)]}, the
	breaks that leave it (not an inner loop's or switch's)."""
	kw = next(j for j, t in enumerate(toks) if t[2] == loop[0] and t[1] in ("for", "while", "do"))
	lo, hi = _body_span(toks, kw)
	inner = [s for s in (_body_span(toks, j) for j in range(lo, hi + 1)
			     if toks[j][0] == "id" and toks[j][1] in BREAKABLE) if s]
	out = {"break": [], "return": [], "goto": []}
	for j in range(lo, hi + 1):
		k, v, ln = toks[j]
		if k != "id":
			continue
		if v == "break" and not any(a <= j <= b for a, b in inner):
			out["break"].append(ln)
		elif v == "return":
			out["return"].append(ln)
		elif v == "goto" and j + 1 <= hi:
			out["goto"].append((ln, toks[j + 1][1]))
	return out


def _label_line(toks, label):
	for j in range(1, len(toks) - 1):
		if toks[j][1] == label and toks[j + 1][1] == ":" and toks[j - 1][1] in (";", "{", "}"):
			return toks[j][2]
	return None


def _check_loop(toks, f, loop, ex):
	"""Refuse what the rule cannot follow: a loop inside another, a goto
	out of the loop, two exits on one line, or a call after the loop that
	ends or sets the state on the way to the return."""
	if cfacts.loop_around(toks, loop[0]) is not None:
		raise Refuse("manual", "the wait loop on line %d is inside another loop: restore TASK_RUNNING "
			     "before the thread function returns by hand" % loop[0])
	for ln, label in ex["goto"]:
		at = _label_line(toks, label)
		if at is None or not loop[0] <= at <= loop[1]:
			raise Refuse("manual", "the wait loop on line %d is left by a goto on line %d: the rule "
				     "cannot follow the path from its label to the return; restore TASK_RUNNING "
				     "before the thread function returns by hand" % (loop[0], ln))
	lines = ex["break"] + ex["return"]
	if len(set(lines)) != len(lines):
		raise Refuse("manual", "two exits of the wait loop on line %d share a line" % loop[0])


def _after_loop(fx, toks, loop, rets):
	"""The names after the loop, up to its last return, that end or set
	the task state: the state the loop leaves set may be what they use."""
	words = set(fx.kn.info["state_restore"]["functions"]) | set(fx.kn.info["state_setters"]["set"])
	last = max(rets)
	return sorted(set(t[1] for t in toks if loop[1] < t[2] <= last and t[0] == "id" and t[1] in words))


def plan_thread_exit(fx, f, u):
	"""The exits of f's wait loop that leave it with the state set get
	__set_current_state(TASK_RUNNING) (and remove_wait_queue() where the
	entry is still queued), through cocci/restore_thread_exit.cocci."""
	rel = f["file"]
	ft = fx.text(rel)
	toks = cfacts.tokenize(ft.t)
	loop = cfacts.loop_around(toks, f["line"])
	if loop is None:
		raise Refuse("manual", "the state set on line %d is not inside a loop: restore TASK_RUNNING before "
			     "the thread function returns by hand" % f["line"])
	ex = loop_exits(toks, loop)
	_check_loop(toks, f, loop, ex)
	rets = sorted(set(p["line"] for p in f["paths"]))
	exits = list(ex["return"])
	if any(r > loop[1] for r in rets):
		used = _after_loop(fx, toks, loop, rets)
		if used:
			raise Refuse("manual", "%s() runs after the wait loop on line %d, before the thread function "
				     "returns: it may need the state the loop leaves set; restore TASK_RUNNING by hand"
				     % (used[0], loop[0]))
		exits += ex["break"]
	o, c = function_body(ft.m, ft.offset(f["line"], f["col"]))
	queued = any(re.search(r"\b%s\s*\(" % a, ft.m[o:c]) for a in ADDS)
	if queued and re.search(r"\bremove_wait_queue\s*\(", ft.m[ft.offset(loop[1] + 1, 0):ft.offset(max(rets), 0)]):
		raise Refuse("manual", "the thread function removes its wait entry after the wait loop on line %d: "
			     "restore TASK_RUNNING before the thread function returns by hand" % loop[0])
	edits = _run(fx, ft, rel, f, exits, queued)
	if not edits:
		raise Refuse("manual", "%s found no exit of the wait loop on line %d that leaves with the task "
			     "state set" % (os.path.basename(RULE), loop[0]))
	for e in edits:
		e.key = ("thread_exit", rel, e.s)
		u.add(rel, e)
	u.reasons.append(reason(ft, f, loop, exits, edits, queued))


def _run(fx, ft, rel, f, exits, queued):
	"""The rule's edits; with a wait entry in the function, the 'sure'
	run (remove where every path holds the entry queued) must equal the
	'maybe' run (where some path does), or the exit is refused."""
	env = {"NESTSLEEP_SETTER": str(f["line"]), "NESTSLEEP_EXITS": " ".join(map(str, exits)),
	       "NESTSLEEP_RESTORES": " ".join(fx.kn.info["state_restore"]["functions"]),
	       "NESTSLEEP_SETTERS": " ".join(fx.kn.info["state_setters"]["set"]),
	       "NESTSLEEP_QUEUE": "sure" if queued else ""}
	edits = spatch_edits(ft, rel, RULE, env)
	if queued:
		maybe = spatch_edits(ft, rel, RULE, dict(env, NESTSLEEP_QUEUE="maybe"))
		if [(e.s, e.e, e.text) for e in maybe] != [(e.s, e.e, e.text) for e in edits]:
			raise Refuse("manual", "the thread's wait entry is on its queue on some paths to an exit of "
				     "the wait loop and off it on others: restore TASK_RUNNING and remove the entry "
				     "by hand")
	return edits


# cited by title, as series/text.py's WOKEN_FORM is: the reason does not
# know whether the tree is a git tree, and checkpatch.pl calls every
# commit id unknown in one that is not (36225a7c72e9 upstream)
W1_FIX = '"w1: fix WARNING after calling w1_process()"'


def reason(ft, f, loop, exits, edits, queued):
	"""What the patch does and why, from the code: the exits it changed
	(an edit that ends at or spans the exit's line), and whether the
	entry came off the queue there."""
	kinds = [_exit_word(ft, ln) for ln in exits if any(e.s <= ft.offset(ln, 0) <= e.e for e in edits)]
	names = []
	for k in ("break", "return"):
		n = kinds.count(k)
		if n:
			names.append("the %s" % k if n == 1 else "the %d %ss" % (n, k))
	changed = " and ".join(names) or "the exit"
	one = len(kinds) == 1
	removes = [r for e in edits for r in REMOVE.findall(e.text)]
	text = ("__set_current_state(TASK_RUNNING) before %s that %s the wait loop with the task state still "
		"set, so that kthread()'s kthread_exit() runs in TASK_RUNNING, as %s did in w1_process()"
		% (changed, "leaves" if one else "leave", W1_FIX))
	if removes:
		text += ("; %s also %s the loop's remove_wait_queue() and %s the thread's on-stack wait entry "
			 "on %s after the function returns, so remove_wait_queue(%s) comes before %s too"
			 % ("that exit" if one else "those exits", "skips" if one else "skip",
			    "leaves" if one else "leave", removes[0].split(",")[0].lstrip("&"), removes[0],
			    "it" if one else "them"))
	elif queued:
		text += "; its wait entry is already off the queue there"
	return text + "; the other exits and the wait itself are unchanged"


def _exit_word(ft, ln):
	line = ft.m[ft.offset(ln, 0):ft.offset(ln + 1, 0) if ln < ft.t.count("\n") else len(ft.m)]
	return "return" if re.search(r"\breturn\b", line) else "break"
