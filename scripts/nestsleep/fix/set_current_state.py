# SPDX-License-Identifier: GPL-2.0-only
"""set_current_state() loops on a wait queue -> cocci/fix_set_current_state.cocci.

A thread that adds itself to a wait queue (add_wait_queue() of a
DECLARE_WAITQUEUE() or init_waitqueue_entry() entry), then loops on
set_current_state() and schedule(): the rule's "body" pass turns the
entry into DEFINE_WAIT_FUNC(woken_wake_function), each schedule() into
wait_woken() and drops the setters (Bluetooth cmtp f06d977309d0, bnep
25717382c1dd).  plan_set_current_state() checks the shape and picks the
sites; rewrite_set_current_state() runs the pass, when the unit is
complete.  A thread on no queue at all gets one of its own: own_queue.py,
which runs more passes of the same rule and takes its helpers from here
(loop_setters(), setter_loop(), later_setters(), setter_comments(),
body_pass(), own_edits())."""

import difflib
import json
import os
import re

from nestsleep import COCCI_DIR
from nestsleep.fix.ctext import LINES, flat, match_close, next_nonspace, open_block, split_top
from nestsleep.fix.edits import Edit, Refuse, lower
from nestsleep.fix.sites import calls_in, loop_of, loop_site, schedules, statement
from nestsleep.fix.spatch import spatch_text

SCS_RULE = os.path.join(COCCI_DIR, "fix_set_current_state.cocci")


def loop_setters(fx, f):
	"""(setters, state, adds) of the function of f: its setters of a state
	other than TASK_RUNNING, each (name, pos, open, close, state), the
	one state they all set, and its add_wait_queue*() calls (none: the
	thread is on no queue, own_queue.py's shape); refuses a function
	without a setter, or with different or unusual states."""
	rel, ft, t, m, o, c = loop_site(fx, f)
	setters = []
	for name, p, po, pc in calls_in(ft, o, c, ["set_current_state", "__set_current_state"]):
		st = flat(t, m, po + 1, pc)
		if st != "TASK_RUNNING":
			setters.append((name, p, po, pc, st))
	if not setters:
		raise Refuse("manual", "cannot find the set_current_state() call")
	state = setters[0][4]
	if any(x[4] != state for x in setters):
		raise Refuse("manual", "the function sets different task states")
	if state not in ("TASK_INTERRUPTIBLE", "TASK_UNINTERRUPTIBLE", "TASK_KILLABLE", "TASK_IDLE"):
		raise Refuse("manual", "unusual task state %s" % state)
	return setters, state, calls_in(ft, o, c, ["add_wait_queue", "add_wait_queue_exclusive"])


def plan_set_current_state(fx, f, u, setters, state, adds):
	"""Check that the set_current_state() loop of f, whose thread adds
	itself to a wait queue (adds), can be rewritten, and record it for
	the "body" pass of cocci/fix_set_current_state.cocci
	(rewrite_set_current_state(), when the unit is complete)."""
	rel, ft, t, m, o, c = loop_site(fx, f)
	qa = [flat(t, m, x, y) for x, y in split_top(m, adds[0][2] + 1, adds[0][3])]
	if len(adds) > 1 or len(qa) != 2 or not qa[1].startswith("&"):
		raise Refuse("manual", "the thread is on several wait queues")
	q, ent = qa
	entry = ent[1:]
	if not re.match(r"^[A-Za-z_]\w*$", entry):
		raise Refuse("manual", "the wait entry %s is not a local variable" % ent)
	# The edit is cocci/fix_set_current_state.cocci's "body" pass
	# (rewrite_set_current_state()); this checks the shape it rewrites.
	dq = re.compile(r"\bDECLARE_WAITQUEUE\s*\(\s*%s\s*,\s*current\s*\)\s*;" % re.escape(entry)).search(m, o, c)
	if dq:
		entry_decl = "declare"
	else:
		dv = re.compile(r"\b(?:wait_queue_entry_t|struct\s+wait_queue_entry)\s+%s\s*;" % re.escape(entry)) \
			.search(m, o, c)
		iw = calls_in(ft, o, c, ["init_waitqueue_entry"])
		iw = [x for x in iw if flat(t, m, x[2] + 1, x[3]) == "&%s, current" % entry]
		if not dv or len(iw) != 1:
			raise Refuse("manual", "the wait entry %s is neither DECLARE_WAITQUEUE(%s, current) nor "
				     "initialized with init_waitqueue_entry(&%s, current)" % (entry, entry, entry))
		statement(ft, iw[0][1], iw[0][3], "init_waitqueue_entry")
		entry_decl = "init"
	# the loop: set_current_state() at its top (or right before it, and
	# again after schedule())
	first = setters[0]
	ls0, _, _ = statement(ft, first[1], first[3], first[0])
	loop = loop_of(ft, first[1])
	lstart, bo, bc = setter_loop(ft, first)
	if re.match(r"do\b", m[lstart:lstart + 3]):
		raise Refuse("manual", "the loop is a do ... while loop, which spatch 1.1.1 does not match "
			     "(\"not supported\"): convert it by hand")
	if adds[0][1] > ls0:
		raise Refuse("manual", "add_wait_queue() comes after the wait starts")
	later_setters(ft, setters, bo, bc)
	rems = calls_in(ft, o, c, ["remove_wait_queue"])
	if not any(flat(t, m, x[2] + 1, x[3]) == "%s, %s" % (q, ent) for x in rems if x[1] > bc):
		raise Refuse("manual", "no remove_wait_queue() after the loop")
	after = next_nonspace(m, bc + 1)
	u.own = {"func": f["function"], "entry": entry, "queue": q, "state": state,
		 "sched": schedules(fx, ft, bo, bc, first[0]), "onqueue": True, "entry_decl": entry_decl,
		 # the restore right after the loop goes; the others stay
		 "restored": bool(re.match(r"(?:__)?set_current_state\s*\(\s*TASK_RUNNING\s*\)\s*;",
					   m[after:])),
		 "comments": setter_comments(t, setters)}
	lstart = loop[0] if loop else ls0
	u.reasons.append("the %s() loop on %s becomes a wait_woken() loop" % (first[0], q))
	fx.wakers(u, rel, f["function"], q, state, bool(re.search(r"\bkthread_should_stop\s*\(",
								 m[min(lstart, ls0):bc])), (min(lstart, ls0), bc))
	u.confidence = lower(u.confidence)


def setter_loop(ft, first):
	"""(start, body open, body close) of the loop whose top holds the
	setter first, or of the loop right after it; refuses otherwise."""
	m = ft.m
	loop = loop_of(ft, first[1])
	if loop:
		return loop
	lstart = next_nonspace(m, first[3] + 2)
	if not re.match(r"(for|while|do)\b", m[lstart:lstart + 6]):
		raise Refuse("manual", "%s() is neither at the top of a loop nor right before one" % first[0])
	bo = m.find("{", lstart)
	bc = match_close(m, bo) if bo >= 0 else -1
	if bc < 0:
		raise Refuse("manual", "the loop has no braces")
	return lstart, bo, bc


def later_setters(ft, setters, bo, bc):
	"""Every setter after the first must be in the loop m[bo:bc], right
	after a schedule() (the re-arm of a loop that sets its state
	before it); the rules drop them all."""
	m = ft.m
	for name, p, po, pc, st in setters[1:]:
		if not (bo < p < bc):
			raise Refuse("manual", "%s(%s) outside the wait loop" % (name, st))
		before = m[open_block(m, p) + 1:p]
		if not re.search(r"\bschedule(?:_timeout)?\s*\([^;]*\)\s*;\s*$", before):
			raise Refuse("manual", "%s() in the middle of the loop, not right after schedule()" % name)
		statement(ft, p, pc, name)


def setter_comments(t, setters):
	"""The lines (0-based) of the comments right above the setters,
	which spatch drops with them and own_edits() puts back.  Its last
	paragraph goes with the setter when that paragraph, and only it,
	speaks of the setter, as hidp's fix (5da8e47d849d) dropped "Note:
	set_current_state() performs any necessary memory-barriers for
	us."; a comment that is all about the setter goes whole."""
	comments = set()
	lines = t.split("\n")
	for name, p, po, pc, st in setters:
		k = t.count("\n", 0, p) - 1
		if k < 0 or not lines[k].strip().endswith("*/"):
			continue
		end = k
		while k > 0 and "/*" not in lines[k]:
			k -= 1
		block = list(range(k, end + 1))
		said = re.compile(r"\b(?:__)?%s\s*\(" % re.escape(name.lstrip("_")))
		seps = [i for i in block if lines[i].strip() == "*"]
		closing = [end] if lines[end].strip() == "*/" else []
		if seps:
			tail = [i for i in block if i >= seps[-1] and i not in closing]
			if any(said.search(lines[i]) for i in tail) and \
					not any(said.search(lines[i]) for i in block if i not in tail):
				block = [i for i in block if i not in tail]
		elif any(said.search(lines[i]) for i in block):
			block = []
		comments.update(block)
	return sorted(comments)


def check_on_queue(old, new, spec):
	"""The "body" pass on a loop already on a queue did all of its
	edits, or the unit is refused: a half-converted wait (an entry
	woken by default_wake_function() under wait_woken(), a schedule()
	left) must never ship."""
	entry = spec["entry"]
	restores = r"\b(?:__)?set_current_state\s*\(\s*TASK_RUNNING\s*\)"
	missing = []
	if "DEFINE_WAIT_FUNC(%s, woken_wake_function);" % entry not in new:
		missing.append("the entry %s" % entry)
	if spec["entry_decl"] == "init" and re.search(r"\binit_waitqueue_entry\s*\(\s*&\s*%s\b"
							 % re.escape(entry), new):
		missing.append("init_waitqueue_entry()")
	if len(re.findall(r"\bwait_woken\s*\(\s*&%s\b" % re.escape(entry), new)) - \
			len(re.findall(r"\bwait_woken\s*\(\s*&%s\b" % re.escape(entry), old)) != len(spec["sched"]):
		missing.append("a schedule()")
	if len(re.findall(restores, old)) - len(re.findall(restores, new)) != int(spec["restored"]):
		missing.append("the restore of TASK_RUNNING after the loop")
	if missing:
		raise Refuse("manual", "%s did not rewrite %s in this statement context"
			     % (os.path.basename(SCS_RULE), ", ".join(missing)))


def own_edits(old, new, comments):
	"""text_edits(old, new) for fix_set_current_state.cocci's output, with
	two text fixes (spatch 1.1.1 cannot be told to do either): the comment
	right above a removed set_current_state() (lines 'comments' of old,
	0-based) is put back, as hidp's fix kept its comment, and a blank line
	left right after a '{' by a removed setter goes (checkpatch --strict:
	"Blank lines aren't necessary after an open brace")."""
	a = LINES.findall(old)
	b = LINES.findall(new)
	starts = [0]
	for line in a:
		starts.append(starts[-1] + len(line))
	keep = set(comments)
	out = []
	for op, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
		if op == "equal":
			continue
		text = "".join(a[i] for i in range(i1, i2) if i in keep) + "".join(b[j1:j2])
		e = i2
		if not text and i1 > 0 and a[i1 - 1].rstrip().endswith("{") and i2 < len(a) and not a[i2].strip():
			e = i2 + 1
		elif not text.strip("\n") and text and i1 > 0 and a[i1 - 1].rstrip().endswith("{"):
			text = ""
		out.append(Edit(starts[i1], starts[e], text))
	return out


def body_pass(fx, u):
	"""(FileText, spec, text) of cocci/fix_set_current_state.cocci's
	"body" pass on the unit's loop: schedule() by position becomes
	wait_woken(), the setters go.  The spec is the one the later passes
	of own_queue.py take."""
	rel = u.rel
	ft = fx.text(rel)
	spec = dict((k, v) for k, v in u.own.items() if k not in ("loop_at", "qname", "comments"))
	mid = spatch_text(ft.t, os.path.basename(rel), SCS_RULE,
			  {"NESTSLEEP_SITES": json.dumps(dict(spec, **{"pass": "body"}))})
	if mid is None or mid == ft.t:
		raise Refuse("manual", "%s could not rewrite the loop body" % os.path.basename(SCS_RULE))
	return ft, spec, mid


def rewrite_set_current_state(fx, u):
	"""Run cocci/fix_set_current_state.cocci on the unit's loop, already
	on a wait queue: the "body" pass is the whole rewrite, and it must
	have made all of it (check_on_queue())."""
	ft, _, mid = body_pass(fx, u)
	check_on_queue(ft.t, mid, u.own)
	for e in own_edits(ft.t, mid, u.own["comments"]):
		u.add(u.rel, e)
