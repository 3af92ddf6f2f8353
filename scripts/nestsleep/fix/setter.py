# SPDX-License-Identifier: GPL-2.0-only
"""set_current_state() setters outside their loop's place -> cocci/move_setter.cocci.

Two shapes, where the loop itself is right and one setter is not:

  move  a setter in the middle of its loop, before a call that may sleep
        (6.1 apm_mainloop(): set, apm_event_handler(), then the
        schedule_timeout() at the loop top): the setter moves right after
        that call, when a wakeup that comes before its new place is still
        seen (a condition tested after it, other than
        kthread_should_stop(), guards the sleep) or the sleep has a
        constant timeout that bounds its loss (the caveat says so);
        otherwise refused (6.1 sdio_irq_thread(): only
        kthread_should_stop() is tested and the timeout can be
        MAX_SCHEDULE_TIMEOUT, so an IRQ's wakeup would be lost for good)
  drop  a setter before a loop that sets its own state before each of its
        sleeps (6.1 aac_command_thread()): the setter only puts the work
        before the loop's own setter in a sleeping state, and goes

The task still sleeps in schedule*() after either edit, so its wakers
(wake_up_process() or a wake_up*() of its queue) stay as they are.
plan_setter() picks the shape and checks it; rewrite_setter() runs the
rule when the unit is complete.
"""

import os
import re

from nestsleep import COCCI_DIR
from nestsleep.fix.ctext import flat, line_start, match_close, next_nonspace, open_block, prev_nonspace
from nestsleep.fix.edits import Refuse, Unit, lower
from nestsleep.fix.set_current_state import later_setters, setter_loop
from nestsleep.fix.sites import calls_in, loop_of, loop_site, statement
from nestsleep.fix.spatch import spatch_edits

MOVE_RULE = os.path.join(COCCI_DIR, "move_setter.cocci")

# the conditions that end a sleep for one waker only, not the loop's own
STOP_TESTS = r"\b(?:kthread_should_stop|kthread_should_park|signal_pending|fatal_signal_pending|freezing)" \
	     r"\s*\(\s*(?:current)?\s*\)"
# reads of the task state, which a dropped setter would change
STATE_READS = r"\b(?:task_is_running|get_current_state|task_state_index)\s*\(|\bcurrent\s*->\s*__?state\b"
JUMPS = r"\b(?:break|continue|return|goto)\b"


def plan_setter(fx, f, u, setters, state, fits=False):
	"""Plan the setter of finding f when it is one of this module's
	shapes (a move or a drop) and return True; False leaves f to the
	wait_woken() rewrites.  Raises Refuse.  fits: the loop has the
	place those rewrites take, and they refused it: only a move, and
	only of the first setter, which there may stand mid-loop."""
	rel, ft, t, m, o, c = loop_site(fx, f)
	at = ft.offset(f["line"], f["col"])
	s = next((x for x in setters if x[1] == at), None)
	if s is None or (fits and s is not setters[0]) or (not fits and loop_fits(ft, setters)):
		return False
	loop = loop_of(ft, s[1])
	if u.setter:
		# another finding of the function: the same setter, to the
		# same place, or none
		v = Unit(u.rel, u.func, None)
		if not plan_setter(fx, f, v, setters, state, fits) or v.setter != u.setter:
			raise Refuse("manual", "two findings of the function need their setters moved differently; "
				     "move them by hand")
		u.reasons += v.reasons
		u.caveats += v.caveats
		return True
	if loop:
		before = m[loop[1] + 1:s[1]]
		if not before.strip() or re.search(r"\b%s\s*\([^;]*\)\s*;\s*$" % sched_rx(fx), before):
			return False    # the top of its loop, or its re-arm after schedule()
		after = plan_move(fx, f, u, s, loop)
	elif fits:
		return False
	else:
		if loop_around(m, s[1], o):
			return False
		if re.match(r"(?:for|while|do)\b", m[next_nonspace(m, s[3] + 2):]):
			return False    # right before its loop
		lp = next_loop(m, s[3] + 2)
		if lp is None:
			return False
		after = plan_drop(fx, f, u, s, setters, lp, c)
	u.setter = {"setter": pos_of(t, s[1]), "after": after}
	return True


def loop_fits(ft, setters):
	"""Whether the setters have the place the wait_woken() rewrites take
	(set_current_state.py, own_queue.py): the first at the top of its
	loop or right before it, every other right after a schedule().
	Those loops are theirs; this module takes only the ones they
	refuse for the place of a setter."""
	try:
		_, bo, bc = setter_loop(ft, setters[0])
		later_setters(ft, setters, bo, bc)
	except Refuse:
		return False
	return True


def sched_rx(fx):
	return "(?:%s)" % "|".join(sorted(fx.kn.schedulers, key=len, reverse=True))


def pos_of(t, p):
	"""The "line:column" spatch gives position p (column: 0-based)."""
	ls = line_start(t, p)
	return "%d:%d" % (t.count("\n", 0, ls) + 1, p - ls)


def loop_around(m, p, o):
	"""Whether a loop body encloses p, at any depth inside the function
	whose body opens at o."""
	b = open_block(m, p)
	while b > o:
		hb = prev_nonspace(m, b)
		head = m[:hb + 1]
		if re.search(r"\bdo\s*$", head):
			return True
		if m[hb] == ")":
			depth, j = 0, hb
			while j >= 0:
				depth += {")": 1, "(": -1}.get(m[j], 0)
				if depth == 0:
					break
				j -= 1
			if re.search(r"\b(?:for|while)\s*$", m[:j]):
				return True
		b = open_block(m, b)
	return False


def stmt_end(m, j):
	"""The index just past the statement that starts at m[j]."""
	j = next_nonspace(m, j)
	kw = re.match(r"(if|for|while|switch|do|else)\b", m[j:])
	if m[j] == "{":
		return match_close(m, j) + 1
	if not kw:
		depth = 0
		while j < len(m):
			if m[j] in "([{":
				depth += 1
			elif m[j] in ")]}":
				depth -= 1
			elif m[j] == ";" and depth == 0:
				return j + 1
			j += 1
		return len(m)
	word = kw.group(1)
	j += len(word)
	if word == "do":
		e = stmt_end(m, j)
		return stmt_end(m, e)    # the 'while (...);' after the body
	if word != "else":
		j = match_close(m, next_nonspace(m, j)) + 1
	e = stmt_end(m, j)
	if word == "if" and re.match(r"else\b", m[next_nonspace(m, e):]):
		return stmt_end(m, next_nonspace(m, e))
	return e


def next_loop(m, j):
	"""(start, body open, body close) of the first loop among the
	statements of the block from m[j] on, or None."""
	while True:
		j = next_nonspace(m, j)
		if j >= len(m) or m[j] == "}":
			return None
		if re.match(r"(?:for|while|do)\b", m[j:]):
			bo = m.find("{", j)
			if bo < 0 or (m[j] != "d" and bo != next_nonspace(m, match_close(m, m.find("(", j)) + 1)):
				return None
			return j, bo, match_close(m, bo)
		j = stmt_end(m, j)


def plan_move(fx, f, u, s, loop):
	"""The setter s in the middle of loop: move it after the statement
	that holds the last call of f that may sleep, or refuse; returns
	where it goes (the "line:column" of that statement)."""
	rel, ft, t, m, o, c = loop_site(fx, f)
	name, p, po, pc, st = s
	lstart, bo, bc = loop
	statement(ft, p, pc, name)
	last = max(ft.offset(x["line"], x["col"]) for x in f["paths"])
	j, end = pc + 2, None
	while end is None:
		j = next_nonspace(m, j)
		if j >= bc:
			raise Refuse("manual", "%s() is in the middle of the loop, and %s() is not in its block"
				     % (name, f["call"]))
		e = stmt_end(m, j)
		if e > last:
			end = e
		else:
			j = e
	over = m[pc + 2:end]
	if re.search(r"\b%s\s*\(" % sched_rx(fx), over) or re.search(JUMPS, over) or re.search(r"^\s*\w+\s*:(?!:)", over, re.M):
		raise Refuse("manual", "%s() cannot move after %s(): the code between them sleeps, jumps or "
			     "holds a label" % (name, f["call"]))
	sleep, wrap = next_sleep(fx, ft, loop, end, p)
	conds = guards(m, t, loop, end, sleep, wrap)
	bound = bounded(ft, o, c, sleep)
	sname = sleep[0]
	sleep_txt = "%s(%s)" % (sname, flat(t, m, sleep[2] + 1, sleep[3]))
	moved = "%s(%s) moves after %s(), which may sleep, so that the call runs in TASK_RUNNING; the task " \
		"still sleeps in %s, so its wakers are unchanged" % (name, st, f["call"], sleep_txt)
	if conds:
		u.reasons.append("%s; a wakeup that comes before the setter's new place is not lost: %s is "
				 "tested after it" % (moved, " and ".join(conds)))
	elif bound is True:
		u.reasons.append(moved)
		u.caveats.append("the loop tests no condition between the moved %s() and %s: a wakeup that "
				 "comes while %s() runs no longer ends that sleep at once; a wakeup can be late "
				 "by up to the timeout, %s" % (name, sleep_txt, f["call"],
							       flat(t, m, sleep[2] + 1, sleep[3])))
	else:
		# where each piece is, file:line, as a claim of a lost wakeup must say
		base = os.path.basename(rel)
		bound = re.sub(r", line (\d+)$", r" at %s:\1" % base, bound)
		raise Refuse("manual", "%s() at %s:%d cannot move after %s(): after its new place the loop tests "
			     "no condition of its wakers (at most kthread_should_stop() or signal_pending()), and %s "
			     "at %s:%d is not bounded (%s), so a wakeup that comes between %s() and the moved setter "
			     "would be lost for good; test the wakers' condition after the setter by hand"
			     % (name, base, t.count("\n", 0, p) + 1, f["call"], sleep_txt, base,
				t.count("\n", 0, sleep[1]) + 1, bound, f["call"]))
	u.confidence = lower(u.confidence)
	return pos_of(t, next_nonspace(m, j))


def next_sleep(fx, ft, loop, end, p):
	"""((name, pos, open, close), wrapped) of the sleep the moved setter
	sets the state for: the first one after end in the loop body, or,
	past the loop's back edge, the first one in it before p."""
	lstart, bo, bc = loop
	calls = calls_in(ft, bo, bc, list(fx.kn.schedulers))
	after = [x for x in calls if x[1] >= end]
	if after:
		return after[0], False
	before = [x for x in calls if x[1] < p]
	if not before:
		raise Refuse("manual", "no schedule() in the loop after the setter's new place")
	return before[0], True


def guards(m, t, loop, end, sleep, wrap):
	"""The conditions, other than STOP_TESTS, tested between end and the
	sleep that guard it: an 'if' around the sleep or one that jumps out,
	and past the back edge the loop's own condition."""
	lstart, bo, bc = loop
	spans = [(end, sleep[1])] if not wrap else [(end, bc), (bo + 1, sleep[1])]
	heads = []
	for s, e in spans:
		for mm in re.finditer(r"\bif\s*\(", m[s:e]):
			ho = s + mm.end() - 1
			hc = match_close(m, ho)
			be = stmt_end(m, hc + 1)
			if hc + 1 <= sleep[1] < be or re.match(r"\s*\{?\s*" + JUMPS, m[hc + 1:be]):
				heads.append((ho, hc))
	if wrap:
		if m[lstart] == "d":
			ho = m.find("(", bc)
		else:
			ho = m.find("(", lstart)
		hc = match_close(m, ho)
		head = m[ho + 1:hc]
		if m[lstart] == "f":
			parts = head.split(";")
			head = parts[1] if len(parts) == 3 else ""
			ho = m.find(";", ho) if head.strip() else -1
		if head.strip() and ho >= 0:
			heads.append((ho, ho + 1 + len(head)) if m[lstart] == "f" else (ho, hc))
	out = []
	for ho, hc in heads:
		cond = flat(t, m, ho + 1, hc)
		rest = re.sub(STOP_TESTS, "", m[ho + 1:hc])
		if re.sub(r"[\s!&|()]", "", rest) and cond:
			out.append(cond.strip())
	return out


def bounded(ft, o, c, sleep):
	"""True when the sleep has a constant timeout (literals, HZ and
	upper-case macros the file defines as such); else why not."""
	t, m = ft.t, ft.m
	name = sleep[0]
	if not re.match(r"schedule_(?:hr)?timeout", name):
		return "%s() has no timeout" % name
	arg = flat(t, m, sleep[2] + 1, sleep[3]) or ""
	seen = set()
	todo = [arg]
	while todo:
		x = todo.pop()
		if "MAX_SCHEDULE_TIMEOUT" in x:
			return "the timeout can be MAX_SCHEDULE_TIMEOUT"
		for ident in re.findall(r"\b[A-Za-z_]\w*\b", x):
			if ident == "HZ" or ident in seen:
				continue
			seen.add(ident)
			d = re.search(r"^#\s*define\s+%s\s+(.*)$" % re.escape(ident), t, re.M)
			if ident.isupper() and d:
				todo.append(d.group(1))
				continue
			mm = re.search(r"\b%s\s*=[^=][^;]*\bMAX_SCHEDULE_TIMEOUT\b" % re.escape(ident), m[o:c])
			if mm:
				return "%s can be MAX_SCHEDULE_TIMEOUT, line %d" % (ident, t.count("\n", 0, o + mm.start()) + 1)
			return "the timeout %s is not a constant" % arg
	return True


def plan_drop(fx, f, u, s, setters, lp, c):
	"""The setter s before the loop lp: drop it when the loop sets its
	own state before each of its sleeps and nothing between reads the
	state, or refuse; returns "" (no new place)."""
	rel, ft, t, m, o, _ = loop_site(fx, f)
	name, p, po, pc, st = s
	lstart, bo, bc = lp
	statement(ft, p, pc, name)
	sched = calls_in(ft, pc, c, list(fx.kn.schedulers))
	own = [x for x in setters if bo < x[1] < bc and open_block(m, x[1]) == bo]
	first = [x for x in sched if bo < x[1] < bc]
	if not own or not first or first[0][1] < own[0][1] or any(x[1] < bo for x in sched):
		where = first[0] if first else (sched[0] if sched else None)
		raise Refuse("manual", "the setter before the loop is needed: the loop does not set its own "
			     "state before its first sleep%s" % (
				     " (%s() on line %d)" % (where[0], t.count("\n", 0, where[1]) + 1) if where else ""))
	late = [x for x in f["paths"] if not pc < ft.offset(x["line"], x["col"]) < own[0][1]]
	if late:
		# the drop takes only the work before the loop's own setter out
		# of the window: a call of the finding past that setter (a
		# break that returns to kthread_exit()) would stay in it
		raise Refuse("manual", "dropping the setter before the loop would leave %s() on line %d in the "
			     "state the loop's own %s() on line %d sets; fix that path by hand"
			     % (late[0]["call"], late[0]["line"], own[0][0], t.count("\n", 0, own[0][1]) + 1))
	between = m[pc + 2:own[0][1]]
	if re.search(STATE_READS, between) or re.search(r"^\s*\w+\s*:(?!:)", between, re.M):
		raise Refuse("manual", "the setter before the loop cannot go: the code before the loop's own "
			     "setter reads the task state or holds a label")
	after = m[bc:c]
	sa = re.search(r"\b%s\s*\(" % sched_rx(fx), after)
	if sa and not any(bc < x[1] < bc + sa.start() for x in setters):
		raise Refuse("manual", "the setter before the loop cannot go: a sleep after the loop may need it")
	jumps = re.search(JUMPS, between[lstart - pc - 2:])
	u.reasons.append("%s(%s) before the loop goes: the loop sets its own state before it sleeps, so the "
			 "dropped setter only put the work before the loop's own setter, %s() among it, in a "
			 "sleeping state; nothing there reads the state, and the loop's sleep and its wakers "
			 "are unchanged%s" % (name, st, f["call"], "; a way out of the loop before its own setter "
						 "now leaves in TASK_RUNNING" if jumps else ""))
	return ""


def rewrite_setter(fx, u):
	"""Run cocci/move_setter.cocci on the unit's setter."""
	ft = fx.text(u.rel)
	edits = spatch_edits(ft, u.rel, MOVE_RULE, {"NESTSLEEP_SETTER": u.setter["setter"],
						    "NESTSLEEP_AFTER": u.setter["after"]})
	if not edits:
		raise Refuse("manual", "%s could not %s the setter" % (os.path.basename(MOVE_RULE),
								"move" if u.setter["after"] else "drop"))
	for e in edits:
		u.add(u.rel, e)
