# SPDX-License-Identifier: GPL-2.0-only
"""The waker rule: a rewritten wait must keep every waker of its task.

wait_woken() is only reliably woken through its wait queue: the queue's
woken_wake_function() sets WQ_FLAG_WOKEN, which wait_woken() tests after
its set_current_state().  A direct wakeup (wake_up_process(),
wake_up_state(), a wake_q) that comes while the rewritten loop tests its
condition in TASK_RUNNING sets no flag, so the thread then sleeps on: a
lost wakeup.  The fixer therefore rewrites a wait only when this module
has found every direct waker of the waiting task and turned each into a
wake_up*() of the queue the task waits on, or when the task pointer is
stored nowhere, so that no direct waker can exist.

  thread     the waiting function and its callers, up to MAX_UP levels:
             which of them is a kthread function (passed to
             kthread_run()/kthread_create*()) and which stores current
  locations  where the task pointer lives: a global, a struct member, an
             array, a local that is copied on (kthread_run()'s value)
  wakers     every call in cocci/sleep_info.json's "tasks.wakers" whose
             task argument is the location, or a local copy of it
             (READ_ONCE() included), in every file that mentions the
             global, the array, or the struct type and the member
  convert    wake_up_process(T)/wake_up_state(T, S) -> wake_up*(queue),
             the queue written from the waker's own pointer; the edit is
             cocci/fix_wakers.cocci's (rewrite()), and a waker it leaves
             refuses the unit

Anything it cannot follow refuses the site ("manual"), with the reason and
the file:line: a pointer passed to a call it does not know, returned to a
caller, stored where it cannot name the struct type, a wake_q, a start
wakeup it cannot tell from a kick, kthread_stop() without a
kthread_should_stop() test, kthread_park() on a tree whose wait_woken()
does not check parking, a queue the waker cannot reach, or another direct
sleep of the same thread.
"""

import json
import os
import re
import subprocess

from nestsleep import COCCI_DIR
from nestsleep.fix.ctext import LINES, match_close, next_nonspace, prev_nonspace, split_top
from nestsleep.fix.edits import Edit, Refuse, text_edits
from nestsleep.fix.spatch import spatch_text

WAKERS_RULE = os.path.join(COCCI_DIR, "fix_wakers.cocci")

MAX_UP = 3          # caller levels searched above the waiting function
MAX_FANIN = 40      # callers of one function beyond which the search stops

IDENT = r"[A-Za-z_]\w*"
WAKE_CALL = re.compile(r"\bwake_up_(?:process|state)\(")
ACCESS = re.compile(r"^%s(?:(?:->|\.)%s|\[[^\]]*\])*$" % (IDENT, IDENT))


def match_open(m, i):
	"""Index of the bracket that opens the one closing at m[i], or -1."""
	pairs = {")": "(", "]": "["}
	depth = 0
	for o in range(i, -1, -1):
		if m[o] == m[i]:
			depth += 1
		elif m[o] == pairs[m[i]]:
			depth -= 1
			if depth == 0:
				return o
	return -1


def compact(s):
	return re.sub(r"\s+", "", s or "")


def per_line(t, edits):
	"""A run of changed lines that keeps its line count, one Edit per changed
	line: two units that convert different wakers on neighbouring lines
	then give equal edits for the waker they share, which de-duplicate."""
	out = []
	for e in edits:
		old = LINES.findall(t[e.s:e.e])
		new = LINES.findall(e.text)
		if len(old) != len(new) or len(old) < 2:
			out.append(e)
			continue
		s = e.s
		for a, b in zip(old, new):
			if a != b:
				out.append(Edit(s, s + len(a), b))
			s += len(a)
	return out


class Loc:
	"""Where a task pointer is kept: ('global', None, name),
	('member', struct, member) or ('array', struct or None, name)."""

	__slots__ = ("kind", "struct", "name", "where", "started", "static")

	def __init__(self, kind, struct, name, where, started, static=None):
		self.kind, self.struct, self.name, self.where = kind, struct, name, where
		self.started = started      # True: kthread_run; False: kthread_create; None: current
		self.static = static        # the file of a file-scope static global

	def key(self):
		return (self.kind, self.struct, self.name)

	def words(self):
		return [w for w in (self.struct, self.name) if w]

	def describe(self):
		if self.kind == "global":
			return self.name
		if self.kind == "member":
			return "struct %s's ->%s" % (self.struct, self.name)
		return "%s%s[]" % ("struct %s's ->" % self.struct if self.struct else "", self.name)


class Waker:
	__slots__ = ("name", "kind", "rel", "line", "func", "s", "e", "arg", "base", "loc", "via_copy", "stmt_ok",
		     "state_arg")

	def __init__(self, **kw):
		for k in self.__slots__:
			setattr(self, k, kw.get(k))

	def at(self):
		return "%s:%d" % (self.rel, self.line)


class Thread:
	"""What the rule learned about the task that runs a waiting function."""

	def __init__(self):
		self.ancestors = []     # (rel, func, depth)
		self.entries = []       # (rel, func): kthread functions among them
		self.locs = []          # Loc
		self.stores = []        # "file:line: text" of each store found
		self.refuse = None      # reason
		self.cut = []           # functions whose callers were not followed (fan-in)
		self.creates = []       # (rel, func, pos) of kthread_create*() calls
		self.local_wakers = []  # (rel, call pos, what, started): wakers of a local copy


class WakerRule:
	def __init__(self, fixer, kn):
		self.fx = fixer
		self.tree, self.facts = fixer.tree, fixer.facts
		info = kn.info.get("tasks") or {}
		self.wakers = {w["name"]: w for w in info.get("wakers", [])}
		cr = info.get("creators", {})
		self.started = set(cr.get("started", []))
		self.creators = self.started | set(cr.get("stopped", []))
		self.harmless = set(info.get("harmless", {}).get("functions", []))
		self.registrars = set(info.get("callback_registrars", {}).get("functions", []))
		st = info.get("stores", {})
		self.store_wrappers = set(st.get("store_wrappers", []))
		self.load_wrappers = set(st.get("load_wrappers", []))
		self.direct_sleeps = set(info.get("direct_sleeps", {}).get("functions", []))
		self.mentions_memo = {}
		self.callers_memo = {}
		self.threads = {}
		self._park_safe = None
		self.struct_memo = {}

	# -- the whole tree's words ---------------------------------------------

	def roots(self):
		roots = [self.tree.kdir]
		for rel in self.tree.abs:
			if os.path.isabs(rel):
				roots.append(os.path.dirname(rel))
				break
		return roots

	def mentions(self, words):
		"""word -> set of tree files that hold it as a whole word."""
		want = sorted(set(w for w in words if w not in self.mentions_memo))
		if want:
			for w in want:
				self.mentions_memo[w] = set()
			byabs = {}
			for rel, p in self.tree.abs.items():
				byabs[p] = rel
			pats = "\n".join(want) + "\n"
			for root in sorted(set(self.roots())):
				cmd = ["grep", "-rowHF", "--include=*.c", "--include=*.h", "-f", "-", root]
				proc = subprocess.run(cmd, input=pats.encode(), stdout=subprocess.PIPE,
						      stderr=subprocess.DEVNULL)
				for line in proc.stdout.decode("utf-8", "replace").splitlines():
					path, _, word = line.rpartition(":")
					rel = byabs.get(path)
					if rel is None:
						rel = byabs.get(os.path.normpath(path))
					if rel is not None and word in self.mentions_memo:
						self.mentions_memo[word].add(rel)
		return {w: self.mentions_memo.get(w, set()) for w in words}

	def files_with_all(self, words):
		sets = [self.mentions([w])[w] for w in words]
		out = set(sets[0]) if sets else set()
		for s in sets[1:]:
			out &= s
		return sorted(out)

	# -- functions and types -------------------------------------------------

	def func_span(self, rel, name):
		"""(open, close) of the body of name in rel, with the parameter list
		start, from the facts' line numbers; None if not defined there."""
		fn = self.facts.get(rel)["functions"].get(name)
		if not fn:
			return None
		ft = self.fx.text(rel)
		o = ft.offset(fn["line"], 0)
		o = ft.m.find("{", o)
		if o < 0:
			return None
		c = match_close(ft.m, o)
		if c < 0:
			return None
		# the parameter list: the last ')' before the body
		pe = ft.m.rfind(")", 0, o)
		ps = ft.m.rfind(name, 0, pe)
		return (ps if ps >= 0 else o), o, c

	def func_around(self, rel, pos):
		ft = self.fx.text(rel)
		line = ft.t.count("\n", 0, pos) + 1
		best = None
		for name, fn in self.facts.get(rel)["functions"].items():
			if fn["line"] <= line <= fn["end"]:
				if best is None or fn["line"] > best[1]["line"]:
					best = (name, fn)
		return best or (None, None)

	def is_local(self, rel, func, name):
		"""Whether name is declared in func (a parameter or a local)."""
		span = self.func_span(rel, func) if func else None
		if not span:
			return False
		txt = self.fx.text(rel).m[span[0]:span[2]]
		return bool(re.search(r"(?:\bstruct\s+\w+\s*\**|\b\w+\s*\*+|\b(?:int|long|bool|char|unsigned|\w+_t)"
				      r"\s+\**)\s*(?:const\s+)?%s\s*[=;,)\[]" % re.escape(name), txt))

	def struct_body(self, sname):
		if sname in self.struct_memo:
			return self.struct_memo[sname]
		body = None
		for rel in self.tree.struct_defs.get(sname, []):
			ft = self.fx.text(rel)
			mm = re.search(r"\bstruct\s+%s\s*\{" % re.escape(sname), ft.m)
			if mm:
				c = match_close(ft.m, mm.end() - 1)
				if c > 0:
					body = ft.m[mm.end():c]
					break
		self.struct_memo[sname] = body
		return body

	def field_type(self, sname, field):
		body = self.struct_body(sname)
		if body is None:
			return None
		mm = re.search(r"\bstruct\s+(\w+)\s*\**\s*(?:const\s+)?%s\s*(?:\[[^\]]*\])?\s*[;,:]" % re.escape(field), body)
		if mm:
			return mm.group(1)
		return None

	def global_type(self, rel, name):
		ft = self.fx.text(rel)
		mm = re.search(r"^[ \t]*(?:static\s+|extern\s+)?(?:const\s+)?struct\s+(\w+)\s*\**\s*%s\s*(?:\[[^\]]*\])?\s*[;=,]"
			       % re.escape(name), ft.m, re.M)
		return mm.group(1) if mm else None

	def type_of(self, rel, func, expr):
		"""The struct type of an access path (x, x->f, x.f->g, (*x)), or None."""
		e = compact(expr)
		e = re.sub(r"^\(\*(%s)\)" % IDENT, r"\1", e)
		e = re.sub(r"\[[^\]]*\]", "", e)
		parts = re.split(r"->|\.", e)
		if not parts or not all(re.match(r"^%s$" % IDENT, p) for p in parts):
			return None
		fn = self.facts.get(rel)["functions"].get(func) if func else None
		ty = None
		if fn and parts[0] in fn["locals"]:
			ty = fn["locals"][parts[0]].rstrip("*")
		else:
			ty = self.global_type(rel, parts[0])
			if ty is None:
				for inc in self.headers_of(rel):
					ty = self.global_type(inc, parts[0])
					if ty:
						break
		for f in parts[1:]:
			if ty is None:
				return None
			ty = self.field_type(ty, f)
		return ty

	def headers_of(self, rel):
		out = []
		d = os.path.dirname(rel)
		for inc in self.facts.get(rel).get("includes", []):
			cand = os.path.normpath(os.path.join(d, inc))
			if cand in self.tree.files:
				out.append(cand)
		return out

	def prepare(self, sites):
		"""Search the words of all sites at once, level by level: one grep
		of the tree per caller level and one for the locations, not one per
		site.  sites: [(rel, func)]."""
		seen = set(sites)
		level = set(sites)
		for _ in range(MAX_UP):
			names = sorted(set(f for _, f in level))
			self.mentions(names)
			nxt = set()
			for name in names:
				if len(self.callers_of(name)) <= MAX_FANIN:
					nxt.update(self.callers_of(name))
			level = nxt - seen
			seen |= level
		self.mentions(sorted(set(f for _, f in seen)))
		words = set()
		for rel, func in sites:
			for loc in self.thread_of(rel, func).locs:
				words.update(loc.words())
		self.mentions(sorted(words))

	def callers_of(self, name):
		"""[(rel, function)] of the functions that call name, in the files
		that mention it."""
		if name not in self.callers_memo:
			self.callers_memo[name] = sorted(
				(r, g) for r in self.mentions([name])[name]
				for g, fn in self.facts.get(r)["functions"].items()
				if any(c["name"] == name for c in fn["calls"]))
		return self.callers_memo[name]

	# -- where the task pointer lives ---------------------------------------

	def thread_of(self, rel, func):
		key = (rel, func)
		if key in self.threads:
			return self.threads[key]
		th = Thread()
		self.threads[key] = th
		seen = {(rel, func)}
		level = [(rel, func)]
		for depth in range(MAX_UP + 1):
			for r, f in level:
				th.ancestors.append((r, f, depth))
			if depth == MAX_UP or not level:
				break
			names = sorted(set(f for _, f in level))
			self.mentions(names)
			nxt = []
			for name in names:
				if len(self.callers_of(name)) > MAX_FANIN:
					th.cut.append(name)
					continue
				for c in self.callers_of(name):
					if c not in seen:
						seen.add(c)
						nxt.append(c)
			level = nxt
		# kthread functions among them, and where their task goes
		names = sorted(set(f for _, f, _ in th.ancestors))
		hits = self.mentions(names)
		for name in names:
			rx = re.compile(r"\b(%s)\s*\(\s*%s\s*[,)]" % ("|".join(sorted(self.creators)), re.escape(name)))
			for r in sorted(hits[name]):
				ft = self.fx.text(r)
				for cm in rx.finditer(ft.m):
					if (r, name) not in th.entries:
						th.entries.append((r, name))
					po = ft.m.find("(", cm.start())
					pc = match_close(ft.m, po)
					if pc < 0:
						continue
					self.follow_value(th, r, cm.start(), pc + 1, "%s(%s)" % (cm.group(1), name),
							  cm.group(1) in self.started)
		self.passed_as_thread(th, names, hits)
		# stores of current in the ancestors
		for r, f, _ in th.ancestors:
			span = self.func_span(r, f)
			if not span:
				continue
			ft = self.fx.text(r)
			for cm in re.finditer(r"\bcurrent\b(?!\s*->)", ft.m[span[1]:span[2]]):
				p = span[1] + cm.start()
				self.follow_current(th, r, f, p)
		return th

	def passed_as_thread(self, th, names, hits):
		"""An ancestor whose address goes to a call the rule does not know
		may run as a thread whose task is woken directly: set th.refuse.
		Only a word that names the ancestor counts (names_function())."""
		for name in names:
			homes = [(r, f) for r, f, _ in th.ancestors if f == name]
			rx = re.compile(r"(?<![\w.>])%s\b(?!\s*\()" % re.escape(name))
			for r in sorted(hits[name]):
				ft = self.fx.text(r)
				for am in rx.finditer(ft.m):
					if not self.names_function(r, am.start(), name, homes):
						continue
					use = self.use_of(ft.m, am.start(), am.end())
					if use[0] != "arg" or use[1] in self.creators or self.declares(use[1], use[2]):
						continue        # a creator (followed above), a registrar, a table macro
					th.refuse = "%s:%d: %s() is passed to %s(), which may run it as a thread whose task " \
						    "is woken directly; the waker search does not follow it" % (
							    r, ft.t.count("\n", 0, am.start()) + 1, name, use[1])
					return

	def names_function(self, rel, pos, name, homes):
		"""Whether the word name at pos in rel can be the function name of
		homes [(file, name)]: not a member (x->name, x.name, split over
		lines inside a macro argument), not a parameter or local of the
		function around it (a value that shadows the function, C11 6.2.1),
		and, when every definition in homes is static, in one of their
		files (a static function has internal linkage: no other file can
		name it, C11 6.2.2)."""
		ft = self.fx.text(rel)
		b = prev_nonspace(ft.m, pos)
		if b >= 0 and (ft.m[b] == "." or ft.m[max(0, b - 1):b + 1] == "->"):
			return False
		func, _ = self.func_around(rel, pos)
		if func and func != name and self.is_local(rel, func, name):
			return False
		defs = [(r, (self.facts.get(r)["functions"].get(f) or {})) for r, f in homes]
		if defs and all(fn.get("static") for _, fn in defs):
			return rel in set(r for r, _ in defs)
		return True

	def declares(self, callee, idx, depth=0):
		"""Whether a function name passed as argument idx of callee only
		lands in a callback registrar or a declaration: callee is a
		registrar, or a function-like macro whose body hands that parameter
		only to such calls (GENL_doit(), TRACE_EVENT() build table entries).
		A function, or a macro that hands it to anything else, may run it
		as a thread."""
		if callee in self.registrars:
			return True
		if depth > 3 or callee in self.creators:
			return False
		mac = None
		rx = re.compile(r"^[ \t]*#[ \t]*define[ \t]+%s\(" % re.escape(callee), re.M)
		for rel in sorted(self.tree.defs.get(callee, []), key=lambda r: (not r.startswith("include/"), r)):
			if rx.search(self.fx.text(rel).t):
				mac = self.facts.get(rel)["macros"].get(callee)
				if mac:
					break
		if not mac or idx >= len(mac["params"]):
			return False
		param = mac["params"][idx]
		if re.search(r"#\s*#\s*%s\b|\b%s\s*#\s*#|(?<![#\s])\s*#\s*%s\b" % ((re.escape(param),) * 3),
			     mac.get("body", "")):
			return True     # a name pasted into other names (TRACE_EVENT()): not a pointer
		for c in mac["calls"]:
			for k, a in enumerate(c.get("args") or []):
				if param in re.findall(IDENT, a) and not self.declares(c["name"], k, depth + 1):
					return False
		return True

	def expr_bounds(self, m, s, e):
		"""Widen [s, e) over wrappers: READ_ONCE(x), get_task_struct(x), (x)."""
		while True:
			b = prev_nonspace(m, s)
			if b >= 0 and m[b] == "(":
				a = next_nonspace(m, e)
				if a < len(m) and m[a] == ")":
					wm = re.search(r"(%s)\s*$" % IDENT, m[:b])
					if wm is None or wm.group(1) in self.load_wrappers:
						s = wm.start(1) if wm else b
						e = a + 1
						continue
			return s, e

	def use_of(self, m, s, e):
		"""How the value at m[s:e] is used: ('assign', lhs_start, lhs_text_span),
		('return',), ('arg', callee, index, call_start), ('test',), ('other',)."""
		s, e = self.expr_bounds(m, s, e)
		b = prev_nonspace(m, s)
		a = next_nonspace(m, e)
		if b >= 0 and m[b] == "=" and m[b - 1] not in "=!<>+-*/%&|^":
			le = prev_nonspace(m, b) + 1
			ls = self.base_before(m, le)
			lhs = m[ls:le]
			st = ls - 1
			while st >= 0 and m[st] not in ";{}(,":
				st -= 1
			pre = m[st + 1:ls].strip()
			if pre and re.match(r"^(?:(?:const|volatile|static|struct|union|unsigned|signed)\s+)*\w+(?:\s+\w+)?\s*\**\s*(?:const\s*)?$",
					    pre) and pre.split()[0] not in ("return", "else", "do", "case", "goto"):
				return ("decl", compact(lhs), ls)
			if pre.endswith(("*", "&")):
				return ("assign", pre[-1] + compact(lhs), ls)
			return ("assign", compact(lhs), ls)
		if b >= 0 and m[max(0, b - 6):b + 1].endswith("return"):
			return ("return",)
		if a < len(m) and m[a] == ";" and (b < 0 or m[b] in ";{})" or m[max(0, b - 3):b + 1] == "else"):
			return ("discard",)
		if b >= 0 and m[b] in "(,":
			# an argument: find the call
			depth = 0
			j = s - 1
			idx = 0
			while j >= 0:
				c = m[j]
				if c in ")]}":
					depth += 1
				elif c in "([{":
					if depth == 0:
						break
					depth -= 1
				elif c == "," and depth == 0:
					idx += 1
				j -= 1
			if j >= 0 and m[j] == "(":
				wm = re.search(r"(%s)\s*$" % IDENT, m[:j])
				if wm and wm.group(1) not in ("if", "while", "for", "switch", "return", "sizeof"):
					return ("arg", wm.group(1), idx, wm.start(1))
				if wm is None or wm.group(1) in ("if", "while"):
					return ("test",)
		if (b >= 0 and m[b] in "!&|?:") or (a < len(m) and m[a] in ")&|?=!<>"):
			return ("test",)
		return ("other",)

	def classify_lvalue(self, th, rel, func, lhs, where, started):
		"""A location for the text lhs, or None (and th.refuse) when it is
		not one the search follows."""
		mm = re.match(r"^&?(.+)$", lhs)
		lhs = mm.group(1)
		if re.match(r"^%s$" % IDENT, lhs):
			return Loc("global", None, lhs, where, started, self.static_in(rel, lhs))
		am = re.match(r"^(.*?)(%s)\[[^\]]*\]$" % IDENT, lhs)
		if am and (not am.group(1) or am.group(1).endswith(("->", "."))):
			base = am.group(1)[:-2] if am.group(1).endswith("->") else am.group(1)[:-1]
			if not base:
				return Loc("array", None, am.group(2), where, started, self.static_in(rel, am.group(2)))
			st = self.type_of(rel, func, base)
			if st is None:
				th.refuse = "%s: the task pointer is stored in %s, and the struct type of %s is not known, so " \
					    "its wakers cannot be searched" % (where, lhs, base)
				return None
			return Loc("array", st, am.group(2), where, started)
		mm = re.match(r"^(.+?)(?:->|\.)(%s)$" % IDENT, lhs)
		if mm and ACCESS.match(lhs.replace("(*", "").replace(")", "")):
			st = self.type_of(rel, func, mm.group(1))
			if st is None:
				th.refuse = "%s: the task pointer is stored in %s, and the struct type of %s is not known, so " \
					    "its wakers cannot be searched" % (where, lhs, mm.group(1))
				return None
			return Loc("member", st, mm.group(2), where, started)
		th.refuse = "%s: the task pointer is stored in %s, a place the waker search does not follow" % (where, lhs)
		return None

	def static_in(self, rel, name):
		"""rel if name is a file-scope static there: no other file sees it."""
		if re.search(r"^[ \t]*static\b[^;(]*\b%s\s*(?:\[[^\]]*\])?\s*[;=]" % re.escape(name), self.fx.text(rel).m, re.M):
			return rel
		return None

	def add_loc(self, th, loc):
		if loc and all(x.key() != loc.key() for x in th.locs):
			th.locs.append(loc)
		elif loc:
			for x in th.locs:
				if x.key() == loc.key() and loc.started is False:
					x.started = False

	def follow_value(self, th, rel, s, e, what, started, depth=0, strict=True):
		"""The task value at m[s:e] (a kthread_run() value, current, a local
		copy): record where it is stored, or refuse where it escapes.
		strict: a call that takes the value is an escape (a kthread's task
		pointer); for current, which every callee can read anyway, only
		stores count."""
		ft = self.fx.text(rel)
		m = ft.m
		line = ft.t.count("\n", 0, s) + 1
		where = "%s:%d" % (rel, line)
		func, _ = self.func_around(rel, s)
		use = self.use_of(m, s, e)
		if use[0] == "arg" and use[1] in self.store_wrappers and use[2] == 1:
			cs = use[3]
			po = m.find("(", cs)
			pc = match_close(m, po)
			a0 = split_top(m, po + 1, pc)[0]
			use = ("assign", compact(m[a0[0]:a0[1]]).lstrip("&"), cs)
		if use[0] in ("assign", "decl"):
			lhs = use[1]
			th.stores.append("%s: %s = %s" % (where, lhs, what))
			if started is False:
				th.creates.append((rel, func, s))
			if use[0] == "decl" or (re.match(r"^%s$" % IDENT, lhs) and self.is_local(rel, func, lhs)):
				self.follow_local(th, rel, func, lhs, e, what, started, depth, strict)
				return
			self.add_loc(th, self.classify_lvalue(th, rel, func, lhs, where, started))
			return
		if not strict:
			return
		if use[0] == "arg":
			callee = use[1]
			if callee in self.harmless or callee in self.load_wrappers:
				return
			if callee in self.wakers and self.wakers[callee]["kind"] != "wake_q":
				th.local_wakers.append((rel, use[3], what, started))
				return
			th.refuse = "%s: the task pointer (%s) is passed to %s(), which the waker search cannot follow" % (
				where, what, callee)
			return
		if use[0] == "return":
			th.refuse = "%s: %s() returns the task pointer (%s) to its callers, which the waker search does " \
				    "not follow" % (where, func, what)
			return
		if use[0] in ("test", "discard"):
			return
		th.refuse = "%s: the task pointer (%s) is used in an expression the waker search does not follow" % (
			where, what)

	def follow_local(self, th, rel, func, name, after, what, started, depth, strict):
		if depth > 3:
			th.refuse = "%s:%d: the task pointer is copied through too many locals" % (
				rel, self.fx.text(rel).t.count("\n", 0, after) + 1)
			return
		span = self.func_span(rel, func) if func else None
		if not span:
			return
		m = self.fx.text(rel).m
		for um in re.finditer(r"(?<![\w.>])%s\b(?!\s*(?:->|\.|\[))" % re.escape(name), m[after:span[2]]):
			p = after + um.start()
			q = p + len(name)
			nxt = next_nonspace(m, q)
			if nxt < len(m) and m[nxt] == "=" and m[nxt + 1] != "=":
				break           # assigned again: another value from here on
			self.follow_value(th, rel, p, q, "%s, from %s" % (name, what), started, depth + 1, strict)
			if th.refuse:
				return

	def follow_current(self, th, rel, func, p):
		self.follow_value(th, rel, p, p + len("current"), "current", None, strict=False)

	# -- the wakers -----------------------------------------------------------

	def park_safe(self):
		"""Whether the tree's wait_woken() stops sleeping for a park request."""
		if self._park_safe is None:
			path = os.path.join(self.tree.kdir, "kernel", "sched", "wait.c")
			try:
				with open(path, errors="replace") as f:
					t = f.read()
			except OSError:
				t = ""
			mm = re.search(r"long\s+wait_woken\s*\([^)]*\)\s*\{(.*?)\n\}", t, re.S)
			self._park_safe = bool(mm and "kthread_should_stop_or_park" in mm.group(1))
		return self._park_safe

	def woken_lines(self):
		"""'kernel/sched/wait.c:462 and sleeps at kernel/sched/wait.c:464':
		where the tree's wait_woken() sets the state and where it sleeps,
		testing only its flag (and kthread_should_stop*()), not the wait's
		condition; '' when wait.c has no such body."""
		path = os.path.join(self.tree.kdir, "kernel", "sched", "wait.c")
		try:
			with open(path, errors="replace") as f:
				t = f.read()
		except OSError:
			return ""
		mm = re.search(r"long\s+wait_woken\s*\([^)]*\)\s*\{(.*?)\n\}", t, re.S)
		if not mm:
			return ""
		first = t.count("\n", 0, mm.start(1)) + 1
		at = {}
		for i, line in enumerate(mm.group(1).split("\n")):
			for key, pat in (("set", r"\bset_current_state\s*\("), ("sleep", r"\bschedule\w*\s*\(")):
				if key not in at and re.search(pat, line):
					at[key] = first + i
		if len(at) < 2:
			return ""
		return "kernel/sched/wait.c:%d and sleeps at kernel/sched/wait.c:%d" % (at["set"], at["sleep"])

	def woken_text(self):
		"""' (wait_woken() sets the state at ... testing only WQ_FLAG_WOKEN)'."""
		w = self.woken_lines()
		return " (wait_woken() sets the state at %s testing only WQ_FLAG_WOKEN)" % w if w else ""

	def loc_of_arg(self, rel, func, arg, loc):
		"""The base expression of loc in the task argument arg, '' for a
		global or an array of globals, None if arg is not loc."""
		a = compact(arg)
		while True:
			wm = re.match(r"^(%s)\((.*)\)$" % IDENT, a)
			if wm and wm.group(1) in self.load_wrappers:
				a = wm.group(2)
				continue
			if a.startswith("(") and a.endswith(")") and match_close(a, 0) == len(a) - 1:
				a = a[1:-1]
				continue
			break
		if loc.kind == "global":
			return "" if a == loc.name and not self.is_local(rel, func, a) else None
		if loc.kind == "array":
			mm = re.match(r"^(?:(.*)(?:->|\.))?%s\[.*\]$" % re.escape(loc.name), a)
			if not mm:
				return None
			if loc.struct is None:
				return "" if not mm.group(1) and not self.is_local(rel, func, loc.name) else None
			return self.match_base(rel, func, mm.group(1), loc)
		mm = re.match(r"^(.+)(?:->|\.)%s$" % re.escape(loc.name), a)
		if not mm:
			return None
		return self.match_base(rel, func, mm.group(1), loc)

	def match_base(self, rel, func, base, loc):
		st = self.type_of(rel, func, base)
		if st == loc.struct:
			return base
		if st is None:
			return "?" + base
		return None

	def waker_at(self, rel, pos, loc, base, via):
		ft = self.fx.text(rel)
		m = ft.m
		wm = re.compile(r"(%s)\s*\(" % IDENT).match(m, pos)
		name = wm.group(1)
		spec = self.wakers[name]
		po = wm.end() - 1
		pc = match_close(m, po)
		args = split_top(m, po + 1, pc)
		s, e = args[spec["task_arg"]]
		func, _ = self.func_around(rel, pos)
		w = Waker(name=name, kind=spec["kind"], rel=rel, line=ft.t.count("\n", 0, pos) + 1, func=func, s=pos,
			  e=pc + 1, arg=compact(m[s:e]), base=base, loc=loc, via_copy=via,
			  state_arg=compact(m[args[1][0]:args[1][1]]) if name == "wake_up_state" and len(args) > 1 else None)
		a = next_nonspace(m, pc + 1)
		b = prev_nonspace(m, pos)
		w.stmt_ok = a < len(m) and m[a] == ";" and (b < 0 or m[b] in ";{}):" or m[max(0, b - 3):b + 1] == "else")
		return w

	def find_wakers(self, th):
		"""Every waker call on one of th's locations (or on a local copy of
		one), and every read of a location that escapes (th.refuse)."""
		out = []
		rx = re.compile(r"\b(%s)\s*\(" % "|".join(sorted(self.wakers)))
		for rel, pos, what, started in th.local_wakers:
			loc = Loc("local", None, what, "%s:%d" % (rel, self.fx.text(rel).t.count("\n", 0, pos) + 1), started)
			out.append(self.waker_at(rel, pos, loc, "", None))
		for loc in th.locs:
			files = self.files_with_all(loc.words())
			if loc.static:
				files = [loc.static]
			for rel in files:
				m = self.fx.text(rel).m
				for wm in rx.finditer(m):
					spec = self.wakers[wm.group(1)]
					po = wm.end() - 1
					pc = match_close(m, po)
					if pc < 0:
						continue
					args = split_top(m, po + 1, pc)
					if spec["task_arg"] >= len(args):
						continue
					s, e = args[spec["task_arg"]]
					arg = compact(m[s:e])
					func, _ = self.func_around(rel, wm.start())
					base = self.loc_of_arg(rel, func, arg, loc)
					via = None
					if base is None and re.match(r"^%s$" % IDENT, arg) and func:
						base, via = self.copy_source(rel, func, arg, wm.start(), loc)
					if base is None:
						continue
					if all(x.s != wm.start() or x.rel != rel for x in out):
						out.append(self.waker_at(rel, wm.start(), loc, base, via))
				self.escapes(th, rel, loc)
				if th.refuse:
					return out
		return out

	def copy_source(self, rel, func, name, before, loc):
		"""(base, copied text) when the local name was last assigned from loc
		in func before the position before."""
		span = self.func_span(rel, func)
		if not span:
			return None, None
		m = self.fx.text(rel).m
		found = (None, None)
		for am in re.finditer(r"(?<![\w.>])%s\s*=(?!=)\s*([^;]+);" % re.escape(name), m[span[1]:before]):
			src = am.group(1)
			base = self.loc_of_arg(rel, func, src, loc)
			found = (base, compact(src)) if base is not None else (None, None)
		return found

	@staticmethod
	def base_before(m, end):
		"""Start of the access path (x, x->y, x.y[i], (*x)->y, f(a)->b)
		that ends at m[end]."""
		j = end
		while True:
			k = j
			while k > 0 and m[k - 1] in " \t":
				k -= 1
			while k > 0 and m[k - 1] == "]":
				o = match_open(m, k - 1)
				if o < 0:
					return j
				k = o
			if k > 0 and m[k - 1] == ")":
				o = match_open(m, k - 1)
				if o < 0:
					return j
				wm = re.search(r"(%s)\s*$" % IDENT, m[max(0, o - 80):o])
				k = o - (len(wm.group(0)) if wm else 0)
				st = k
			elif k > 0 and (m[k - 1].isalnum() or m[k - 1] == "_"):
				st = k
				while st > 0 and (m[st - 1].isalnum() or m[st - 1] == "_"):
					st -= 1
			else:
				return k if k < j else j
			j = st
			k = j
			while k > 0 and m[k - 1] in " \t\n":
				k -= 1
			if m[max(0, k - 2):k] == "->":
				j = k - 2
			elif k > 0 and m[k - 1] == "." and not re.search(r"(?<![\w])\d\w*\s*$", m[max(0, k - 40):k - 1]):
				j = k - 1
			else:
				return j

	def escapes(self, th, rel, loc):
		"""Reads of loc in rel that copy it where the search cannot follow:
		into another non-local place, a return, or an unknown call."""
		ft = self.fx.text(rel)
		m = ft.m
		if loc.kind == "global":
			rx = re.compile(r"(?<![\w.>])%s\b(?!\s*\[)" % re.escape(loc.name))
		elif loc.kind == "array":
			rx = re.compile(r"(?<![\w])%s\s*\[" % re.escape(loc.name))
		else:
			rx = re.compile(r"(?:->|\.)\s*%s\b" % re.escape(loc.name))
		for om in rx.finditer(m):
			s, e = om.start(), om.end()
			func, _ = self.func_around(rel, s)
			if not func:
				continue
			if loc.kind == "array":
				e = match_close(m, e - 1) + 1
				if e <= 0:
					continue
			if loc.kind == "member" or (loc.kind == "array" and loc.struct):
				s = self.base_before(m, om.start())
				base = compact(m[s:om.start()])
				if loc.kind == "array":
					base = re.sub(r"(->|\.)$", "", base)
				if base:
					st = self.type_of(rel, func, base)
					if st is not None and st != loc.struct:
						continue
			elif self.is_local(rel, func, loc.name):
				continue
			nxt = next_nonspace(m, e)
			if nxt < len(m) and m[nxt] == "=" and m[nxt + 1] != "=":
				continue        # a store into the location
			if m[nxt:nxt + 2] == "->" or (nxt < len(m) and m[nxt] in "(["):
				continue        # a dereference, or not the pointer itself
			use = self.use_of(m, s, e)
			where = "%s:%d" % (rel, ft.t.count("\n", 0, s) + 1)
			if use[0] == "arg":
				callee = use[1]
				if callee in self.store_wrappers and use[2] == 0:
					continue        # WRITE_ONCE(loc, v): a store
				if callee in self.harmless or callee in self.wakers or callee in self.load_wrappers:
					continue
				th.refuse = "%s: %s is passed to %s(), which the waker search cannot follow" % (
					where, loc.describe(), callee)
				return
			if use[0] == "decl" or (use[0] == "assign" and re.match(r"^%s$" % IDENT, use[1]) and
						self.is_local(rel, func, use[1])):
				continue        # a local copy: its wakers are found by copy_source()
			if use[0] == "assign":
				th.refuse = "%s: %s is copied to %s, which the waker search does not follow" % (
					where, loc.describe(), use[1])
				return
			if use[0] == "return":
				th.refuse = "%s: %s() returns %s, which the waker search does not follow" % (
					where, func, loc.describe())
				return

	def forwarded_entries(self, th):
		"""The wait entries the thread queues on other wait queues with itself
		as the task to wake: init_waitqueue_entry(&e, current) or
		DECLARE_WAITQUEUE(e, current), in the waiting function and its
		callers (hidp's ctrl_wait and intr_wait on the sockets' queues).
		[(rel, func, entry, "init" or "declare", start, end)] of the
		init_waitqueue_entry() call or the DECLARE_WAITQUEUE() statement.
		Given a queue of its own, the thread is woken through it only, so
		these entries must forward their wakeups to it."""
		out = []
		rx = re.compile(r"\binit_waitqueue_entry\s*\(\s*&\s*(%s)\s*,\s*current\s*\)\s*;|"
				r"\bDECLARE_WAITQUEUE\s*\(\s*(%s)\s*,\s*current\s*\)\s*;" % (IDENT, IDENT))
		for r, f, _ in th.ancestors:
			span = self.func_span(r, f)
			if not span:
				continue
			m = self.fx.text(r).m
			for mm in rx.finditer(m, span[1], span[2]):
				if mm.group(1):
					out.append((r, f, mm.group(1), "init", mm.start(), mm.end()))
				else:
					out.append((r, f, mm.group(2), "declare", mm.start(), mm.end()))
		return out

	# -- the rule ---------------------------------------------------------------

	def check(self, site, u):
		"""Apply the rule to one rewritten wait.  site: dict with rel, func,
		queue (as the waiting function writes it), state, stop_tested,
		span (the rewritten text).  Adds the waker edits to u, or raises
		Refuse."""
		rel, func = site["rel"], site["func"]
		th = self.thread_of(rel, func)
		if th.refuse:
			raise Refuse("manual", "wakers: %s; convert the wakers and the wait by hand" % th.refuse)
		if site.get("own") and not th.locs and not site.get("forwarded"):
			raise Refuse("manual", "own queue: no waker found: no task pointer of %s() is kept and it queues "
				     "no entry of its own, so nothing is known to wake the thread; convert by hand" % func)
		if not th.locs:
			entry = " (a kthread function)" if th.entries else ""
			cut = "" if not th.cut else "; callers of %s() not followed (more than %d)" % (
				", ".join(th.cut), MAX_FANIN)
			u.caveats.append("wakers: no waker to convert was found: neither %s()%s nor its callers up to %d "
					 "levels store current or a kthread_run()/kthread_create() value or hand it to a "
					 "call that runs it as a thread (a thread that reaches it through a function "
					 "pointer is not followed; a wake_up_process() of such a thread makes the loop test "
					 "its condition again, as before). The wake_up*() calls on %s wake wait_woken() "
					 "too; whether one runs for every change of the condition while it waits is not "
					 "checked%s" % (
						 func, entry, MAX_UP, site["queue"], cut))
			return
		wakers = self.find_wakers(th)
		if th.refuse:
			raise Refuse("manual", "wakers: %s; convert the wakers and the wait by hand" % th.refuse)
		self.other_sleeps(th, site, wakers)
		converted, kept = [], []
		self.started_in = set()
		for w in sorted(wakers, key=lambda x: (x.rel, x.s)):
			self.one_waker(th, site, u, w, converted, kept)
		self.drop_dead_copies(u, [w for w, _ in converted if w.via_copy])
		locs = "; ".join("%s (%s)" % (x.describe(), x.where) for x in th.locs)
		done = ["%s:%s() %s(%s) -> %s" % (w.rel, w.func, w.name, w.arg, call) for w, call in converted]
		u.caveats.append("wakers: the task pointer of %s() is kept in %s; every waker of it in the files that "
				 "mention it was searched: %s%s" % (
					 func, locs, ", ".join(done) or "none to convert",
					 "; left as they are: " + "; ".join(kept) if kept else ""))
		if converted:
			u.wakers += ["%s:%s" % (w.rel, w.func) for w, _ in converted]
			u.reasons.append("the direct wakers of the thread (%s) become wake_up*() calls on %s, so that "
					 "woken_wake_function() sees every wakeup" % (
						 ", ".join(sorted(set("%s()" % w.name for w, _ in converted))), site["queue"]))

	def one_waker(self, th, site, u, w, converted, kept):
		if w.base is not None and w.base.startswith("?"):
			raise Refuse("manual", "wakers: %s: %s(%s) may wake the task (%s), but the type of %s is not "
				     "known; convert it by hand" % (w.at(), w.name, w.arg, w.loc.describe(), w.base[1:]))
		if w.kind == "wake_q":
			raise Refuse("manual", "wakers: %s: %s() queues the task (%s) for a later wake_up_q(), a direct "
				     "wakeup wait_woken() can lose%s; convert it by hand" % (
					     w.at(), w.name, w.loc.describe(), self.woken_text()))
		if w.kind == "unpark":
			kept.append("%s %s() (wakes only a parked thread)" % (w.at(), w.name))
			return
		if w.kind == "park":
			if self.park_safe():
				kept.append("%s %s() (this tree's wait_woken() tests kthread_should_stop_or_park())" % (
					w.at(), w.name))
				return
			raise Refuse("manual", "wakers: %s: %s() parks the thread with a wake_up_process() that "
				     "wait_woken() can lose (this tree's wait_woken() sets the state at %s testing "
				     "only kthread_should_stop(), not parking), and kthread_park() then waits forever; "
				     "convert by hand" % (w.at(), w.name, self.woken_lines() or "kernel/sched/wait.c"))
		if w.kind == "stop":
			if site["stop_tested"]:
				kept.append("%s %s() (the rewritten loop tests kthread_should_stop(), and wait_woken() "
					    "does not sleep once it is set)" % (w.at(), w.name))
				return
			raise Refuse("manual", "wakers: %s: %s() stops the thread, but the wait does not test "
				     "kthread_should_stop(): wait_woken() would return at once on every pass and the "
				     "rewritten loop would spin; add the test by hand" % (w.at(), w.name))
		if site.get("own") and w.rel != site["rel"]:
			raise Refuse("manual", "own queue: %s: the waker %s(%s) is in another file than %s, to which "
				     "the thread's queue %s would be static; convert by hand" % (
					     w.at(), w.name, w.arg, site["rel"], site["queue"].lstrip("&")))
		# wake_up_process() / wake_up_state()
		creates = [c for c in th.creates if c[0] == w.rel and c[1] == w.func and c[2] < w.s]
		if creates and w.name == "wake_up_process" and (w.rel, w.func) not in self.started_in:
			self.started_in.add((w.rel, w.func))
			kept.append("%s %s() (the first wakeup after kthread_create(): it starts the thread)" % (
				w.at(), w.name))
			return
		if w.loc.started is False:
			raise Refuse("manual", "wakers: %s: %s(%s) may be the wakeup that starts the thread that "
				     "kthread_create() made (%s) or a kick of the running thread; tell them apart "
				     "and convert by hand" % (w.at(), w.name, w.arg, w.loc.where))
		if not w.stmt_ok:
			raise Refuse("manual", "wakers: %s: the value of %s() is used; convert it by hand" % (w.at(), w.name))
		interruptible = "INTERRUPTIBLE" in site["state"] and "UNINTERRUPTIBLE" not in site["state"]
		if w.name == "wake_up_state":
			if w.state_arg not in ("TASK_NORMAL", "TASK_INTERRUPTIBLE", "TASK_UNINTERRUPTIBLE") or (
					w.state_arg == "TASK_INTERRUPTIBLE" and not interruptible) or (
					w.state_arg == "TASK_UNINTERRUPTIBLE" and interruptible):
				raise Refuse("manual", "wakers: %s: wake_up_state(%s, %s) does not match the wait's %s; "
					     "convert it by hand" % (w.at(), w.arg, w.state_arg, site["state"]))
		q = self.queue_for(site, w)
		name = "wake_up_interruptible" if interruptible else "wake_up"
		call = "%s(%s)" % (name, q)
		ft = self.fx.text(w.rel)
		ls = ft.t.rfind("\n", 0, w.s) + 1
		at = "%d:%d" % (ft.t.count("\n", 0, ls) + 1, w.s - ls)
		sites = u.waker_sites.setdefault(w.rel, {})
		if at in sites and sites[at]["text"] != call:
			raise Refuse("manual", "wakers: %s: %s(%s) would become both %s and %s; convert it by hand" % (
				w.at(), w.name, w.arg, sites[at]["text"], call))
		# the call itself is rewritten by cocci/fix_wakers.cocci (rewrite())
		sites[at] = {"call": name, "queue": q, "text": call, "s": w.s, "e": w.e,
			     "what": "%s %s(%s)" % (w.at(), w.name, w.arg)}
		self.doc_comment(u, w, name)
		converted.append((w, call))

	def doc_comment(self, u, w, new):
		"""The comment above the waker's function that names the call it
		makes names the new one (hidp 5da8e47d849d: "Note:
		wake_up_process() performs any necessary memory-barriers for us."
		became wake_up_interruptible()).  Only when the function makes
		that call once and the comment names it once; a text edit, as
		comments are not code a rule matches."""
		span = self.func_span(w.rel, w.func)
		if not span:
			return
		ft = self.fx.text(w.rel)
		t, m = ft.t, ft.m
		if len(re.findall(r"\b%s\s*\(" % re.escape(w.name), m[span[1]:span[2]])) != 1:
			return
		ls = t.rfind("\n", 0, span[0]) + 1
		while ls > 0:
			# a return type on a line of its own ('static void\nname(...)')
			prev = t[t.rfind("\n", 0, ls - 1) + 1:ls - 1].strip()
			if not prev or prev.endswith(("*/", ";", "}", "{")) or prev.startswith("#"):
				break
			ls = t.rfind("\n", 0, ls - 1) + 1
		before = t[:ls].rstrip()
		if not before.endswith("*/"):
			return
		cs = before.rfind("/*")
		names = [mm for mm in re.finditer(r"\b%s\(\)" % re.escape(w.name), before[cs:])]
		if cs < 0 or len(names) != 1:
			return
		at = cs + names[0].start()
		u.add(w.rel, Edit(at, at + len(w.name), new, key=("waker-doc", at)))

	def drop_dead_copies(self, u, wakers):
		"""A local copy that only fed a converted waker is no longer read:
		its declaration goes, or gcc warns about an unused variable.  Only
		chosen here (a 'struct task_struct *t = ...;' line of its own whose
		one read is the converted call); cocci/fix_wakers.cocci deletes it,
		and only if the rest of the function no longer reads it."""
		for w in wakers:
			span = self.func_span(w.rel, w.func)
			if not span:
				continue
			ft = self.fx.text(w.rel)
			m = ft.m
			done = [(x["s"], x["e"]) for x in u.waker_sites.get(w.rel, {}).values()]
			uses = [mm for mm in re.finditer(r"(?<![\w.>])%s\b" % re.escape(w.arg), m[span[1]:span[2]])
				if not any(a <= span[1] + mm.start() < b for a, b in done)]
			if len(uses) != 1:
				continue
			p = span[1] + uses[0].start()
			dm = re.compile(r"[ \t]*struct\s+task_struct\s*\*\s*%s\s*=[^;]*;[ \t]*\n" % re.escape(w.arg))
			ls = m.rfind("\n", 0, p) + 1
			mm = dm.match(m, ls)
			if not mm or not (ls <= p < mm.end()):
				continue
			u.dead_copies.setdefault(w.rel, {})[(w.func, w.arg)] = ls

	def rewrite(self, u):
		"""Run cocci/fix_wakers.cocci once per file on the unit's wakers
		(and dead copies) chosen by one_waker() and drop_dead_copies(); its
		changes become the unit's Edits.  A waker or a copy the rule left as
		it was, or a change nobody asked for, refuses the unit: a wait
		rewritten while a direct waker of its task stays would lose that
		wakeup."""
		for rel in sorted(u.waker_sites):
			ft = self.fx.text(rel)
			sites = u.waker_sites[rel]
			dead = u.dead_copies.get(rel, {})
			spec = {"wakers": {at: {"call": x["call"], "queue": x["queue"]} for at, x in sites.items()},
				"dead": [[f, n] for f, n in sorted(dead)]}
			new = spatch_text(ft.t, os.path.basename(rel), WAKERS_RULE,
					  {"NESTSLEEP_SITES": json.dumps(spec)})
			# None: spatch failed, or changed nothing (then it writes no -o file)
			edits = [] if new is None else per_line(ft.t, text_edits(ft.t, new))
			wanted = [(x["s"], x) for x in sites.values()] + [(ls, (f, n)) for (f, n), ls in dead.items()]
			for e in edits:
				mine = [x for at, x in wanted if e.s <= at < e.e]
				if not mine:
					raise Refuse("manual", "wakers: %s changed %s:%d, which was not asked for; convert the "
						     "wakers and the wait by hand" % (os.path.basename(WAKERS_RULE), rel,
										   ft.t.count("\n", 0, e.s) + 1))
				old, txt = compact(ft.t[e.s:e.e]), compact(e.text)
				calls = [x for x in mine if isinstance(x, dict)]
				gone = len(WAKE_CALL.findall(old)) - len(WAKE_CALL.findall(txt))
				made = all(txt.count(compact(x["text"])) >= sum(1 for y in calls if y["text"] == x["text"])
					   for x in calls)
				copies = [x for x in mine if not isinstance(x, dict)]
				dropped = all(len(re.findall(r"structtask_struct\*%s=" % re.escape(n), old)) >
					      len(re.findall(r"structtask_struct\*%s=" % re.escape(n), txt)) for _, n in copies)
				if gone == len(calls) and made and dropped:
					for x in mine:
						wanted.remove(next(y for y in wanted if y[1] is x))
			if wanted:
				x = wanted[0][1]
				what = x["what"] if isinstance(x, dict) else "the dead copy %s in %s()" % (x[1], x[0])
				raise Refuse("manual", "wakers: %s did not convert %s%s%s; convert the wakers and the wait "
					     "by hand" % (os.path.basename(WAKERS_RULE), what,
							  " (and %d more)" % (len(wanted) - 1) if len(wanted) > 1 else "",
							  " (spatch failed or changed nothing)" if new is None else ""))
			for e in edits:
				e.key = ("waker", e.s, e.e, e.text)
				u.add(rel, e)

	def queue_for(self, site, w):
		"""The wait's queue written in the waker's terms."""
		q = site["queue"]
		if site.get("own"):
			return q        # a file-scope static of the waker's own file
		rel, func = site["rel"], site["func"]
		fn = self.facts.get(rel)["functions"].get(func) or {"locals": {}}
		span = self.func_span(rel, func)
		body = self.fx.text(rel).m[span[0]:span[2]] if span else ""
		for _ in range(3):
			roots = [x for x in re.findall(r"(?<![\w>.])(%s)\b(?!\s*\()" % IDENT, q)
				 if x not in ("current",)]
			local_roots = [x for x in roots if self.is_local(rel, func, x)]
			if not local_roots:
				break
			done = True
			for x in local_roots:
				ty = fn["locals"].get(x, "").rstrip("*")
				if w.loc.struct and ty == w.loc.struct and w.base:
					base = w.base if ACCESS.match(w.base) else "(%s)" % w.base
					q = re.sub(r"(?<![\w>.])%s\b" % re.escape(x), base, q)
					continue
				im = re.search(r"(?<![\w.>])%s\s*=(?!=)\s*([^;,]+)[;,]" % re.escape(x), body)
				if not im or not ACCESS.match(compact(im.group(1)).lstrip("&")):
					raise Refuse("manual", "wakers: %s: the waker %s(%s) cannot reach the queue %s, which "
						     "depends on %s() local %s; convert it by hand" % (
							     w.at(), w.name, w.arg, site["queue"], func, x))
				q = re.sub(r"(?<![\w>.])%s\b" % re.escape(x), compact(im.group(1)), q)
				done = False
			if done:
				break
		roots = [x for x in re.findall(r"(?<![\w>.])(%s)\b(?!\s*\()" % IDENT, q)]
		if any(self.is_local(rel, func, x) for x in roots if not (w.base and x in re.findall(IDENT, w.base))):
			raise Refuse("manual", "wakers: %s: the waker %s(%s) cannot reach the queue %s; convert it by hand"
				     % (w.at(), w.name, w.arg, site["queue"]))
		# a global queue must be visible where the waker is
		bases = set(re.findall(IDENT, w.base or ""))
		for x in roots:
			if x in bases:
				continue
			seen_in = self.mentions([x])[x]
			if w.rel != rel and w.rel not in seen_in and not any(h in seen_in for h in self.headers_of(w.rel)):
				raise Refuse("manual", "wakers: %s: the queue %s is not visible in %s, where the waker "
					     "%s(%s) is; convert it by hand" % (w.at(), site["queue"], w.rel, w.name, w.arg))
		return q

	def other_sleeps(self, th, site, wakers):
		"""A direct waker may be meant for another sleep of the same thread.
		Once it wakes only the site's queue, a sleep that only a direct
		wakeup ends (schedule_timeout(), ...), or a wait on another queue,
		would miss it.  Searched in the waiting function and its callers
		(not in the functions they call)."""
		direct = [x for x in wakers if x.kind == "wake"]
		if not direct:
			return
		w = direct[0]
		sleeps = re.compile(r"\b(%s)\s*\(" % "|".join(sorted(self.direct_sleeps)))
		waits = sorted(n for n, v in self.fx.table.items() if v.get("family") == "wait_event")
		waits += ["prepare_to_wait", "prepare_to_wait_exclusive", "prepare_to_wait_event", "add_wait_queue",
			  "add_wait_queue_exclusive"]
		queued = re.compile(r"\b(%s)\s*\(" % "|".join(waits))
		mine = compact(site["queue"]).lstrip("&")
		for r, f, _ in th.ancestors:
			span = self.func_span(r, f)
			if not span:
				continue
			ft = self.fx.text(r)
			m = ft.m
			for sm in sleeps.finditer(m, span[1], span[2]):
				if r == site["rel"] and site["span"][0] <= sm.start() < site["span"][1]:
					continue
				raise Refuse("manual", "wakers: %s:%d: the thread also sleeps in %s() in %s(), which only a "
					     "direct wakeup such as %s %s() ends; converting that waker to a queue wakeup "
					     "would leave it asleep; convert by hand" % (
						     r, ft.t.count("\n", 0, sm.start()) + 1, sm.group(1), f, w.at(), w.name))
			for qm in queued.finditer(m, span[1], span[2]):
				if r == site["rel"] and site["span"][0] <= qm.start() < site["span"][1]:
					continue
				po = qm.end() - 1
				pc = match_close(m, po)
				if pc < 0:
					continue
				q = compact(m[split_top(m, po + 1, pc)[0][0]:split_top(m, po + 1, pc)[0][1]]).lstrip("&")
				args = split_top(m, po + 1, pc)
				ent = compact(m[args[1][0]:args[1][1]]).lstrip("&") if len(args) > 1 else ""
				if (r, f, ent) in site.get("forwarded", []):
					continue        # forwarded to the thread's own queue
				if r == site["rel"] and f == site["func"] and q == mine:
					continue        # the same queue in the same function
				raise Refuse("manual", "wakers: %s:%d: the thread also waits in %s(%s) in %s(); the direct "
					     "waker %s %s() may be meant for that wait, and a wakeup of %s would not "
					     "reach it; convert by hand" % (
						     r, ft.t.count("\n", 0, qm.start()) + 1, qm.group(1), q, f, w.at(), w.name,
						     site["queue"]))
