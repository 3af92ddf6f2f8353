# SPDX-License-Identifier: GPL-2.0-only
"""set_current_state() loops of a thread on no wait queue: a queue of its own.

The set_current_state() loop of a thread that waits on no wait queue gets
one (Bluetooth hidp, 5da8e47d849d): static
DECLARE_WAIT_QUEUE_HEAD(<thread>_wq), wait_woken() in the loop, every
wake_up_process() of the thread -> wake_up*() of the queue (wakers.py),
and the entries the thread queues on other wait queues with
init_waitqueue_entry(&e, current) forwarded to it by
<thread>_wake_function().

The loop edit is cocci/fix_set_current_state.cocci, in passes: "body"
(set_current_state.py's body_pass()), then "wrap" (the queue around the
loop, the entry) and "decl" (rewrite_own_queue()).  The queue head, the
wake function and the forwarded entries are text: they are file-scope
items or live in other functions, where a rule's '+' line has no
statement to attach to.
"""

import json
import os
import re

from nestsleep.fix.ctext import (idents, indent_at, is_decl_line, line_end, line_start, next_nonspace, open_block,
				 pick_name)
from nestsleep.fix.edits import Edit, Refuse, lower, text_edits
from nestsleep.fix.layout import wrap_call
from nestsleep.fix.set_current_state import SCS_RULE, body_pass, later_setters, own_edits, setter_comments, setter_loop
from nestsleep.fix.sites import loop_site, schedules, statement, taken_names
from nestsleep.fix.spatch import spatch_text


def plan_own_queue(fx, f, u, setters, state):
	"""Give the set_current_state() loop of f, whose thread waits on no
	wait queue, a queue of its own: pick the loop, the names and the
	wakers, or refuse; rewrite_own_queue() makes the loop edit when the
	unit is complete."""
	rel, ft, t, m, o, c = loop_site(fx, f)
	func = f["function"]
	first = setters[0]
	lstart, bo, bc = own_loop(ft, setters)
	sched = schedules(fx, ft, bo, bc, first[0])
	thread, forwards, (qname, wfname, entry) = own_names(fx, f, ft, rel)
	q = "&" + qname
	u.own = {"func": func, "entry": entry, "queue": q, "state": state, "sched": sched,
		 "loop": t.count("\n", 0, lstart) + 1, "loop_at": lstart, "qname": qname,
		 "decl": last_top_decl(ft, o, c),
		 # the restores of TASK_RUNNING go only when nothing else in
		 # the function sets a state
		 "restores": not re.search(r"\b(?:%s|set_special_state)\s*\(" % "|".join(
			 sorted(fx.kn.words.prepare)), m[o:c]),
		 "comments": setter_comments(t, setters)}
	u.reasons.append("the thread waits on no wait queue: it gets one of its own (%s, as the Bluetooth "
			 "hidp fix did), and the %s() loop becomes a wait_woken() loop on it"
			 % (qname, first[0]))
	fx.rule.check({"rel": rel, "func": func, "queue": q, "state": state,
			 "stop_tested": bool(re.search(r"\bkthread_should_stop\s*\(", m[lstart:bc])),
			 "span": (min(lstart, first[1]), bc), "own": True,
			 "forwarded": [(r, fn, ent) for r, fn, ent, _, _, _ in forwards]}, u)
	users = [o]
	if forwards:
		users.append(forward_entries(fx, ft, u, rel, forwards, state, qname, wfname))
	queue_head(ft, u, rel, qname, users)
	u.caveats.append("own queue: %s is one queue for every instance of the thread; a wakeup of one "
			 "instance also wakes the others, which test their condition and sleep again" % qname)
	fx.own_threads[(rel, thread)] = func
	u.confidence = lower(u.confidence)


def own_loop(ft, setters):
	"""(start, body open, body close) of the loop the setters wait in,
	when a queue of its own keeps every wakeup it waits for; refuses a
	do ... while loop, an inner sleep that replaces the pending one, and
	an exit that would leave the entry on the queue."""
	t, m = ft.t, ft.m
	first = setters[0]
	statement(ft, first[1], first[3], first[0])
	lstart, bo, bc = setter_loop(ft, first)
	if re.match(r"do\b", m[lstart:lstart + 3]):
		# spatch 1.1.1 edits the statements in a do ... while body, but
		# a pattern of the do ... while statement itself stops it with
		# "not supported", and the "wrap" pass needs one
		raise Refuse("manual", "own queue: the loop is a do ... while loop: spatch 1.1.1 edits the "
			     "statements in its body but does not match the do ... while statement itself "
			     "(\"not supported\"), which the rule needs to put the queue around the loop; give "
			     "the thread a wait queue of its own by hand")
	if t[line_start(t, lstart):lstart].strip():
		raise Refuse("manual", "the loop statement shares its line with other code")
	later_setters(ft, setters, bo, bc)
	body = m[bo:bc]
	# an inner sleep that replaces the pending one by design
	if re.search(r"\bkthread_parkme\s*\(", body):
		raise Refuse("manual", "own queue: the loop parks the thread with kthread_parkme(), whose sleep "
			     "replaces the pending one by design and which only kthread_unpark()'s direct "
			     "wakeup ends; a queue of its own would not change that")
	lastsched = max([mm.start() for mm in re.finditer(r"\bschedule(?:_timeout)?\s*\(", body)] or [-1])
	for mm in re.finditer(r"\b(msleep|msleep_interruptible|ssleep|usleep_range)\s*\(", body):
		if mm.start() > lastsched:
			raise Refuse("manual", "own queue: the loop sleeps in %s() with no schedule() after it: "
				     "that sleep replaces the pending one by design (a poll), there is no wakeup "
				     "to keep" % mm.group(1))
	for kw in re.finditer(r"\b(goto|return)\b", body):
		raise Refuse("manual", "own queue: a %s leaves the wait loop, which would leave the entry on the "
			     "thread's queue" % kw.group(1))
	return lstart, bo, bc


def own_names(fx, f, ft, rel):
	"""(thread, forwarded entries, (queue, wake function, entry)) of the
	loop of f: the thread function it runs in, the entries it queues on
	other wait queues (wakers.py's forwarded_entries()), and the names,
	free in the file and the function; refuses a thread that already
	gets its queue from another loop, or forwards from another file."""
	m = ft.m
	func = f["function"]
	if fx.rule is None:
		raise Refuse("manual", "no tree facts to search the wakers with")
	th = fx.rule.thread_of(rel, func)
	thread = sorted(e[1] for e in th.entries if e[0] == rel)[0] if any(
		e[0] == rel for e in th.entries) else func
	# one queue per thread and file: each unit is a patch of its own,
	# and two would each declare it
	own = fx.own_threads
	if own.get((rel, thread), func) != func:
		raise Refuse("manual", "own queue: %s(), another loop of the thread %s(), already gets its queue; "
			     "convert both loops together by hand" % (own[(rel, thread)], thread))
	taken_file = idents(m)
	qname = pick_name(taken_file, ["%s_wq" % thread])
	wfname = pick_name(taken_file, ["%s_wake_function" % thread])
	taken, _ = taken_names(ft, ft.offset(f["line"], f["col"]))
	entry = pick_name(set(taken), ["wait"])
	forwards = fx.rule.forwarded_entries(th)
	for r, fn, ent, kind, s0, e0 in forwards:
		if r != rel:
			raise Refuse("manual", "own queue: %s() in %s queues the thread on another wait queue "
				     "(entry %s), and the thread's queue would be static to %s; forward it by "
				     "hand" % (fn, r, ent, rel))
	return thread, forwards, (qname, wfname, entry)


def forward_entries(fx, ft, u, rel, forwards, state, qname, wfname):
	"""The forwarded entries as DEFINE_WAIT_FUNC(e, <thread>_wake_function)
	and that wake function, before the first function that uses it;
	returns where the wake function goes.  Text: the forwarded entries
	live in other functions (the thread function), outside the rule's
	one function; their declaration and init_waitqueue_entry() are plain
	statements, and the wake function they name must be written before
	that function, at file scope, where a '+' line of a rule has no
	statement to attach to."""
	t = ft.t
	q = "&" + qname
	interruptible = "INTERRUPTIBLE" in state and "UNINTERRUPTIBLE" not in state
	names = set((r, fn, ent) for r, fn, ent, _, _, _ in forwards)
	for r, fn, ent, kind, s0, e0 in forwards:
		if kind == "declare":
			u.add(rel, Edit(s0, e0, "DEFINE_WAIT_FUNC(%s, %s);" % (ent, wfname)))
			continue
		delete_stmt(ft, u, rel, line_start(t, s0), line_end(t, e0) + 1)
		forward_decl(fx, ft, u, rel, (r, fn, ent), names, wfname)
	fns = sorted(set((fx.rule.func_span(r, fn)[0], fn) for r, fn, _, _, _, _ in forwards))
	at = top_start(ft, fns[0][0])
	sig = wrap_call("", "static int " + wfname, ["struct wait_queue_entry *wait", "unsigned int mode",
						      "int sync", "void *key"], tail="")
	u.add(rel, Edit(at, at, "%s\n{\n\t%s(%s);\n\treturn 0;\n}\n\n" % (
		"\n".join(sig), "wake_up_interruptible" if interruptible else "wake_up", q),
			key=("own-wakefn", wfname)))
	u.reasons.append("the entries the thread queues on other wait queues (%s) forward their wakeups "
			 "to %s through %s(), so that woken_wake_function() sees them" % (
				 ", ".join(sorted(set(x[2] for x in forwards))), qname, wfname))
	return at


def forward_decl(fx, ft, u, rel, fwd, names, wfname):
	"""The declaration of the forwarded entry fwd = (file, function, entry)
	becomes DEFINE_WAIT_FUNC(); one declaration may hold several entries
	(hidp: 'wait_queue_t ctrl_wait, intr_wait;'), which must all be
	forwarded (names)."""
	m = ft.m
	r, fn, ent = fwd
	span = fx.rule.func_span(r, fn)
	dv = re.compile(r"\b(?:wait_queue_entry_t|struct\s+wait_queue_entry)\s+"
			r"((?:\w+\s*,\s*)*%s\s*(?:,\s*\w+\s*)*);" % re.escape(ent))
	dm = dv.search(m, span[1], span[2])
	if not dm:
		raise Refuse("manual", "own queue: cannot find the declaration of the entry %s "
			     "in %s()" % (ent, fn))
	ents = [x.strip() for x in dm.group(1).split(",")]
	if any((r, fn, x) not in names for x in ents):
		raise Refuse("manual", "own queue: the entry %s of %s() shares its declaration with "
			     "an entry that is not forwarded" % (ent, fn))
	ind = indent_at(ft.t, dm.start())
	u.add(rel, Edit(dm.start(), dm.end(), ("\n" + ind).join(
		"DEFINE_WAIT_FUNC(%s, %s);" % (x, wfname) for x in ents), key=("own-entry", dm.start())))


def queue_head(ft, u, rel, qname, users):
	"""static DECLARE_WAIT_QUEUE_HEAD(qname) before the first of its users
	(offsets), after the file's other static DECLARE_/DEFINE_ items
	there.  Text: the queue head is a file-scope definition, which a rule
	cannot add ahead of the first function that uses it."""
	t = ft.t
	users = users + [x["s"] for x in u.waker_sites.get(rel, {}).values()]
	first_use = top_start(ft, min(users))
	at = first_use
	statics = [mm for mm in re.finditer(r"^static\s+(?:DECLARE|DEFINE)_\w+\([^;\n]*\);[ \t]*\n|"
					    r"^static\s+LIST_HEAD\([^;\n]*\);[ \t]*\n", t[:first_use], re.M)]
	if statics:
		at = statics[-1].end()
		text = "static DECLARE_WAIT_QUEUE_HEAD(%s);\n" % qname
	else:
		text = "static DECLARE_WAIT_QUEUE_HEAD(%s);\n\n" % qname
	u.add(rel, Edit(at, at, text, key=("own-queue", qname)))


def delete_stmt(ft, u, rel, s, e):
	"""Delete the lines [s, e), and one blank line after them when they
	opened a block or followed a blank line."""
	t = ft.t
	prev = t[line_start(t, max(s - 1, 0)):max(s - 1, 0)].strip() if s > 0 else ""
	nxt_e = line_end(t, e)
	if e < len(t) and not t[e:nxt_e].strip() and (prev.endswith("{") or prev == ""):
		e = nxt_e + 1
	u.add(rel, Edit(s, e, ""))


def last_top_decl(ft, o, c):
	"""The line of the last of the declarations that open the body
	m[o:c] (a statement at a time, at the body's own level), or 0."""
	t, m = ft.t, ft.m
	j = o + 1
	line = 0
	while True:
		j = next_nonspace(m, j)
		if j >= c or m[j] in "{}":
			return line
		k, depth = j, 0
		while k < c and not (m[k] == ";" and depth == 0):
			if m[k] in "([{":
				depth += 1
			elif m[k] in ")]}":
				depth -= 1
			k += 1
		if k >= c or not is_decl_line(" ".join(m[j:k + 1].split())):
			return line
		line = t.count("\n", 0, j) + 1
		j = k + 1


def top_start(ft, pos):
	"""Where a file-scope item can be inserted before the function whose
	definition starts at pos: after the previous top-level item and
	the blank lines that follow it, so before the function's own
	leading comment."""
	t, m = ft.t, ft.m
	j = max(m.rfind(";", 0, pos), m.rfind("}", 0, pos))
	while j >= 0 and open_block(m, j + 1) >= 0:
		j = max(m.rfind(";", 0, j), m.rfind("}", 0, j))
	s = line_end(t, j) + 1 if j >= 0 else 0
	while s < len(t) and t[s] == "\n":
		s += 1
	return s


def rewrite_own_queue(fx, u):
	"""Run cocci/fix_set_current_state.cocci on the unit's loop, in two
	passes: "body" (schedule() by position, the setters), then "wrap"
	(the queue around the loop, the entry), on the file "body" wrote,
	with the loop's line as it is there; then "decl" when the function
	opens with declarations."""
	rel = u.rel
	ft, spec, mid = body_pass(fx, u)
	name = os.path.basename(rel)
	# the loop's line in the body pass's output: lines removed above it
	shift = sum(ft.t.count("\n", e.s, e.e) - e.text.count("\n")
		    for e in text_edits(ft.t, mid) if e.e <= u.own["loop_at"])
	spec = dict(spec, loop=u.own["loop"] - shift, **{"pass": "wrap"})
	new = spatch_text(mid, name, SCS_RULE, {"NESTSLEEP_SITES": json.dumps(spec)})
	if new is None or new == mid or "add_wait_queue(%s, &%s);" % (u.own["queue"], u.own["entry"]) not in new:
		raise Refuse("manual", "%s could not put the queue around the loop in this statement context"
			     % os.path.basename(SCS_RULE))
	if spec["decl"]:
		# the leading declarations are above the loop: the earlier
		# passes did not move them
		last = spatch_text(new, name, SCS_RULE, {"NESTSLEEP_SITES": json.dumps(dict(spec, **{
			"pass": "decl"}))})
		new = new if last is None else last
	if "DEFINE_WAIT_FUNC(%s, woken_wake_function);" % u.own["entry"] not in new:
		raise Refuse("manual", "%s could not declare the wait entry" % os.path.basename(SCS_RULE))
	for e in own_edits(ft.t, new, u.own["comments"]):
		u.add(rel, e)
