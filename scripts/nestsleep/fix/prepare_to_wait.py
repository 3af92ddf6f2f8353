# SPDX-License-Identifier: GPL-2.0-only
"""prepare_to_wait*() loops -> cocci/fix_prepare_to_wait.cocci.

add_wait_queue() before the loop, wait_woken() for each schedule(),
remove_wait_queue() for each finish_wait() (md/raid5 ee1aa06ba325), on a
DEFINE_WAIT_FUNC(woken_wake_function) entry.  plan_prepare_to_wait()
checks the loop's shape and picks the sites; rewrite_prepare_to_wait()
runs the rule when the unit is complete."""

import json
import os
import re

from nestsleep import COCCI_DIR
from nestsleep.fix.ctext import flat, line_start, match_close, next_nonspace, open_block, split_top
from nestsleep.fix.edits import Refuse, lower, text_edits
from nestsleep.fix.gotos import check_gotos
from nestsleep.fix.layout import wrap_long
from nestsleep.fix.sites import calls_in, loop_of, loop_site, schedules, statement
from nestsleep.fix.spatch import spatch_text

LABELS = re.compile(r"(?<![\w:])[A-Za-z_]\w*\s*:(?!:)")
PREPARE_RULE = os.path.join(COCCI_DIR, "fix_prepare_to_wait.cocci")

# spatch 1.1.1 edits the statements in a do ... while body, but a pattern
# of the do ... while statement itself stops it with "not supported", and
# the rule needs one to queue the entry before the loop
DO_WHILE = ("the loop is a do ... while loop: spatch 1.1.1 does not match the do ... while statement itself "
	    "(\"not supported\"), which the rule needs to queue the entry before the loop")


def plan_prepare_to_wait(fx, f, u, callers=None):
	"""Check that the prepare_to_wait*() loop of f can be rewritten, and
	record it for cocci/fix_prepare_to_wait.cocci, which makes the edit
	(rewrite_prepare_to_wait(), when the unit is complete).  callers:
	for an entry that is a parameter of f, {caller: its DEFINE_WAIT()
	entry}, checked by entries.plan_entry_param()."""
	rel, ft, t, m, o, c = loop_site(fx, f)
	if f["primitive"] == "prepare_to_wait_event":
		raise Refuse("manual", "prepare_to_wait_event() returns the signal state; convert by hand")
	preps, fins, (name, q, ent, state) = ptw_calls(fx, ft, o, c, callers is not None)
	entry = ent if callers else ent[1:]
	loop, (lstart, bo, bc), add_at, ls0 = ptw_loop(ft, preps, name)
	gotos = check_exits(ft, (o, c), bo, bc, fins, "finish_wait")
	for fn, p, po, pc in fins:
		if p < add_at:
			raise Refuse("manual", "finish_wait() before the wait loop")
	sched = schedules(fx, ft, bo, bc, name)
	u.ptw = {"func": f["function"], "entry": entry, "queue": q, "state": state,
		 "add": "add_wait_queue_exclusive" if name == "prepare_to_wait_exclusive" else "add_wait_queue",
		 "form": "top" if loop else "before", "sched": sched, "prim": name}
	if callers:
		u.ptw.update(param=True, callers=callers)
		names = ["%s()" % x for x in sorted(callers)]
		u.reasons.append("the wait entry %s is a parameter of %s(), which queues and removes it on every "
				 "path; the DEFINE_WAIT() entr%s of %s become%s DEFINE_WAIT_FUNC(..., "
				 "woken_wake_function)" % (entry, f["function"], "ies" if len(names) > 1 else "y",
							   " and ".join([", ".join(names[:-1]), names[-1]] if len(names) > 1
									else names), "" if len(names) > 1 else "s"))
		u.caveats.append("a caller that calls %s() again with the same entry may find WQ_FLAG_WOKEN "
				 "left set by a wakeup that came after the last wait_woken() of the previous call "
				 "(add_wait_queue() and remove_wait_queue() keep it): the first wait_woken() of the "
				 "next call then returns at once, one extra pass of the loop, no wakeup lost"
				 % f["function"])
	u.reasons.append("the %s() loop becomes an add_wait_queue()/wait_woken()/remove_wait_queue() loop: "
			 "the code between the old %s() and schedule() now runs in TASK_RUNNING, and a wakeup "
			 "that comes while it runs is kept by WQ_FLAG_WOKEN" % (name, name))
	if gotos:
		u.reasons.append("every goto out of the loop reaches the %s() after it, now remove_wait_queue(), "
				 "on every path, and no other path reaches that call: the entry is queued once before "
				 "the loop and removed once; the gotos stay" % fins[-1][0])
	fx.wakers(u, rel, f["function"], q, state, bool(re.search(r"\bkthread_should_stop\s*\(",
								 m[min(lstart, ls0):bc])), (min(lstart, ls0), bc), f)
	if name == "prepare_to_wait_exclusive":
		u.caveats.append("exclusive wait: add_wait_queue_exclusive() keeps the tail queueing, but a "
				 "waiter woken exclusively that then leaves on a signal or a timeout may swallow "
				 "the wakeup, where finish_wait() would not pass it on either")
		u.confidence = lower(u.confidence)
	u.caveats.append("finish_wait() becomes remove_wait_queue() on every exit; each exit path removes "
			 "the entry once")


def ptw_calls(fx, ft, o, c, param=False):
	"""(prepare_to_wait*() calls, finish_wait() calls, (name, queue,
	entry, state)) of the function body m[o:c]: every prepare_to_wait*()
	the same call on the same local DEFINE_WAIT() entry (param: on the
	same parameter, entries.plan_entry_param()), every finish_wait() on
	that queue and entry; refuses otherwise."""
	t, m = ft.t, ft.m
	preps = calls_in(ft, o, c, sorted(fx.kn.words.prepare))
	fins = calls_in(ft, o, c, ["finish_wait"])
	sig = None
	for name, p, po, pc in preps:
		a = [flat(t, m, x, y) for x, y in split_top(m, po + 1, pc)]
		if None in a or len(a) != 3:
			raise Refuse("manual", "unexpected arguments of %s()" % name)
		if sig is None:
			sig = (name, a)
		elif (name, a) != sig:
			raise Refuse("manual", "the function calls prepare_to_wait*() with different queues, "
				     "entries or states")
	name, (q, ent, state) = sig
	if param:
		if not fins:
			raise Refuse("manual", "no finish_wait() for the entry")
		if any([flat(t, m, x, y) for x, y in split_top(m, po + 1, pc)] != [q, ent] for fn, p, po, pc in fins):
			raise Refuse("manual", "finish_wait() on another queue or entry")
		return preps, fins, (name, q, ent, state)
	if not ent.startswith("&") or not re.match(r"^[A-Za-z_]\w*$", ent[1:]):
		raise Refuse("manual", "the wait entry %s is not a local variable" % ent)
	entry = ent[1:]
	if len(re.compile(r"\bDEFINE_WAIT\s*\(\s*%s\s*\)\s*;" % re.escape(entry)).findall(m, o, c)) != 1:
		raise Refuse("manual", "the wait entry %s is not declared with DEFINE_WAIT()" % entry)
	for fn, p, po, pc in fins:
		a = [flat(t, m, x, y) for x, y in split_top(m, po + 1, pc)]
		if a != [q, ent]:
			raise Refuse("manual", "finish_wait() on another queue or entry")
	if not fins:
		raise Refuse("manual", "no finish_wait() for the entry")
	return preps, fins, (name, q, ent, state)


def ptw_loop(ft, preps, name):
	"""(loop, (start, body open, body close), where add_wait_queue() goes,
	start of the first prepare_to_wait*() statement): the loop that
	prepare_to_wait*() tops, or that follows it (md/raid5), and a re-arm
	only right after schedule() in it."""
	t, m = ft.t, ft.m
	first = preps[0]
	loop = loop_of(ft, first[1])
	ls0, le0, _ = statement(ft, first[1], first[3], first[0])
	if loop:
		lstart, bo, bc = loop
		if not re.match(r"(for|while)\b", m[lstart:lstart + 5]):
			raise Refuse("manual", DO_WHILE)
		if t[line_start(t, lstart):lstart].strip():
			raise Refuse("manual", "the loop statement shares its line with other code")
		add_at = line_start(t, lstart)
	else:
		# before the loop (md/raid5): the first one adds, a re-arm after
		# schedule() goes away
		nxt = next_nonspace(m, first[3] + 2)
		if not re.match(r"(for|while)\b", m[nxt:nxt + 5]):
			if re.match(r"do\b", m[nxt:nxt + 3]):
				raise Refuse("manual", DO_WHILE)
			raise Refuse("manual", "%s() is neither at the top of a loop nor right before one" % name)
		lstart = nxt
		bo = m.find("{", lstart)
		if bo < 0:
			raise Refuse("manual", "the loop has no braces")
		bc = match_close(m, bo)
		add_at = ls0
	for pname, p, po, pc in preps[1:]:
		if not (bo < p < bc):
			raise Refuse("manual", "%s() outside the wait loop" % pname)
		statement(ft, p, pc, pname)
		# a re-arm must follow a schedule()
		before = m[open_block(m, p) + 1:p]
		if not re.search(r"\bschedule(?:_timeout)?\s*\([^;]*\)\s*;\s*$", before):
			raise Refuse("manual", "%s() in the middle of the loop, not right after schedule()" % pname)
	return loop, (lstart, bo, bc), add_at, ls0


def check_exits(ft, body, bo, bc, fins, what):
	"""Inside the loop, a removal must be followed by return: a break
	would reach the removal after the loop a second time.  A goto out of
	the loop must reach the removal after it (gotos.py).  True when a
	goto leaves the loop."""
	m = ft.m
	for fn, p, po, pc in fins:
		if bo < p < bc:
			after = m[pc + 1:]
			mm = re.match(r"\s*;\s*(\w+)", after)
			if not mm or mm.group(1) != "return":
				raise Refuse("manual", "%s() inside the loop is not followed by return; a second "
					     "removal would corrupt the queue" % what)
	outside = [x for x in fins if not (bo < x[1] < bc)]
	if len(outside) != 1 or outside[0][1] < bc:
		raise Refuse("manual", "expected one %s() after the loop" % what)
	gotos = check_gotos(ft, body[0], body[1], bo, bc, outside[0])
	# the removal must come right after the loop (labels and
	# __set_current_state(TASK_RUNNING) allowed)
	between = LABELS.sub("", m[bc + 1:outside[0][1]])
	if between.strip():
		rest = re.sub(r"__set_current_state\s*\(\s*TASK_RUNNING\s*\)\s*;|set_current_state\s*\(\s*"
			      r"TASK_RUNNING\s*\)\s*;", "", between)
		if rest.strip() and not re.match(r"^\s*(?:while\s*\([^;]*\)\s*;)?\s*$", rest):
			raise Refuse("manual", "code between the end of the loop and %s()" % what)
	return gotos


def rewrite_prepare_to_wait(fx, u):
	"""Run cocci/fix_prepare_to_wait.cocci on the unit's loop."""
	rel = u.rel
	ft = fx.text(rel)
	spec = dict((k, v) for k, v in u.ptw.items() if k != "prim")
	new = spatch_text(ft.t, os.path.basename(rel), PREPARE_RULE, {"NESTSLEEP_SITES": json.dumps(spec)})
	if new is None or new == ft.t:
		raise Refuse("manual", "%s could not rewrite the %s() loop in this statement context"
			     % (os.path.basename(PREPARE_RULE), u.ptw["prim"]))
	for e in text_edits(ft.t, wrap_long(ft.t, new)):
		u.add(rel, e)
