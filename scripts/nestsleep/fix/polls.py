# SPDX-License-Identifier: GPL-2.0-only
"""The poll rule: a wait that polls today is rewritten only if a waker stays.

A wait whose condition blocks on every pass (analysis/polls.py) ends as
soon as the state it reads changes, woken or not.  After a wait_woken()
rewrite it ends only when a wake_up*() of its queue runs after the change.
So the fixer rewrites such a wait only when some waker of its queue

  (a) wakes the wait's task state (wake_up_interruptible*() does not wake
      TASK_UNINTERRUPTIBLE),
  (b) is registered for the whole wait: not a sleep_info.json
      "late_registration" callback (a xenbus_driver's .otherend_changed)
      while the wait is reached from that driver's .probe or .remove,
  (c) cannot be kept from running by a lock the waiter holds across the
      wait: the waiter or its callers assert a lock ("held_lock_asserts":
      rtnl_dereference(), lockdep_assert_held(), ...) or take it before
      the wait and do not release it on the way (mutex_lock(&d->lock)
      with no mutex_unlock(&d->lock) between), and the waker's function,
      or when it runs in a "serialised_contexts" context (the xenwatch
      thread) any callback of that context in the file, takes it.  A lock
      is its member name and, where both sides declare the base of a
      'base->member' as a struct, that struct type.

Otherwise the site is refused ("manual") with what is missing.  A wait
that does not poll is left to the other rules.

The queue's wakers come from finding["wakers"] when the analysis filled it;
until then queue_wakers() searches the waiter's file for wake_up*() of the
queue (swap it for the tree-wide search).  Callers, callees and struct
initializers are read in that file only.
"""

import os
import re

from nestsleep.analysis import polls as apolls
from nestsleep.fix.ctext import match_close, split_top
from nestsleep.fix.edits import Refuse

MAX_UP = 3
IDENT = r"[A-Za-z_]\w*"
WAKE = re.compile(r"\b(wake_up(?:_interruptible)?(?:_all|_nr|_poll|_sync|_locked|_all_locked)?"
		  r"(?:_sync|_poll)?)\s*\(")


class FileFuncs:
	"""The functions of one file: name -> (body open, body close)."""

	def __init__(self, ft):
		self.ft = ft
		self.spans = {}
		self.heads = {}
		m = ft.m
		for mm in re.finditer(r"\b(%s)\s*\(" % IDENT, m):
			po = mm.end() - 1
			pc = match_close(m, po)
			if pc < 0:
				continue
			k = pc + 1
			while k < len(m) and m[k] in " \t\n":
				k += 1
			if k >= len(m) or m[k] != "{" or self.depth(mm.start()) != 0:
				continue
			if mm.group(1) in ("if", "while", "for", "switch", "return", "sizeof"):
				continue
			if mm.group(1) not in self.spans:
				self.spans[mm.group(1)] = (k, match_close(m, k))
				self.heads[mm.group(1)] = mm.start()

	def depth(self, i):
		m = self.ft.m
		return m.count("{", 0, i) - m.count("}", 0, i)

	def line(self, pos):
		return self.ft.t.count("\n", 0, pos) + 1

	def around(self, pos):
		for name, (o, c) in self.spans.items():
			if o <= pos <= c:
				return name
		return None

	def calls(self, name, callee):
		"""Offsets of the calls of callee in name's body."""
		o, c = self.spans[name]
		return [mm.start() for mm in re.compile(r"\b%s\s*\(" % re.escape(callee)).finditer(self.ft.m, o, c)]

	def callers(self, name):
		return sorted(f for f in self.spans if f != name and self.calls(f, name))

	def up(self, name):
		"""name and its callers in the file, MAX_UP levels."""
		seen, todo = [name], [name]
		for _ in range(MAX_UP):
			todo = [c for n in todo for c in self.callers(n) if c not in seen]
			seen += todo
		return seen

	def down(self, name, depth=MAX_UP):
		"""[(function, path from name)] of name and its callees in the file."""
		out, todo = [(name, [name])], [(name, [name])]
		for _ in range(depth):
			nxt = []
			for f, path in todo:
				for g in self.spans:
					if g not in [x for x, _ in out] and self.calls(f, g):
						nxt.append((g, path + [g]))
						out.append((g, path + [g]))
			todo = nxt
		return out

	def initializers(self, struct):
		"""{member: function} of every 'struct S NAME = { .m = f }' in the file."""
		out = []
		for mm in re.finditer(r"\bstruct\s+%s\s+%s\s*(?:\[[^\]]*\])?\s*=\s*\{" % (re.escape(struct), IDENT),
				      self.ft.m):
			o = mm.end() - 1
			body = self.ft.m[o:match_close(self.ft.m, o)]
			out.append(dict(re.findall(r"\.(%s)\s*=\s*&?(%s)\b" % (IDENT, IDENT), body)))
		return out


def norm_queue(q):
	"""The queue as a waker names it: '&x->wq' and '&y.wq' -> '.wq'; '&g' -> 'g'."""
	q = re.sub(r"\s+", "", q or "").lstrip("&")
	mm = re.search(r"(?:->|\.)(%s)$" % IDENT, q)
	return "." + mm.group(1) if mm else q


def base_type(ff, func, expr):
	"""The struct type of the base of 'base->member' or 'base.member', as
	func (a parameter or a local) or the file declares it; None when
	unknown or when the member is deeper."""
	e = re.sub(r"\s+", "", expr or "").lstrip("&")
	mm = re.match(r"^(%s)(->|\.)%s$" % (IDENT, IDENT), e)
	if not mm:
		return None
	ptr = r"\*\s*(?:const\s+)?" if mm.group(2) == "->" else ""
	pat = r"\bstruct\s+(%s)\s*%s%s\b" % (IDENT, ptr, re.escape(mm.group(1)))
	if func in ff.spans:
		d = re.search(pat, ff.ft.m[ff.heads[func]:ff.spans[func][1]])
		if d:
			return d.group(1)
	for d in re.finditer(pat, ff.ft.m):
		if ff.depth(d.start()) == 0 and not ff.around(d.start()):
			return d.group(1)
	return None


def lock_id(ff, func, expr):
	"""(name, struct type or None, as written) of the lock expr in func."""
	return (norm_queue(expr), base_type(ff, func, expr), re.sub(r"\s+", "", expr).lstrip("&"))


def same_lock(a, b):
	return a[0] == b[0] and (a[1] is None or b[1] is None or a[1] == b[1])


def wakes_state(call, state):
	return "interruptible" not in call or state == "TASK_INTERRUPTIBLE"


def queue_wakers(fx, rel, queue, state):
	"""The wake_up*() calls of queue in the waiter's file, in
	finding["wakers"]["wakers"]'s shape.  A local stand-in for the
	tree-wide search (worktree wakecov)."""
	ft = fx.text(rel)
	ff = FileFuncs(ft)
	out = []
	for mm in WAKE.finditer(ft.m):
		pc = match_close(ft.m, mm.end() - 1)
		args = split_top(ft.m, mm.end(), pc)
		if pc < 0 or not args or norm_queue(ft.t[args[0][0]:args[0][1]]) != norm_queue(queue):
			continue
		out.append({"at": "%s:%d" % (rel, ff.line(mm.start())), "function": ff.around(mm.start()),
			    "call": mm.group(1), "wakes": wakes_state(mm.group(1), state), "guard": None})
	return out


def held_locks(fx, ff, rel, func, pos):
	"""[(lock_id, 'assert() at file:line')] asserted by func or its
	callers, or taken before the wait at pos (held_at())."""
	info = fx.kn.info.get("held_lock_asserts", {})
	out = []
	for f in ff.up(func):
		for name, lock in info.get("asserts", {}).items():
			for p in ff.calls(f, name):
				pc = match_close(ff.ft.m, ff.ft.m.index("(", p))
				held = (lock, None, lock)
				if isinstance(lock, int):
					args = split_top(ff.ft.m, ff.ft.m.index("(", p) + 1, pc)
					if len(args) <= lock:
						continue
					held = lock_id(ff, f, ff.ft.t[args[lock][0]:args[lock][1]])
				out.append((held, "%s() at %s:%d" % (name, os.path.basename(rel), ff.line(p))))
	todo, seen = [(func, pos)], {func}
	for _ in range(MAX_UP + 1):
		nxt = []
		for f, p in todo:
			out += held_at(fx, ff, rel, f, p)
			for c in ff.callers(f):
				if c not in seen:
					seen.add(c)
					nxt += [(c, q) for q in ff.calls(c, f)]
		todo = nxt
	return out


def held_at(fx, ff, rel, func, pos):
	"""[(lock_id, 'mutex_lock() at file:line')] that func takes before
	offset pos and does not release before it (in text order)."""
	info = fx.kn.info.get("held_lock_asserts", {})
	takers, droppers = info.get("lock_calls", []), info.get("unlock_calls", [])
	if func not in ff.spans or not takers:
		return []
	o = ff.spans[func][0]
	held = []
	rx = re.compile(r"\b(%s)\s*\(" % "|".join(re.escape(x) for x in takers + droppers))
	for mm in rx.finditer(ff.ft.m, o, pos):
		po = mm.end() - 1
		args = split_top(ff.ft.m, po + 1, match_close(ff.ft.m, po))
		if not args:
			continue
		lk = lock_id(ff, func, ff.ft.t[args[0][0]:args[0][1]])
		if mm.group(1) in takers:
			held.append((lk, "%s() at %s:%d" % (mm.group(1), os.path.basename(rel), ff.line(mm.start()))))
		else:
			held = [h for h in held if h[0][:2] != lk[:2]]
	return held


def takes(fx, ff, rel, func, lock):
	"""'f() -> g() (taker() at file:line)' when func or its callees take
	lock (a lock_id())."""
	info = fx.kn.info.get("held_lock_asserts", {})
	named = info.get("takers", {}).get(lock[0])
	if func not in ff.spans:
		return None
	for g, path in ff.down(func):
		for taker in (named or info.get("lock_calls", [])):
			for p in ff.calls(g, taker):
				if not named:
					o = ff.ft.m.index("(", p)
					args = split_top(ff.ft.m, o + 1, match_close(ff.ft.m, o))
					if not args or not same_lock(lock_id(ff, g, ff.ft.t[args[0][0]:args[0][1]]), lock):
						continue
				return "%s (%s() at %s:%d)" % (" -> ".join(x + "()" for x in path), taker,
							       os.path.basename(rel), ff.line(p))
	return None


def context_of(fx, ff, func):
	"""(name, describe, [callbacks in the file]) of the serialised context
	func runs in, or None."""
	for cname, c in fx.kn.info.get("serialised_contexts", {}).get("contexts", {}).items():
		members = []
		for struct, fields in c.get("members", {}).items():
			for init in ff.initializers(struct):
				members += [init[x] for x in fields if x in init]
		for reg, idx in c.get("registrars", {}).items():
			for f in ff.spans:
				for p in ff.calls(f, reg):
					o = ff.ft.m.index("(", p)
					args = split_top(ff.ft.m, o + 1, match_close(ff.ft.m, o))
					if idx is not None and idx < len(args):
						members.append(ff.ft.t[args[idx][0]:args[idx][1]].strip().lstrip("&"))
		if func in members:
			return cname, c["describe"], sorted(set(m for m in members if m in ff.spans))
	return None


def late(fx, ff, w, func):
	"""Why waker w is not there while func waits, or None."""
	for struct, s in fx.kn.info.get("late_registration", {}).get("structs", {}).items():
		for init in ff.initializers(struct):
			if not any(init.get(x) == w for x in s["callbacks"]):
				continue
			during = [init.get(x) for x in s["during"]]
			ups = ff.up(func)
			hit = [d for d in during if d in ups]
			if hit:
				return "is the .%s callback of struct %s, %s, and the wait is reached from %s()" % (
					next(x for x in s["callbacks"] if init.get(x) == w), struct,
					s["describe"] % tuple(d or "?" for d in during), hit[0])
	return None


def waker_file(fx, ff, rel, w):
	"""(FileFuncs, path) of the file of waker w ('at': 'path:line'): ff
	for the waiter's own file; None when it cannot be read."""
	wrel = (w.get("at") or "").rsplit(":", 1)[0] or rel
	if os.path.normpath(os.path.join(fx.kdir, wrel)) == os.path.normpath(os.path.join(fx.kdir, rel)):
		return ff, rel
	try:
		return FileFuncs(fx.text(wrel)), wrel
	except OSError:
		return None


def check(fx, f, u, rel, func, queue, state):
	"""Refuse the wait of f, or note why its rewrite keeps a waker."""
	p = (f.get("wakers") or {}).get("polls") or apolls.polls(f, fx.ana, fx.kn)
	if p is None:
		return
	polled = "the wait polls today (%s)" % p["reason"]
	wk = f.get("wakers")
	ws = [w for w in wk["wakers"]] if wk and wk.get("wakers") is not None else queue_wakers(fx, rel, queue, state)
	shown = re.sub(r"\s+", "", queue).lstrip("&")
	good = [w for w in ws if w.get("wakes") and w.get("function")]
	if not good:
		raise Refuse("manual", "%s; nothing in the file wakes %s in %s: a wait_woken() rewrite would "
			     "never end" % (polled, shown, state))
	ft = fx.text(rel)
	ff = FileFuncs(ft)
	line = max(1, int(f.get("line") or 1))
	pos = len("\n".join(ft.t.split("\n")[:line - 1])) + (line > 1)
	locks = held_locks(fx, ff, rel, func, pos)
	why = []
	for w in good:
		wf = w["function"]
		wff = waker_file(fx, ff, rel, w)
		lw = late(fx, ff, wf, func)
		if lw:
			why.append("its waker %s() (%s) %s: the rewrite would wait out its timeout or hang" % (wf, w["at"], lw))
			continue
		ctx = context_of(fx, ff, wf)
		blocked = None
		for lock, at in locks:
			# the context's callbacks are the waiter's file's; the
			# waker alone is read in its own file
			for g, gff in ([(g, (ff, rel)) for g in ctx[2]] if ctx else [(wf, wff)]):
				t = takes(fx, gff[0], gff[1], g, lock) if gff else None
				if t:
					blocked = "its waker %s() (%s) runs on %s; %s takes %s, which the waiter holds " \
						  "(%s): the rewrite could hang" % (wf, w["at"], ctx[1] if ctx else
										 "its own context", t, lock[2], at)
					break
			if blocked:
				break
		if blocked:
			why.append(blocked)
			continue
		u.reasons.append("%s; its waker %s() (%s) wakes %s for the whole wait" % (polled, wf, w["at"], shown))
		return
	raise Refuse("manual", "%s; %s" % (polled, "; ".join(why)))
