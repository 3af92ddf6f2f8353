# SPDX-License-Identifier: GPL-2.0-only
"""Fixes of the missed wakeups (scripts/nestsleep/analysis/wakecov.py), made
by cocci/fix_missed_wakeup.cocci:

  wrong_mode  the writer's wakers, wake_up_interruptible*(), become
              wake_up*(): the mode that wakes TASK_NORMAL
              (include/linux/wait.h:222-224, 229-231, 239-244); a waker under a parameter
              test that some caller passes as a value that may be false
              also becomes unconditional (drivers/acpi/acpi_dbg.c
              acpi_aml_unlock_fifo(), whose callers pass 'ret >= 0')
  guarded     the writer's wakeup under a parameter test becomes
              unconditional
  unwoken     'wake_up(Q);' after every write of the writer function
              that can end the wait, Q the queue in the writer's terms

A wider mode or a dropped test wakes more tasks than before, which is
harmless only for a waiter that tests its condition again when woken: the
fix is made only when every use of the queue that sleeps on it is a
wait_event*() macro (___wait_event()'s loop, include/linux/wait.h:
308-311), a prepare_to_wait*() inside a loop, or an entry added next to a
wait_woken() (the same).  Otherwise, or where the queue cannot be named in
the writer, or a write is not a statement of its own, the finding is
report-only with the reason."""

import json
import os
import re

from nestsleep import COCCI_DIR
from nestsleep.analysis import cfacts
from nestsleep.analysis.cfacts import _match_close, _text, split_args
from nestsleep.analysis.wakecov import WakeCov, expr_key
from nestsleep.fix.edits import Refuse, Unit, text_edits
from nestsleep.fix.spatch import spatch_text

RULE = os.path.join(COCCI_DIR, "fix_missed_wakeup.cocci")
# the wakeup that wakes TASK_NORMAL for each interruptible one
WIDER = {"wake_up_interruptible": "wake_up", "wake_up_interruptible_all": "wake_up_all",
	 "wake_up_interruptible_poll": "wake_up_poll"}
GUARDED = set(WIDER) | set(WIDER.values())
# uses of a queue that put no sleeper on it
NOT_WAITERS = re.compile(r"^(?:init_waitqueue_head|waitqueue_active|wq_has_sleeper|poll_wait|remove_wait_queue|"
			 r"finish_wait|__wake_up\w*|wake_up\w*)$")
_EXPR = re.compile(r"^[&*(\s]*([A-Za-z_]\w*)\s*(->|\.)\s*(.+?)[\s)]*$")
_TRUE = re.compile(r"^(?:true|[1-9]\d*)$")


def plan(fx, findings, cache):
	"""Set the "fix" record of every missed_wakeup finding of findings;
	return the units of those that have one."""
	waits = {}
	for f in findings:
		if f["kind"] != "missed_wakeup" and f.get("wakers"):
			waits.setdefault("%s:%d" % (f["file"], f["line"]), f)
	wc = WakeCov(fx.tree, fx.kn, cache) if fx.tree is not None else None
	units = []
	for m in findings:
		if m["kind"] != "missed_wakeup":
			continue
		u = Unit(m["file"], m["function"], "missed_wakeup")
		try:
			wait = waits.get(m["wait_at"])
			if wait is None or wc is None:
				raise Refuse("report-only", "the wait on %s is not among the findings" % m["wait_at"])
			plan_one(fx, wc, m, wait, u)
			fx.finish(u)
		except Refuse as r:
			m["fix"] = record(m, r.status, r.reason, [], "")
			continue
		m["fix"] = record(m, "patch", "; ".join(u.reasons), sorted(u.edits), fx.diff(u.edits), u.caveats)
		units.append(u)
	return units


def record(m, status, reason, files, diff, caveats=()):
	return {"status": status, "reason": reason, "kind": "missed_wakeup", "confidence": m["confidence"],
		"caveats": list(caveats), "unit": "%s:%s" % (m["file"], m["function"]), "files": files,
		"wakers": [], "diff": diff}


def plan_one(fx, wc, m, wait, u):
	rec = wait["wakers"]
	rel, func = m["file"], m["function"]
	writes = [w for w in rec["writers"] if w["function"] == func and w["at"].rpartition(":")[0] == rel
		  and w["makes_true"] is True]
	if not writes:
		raise Refuse("report-only", "the writes of %s() are not in the wake coverage record" % func)
	fv = wc.view(rel)
	fn = fv and fv.funcs.get(func)
	if fn is None:
		raise Refuse("report-only", "cannot read %s() in %s" % (func, rel))
	wakers = {}
	for wk in rec["wakers"]:
		wakers.setdefault(wk["at"], []).append(wk)
	sites = {"mode": {}, "guard": {}, "after": {}, "unparam": {}, "unparam_at": {}}
	if m["missed"] == "unwoken":
		for w in writes:
			line = int(w["at"].rpartition(":")[2])
			s = fv.lines[line - 1]
			if s.rstrip().endswith("\\"):
				raise Refuse("report-only", "the write on line %d is inside a macro" % line)
			st = s.strip()
			if not st.endswith(";") or st.count(";") != 1 or re.match(r"^(?:if|while|for|do|return|switch)\b", st):
				raise Refuse("report-only", "the write on line %d (%s) is not a statement of its own: add "
					     "the wakeup by hand" % (line, st))
			sites["after"]["%d:%d" % (line, len(s) - len(s.lstrip()))] = ""
		q = queue_for(wc, rec, fv, fn, writes[0])
		for at in sites["after"]:
			sites["after"][at] = q
		u.reasons.append("wake_up(%s) after %s on line%s %s: nothing woke %s after it" % (
			q, writes[0]["write"].rstrip(";"), "s" if len(writes) > 1 else "",
			", ".join(w["at"].rpartition(":")[2] for w in writes), rec["queue"].lstrip("&")))
	else:
		ats = sorted(set(a for w in writes for a in w["woken_by"]))
		for at in ats:
			for wk in wakers.get(at, []):
				if wk["function"] != func and m["missed"] == "guarded":
					continue
				waker_site(fx, wc, fv, fn, m, wk, sites, u)
		if not any(sites.values()):
			raise Refuse("report-only", "no wakeup of %s() to change" % func)
	check_waiters(wc, rec, wait)
	u.caveats.append("every waiter of %s tests its condition again when woken, so a wakeup that finds the "
			 "condition still false costs one more test" % rec["queue"].lstrip("&"))
	run_rule(fx, u, rel, sites)


def waker_site(fx, wc, fv, fn, m, wk, sites, u):
	"""Pick the change of one waker: its mode, and its guard when a caller
	of its function may pass the guard false."""
	rel, line = wk["at"].rpartition(":")[0], int(wk["at"].rpartition(":")[2])
	if rel != m["file"]:
		raise Refuse("report-only", "the wakeup on %s is in another file" % wk["at"])
	call = wk["call"]
	new = WIDER.get(call, call) if wk["wakes"] is False else call
	if wk["wakes"] is False and call not in WIDER:
		raise Refuse("report-only", "%s() on %s has no wake_up*() form of another mode" % (call, wk["at"]))
	s = fv.lines[line - 1]
	cols = [x.start() for x in re.finditer(r"\b%s\s*\(" % re.escape(call), s)]
	if len(cols) != 1:
		raise Refuse("report-only", "cannot place %s() on %s" % (call, wk["at"]))
	at = "%d:%d" % (line, cols[0])
	what = call_text(fv, line, call) if new == call else "%s -> %s" % (
		call_text(fv, line, call), call_text(fv, line, call).replace(call + "(", new + "(", 1))
	g = wk["guard"]
	if g and wk["function"] == fn["name"] and guard_false(wc, fv, fn, g):
		if call not in GUARDED:
			raise Refuse("report-only", "cannot drop the test of %s() on %s" % (call, wk["at"]))
		prev = fv.lines[line - 2].strip() if line >= 2 else ""
		if not re.match(r"^if\s*\(.*\)$", prev) or s.strip().count(";") != 1:
			raise Refuse("report-only", "the test of %s() on %s is not a plain 'if (%s)'" % (call, wk["at"], g))
		sites["guard"][at] = 1
		u.reasons.append("%s, on every path: it ran only under 'if (%s)', which some callers make false "
				 "although the write before it still ends the wait" % (what, g))
		drop = unused_param(wc, fv, fn, g)
		if drop:
			sites["unparam"][fn["name"]] = g
			sites["unparam_at"].update(dict.fromkeys(drop, 1))
			u.reasons.append("'%s' is then unused: the parameter goes, with its argument at the %s of "
					 "%s()" % (g, "call" if len(drop) == 2 else "%d calls" % (len(drop) - 1),
						   fn["name"]))
	elif new != call:
		sites["mode"][at] = 1
		u.reasons.append("%s: %s() does not wake the waiter's state" % (what, call))


_SIDE_EFFECT = re.compile(r"\(|\+\+|--|(?<![<>=!])=(?!=)")


def unused_param(wc, fv, fn, guard):
	"""The "line:column" sites (the parameter, then each call's argument)
	of dropping parameter guard from static fn, or None: only when the
	guard was its only use in the body, it is not the first parameter,
	every mention of fn in its file is the definition or a one-line call
	with every argument, and no argument given for it has a side effect."""
	params, toks, name = fn["params"], fv.toks, fn["name"]
	if not re.match(r"^\w+$", guard) or guard not in params or params.index(guard) == 0:
		return None
	if not re.search(r"^static\b[^;{]*\b%s\s*\(" % re.escape(name), fv.text, re.M):
		return None
	if sum(1 for i in range(fn["lo"], fn["hi"]) if toks[i][0] == "id" and toks[i][1] == guard) != 1:
		return None
	idx = params.index(guard)
	calls = fv.calls_of(name)
	mentions = sum(1 for t in toks if t[0] == "id" and t[1] == name)
	if mentions != len(calls) + 1:
		return None
	at = []
	for i in range(fn["lo"] - 1, -1, -1):
		if toks[i][0] == "id" and toks[i][1] == guard:
			at.append("%d:0" % toks[i][2])
			break
	for fn2, i, args in calls:
		close = _match_close(toks, i + 1, "(", ")")
		# a call over several lines is left alone: its sites are lines
		if len(args) != len(params) or _SIDE_EFFECT.search(args[idx]) or toks[close][2] != toks[i][2]:
			return None
		at.append("%d:0" % toks[i][2])
	return at if len(at) == len(calls) + 1 else None


def call_text(fv, line, call):
	s = fv.lines[line - 1]
	i = s.index(call)
	return s[i:s.index(";", i)] if ";" in s[i:] else s[i:].strip()


def guard_false(wc, fv, fn, guard):
	"""Whether some call of fn passes the parameter its wakeup tests as a
	value other than a true constant."""
	params = fn["params"]
	idx = next((params.index(t) for t in re.findall(r"\w+", guard) if t in params), -1)
	if idx < 0:
		return False
	for v3, fn3, ci, args in wc.callers([fv.rel], fv, fn["name"]):
		a = args[idx] if idx < len(args) else ""
		if not _TRUE.match(a):
			return True
	return False


def queue_for(wc, rec, fv, fn, w):
	"""The wait's queue written in the writer's terms: a global the
	writer's file sees as it is, a member through the base of the
	writer's own write."""
	key, queue = rec["key"], rec["queue"]
	amp = "" if queue.startswith("&") else "&"
	if key.startswith("global:"):
		base = key[7:].split(".")[0]
		if fv.global_kind(base) is None:
			raise Refuse("report-only", "%s() cannot name %s: it is not declared in %s" % (
				fn["name"], queue.lstrip("&"), fv.rel))
		return amp + queue
	struct = key[7:].split(".")[0] if key.startswith("member:") else ""
	mq = _EXPR.match(queue)
	mw = _EXPR.match(w["write"].lstrip("+-").strip())
	if not struct or not mq or not w["input"].startswith("member:%s." % struct) or not mw:
		raise Refuse("report-only", "%s() has no struct %s to name %s with" % (
			fn["name"], struct or "of the queue", queue.lstrip("&")))
	base, op = mw.group(1), mw.group(2)
	if expr_key("%s%s%s" % (base, op, mq.group(3)), fv, fn)[0] != key:
		raise Refuse("report-only", "%s() has no struct %s to name %s with" % (
			fn["name"], struct, queue.lstrip("&")))
	return "&%s%s%s" % (base, op, mq.group(3).replace(" ", ""))


def check_waiters(wc, rec, wait):
	"""Refuse unless every use of the queue that sleeps on it tests its
	condition again when woken (module doc)."""
	key = rec["key"]
	if not key:
		raise Refuse("report-only", "the queue %s has no identity to find its waiters by" % rec["queue"])
	wc.index(wc.names_of(key))
	for rel in wc.files_for(key, wait["file"]):
		fv = wc.view(rel)
		for name in sorted(fv.funcs) if fv else ():
			fn = fv.funcs[name]
			toks = fv.toks
			for i in range(fn["lo"], fn["hi"]):
				k, v, ln = toks[i]
				if k != "id" or toks[i + 1][1] != "(" or toks[i - 1][1] in ("->", "."):
					continue
				a = split_args(toks, i + 1, _match_close(toks, i + 1, "(", ")"))
				if not a or not a[0] or expr_key(_text(a[0]), fv, fn)[0] != key:
					continue
				if NOT_WAITERS.match(v) or v in wc.kn.waiters:
					continue
				if v.startswith("prepare_to_wait") and cfacts.loop_around(toks, ln) is not None:
					continue
				if v.startswith("add_wait_queue") and any(t[1] == "wait_woken" for t in toks[fn["lo"]:fn["hi"]]):
					continue
				raise Refuse("report-only", "%s() on %s:%d puts a sleeper on %s that may not test its "
					     "condition again, which a wider or unconditional wakeup would wake" % (
						     v, rel, ln, rec["queue"].lstrip("&")))


def run_rule(fx, u, rel, sites):
	"""cocci/fix_missed_wakeup.cocci once per kind of site on the file as it
	is; every site must have changed (the edits of a kind only touch its
	sites)."""
	ft = fx.text(rel)
	for kind in ("mode", "guard", "after", "unparam"):
		if not sites[kind]:
			continue
		new = spatch_text(ft.t, os.path.basename(rel), RULE,
				  {"NESTSLEEP_SITES": json.dumps({kind: sites[kind]})}, ["-D", kind])
		edits = [] if new is None else text_edits(ft.t, new)
		offs = []
		# a dropped parameter's sites are its lines: the definition's, each call's
		for at in sites["unparam_at"] if kind == "unparam" else sites[kind]:
			line, col = map(int, at.split(":"))
			# an insertion after the write starts the next line
			o = ft.offset(line + 1, 0) if kind == "after" else ft.offset(line, col)
			offs.append(o)
			if not any(e.s <= o <= e.e for e in edits):
				raise Refuse("report-only", "%s did not change the %s site at %s:%s" % (
					os.path.basename(RULE), kind, rel, at))
		for e in edits:
			if not any(e.s <= o <= e.e for o in offs):
				raise Refuse("report-only", "%s changed %s:%d, which was not asked for" % (
					os.path.basename(RULE), rel, ft.t.count("\n", 0, e.s) + 1))
			e.key = ("missed", kind, e.s, e.e, e.text)
			u.add(rel, e)
