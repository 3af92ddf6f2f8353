# SPDX-License-Identifier: GPL-2.0-only
"""A prepare_to_wait() loop that leaves its wait entry queued.

A loop calls prepare_to_wait*(Q, &w, state) and leaves by its break (or
its own test) with w still on Q and the task state still set, and no
statement after the loop in w's scope names w: no finish_wait(), no
remove_wait_queue().  A call after the loop that may sleep then sleeps in
that state, and w, a local, stays queued on Q after its scope ends: a
wakeup of Q walks a dead stack entry.  Restoring TASK_RUNNING alone (the
restore rule, restore.py) would leave w queued, so this rule runs first
on every prepare_to_wait() finding whose state outlives its loop.

The fix is finish_wait(Q, &w) right after the loop, in w's scope
(cocci/finish_after_loop.cocci): finish_wait() sets TASK_RUNNING and
takes w off Q if a wakeup has not already (kernel/sched/wait.c
finish_wait()), which is how ___wait_var_event() and ___wait_event()
end their loops (include/linux/wait_bit.h, include/linux/wait.h).  The
loop and its wakeups stay as they are: a wakeup that comes before the
finish_wait() finds the task on Q as today, and one after it is not for
this wait.  finish_wait() on an entry already taken off (a return that
finished it) only sets the state again.

Refused ("manual"), as this rule cannot prove the fix:
  - an entry whose wake function is its own (DEFINE_WAIT_FUNC(),
    init_waitqueue_func_entry(), an assignment to .func): an entry with
    its own wake function is never converted;
  - an entry set up any other way than DEFINE_WAIT(), DEFINE_WAIT_BIT(),
    init_wait(), init_wait_entry() or init_wait_var_entry();
  - a return or a goto out of the loop without a finish_wait() of the
    entry right before it (the finish_wait() after the loop is skipped);
  - a queue expression that calls something other than a hashed-queue
    lookup, or that the loop may change;
  - a do ... while loop that ends its block (spatch 1.1.1 matches no
    do ... while loop, and there is no statement after it to anchor on).
"""

import os

from nestsleep import COCCI_DIR
from nestsleep.analysis import cfacts
from nestsleep.fix.edits import Refuse
from nestsleep.fix.restore import after_loop_site
from nestsleep.fix.spatch import add_rule_edits

FINISH_RULE = os.path.join(COCCI_DIR, "finish_after_loop.cocci")

PREPARES = ("prepare_to_wait", "prepare_to_wait_event", "prepare_to_wait_exclusive")
# the entries whose wake function is the default: autoremove_wake_function()
# (include/linux/wait.h DEFINE_WAIT(), init_wait(); kernel/sched/wait.c
# init_wait_entry()), wake_bit_function() (include/linux/wait_bit.h
# DEFINE_WAIT_BIT()) and var_wake_function() (kernel/sched/wait_bit.c
# init_wait_var_entry())
DEFAULT_DEFINES = ("DEFINE_WAIT", "DEFINE_WAIT_BIT")
DEFAULT_INITS = ("init_wait", "init_wait_entry", "init_wait_var_entry")
OWN_FUNC = ("DEFINE_WAIT_FUNC", "init_waitqueue_func_entry")
ENTRY_TYPES = ("wait_bit_queue_entry", "wait_queue_entry", "wait_queue_entry_t")
# queue lookups that only hash their argument (kernel/sched/wait_bit.c)
PURE_QUEUES = ("__var_waitqueue", "bit_waitqueue")


def plan_finish_after_loop(fx, f, u):
	"""Plan finish_wait(Q, E) after the loop of finding f into unit u and
	return "finish_wait"; None when a statement after the loop names the
	entry (the wait is finished there: the restore rule's case)."""
	if f["shape"] != "prepare_to_wait" or f["primitive"] not in PREPARES:
		return None
	rel, ft, toks, loop = after_loop_site(fx, f)
	lo = next(j for j, t in enumerate(toks) if t[2] == loop[0] and t[1] in ("for", "while", "do"))
	hi = max(j for j, t in enumerate(toks) if t[2] <= loop[1])
	call = next((j for j in range(lo, hi) if toks[j][2] == f["line"] and toks[j][1] == f["primitive"]
		     and toks[j + 1][1] == "("), None)
	if call is None:
		raise Refuse("manual", "cannot find %s() on line %d" % (f["primitive"], f["line"]))
	args = cfacts.split_args(toks, call + 1, cfacts._match_close(toks, call + 1, "(", ")"))
	if len(args) != 3:
		raise Refuse("manual", "cannot read the queue and entry of %s() on line %d" % (f["primitive"], f["line"]))
	queue, entry = cfacts._text(args[0]), cfacts._text(args[1])
	w = entry_name(args[1])
	if w is None:
		raise Refuse("manual", "the wait entry %s is not a local of the function" % entry)
	scope, problem = entry_scope(toks, lo, w, entry)
	if any(t[0] == "id" and t[1] == w for t in toks[hi + 1:scope]):
		return None
	if problem:
		raise Refuse("manual", problem)
	check_exits(toks, lo, hi, w, loop[0])
	check_queue(toks, lo, hi, args[0], queue, loop[0])
	env = place(toks, lo, hi, scope, loop[0])
	env["NESTSLEEP_PTW"] = str(f["line"])
	add_rule_edits(u, ft, rel, FINISH_RULE, env, lambda e: ("finish_wait", rel, loop[0]),
		       "place finish_wait() after the wait loop on line %d" % loop[0])
	gone = "after the function returns" if scope == fn_body(toks, lo)[1] else "after its block ends"
	u.reasons.append("the wait loop on line %d ends with the entry %s still queued on %s and the task state "
			 "still set, and nothing after it finishes the wait: %s() runs in that state, and the "
			 "entry stays queued on %s %s, where a later wakeup of the queue reads it out of scope; "
			 "finish_wait(%s, %s) now runs as soon as the loop ends, as "
			 "___wait_event() and ___wait_var_event() end theirs: it sets TASK_RUNNING and takes the "
			 "entry off the queue; the loop and its wakeups are unchanged"
			 % (loop[0], entry, queue, f["call"], queue, gone, queue, entry))
	return "finish_wait"


def entry_name(arg):
	"""w of an entry argument &w or &w.wq_entry (a wait_bit_queue_entry),
	else None."""
	v = [t[1] for t in arg]
	if len(v) == 2 and v[0] == "&" and arg[1][0] == "id":
		return v[1]
	if len(v) == 4 and v[0] == "&" and v[2] == "." and v[3] == "wq_entry" and arg[1][0] == "id":
		return v[1]
	return None


def enclosing(toks, i):
	"""Index of the '{' of the innermost block around toks[i], or -1."""
	depth = 0
	for j in range(i - 1, -1, -1):
		v = toks[j][1]
		if toks[j][0] != "op":
			continue
		if v == "}":
			depth += 1
		elif v == "{":
			if depth == 0:
				return j
			depth -= 1
	return -1


def fn_body(toks, i):
	"""(open, close): the indices of the braces of the function body
	around toks[i]."""
	o = enclosing(toks, i)
	while o > 0 and enclosing(toks, o) >= 0:
		o = enclosing(toks, o)
	if o < 0:
		return 0, len(toks) - 1
	return o, cfacts._match_close(toks, o, "{", "}")


def entry_scope(toks, lo, w, entry):
	"""(index of the brace that ends the scope of the entry w declared
	before toks[lo], why the rule cannot take the entry or None): an
	entry with its own wake function, or one set up in a way this rule
	does not know.  The scope is the function's when the declaration is
	not found."""
	body, end = fn_body(toks, lo)
	decl, setup = None, None
	for j in range(body, lo):
		v = toks[j][1]
		if toks[j][0] != "id" or j + 2 >= lo:
			continue
		if v in DEFAULT_DEFINES + OWN_FUNC and toks[j + 1][1] == "(" and toks[j + 2][1] == w:
			decl, setup = j, v
		elif v in ENTRY_TYPES and toks[j + 1][1] == w and toks[j + 2][1] == ";":
			decl = j
		elif v in DEFAULT_INITS + OWN_FUNC and toks[j + 1][1] == "(" and toks[j + 2][1] == "&" \
				and toks[j + 3][1] == w:
			setup = v
	own = [j for j in range(body, end) if toks[j][1] == w and toks[j + 1][1] == "."
	       and "func" in (toks[j + 2][1], toks[j + 4][1] if j + 4 < end else "")]
	if decl is None:
		return end, "cannot find the declaration of the wait entry %s in the function" % entry
	scope = cfacts._match_close(toks, enclosing(toks, decl), "{", "}")
	if setup in OWN_FUNC or own:
		return scope, ("the wait entry %s has its own wake function: an entry with its own wake "
			       "function is never converted" % entry)
	if setup is None:
		return scope, "cannot tell how the wait entry %s is set up before the loop" % entry
	return scope, None


def finished_before(toks, j, w):
	"""Whether the statement before toks[j] is finish_wait(..., &w...)."""
	if j < 3 or toks[j - 1][1] != ";" or toks[j - 2][1] != ")":
		return False
	lp = cfacts._match_open(toks, j - 2, "(", ")")
	return lp > 0 and toks[lp - 1][1] == "finish_wait" and any(t[1] == w for t in toks[lp:j - 2])


def check_exits(toks, lo, hi, w, line):
	"""Every return and every goto out of the loop toks[lo..hi] finishes
	the wait right before it: the finish_wait() after the loop covers
	only its breaks."""
	labels = dict((toks[j][1], j) for j in range(1, len(toks) - 1) if toks[j][0] == "id"
		      and toks[j + 1][1] == ":" and toks[j - 1][1] in (";", "{", "}"))
	for j in range(lo, hi + 1):
		v = toks[j][1]
		if toks[j][0] != "id" or v not in ("return", "goto") or finished_before(toks, j, w):
			continue
		if v == "goto" and lo <= labels.get(toks[j + 1][1], -1) <= hi:
			continue
		raise Refuse("manual", "a %s leaves the wait loop on line %d with the entry still queued and "
			     "skips a finish_wait() after the loop: finish the wait on its way out by hand"
			     % (v, line))


def check_queue(toks, lo, hi, arg, queue, line):
	"""The queue expression reads the same queue again after the loop: it
	calls only hashed-queue lookups, and the loop changes none of its
	names."""
	for i, t in enumerate(arg):
		if t[0] == "id" and i + 1 < len(arg) and arg[i + 1][1] == "(" and t[1] not in PURE_QUEUES:
			raise Refuse("manual", "the queue %s of the wait loop on line %d is read through %s(): "
				     "finish the wait by hand" % (queue, line, t[1]))
		if t[0] == "op" and t[1] in ("++", "--") or t[1].endswith("=") and t[1] not in ("==", "!=", "<=", ">="):
			raise Refuse("manual", "the queue %s of the wait loop on line %d changes a value" % (queue, line))
	names = set(t[1] for i, t in enumerate(arg) if t[0] == "id" and (i == 0 or arg[i - 1][1] not in ("->", ".")))
	changed = cfacts._assigned(toks, lo, hi + 1, names)
	if changed:
		raise Refuse("manual", "the wait loop on line %d changes %s, which its queue %s is read from"
			     % (line, ", ".join(sorted(changed)), queue))


def place(toks, lo, hi, scope, line):
	"""The rule's env for the loop toks[lo..hi]: its keyword's line, or for
	a do ... while loop the line of the statement after it."""
	if toks[lo][1] != "do":
		return {"NESTSLEEP_LOOPS": str(line)}
	if hi + 1 >= scope or toks[hi + 1][1] == "}":
		raise Refuse("manual", "the do ... while loop on line %d ends its block, and spatch matches no "
			     "do ... while loop: put finish_wait() after it by hand" % line)
	return {"NESTSLEEP_NEXT": str(toks[hi + 1][2])}
