# SPDX-License-Identifier: GPL-2.0-only
"""wait_event*() -> cocci/fix_wait_event.cocci.

DEFINE_WAIT_FUNC + add_wait_queue + a while (!cond) loop around
wait_woken(), with the variant's signal and timeout rules (virtio_balloon
3d2a3774c1b0, vfio 41be3e261817, ceph 5c341ee32881).  plan_wait_event()
checks the variant (variant()) and where its value goes (context()), and
records the site; rewrite_wait_events() runs the rule on the unit's sites
when the unit is complete, with the names it may use.

The text rewrite plan_wait_event_text() is kept only for the two
conditions the rule cannot take: a statement expression, and an
assignment in the condition.  The variants with no wait_woken() form are
report-only (REPORT_ONLY)."""

import json
import os
import re

from nestsleep import COCCI_DIR
from nestsleep.fix.ctext import (C_KEYWORDS, cols, flat, function_body, idents, indent_at, is_decl_line, line_end,
				 line_start, mask, match_close, next_nonspace, open_block, pick_name, prev_nonspace,
				 split_top)
from nestsleep.fix.edits import Edit, Refuse, lower, text_edits
from nestsleep.fix.layout import MAX_COLS, if_bodies, wrap_call, wrap_cond, wrap_long
from nestsleep.fix.sites import taken_names
from nestsleep.fix.spatch import spatch_text

WAIT_EVENT_RULE = os.path.join(COCCI_DIR, "fix_wait_event.cocci")
REPORT_ONLY = {
	"locked": "the condition runs with %s held, so a sleep there is a sleep in atomic context, and "
		  "add_wait_queue() would self-deadlock on the held lock; wait_woken() does not fix this: "
		  "move the sleeping call out from under the lock by hand",
	"lock": "the condition runs under the spinlock passed to the macro (%s), with interrupts off: a "
		"sleep there is a sleep in atomic context, which wait_woken() does not fix",
	"ktime": "the hrtimeout variants take a ktime_t and sleep on an hrtimer; wait_woken() takes "
		 "jiffies, so there is no exact wait_woken() form",
	"swait": "swait queues have no wait-queue entry with a wake function, so woken_wake_function() "
		 "would never run",
	"rcuwait": "an rcuwait has no wait queue: the waker wakes the task directly, so woken_wake_function() "
		   "would never run",
	"wait_var": "wait_var_event*() waits on a hashed bit wait queue keyed by the variable; its wakers "
		    "call wake_up_var(), whose wake function filters by key, which woken_wake_function() does not",
	"exclusive": "an exclusive waiter that leaves on a signal must pass on a wakeup it consumed: "
		     "prepare_to_wait_event() dequeues it under the queue lock before the condition is "
		     "tested again, and wait_woken() has no such step, so the wakeup could be lost to the "
		     "other exclusive waiters",
	"io": "io_wait_event() accounts the sleep as iowait through io_schedule(); io_schedule_prepare() and "
	      "io_schedule_finish() are not exported to modules in 6.1, so wait_woken() would lose the accounting",
}


def pointer_to(expr):
	"""&expr for a wait_queue_head_t lvalue as the macros take it."""
	e = expr.strip()
	mm = re.match(r"^\*\s*([A-Za-z_][\w]*(?:(?:->|\.)[A-Za-z_]\w*)*)$", e)
	if mm:
		return mm.group(1)
	if re.match(r"^[A-Za-z_][\w]*(?:\s*(?:->|\.)\s*[A-Za-z_]\w*|\[[^\]]*\])*$", e):
		return "&" + re.sub(r"\s+", "", e)
	return "&(%s)" % e


def signal_caveat(sig, need_val):
	"""The caveat on the signal test of a rewritten wait_event*(): its
	-ERESTARTSYS only where the macro's value was used."""
	if need_val:
		return "signals: %s is tested after the condition, as ___wait_event() does, and gives -ERESTARTSYS" % sig
	return ("signals: %s is tested after the condition, as ___wait_event() does, and ends the wait; the "
		"macro's -ERESTARTSYS was not used here, and nothing takes its place" % sig)


def split_cond(cond):
	"""(loop_decls, pre_statements, test) for a wait condition, so that the
	rewritten loop passes checkpatch: a statement-expression condition
	'({ decls; stmts; value; })' is unpacked into the loop body, and an
	assignment that is evaluated first, '(x = f()) != 0 || ...', is hoisted
	into a statement of its own.  Both keep the order of evaluation."""
	c = cond.strip()
	m = mask(c)
	if c.startswith("({") and c.endswith("})") and match_close(m, 0) == len(c) - 1:
		spans = split_top(m, 2, len(c) - 2, ";")
		parts = [c[a:b].strip() for a, b in spans[:-1]]
		tail = c[spans[-1][0]:spans[-1][1]].strip()
		if tail or not parts or any("{" in mask(p) for p in parts):
			return None
		value = parts[-1]
		vm = mask(value)
		while value.startswith("(") and match_close(vm, 0) == len(value) - 1:
			value = value[1:-1].strip()
			vm = mask(value)
		decls, stmts = [], []
		for p in parts[:-1]:
			if not p:
				continue
			if is_decl_line(p + ";") and not stmts:
				decls.append(p + ";")
			else:
				stmts.append(p + ";")
		d2, s2, test = split_cond(value) or ([], [], value)
		return decls + d2, stmts + s2, test
	if c.startswith("("):
		e = match_close(m, 0)
		if e > 0:
			a = re.match(r"^\(\s*([A-Za-z_][\w]*(?:\s*(?:->|\.)\s*[A-Za-z_]\w*)*)\s*=(?!=)\s*(.*)\)$", c[:e + 1],
				     re.S)
			if a and "=" not in mask(a.group(2)).replace("==", "").replace("!=", "").replace("<=", "") \
					.replace(">=", ""):
				lv, rhs = a.group(1), a.group(2).strip()
				rest = c[e + 1:].strip()
				test = lv + (" " + rest if rest else "")
				return [], ["%s = %s;" % (lv, rhs)], test
	return [], [], c


def plain_names(decls, pre, cond, taken):
	"""A statement expression's locals without the leading underscores
	that a macro argument needs against shadowing ('int __count' in
	wiphy_unregister()'s wait_event()): in the loop body they are plain
	locals, so '__count' becomes 'count' where that name is free in the
	function."""
	ren = {}
	for d in decls:
		for m in re.finditer(r"\b(_+([A-Za-z]\w*))\s*(?=[;=,\[])", d):
			new = m.group(2)
			if new not in taken and new not in ren.values() and new not in C_KEYWORDS:
				ren[m.group(1)] = new
	if not ren:
		return decls, pre, cond
	sub = lambda t: re.sub(r"\b(%s)\b" % "|".join(map(re.escape, ren)), lambda m: ren[m.group(1)], t)
	return [sub(d) for d in decls], [x if x is None else sub(x) for x in pre], sub(cond)


def pre_statement(ind, x):
	"""A statement unpacked from a ({ }) condition, as checkpatch wants it:
	'if (c) s;' on two lines, long lines wrapped."""
	mm = re.match(r"^if\s*\(", x)
	if mm:
		xm = mask(x)
		e = match_close(xm, mm.end() - 1)
		body = x[e + 1:].strip() if e > 0 else ""
		if body and not body.startswith("{") and "else" not in idents(xm[e + 1:]):
			return wrap_cond(ind, x[mm.end():e].strip()) + [ind + "\t" + body]
	a = re.match(r"^([A-Za-z_][\w.>-]*\s*=)(?!=)\s*(.*);$", x, re.S)
	if a and cols(ind + x) > MAX_COLS:
		return wrap_cond(ind, a.group(2), pre=a.group(1) + " ", post=";")
	return [ind + x]


WHAT = "%s() becomes an add_wait_queue()/wait_woken()/remove_wait_queue() loop: the condition " \
       "now runs in TASK_RUNNING, so a sleep in it no longer resets the wait's state"
TIMEOUT_CAVEAT = "timeout: the remaining jiffies are threaded through wait_woken(); the result " \
		 "is 0 if the time ran out with the condition false, at least 1 if it is true"


def plan_wait_event(fx, f, u):
	"""Check that the wait_event*() site of f can be rewritten, and
	record it for cocci/fix_wait_event.cocci, which makes the edit
	(rewrite_wait_events(), when the unit is complete); a condition the
	rule cannot take goes to plan_wait_event_text()."""
	prim = f["primitive"]
	v = variant(fx, f, prim)
	rel, ft, pos, pc, args = macro_call(fx, f, prim)
	if poll_method(ft, pos):
		raise Refuse("report-only", "the wait is inside a ->poll() method, which must not block at "
			     "all: poll_wait() and a mask are the fix, not wait_woken()")
	ctx = context(ft, pos, pc, prim, v)
	state, sig = wait_state(fx, v, args)
	cmd = cmd_args(v, prim, args)
	timeout = v["timeout"] == "jiffies"
	if cmd and (sig or timeout or len(args) != 4):
		raise Refuse("manual", "%s() has a cmd and a signal test or timeout; only wait_event_cmd() "
			     "is rewritten" % prim)
	need_val = ctx["use"] != "discard" and v["value"] != "void"
	form = "cmd" if cmd else ("signal_" if sig else "") + ("timeout" if timeout else "")
	form = form.rstrip("_") or ("signal" if sig else "plain")
	if args[v["cond"]].startswith("({") or re.search(r"[^=!<>+\-*/%&|^]=[^=]", mask(args[v["cond"]])):
		return plan_wait_event_text(fx, f, u, v, prim)
	if u.text_sites:
		raise Refuse("manual", "the function has waits for both the semantic patch and the text "
			     "rewrite")
	if ctx["use"] == "if" and ctx["if_expr"].endswith("< 0") and not sig:
		raise Refuse("report-only", "the value of %s() is never negative" % prim)
	key = "%d:%d" % (f["line"], f["col"])
	if key not in u.sites:
		body, (o, c) = taken_names(ft, pos)
		u.taken |= body | param_names(ft, o) | set(x for a in args for x in idents(a))
		u.sites[key] = {"form": form, "queue": pointer_to(args[0]), "state": state, "test": sig,
				"exclusive": bool(v["exclusive"]), "value": need_val, "use": ctx["use"],
				"lvalue": ctx.get("lvalue"), "args": " ".join(args), "prim": prim, "pos": pos,
				"body": bool(ctx.get("body"))}
	if sig:
		u.includes.add("linux/sched/signal.h")
	u.reasons.append(WHAT % prim)
	if v["exclusive"]:
		u.caveats.append("exclusive wait: add_wait_queue_exclusive() keeps the tail queueing; the "
				 "wait has no signal test, so a wakeup it consumes is never dropped")
	if cmd:
		u.caveats.append("%s: cmd1 and cmd2 now run in TASK_RUNNING around wait_woken()" % prim)
	fx.wakers(u, rel, f["function"], pointer_to(args[0]), state,
		  "kthread_should_stop()" in args[v["cond"]], (ctx["stmt"], ctx["repl_e"]), f)
	if sig:
		u.caveats.append(signal_caveat(sig, need_val))
	if timeout:
		u.caveats.append(TIMEOUT_CAVEAT)


def variant(fx, f, prim):
	"""The wait.h variant of the macro prim (the tree's waiter table), when
	it has a wait_woken() form; refuses one that has none (report-only,
	REPORT_ONLY), or whose sleeping call is its cmd under its lock."""
	v = fx.table.get(prim)
	if v is None:
		raise Refuse("report-only", "%s() is a wait macro defined outside wait.h; rewrite the "
			     "macro or its users by hand" % prim)
	if v["family"] in ("swait", "rcuwait", "wait_var"):
		raise Refuse("report-only", REPORT_ONLY[v["family"]])
	if v["locked"] == "wq.lock":
		raise Refuse("report-only", REPORT_ONLY["locked"] % "wq.lock")
	if v["locked"]:
		if f.get("role") == "cmd":
			raise Refuse("manual", "the sleeping call is in the cmd of %s(), which runs with the lock "
				     "dropped but the task state set; the macro cannot be replaced by wait_woken() "
				     "without re-taking the lock by hand" % prim)
		raise Refuse("report-only", REPORT_ONLY["lock"] % "lock")
	if v["timeout"] == "ktime":
		raise Refuse("report-only", REPORT_ONLY["ktime"])
	if prim == "io_wait_event":
		raise Refuse("report-only", REPORT_ONLY["io"])
	_, sig = fx.kn.states.get(v["state"], (None, None))
	if v["exclusive"] and (sig or v["state"] == "state"):
		raise Refuse("report-only", REPORT_ONLY["exclusive"])
	return v


def wait_state(fx, v, args):
	"""(task state, signal test or None) of a call of the variant v with
	args: the variant's own, or the state argument of the _state ones."""
	state, sig = fx.kn.states.get(v["state"], (None, None))
	if v["state"] == "state":
		state = args[2]
		sig = "signal_pending_state(%s, current)" % state
	if state is None:
		raise Refuse("manual", "unknown task state %s" % v["state"])
	return state, sig


def cmd_args(v, prim, args):
	"""The cmd1 and cmd2 arguments of a call of the variant v, or []."""
	cmd = [args[k] for k in v["cmd"]]
	if prim.endswith("_cmd") and len(args) >= 4:
		cmd = [args[2], args[3]]
	return cmd


def plan_wait_event_text(fx, f, u, v, prim):
	"""The text rewrite of a wait_event*() site, kept only for the two
	conditions fix_wait_event.cocci cannot take: a statement expression
	'({ ... })', which spatch 1.1.1 does not match as a macro argument
	(wiphy_unregister(), wpan_phy_unregister()), and an assignment in
	the condition, which the SmPL form would leave in an if condition
	(checkpatch: "do not use assignment in if condition") or inside
	'while (!(...))'; here it is hoisted into a statement of its own
	(rpmsg_send_offchannel_raw(), drbd's _drbd_request_state()).
	Everything else goes through the semantic patch."""
	rel, ft, pos, pc, args = macro_call(fx, f, prim)
	ctx = context(ft, pos, pc, prim, v)
	if ctx.get("body"):
		raise Refuse("manual", "the wait is the unbraced body of an if/else/loop and its condition "
			     "needs the text rewrite: add braces first")
	if u.sites:
		raise Refuse("manual", "the function has waits for both the semantic patch and the text "
			     "rewrite")
	u.text_sites += 1
	taken, _ = taken_names(ft, pos)
	taken |= set(x for a in args for x in idents(a))
	ind = indent_at(ft.t, ctx["stmt"])
	state, sig = wait_state(fx, v, args)
	w = dict(state=state, sig=sig, wq=pointer_to(args[0]), cmd=cmd_args(v, prim, args),
		 exclusive=v["exclusive"])
	w.update(text_names(taken, v, args, ctx))
	lines = text_loop(ind, w, ctx, args[v["cond"]], taken)
	place_text(ft, u, rel, ctx, ind, lines, w)
	fx.include(ft, u, rel, "linux/wait.h")
	if sig:
		fx.include(ft, u, rel, "linux/sched/signal.h")
	u.reasons.append(WHAT % prim)
	if v["exclusive"]:
		u.caveats.append("exclusive wait: add_wait_queue_exclusive() keeps the tail queueing, but a "
				 "waiter woken exclusively that then leaves on a signal may swallow the wakeup, "
				 "where prepare_to_wait_event() would pass it on")
		u.confidence = lower(u.confidence)
	if w["cmd"]:
		u.caveats.append("%s: cmd1 and cmd2 now run in TASK_RUNNING around wait_woken()" % prim)
	fx.wakers(u, rel, f["function"], w["wq"], state, "kthread_should_stop()" in args[v["cond"]],
		  (ctx["stmt"], ctx["repl_e"]), f)
	if sig:
		u.caveats.append(signal_caveat(sig, w["need_val"]))
	if w["timeout"] is not None:
		u.caveats.append(TIMEOUT_CAVEAT)


def text_names(taken, v, args, ctx):
	"""The names of the text rewrite, free in the function (taken): the
	wait entry, the variable that carries the value (the caller's own
	when it assigns the value to a plain local), and their
	declarations."""
	wname = pick_name(taken, ["wait", "wait_entry", "woken_wait"])
	timeout = args[-1] if v["timeout"] == "jiffies" else None
	need_val = ctx["use"] != "discard" and v["value"] != "void"
	decls = ["DEFINE_WAIT_FUNC(%s, woken_wake_function);" % wname]
	res = None
	if timeout is not None:
		res = pick_name(taken, ["timeout", "remaining", "tmo"])
		decls.append("long %s;" % res)
	elif need_val:
		lv = ctx.get("lvalue")
		if lv and re.match(r"^[A-Za-z_]\w*$", lv) and lv not in idents(" ".join(args)):
			res = lv
		else:
			res = pick_name(taken, ["ret", "err", "wait_ret"])
			decls.append("int %s;" % res)
	return {"wname": wname, "timeout": timeout, "need_val": need_val, "decls": decls, "res": res}


def text_loop(ind, w, ctx, cond, taken):
	"""The lines that replace the macro at indent ind: the loop, after
	wait.h's ___wait_event() and ___wait_cond_timeout(), and what the
	macro's value went to."""
	i1 = ind + "\t"
	i2 = i1 + "\t"
	wname, res, sig, cmd = w["wname"], w["res"], w["sig"], w["cmd"]
	L = []
	if w["timeout"] is not None:
		L.append("%s%s = %s;" % (ind, res, w["timeout"]))
	elif w["need_val"]:
		L.append("%s%s = 0;" % (ind, res))
	add = "add_wait_queue_exclusive" if w["exclusive"] else "add_wait_queue"
	L += wrap_call(ind, add, [w["wq"], "&" + wname])
	L.append("%sfor (;;) {" % ind)
	L += text_test(i1, w, cond, taken)
	if sig:
		if res is not None:
			L += ["%sif (%s) {" % (i1, sig), "%s%s = -ERESTARTSYS;" % (i2, res), "%sbreak;" % i2,
			      "%s}" % i1]
		else:
			L += ["%sif (%s)" % (i1, sig), "%sbreak;" % i2]
	if cmd:
		L += ["%s%s;" % (i1, cmd[0])]
	if w["timeout"] is not None:
		L += wrap_call(i1, "%s = wait_woken" % res, ["&" + wname, w["state"], res])
	else:
		L += wrap_call(i1, "wait_woken", ["&" + wname, w["state"], "MAX_SCHEDULE_TIMEOUT"])
	if len(cmd) > 1:
		L += ["%s%s;" % (i1, cmd[1])]
	L.append("%s}" % ind)
	L += wrap_call(ind, "remove_wait_queue", [w["wq"], "&" + wname])
	use = ctx["use"]
	if use == "assign" and res != ctx["lvalue"]:
		L.append("%s%s = %s;" % (ind, ctx["lvalue"], res))
	elif use == "return":
		L.append("%sreturn %s;" % (ind, res))
	return L


def text_test(i1, w, cond, taken):
	"""The loop's test of cond at indent i1, as checkpatch wants it: a
	statement expression unpacked into the loop body (split_cond()), an
	assignment evaluated into a bool first, the timeout's own exit."""
	i2 = i1 + "\t"
	res = w["res"]
	sc = split_cond(cond)
	if sc is None:
		raise Refuse("manual", "the condition is a statement expression that cannot be unpacked")
	ldecls, pre, cond = plain_names(*sc, taken)
	if re.search(r"[^=!<>+\-*/%&|^]=[^=]", mask(cond)):
		# checkpatch forbids an assignment in an if condition: evaluate
		# the condition, in the same order, into a bool first
		done = pick_name(taken, ["done", "cond_met", "woken_cond"])
		w["decls"].append("bool %s;" % done)
		pre = pre + [None]
		pre_cond = cond
		cond = done
	L = []
	if ldecls:
		L += ["%s%s" % (i1, d) for d in ldecls] + [""]
	for x in pre:
		if x is None:
			L += wrap_cond(i1, pre_cond, pre="%s = " % cond, post=";")
		else:
			L += pre_statement(i1, x)
	if w["timeout"] is not None:
		L += wrap_cond(i1, cond, post=") {")
		L += ["%sif (!%s)" % (i2, res), "%s\t%s = 1;" % (i2, res), "%sbreak;" % i2, "%s}" % i1]
		L += ["%sif (!%s)" % (i1, res), "%sbreak;" % i2]
	else:
		L += wrap_cond(i1, cond)
		L.append("%sbreak;" % i2)
	return L


def place_text(ft, u, rel, ctx, ind, lines, w):
	"""The text rewrite's lines in place of the macro's statement, or
	before the if whose condition it was (which then tests the value);
	the declarations at the top of the block."""
	text = "\n".join(lines) + "\n"
	if ctx["use"] == "if":
		u.add(rel, Edit(ctx["ins"], ctx["ins"], text))
		u.add(rel, Edit(ctx["repl_s"], ctx["repl_e"], ctx["if_expr"] % w["res"]))
		if_body(ft, u, rel, ctx["repl_e"], ind)
	else:
		u.add(rel, Edit(ctx["repl_s"], ctx["repl_e"], text))
	block_decls(ft, u, rel, ctx["stmt"], w["decls"], w["res"])


def macro_call(fx, f, prim):
	"""(file, FileText, offset, closing parenthesis, argument texts)
	of the wait macro call f reports."""
	rel = f["file"]
	ft = fx.text(rel)
	t, m = ft.t, ft.m
	pos = ft.offset(f["line"], f["col"])
	if not t.startswith(prim, pos):
		raise Refuse("manual", "the source at the reported position is not %s()" % prim)
	po = next_nonspace(m, pos + len(prim))
	if po >= len(m) or m[po] != "(":
		raise Refuse("manual", "cannot find the arguments of %s()" % prim)
	pc = match_close(m, po)
	if pc < 0:
		raise Refuse("manual", "unbalanced parentheses in %s()" % prim)
	args = [flat(t, m, s, e) for s, e in split_top(m, po + 1, pc)]
	if any(a is None for a in args):
		raise Refuse("manual", "a comment inside the macro arguments")
	return rel, ft, pos, pc, args


def poll_method(ft, pos):
	"""True when the function around pos is a ->poll() method: it
	takes a poll_table (the file_operations and proto_ops signature)."""
	o, _ = function_body(ft.m, pos)
	if o < 0:
		return False
	head = ft.m[max(0, ft.m.rfind(";", 0, o), ft.m.rfind("}", 0, o)):o]
	return re.search(r"\bpoll_table\s*\*", head) is not None


def param_names(ft, o):
	"""The identifiers of the function header before the body at o:
	its parameters, which a new local must not redeclare."""
	head = ft.m[max(0, ft.m.rfind(";", 0, o), ft.m.rfind("}", 0, o)):o]
	return idents(head)


def context(ft, pos, pc, prim, v):
	"""Where the value of the macro call at pos (closing parenthesis pc)
	goes: returned, assigned, discarded, or tested by an if.  Only
	whole-statement contexts are rewritten, so that moving the loop out
	cannot change the order of evaluation."""
	m = ft.m
	after = next_nonspace(m, pc + 1)
	b = prev_nonspace(m, pos)
	before_word = re.search(r"([A-Za-z_]\w*)\s*$", m[:pos])
	if before_word and before_word.group(1) == "return" and m[after] == ";":
		return statement_context(ft, "return", before_word.start(1), after)
	if b >= 0 and m[b] == "=" and m[b - 1] not in "=!<>+-*/%&|^" and m[after] == ";":
		return assign_context(ft, b, after)
	if m[after] == ";" and (b < 0 or m[b] in ";{}:)" or m[max(0, b - 3):b + 1] == "else"):
		return statement_context(ft, "discard", pos, after)
	if b >= 0 and m[b] in "(!":
		return if_context(ft, pos, pc, b, v)
	raise Refuse("report-only", "the value is used inside an expression (a ?:, &&/|| chain, loop "
		     "condition or macro argument), where moving the wait out could change the order "
		     "of evaluation")


def stmt_ok(m, s):
	"""'block' when the statement at s is a statement of its block,
	'body' when it is the unbraced body of an if/else/loop, else None."""
	p = prev_nonspace(m, s)
	if p < 0 or m[p] in ";{}":
		return "block"
	if m[p] == ":" and not re.search(r"\?[^;{}]*$", m[:p]):
		return "block"
	if m[p] == ")" or m[max(0, p - 3):p + 1] == "else":
		return "body"
	return None


def line_alone(ft, s, e):
	"""Refuses the statement t[s:e] when it shares its lines with other code."""
	t, m = ft.t, ft.m
	if t[line_start(t, s):s].strip():
		raise Refuse("report-only", "the wait shares its line with other code")
	rest = m[e:line_end(t, e)]
	if rest.strip():
		raise Refuse("report-only", "the wait shares its line with other code")


def statement_context(ft, use, s, after):
	"""'return w(...);' (use "return") or 'w(...);' ("discard"): the
	statement from s to the ';' at after."""
	t = ft.t
	where = stmt_ok(ft.m, s)
	if where is None:
		raise Refuse("report-only", "unusual statement context")
	line_alone(ft, s, after + 1)
	return dict(use=use, stmt=s, repl_s=line_start(t, s), repl_e=line_end(t, after) + 1, body=where == "body")


def assign_context(ft, b, after):
	"""'lv = w(...);', the '=' at b: lv must be a plain lvalue, and the
	assignment a statement of its own."""
	t, m = ft.t, ft.m
	st = b - 1
	while st >= 0 and m[st] not in ";{}:":
		st -= 1
	# the lvalue right before '=': after nothing (a statement of
	# its block), 'else' or an if/for/while header (an unbraced
	# body: spatch adds the braces), or a type (a declaration)
	seg = m[st + 1:b]
	mm = re.search(r"([A-Za-z_]\w*(?:\s*(?:->|\.)\s*[A-Za-z_]\w*|\s*\[[^\]]*\])*)\s*$", seg)
	s = st + 1 + (mm.start(1) if mm else len(seg))
	lv = flat(t, m, s, b) if mm else None
	prefix = seg[:mm.start(1)].strip() if mm else seg.strip()
	if lv is None or (prefix and not re.search(r"(?:^|\W)else$|\)$", prefix)):
		whole = flat(t, m, next_nonspace(m, st + 1), b)
		if whole and re.match(r"^[A-Za-z_][\w\s\*]*\s\**[A-Za-z_]\w*$", whole):
			raise Refuse("report-only", "the value initializes a declaration (%s); moving the "
				     "wait out would put code before a declaration" % whole)
		raise Refuse("report-only", "the value is assigned to an expression (%s)" % (whole or "?"))
	where = stmt_ok(m, s)
	if where is None:
		raise Refuse("report-only", "the assignment is not a statement of its own")
	line_alone(ft, s, after + 1)
	return dict(use="assign", lvalue=re.sub(r"\s+", "", lv), stmt=s, repl_s=line_start(t, s),
		    repl_e=line_end(t, after) + 1, body=where == "body")


def if_context(ft, pos, pc, b, v):
	"""'if (w(...))', 'if (!w(...))' or 'if (w(...) < 0)', the '(' or '!'
	before the call at b: the if must be a statement of its own block,
	and the call its whole condition."""
	t, m = ft.t, ft.m
	neg = m[b] == "!"
	op = prev_nonspace(m, b) if neg else b
	if m[op] != "(":
		raise Refuse("report-only", "the value is used inside an expression")
	kw = re.search(r"(?:^|[^\w])(else\s+)?if\s*$", m[:op])
	if not kw:
		raise Refuse("report-only", "the value is used as a loop condition or a call argument")
	if kw.group(1):
		raise Refuse("report-only", "the wait is the condition of an 'else if'")
	tail = re.match(r"\s*(\)|<\s*0\s*\))", m[pc + 1:])
	if not tail:
		raise Refuse("report-only", "the value is part of a larger condition")
	s = kw.start() + (0 if m[kw.start()] == "i" else 1)
	if stmt_ok(m, s) != "block":
		raise Refuse("report-only", "the if statement is not a statement of its own block")
	if t[line_start(t, s):s].strip():
		raise Refuse("report-only", "the wait shares its line with other code")
	tail_txt = tail.group(1)
	expr = ("!%s" if neg else "%s") + (" < 0" if tail_txt.startswith("<") else "")
	ctx = dict(use="if", stmt=s, ins=line_start(t, s), repl_s=(b if neg else pos),
		   repl_e=pc + 1 + tail.start(1) + (len(tail_txt) - 1 if tail_txt.startswith("<") else 0),
		   if_expr=expr)
	if v["value"] == "void":
		raise Refuse("report-only", "a void wait used as a value")
	return ctx


def if_body(ft, u, rel, e, ind):
	"""The 'if' line is rewritten, so checkpatch.pl reads its body too:
	a braced body with one simple statement loses its braces, and a body
	indented off the if's level is re-indented (whitespace only)."""
	t, m = ft.t, ft.m
	j = next_nonspace(m, e)
	if j < len(m) and m[j] == ")":
		e = j + 1
	bo = next_nonspace(m, e)
	if bo >= len(m) or m[bo] != "{" or t[e:bo].count("\n"):
		return
	bc = match_close(m, bo)
	if bc < 0 or t[line_start(t, bc):bc].strip() or m[bc + 1:line_end(t, bc)].strip():
		return
	body = t[bo + 1:bc]
	mb = m[bo + 1:bc]
	if t[bo + 1:line_end(t, bo)].strip():
		return
	lines = body.split("\n")[1:-1]
	stmts = [x for x in mb.split(";")[:-1]]
	inner = ind + "\t"
	if len(stmts) == 1 and not re.search(r"[{}]", mb) and mb == body and mb.strip().endswith(";") \
			and len([x for x in lines if x.strip()]) == 1:
		u.add(rel, Edit(e, line_end(t, bc), "\n%s%s" % (inner, lines[0].strip() if lines[0].strip()
							  else [x for x in lines if x.strip()][0].strip())))
		return
	cur = [re.match(r"^[ \t]*", x).group(0) for x in lines if x.strip()]
	if not cur:
		return
	base = min(cur, key=cols)
	if base == inner:
		return
	fixed = [inner + x[len(base):] if x.startswith(base) else x for x in lines]
	u.add(rel, Edit(line_end(t, bo) + 1, line_start(t, bc), "".join(x + "\n" for x in fixed)))


def block_decls(ft, u, rel, pos, decls, tag):
	"""Declare decls at the top of the block around pos (once per block).
	Text, for plan_wait_event_text() only (a statement-expression
	condition spatch cannot match, or a hoisted assignment); the
	semantic patches declare their own names."""
	o = open_block(ft.m, pos)
	if o < 0:
		raise Refuse("manual", "the wait is not inside a block")
	decls_at(ft, u, rel, o, decls, tag)


def decls_at(ft, u, rel, o, decls, tag):
	t = ft.t
	if re.search(r"\bswitch\s*\([^{};]*\)\s*$", ft.m[max(0, o - 300):o]):
		# a jump to a case label would skip the initialization
		raise Refuse("manual", "the wait is in a switch case without its own braces: "
			     "a jump to a later case label would skip the wait entry's initialization")
	first = line_end(t, o) + 1
	if first >= len(t):
		raise Refuse("manual", "unexpected end of file")
	ind = indent_at(t, next_nonspace(ft.m, first)) if t[first:line_end(t, first)].strip() else None
	if not ind:
		ind = indent_at(t, o) + "\t"
	nxt = t[first:line_end(t, first)]
	text = "".join("%s%s\n" % (ind, d) for d in decls)
	if nxt.strip() and not is_decl_line(nxt):
		text += "\n"
	u.add(rel, Edit(first, first, text, key=("decl", o, tag)))


def rewrite_wait_events(fx, u):
	"""Run cocci/fix_wait_event.cocci on the unit's wait_event*() sites,
	with the names it may use: one wait entry for the function, and the
	variables that carry a value (the caller's own variable when one
	site alone assigns the value to a plain local)."""
	rel = u.rel
	ft = fx.text(rel)
	sites = u.sites
	taken = u.taken
	vals = [s for s in sites.values() if s["value"] and s["form"] in ("signal", "timeout",
									     "signal_timeout")]
	names = {"wait": pick_name(taken, ["wait", "wait_entry", "woken_wait"])}
	decls = []
	sig_vals = [s for s in vals if s["form"] == "signal"]
	to_vals = [s for s in sites.values() if s["form"] in ("timeout", "signal_timeout")]
	if sig_vals:
		lv = sig_vals[0].get("lvalue")
		if len(vals) == 1 and sig_vals[0]["use"] == "assign" and lv and \
				re.match(r"^[A-Za-z_]\w*$", lv) and lv not in idents(sig_vals[0]["args"]):
			names["ret"] = lv
		else:
			names["ret"] = pick_name(taken, ["ret", "err", "wait_ret"])
			decls.append(["int", names["ret"]])
	if to_vals:
		names["tmo"] = pick_name(taken, ["timeout", "remaining", "tmo"])
		decls.append(["long", names["tmo"]])
	names["decls"] = decls
	# One site per spatch run, from the last to the first: a rewrite
	# then moves no site still to come, and the declarations go in
	# with the first site, in the last run.  (spatch 1.1.1 rewrites
	# only one of two sites of a function in one run.)
	text = ft.t
	order = sorted(sites.items(), key=lambda kv: -kv[1]["pos"])
	for i, (k, s) in enumerate(order):
		# the declarations ("decls") go in with the last run only
		spec = {"names": dict(names, nodecls=i < len(order) - 1),
			"sites": {k: dict({x: s[x] for x in ("form", "queue", "state", "test")},
					  add="add_wait_queue_exclusive" if s["exclusive"]
					  else "add_wait_queue")}}
		env = {"NESTSLEEP_SITES": json.dumps(spec)}
		extra = []
		if s["body"]:
			extra += ["-D", "balance"]
		new = spatch_text(text, os.path.basename(rel), WAIT_EVENT_RULE, env, extra)
		if new is None or new == text:
			raise Refuse("manual", "%s could not rewrite %s() on line %s in this statement context"
				     % (os.path.basename(WAIT_EVENT_RULE), s["prim"], k.split(":")[0]))
		text = new
	edits = text_edits(ft.t, if_bodies(ft.t, wrap_long(ft.t, text)))
	for e in edits:
		u.add(rel, e)
	fx.include(ft, u, rel, "linux/wait.h")
	for h in sorted(u.includes):
		fx.include(ft, u, rel, h)
