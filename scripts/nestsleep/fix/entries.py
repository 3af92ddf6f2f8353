# SPDX-License-Identifier: GPL-2.0-only
"""prepare_to_wait*() loops whose wait entry is not a local DEFINE_WAIT().

  own wake function  the entry has a wake function of its own
                     (init_waitqueue_func_entry(&e, fn), DEFINE_WAIT_FUNC(e,
                     fn), '.func = fn'), which filters the wakeups (6.1
                     io_cqring_wait()'s io_wake_function()).  Such an entry is
                     never converted: woken_wake_function() would replace the
                     filter.  When the sleeping call runs at the top of the
                     next pass, before the prepare_to_wait*() that sets the
                     state again, and the loop tests its condition after that
                     before it sleeps, the fix is one
                     __set_current_state(TASK_RUNNING) right before the call's
                     statement (upstream 52ea806ad983, "io_uring: finish
                     waiting before flushing overflow entries"), made by
                     cocci/restore_after_loop.cocci (NESTSLEEP_BEFORE)
                     (plan_restore_before_call()).

A wakeup that comes while the restored call runs is not lost: the wake
function has already run (it is what sets TASK_RUNNING), the
prepare_to_wait*() that follows queues the entry again and sets the state,
and the loop's test after it sees the condition the waker made true.  The
same wakeup in the code as it is today is kept only by that same test, since
the prepare_to_wait*() sets the state again over it.
"""

import os
import re

from nestsleep import COCCI_DIR
from nestsleep.fix.ctext import flat, function_body, line_start, match_close, next_nonspace, split_top
from nestsleep.fix.edits import Refuse
from nestsleep.fix.sites import calls_in, loop_of, loop_site
from nestsleep.fix.spatch import add_rule_edits

RESTORE_RULE = os.path.join(COCCI_DIR, "restore_after_loop.cocci")

# the wake functions of an entry that the wait_woken() form may replace
# (include/linux/wait.h: DEFINE_WAIT() is autoremove_wake_function(),
# DECLARE_WAITQUEUE() and init_waitqueue_entry() default_wake_function())
PLAIN_WAKE = ("autoremove_wake_function", "default_wake_function", "woken_wake_function")


def entry_of(fx, ft, o, c):
	"""(prepare_to_wait*() calls, the entry argument as written) of the
	function body m[o:c], or (calls, None) when they differ."""
	preps = calls_in(ft, o, c, sorted(fx.kn.words.prepare))
	ents = set()
	for name, p, po, pc in preps:
		a = [flat(ft.t, ft.m, x, y) for x, y in split_top(ft.m, po + 1, pc)]
		ents.add(a[1] if a and None not in a and len(a) == 3 else None)
	return preps, (ents.pop() if len(ents) == 1 else None)


def own_wake_function(ft, o, c, ent):
	"""The wake function the function body m[o:c] gives the entry ent
	('&x' or '&x.y'), when it is not one of PLAIN_WAKE, else None."""
	if not ent or not ent.startswith("&"):
		return None
	e = re.escape(ent[1:]).replace(r"\.", r"\s*\.\s*").replace(r"\-\>", r"\s*->\s*")
	m = ft.m
	for rx in (r"\binit_waitqueue_func_entry\s*\(\s*&\s*%s\s*,\s*(\w+)\s*\)" % e,
		   r"\bDEFINE_WAIT_FUNC\s*\(\s*%s\s*,\s*(\w+)\s*\)" % e):
		mm = re.search(rx, m[o:c])
		if mm and mm.group(1) not in PLAIN_WAKE:
			return mm.group(1)
	# struct io_wait_queue iowq = { .wq = { .func = io_wake_function, ... } }
	base = ent[1:].split(".")[0].strip()
	mm = re.search(r"\b%s\s*=\s*\{[^;]*?\.func\s*=\s*(\w+)" % re.escape(base), m[o:c])
	if mm and mm.group(1) not in PLAIN_WAKE:
		return mm.group(1)
	return None


def plan_restore_before_call(fx, f, u, preps, ent, wake):
	"""The prepare_to_wait*() loop of f queues the entry ent, which has
	the wake function wake of its own: not converted.  When every
	sleeping call of f runs in the loop before the prepare_to_wait*()
	that sets the state again, and the loop tests its condition after
	that before it sleeps, __set_current_state(TASK_RUNNING) goes right
	before the call's statement (cocci/restore_after_loop.cocci,
	NESTSLEEP_BEFORE); refuses otherwise, with the reason."""
	rel, ft, t, m, o, c = loop_site(fx, f)
	name = preps[0][0]
	loop = loop_of(ft, preps[0][1])
	if loop is None:
		raise Refuse("manual", "the wait entry %s has a wake function of its own (%s()), so it is not "
			     "converted to wait_woken(), and %s() is not in a loop" % (ent, wake, name))
	lstart, bo, bc = loop
	arm = [p for p in preps if bo < p[1] < bc]
	anchors = set()
	for p in f["paths"]:
		at = ft.offset(p["line"], p["col"])
		if not (bo < at < arm[0][1]):
			raise Refuse("manual", "the wait entry %s has a wake function of its own (%s()), so it is "
				     "not converted to wait_woken(); %s() does not run before the %s() that sets the "
				     "state again in its pass: restore TASK_RUNNING by hand" % (ent, wake, p["call"], name))
		anchors.add(top_statement(ft, bo, at, p["call"]))
	retest(fx, ft, (arm[0][3], bc), name, f["call"])
	lines = sorted(set(t.count("\n", 0, s) + 1 for s in anchors))
	add_rule_edits(u, ft, rel, RESTORE_RULE, {"NESTSLEEP_BEFORE": " ".join(map(str, lines))},
		       lambda e: ("restore-before", rel, e.s),
		       "place the restore before the statement on line %s" % ", ".join(map(str, lines)), len(lines))
	u.restore_call = True
	u.reasons.append("the wait entry %s has a wake function of its own, %s(), which filters the wakeups: "
			 "it is not converted to wait_woken().  %s() runs at the top of the next pass, in the state "
			 "the last pass set; TASK_RUNNING is now restored before it.  %s() sets the state again after "
			 "it, and the loop tests its condition before it sleeps, so a wakeup that comes while %s() "
			 "runs is not lost" % (ent, wake, f["call"], name, f["call"]))


def top_statement(ft, bo, at, what):
	"""Start of the statement of the loop body (opened at bo) that holds
	position at; it must start its line, and set no state before at."""
	m, t = ft.m, ft.t
	depth = 0
	k = at - 1
	while k > bo:
		ch = m[k]
		if ch in ")}":
			depth += 1
		elif ch in "({":
			depth -= 1
		elif depth == 0 and ch == ";":
			break
		if depth == 0 and ch == "}" and not re.match(r"\s*else\b", m[k + 1:k + 40]):
			break
		k -= 1
	s = next_nonspace(m, k + 1)
	if t[line_start(t, s):s].strip():
		raise Refuse("manual", "the statement of %s() shares its line with other code" % what)
	if re.search(r"\b(?:prepare_to_wait\w*|set_current_state|__set_current_state)\s*\(", m[s:at]):
		raise Refuse("manual", "the state is set between the start of %s()'s statement and the call"
			     % what)
	return s


def retest(fx, ft, span, name, call):
	"""The loop must test its condition between the prepare_to_wait*()
	that ends at span[0] and the sleep that follows (a schedule*() in the
	loop, or one in a helper of the file it calls): a way out of the loop
	(break, return, goto) before the sleep, or a return before the
	helper's sleep."""
	m = ft.m
	sched = "|".join(re.escape(s) for s in sorted(fx.kn.schedulers))
	s, e = span
	direct = re.search(r"\b(?:%s)\s*\(" % sched, m[s:e])
	stop = s + direct.start() if direct else e
	if re.search(r"\b(?:break|return|goto)\b", m[s:stop]):
		return
	for mm in re.finditer(r"\b(\w+)\s*\(", m[s:stop]):
		body = helper_body(ft, mm.group(1))
		if body is None:
			continue
		hs = re.search(r"\b(?:%s)\s*\(" % sched, m[body[0]:body[1]])
		if hs and re.search(r"\breturn\b", m[body[0]:body[0] + hs.start()]):
			return
	raise Refuse("manual", "the loop sleeps again after %s() without testing its condition in between: "
		     "TASK_RUNNING restored before %s() would not keep a wakeup that comes while it runs"
		     % (name, call))


def helper_body(ft, fn):
	"""(open, close) of the body of the function fn defined in the file,
	or None."""
	m = ft.m
	mm = re.search(r"^[A-Za-z_][^;{}()]*\b%s\s*\(([^;{}]*)\)\s*\{" % re.escape(fn), m, re.M)
	if not mm:
		return None
	bo = mm.end() - 1
	return bo, match_close(m, bo)


def plan_entry_param(fx, f, ft, o, c, ent):
	"""The wait entry ent of f's loop is a parameter of f (6.1
	vsock_connectible_wait_data()).  Converted with the loop only when
	each call is a complete add/remove cycle of an entry its caller
	owns: f is static and never used but called, every caller declares
	the entry with DEFINE_WAIT() and uses it only as that argument, and
	f uses it only in its prepare_to_wait*() and finish_wait() calls.
	Returns {caller: entry name}; refuses otherwise, with the reason."""
	m = ft.m
	func = f["function"]
	params, hs = signature(ft, o)
	idx = [i for i, p in enumerate(params) if re.search(r"\b%s$" % re.escape(ent), p)]
	if len(idx) != 1 or not re.match(r"^(?:const\s+)?(?:struct\s+wait_queue_entry|wait_queue_entry_t)\s*\*\s*\w+$",
					 params[idx[0]]):
		raise Refuse("manual", "the wait entry %s is neither a local variable nor a wait_queue_entry "
			     "parameter" % ent)
	if not re.match(r"static\b", m[hs:o].lstrip()):
		raise Refuse("manual", "the wait entry %s is a parameter of %s(), which is not static: a caller "
			     "in another file may pass any entry; convert by hand" % (ent, func))
	uses = re.compile(r"\b%s\b" % re.escape(ent)).findall(m, o, c)
	calls = [x for x in calls_in(ft, o, c, sorted(fx.kn.words.prepare) + ["finish_wait"])
		 if split_arg(ft, x, 1) == ent]
	if len(uses) != len(calls):
		raise Refuse("manual", "%s() uses the wait entry %s for something else than prepare_to_wait*() "
			     "and finish_wait(); convert by hand" % (func, ent))
	if not any(x[0] == "finish_wait" for x in calls):
		raise Refuse("manual", "%s() does not finish the entry %s its caller passes in (the caller "
			     "does, or nobody): a call is not a whole add/remove cycle; convert by hand"
			     % (func, ent))
	for mm in re.compile(r"\breturn\b").finditer(m, calls[0][1], calls[-1][1]):
		if not re.search(r"\bfinish_wait\s*\([^;]*\)\s*;\s*$", m[calls[0][1]:mm.start()]):
			raise Refuse("manual", "a return in %s() leaves the entry %s its caller passed in on the queue"
				     % (func, ent))
	return callers_of(fx, ft, func, idx[0], hs, (o, c))


def signature(ft, o):
	"""([parameter text], start of the definition) of the function whose
	body opens at o."""
	m = ft.m
	pc = m.rfind(")", 0, o)
	depth, k = 0, pc
	while k >= 0:
		if m[k] == ")":
			depth += 1
		elif m[k] == "(":
			depth -= 1
			if depth == 0:
				break
		k -= 1
	params = [" ".join(m[x:y].split()) for x, y in split_top(m, k + 1, pc)]
	hs = max(m.rfind(";", 0, k), m.rfind("}", 0, k), m.rfind("#", 0, k)) + 1
	if m[hs - 1:hs] == "#":
		hs = m.find("\n", hs) + 1
	return params, hs


def split_arg(ft, call, i):
	"""The i-th argument of call (name, pos, open, close), flattened, or
	None."""
	a = [flat(ft.t, ft.m, x, y) for x, y in split_top(ft.m, call[2] + 1, call[3])]
	return a[i] if len(a) > i else None


def callers_of(fx, ft, func, i, hs, body):
	"""{caller: entry} for the calls of the static function func, whose
	argument i must be &e of a DEFINE_WAIT(e) of the caller, used
	nowhere else in it; refuses any other use of func or of e."""
	m = ft.m
	out = {}
	for mm in re.finditer(r"\b%s\b" % re.escape(func), m):
		at = mm.start()
		if hs <= at < body[0]:
			continue
		nxt = next_nonspace(m, mm.end())
		if m[nxt:nxt + 1] != "(":
			raise Refuse("manual", "%s() is used other than by a call (line %d): its callers cannot all "
				     "be checked" % (func, ft.t.count("\n", 0, at) + 1))
		co, cc = function_body(m, at)
		if co < 0:
			continue    # a prototype
		caller = flat(ft.t, m, *signature_name(m, co))
		arg = split_arg(ft, (func, at, nxt, match_close(m, nxt)), i) or ""
		if not re.match(r"^&\w+$", arg):
			raise Refuse("manual", "%s() passes %s as the wait entry of %s(), not a local DEFINE_WAIT() "
				     "entry" % (caller, arg or "nothing", func))
		e = arg[1:]
		if len(re.findall(r"\bDEFINE_WAIT\s*\(\s*%s\s*\)\s*;" % e, m[co:cc])) != 1:
			raise Refuse("manual", "%s() does not declare the wait entry %s with DEFINE_WAIT()" % (caller, e))
		n_use = len(re.findall(r"\b%s\b" % e, m[co:cc]))
		n_arg = len(re.findall(r"\b%s\s*\(" % re.escape(func), m[co:cc]))
		if n_use != 1 + n_arg or out.get(caller, e) != e:
			raise Refuse("manual", "%s() uses the entry %s for something else than the argument of %s(); "
				     "convert by hand" % (caller, e, func))
		out[caller] = e
	if not out:
		raise Refuse("manual", "%s() has no caller in its file to pass the wait entry" % func)
	return out


def signature_name(m, o):
	"""(start, end) of the name of the function whose body opens at o."""
	pc = m.rfind(")", 0, o)
	depth, k = 0, pc
	while k >= 0:
		depth += {")": 1, "(": -1}.get(m[k], 0)
		if depth == 0 and m[k] == "(":
			break
		k -= 1
	mm = re.search(r"(\w+)\s*$", m[:k])
	return mm.start(1), mm.end(1)
