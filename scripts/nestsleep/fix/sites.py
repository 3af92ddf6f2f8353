# SPDX-License-Identifier: GPL-2.0-only
"""Where a rewrite stands in its function, as the shapes find it: the names
the function already uses, the calls and statements in it, the loop a
statement is in, and the schedule() calls of an open-coded wait loop."""

import re

from nestsleep.fix.ctext import (flat, function_body, idents, line_end, line_start, match_close, next_nonspace,
				 open_block, prev_nonspace)
from nestsleep.fix.edits import Refuse


def taken_names(ft, pos):
	"""(the identifiers of the function around pos, (its body's open and
	close brace)): the names a new local must not take."""
	o, c = function_body(ft.m, pos)
	if o < 0:
		raise Refuse("manual", "cannot find the enclosing function")
	return idents(ft.m[o:c]), (o, c)


def calls_in(ft, o, c, names):
	"""[(name, pos, open_paren, close_paren)] of calls to names in m[o:c]."""
	m = ft.m
	out = []
	rx = re.compile(r"\b(%s)\s*\(" % "|".join(names))
	for mm in rx.finditer(m, o, c):
		po = mm.end() - 1
		out.append((mm.group(1), mm.start(), po, match_close(m, po)))
	return out


def statement(ft, pos, pc, what):
	"""(line_start, line_end+1, lvalue) of the statement 'call(...);' or
	'lv = call(...);' at pos, which must be alone on its lines."""
	t, m = ft.t, ft.m
	after = next_nonspace(m, pc + 1)
	if after >= len(m) or m[after] != ";":
		raise Refuse("manual", "the value of %s() is used inside an expression" % what)
	s = pos
	lv = None
	b = prev_nonspace(m, pos)
	if b >= 0 and m[b] == "=" and m[b - 1] not in "=!<>":
		st = b - 1
		while st >= 0 and m[st] not in ";{}":
			st -= 1
		s = next_nonspace(m, st + 1)
		lv = flat(t, m, s, b)
		b = prev_nonspace(m, s)
	if b >= 0 and m[b] not in ";{}:":
		raise Refuse("manual", "%s() is not a statement of its own block (it is conditional or "
			     "part of an expression)" % what)
	if t[line_start(t, s):s].strip() or m[after + 1:line_end(t, after)].strip():
		raise Refuse("manual", "%s() shares its line with other code" % what)
	return line_start(t, s), line_end(t, after) + 1, lv


def loop_of(ft, pos):
	"""(loop_stmt_start, body_open, body_close) when the statement at pos
	is a statement of a for/while/do loop body, else None."""
	m = ft.m
	o = open_block(m, pos)
	if o < 0:
		return None
	# Not only the first statement: being on the queue from the top of
	# the body on only adds wakeups (a spurious pass), it loses none.
	hb = prev_nonspace(m, o)
	if hb >= 0 and m[hb] == ")":
		# for (...) { / while (...) {
		depth = 0
		j = hb
		while j >= 0:
			if m[j] == ")":
				depth += 1
			elif m[j] == "(":
				depth -= 1
				if depth == 0:
					break
			j -= 1
		kw = re.search(r"\b(for|while)\s*$", m[:j])
		if not kw:
			return None
		return kw.start(1), o, match_close(m, o)
	kw = re.search(r"\bdo\s*$", m[:o])
	if kw:
		return kw.start(), o, match_close(m, o)
	return None


def loop_site(fx, f):
	"""(rel, text, source, mask, body open, body close) of the function
	that holds an open-coded wait loop."""
	rel = f["file"]
	ft = fx.text(rel)
	o, c = function_body(ft.m, ft.offset(f["line"], f["col"]))
	if o < 0:
		raise Refuse("manual", "cannot find the enclosing function")
	return rel, ft, ft.t, ft.m, o, c


def schedules(fx, ft, s, e, what):
	"""["line:col"] of the schedule() calls in m[s:e], as spatch numbers
	them; refuses a scheduler with no wait_woken() form.  The rules
	rewrite the call where it stands (an unbraced 'if (!done)
	schedule();', a tested 'schedule_timeout(t) == 0'): wait_woken()
	returns what schedule_timeout() does, the time left."""
	t = ft.t
	out = []
	for name, pos, po, pc in calls_in(ft, s, e, list(fx.kn.schedulers)):
		if not fx.kn.schedulers[name]:
			raise Refuse("manual", "the loop sleeps in %s(), which has no wait_woken() form" % name)
		ls = line_start(t, pos)
		out.append("%d:%d" % (t.count("\n", 0, ls) + 1, pos - ls))
	if not out:
		raise Refuse("manual", "no schedule() between %s() and the end of the loop" % what)
	return out
