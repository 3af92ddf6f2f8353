# SPDX-License-Identifier: GPL-2.0-only
"""Wake coverage: who wakes the queue of each reported wait, as data, and
the missed wakeups that leaves.

For each finding whose wait has a queue (the first argument of a
wait_event*() or prepare_to_wait*() call, or the queue an open-coded
set_current_state() loop put itself on with add_wait_queue*() before the
state is set) the record finding["wakers"] names:

  queue, key  the queue as written and its identity: global:NAME[.MEMBER..]
              (a file-scope variable) or member:STRUCT.MEMBER (a member of a
              struct the base is declared as), '' when unknown;
  state       the waiter's task state (the waiters table, cocci/sleep_info.json);
  wakers      every wake_up*() / __wake_up*() call on the same queue, with
              whether its mode wakes that state (sleep_info.json "wakeups")
              and the parameter test it runs under;
  inputs      the globals and struct members the condition reads, directly
              or through the same file's helpers (two levels);
  writers     the functions that write an input, whether the write can make
              the condition true, and the wakers that follow it in the same
              function or in a caller (one level); 'direct': the direct task
              wakeups that follow it there (wake_up_process(), ...:
              sleep_info.json tasks.wakers), whose target is not followed;
  polls       None (filled by the polls knowledge).

Only the files that mention a queue's or an input's last name are read
(a regex over the file's text, cached by file content), and only for
reported waits.  missed() turns a record into "missed wakeup" findings for
a condition that compares one input with zero or tests its bits: a writer
that makes it true and is followed only by wakeups of the wrong mode, or by
none at all on some caller's path.  A writer followed by a direct task
wakeup gets no finding: that call may wake the waiter itself."""

import re

from nestsleep.analysis import cfacts, ctok
from nestsleep.analysis.cfacts import _LOCAL_DECL, _match_close, _text, params_of, split_args, tokenize
from nestsleep.cache import Cache
from nestsleep.common import fingerprint, run_spawned, sha1
from nestsleep.knowledge import Knowledge

# writes through a call: the lvalue is the call's argument '&x'
WRITE_CALLS = re.compile(r"^(?:atomic(?:64|_long)?_(?:set|inc|dec|add|sub|and|or|andnot|xchg|cmpxchg|fetch_\w+)"
			 r"\w*|(?:__)?(?:set|clear|change)_bit\w*|test_and_(?:set|clear|change)_bit\w*|"
			 r"list_(?:add|del|move|splice)\w*|WRITE_ONCE)$")
DEC_CALLS = re.compile(r"^(?:atomic(?:64|_long)?_(?:dec|sub)\w*|refcount_dec\w*)$")
CLEAR_CALLS = re.compile(r"^(?:__)?clear_bit\w*$|^test_and_clear_bit\w*$")
SET_CALLS = re.compile(r"^(?:__)?set_bit\w*$|^test_and_set_bit\w*$")
READ_CALLS = re.compile(r"^(?:atomic(?:64|_long)?_read|test_bit|READ_ONCE|list_empty\w*|refcount_read)$")
_EXPR = re.compile(r"^[&*(\s]*([A-Za-z_]\w*)((?:\s*(?:->|\.)\s*\w+)*)[\s)]*$")
_GLOBAL = r"^(?:static\s+)?(?:(?:const|volatile|__\w+)\s+)*(?:struct\s+)?\w+(?:\s+\w+)*?\s*\**\s*%s\s*(?:\[[^\]]*\])?\s*[;=]"
# a file-scope variable a macro defines: 'static DECLARE_WAIT_QUEUE_HEAD(q);'
# (include/linux/wait.h), DEFINE_MUTEX(m), DEFINE_SPINLOCK(l)...
_MACRO_GLOBAL = r"^(?:static\s+)?(?:DECLARE|DEFINE)_[A-Z0-9_]+\(\s*%s\s*[,)]"
_DEFINE = re.compile(r"^[ \t]*#[ \t]*define[ \t]+([A-Z_][A-Z0-9_]*)[ \t]+(.+)$", re.M)
_COMMENT = re.compile(r"/\*.*?(?:\*/|$)|//.*$")
_NUMEXPR = re.compile(r"^[\s0-9xXa-fA-FuUlL()|&~<>+]*$")


class FileView:
	"""One file's tokens, functions (body range, parameters, locals with
	their struct types), static and file-scope variables and #define
	constants."""

	def __init__(self, rel, text):
		self.rel = rel
		self.text = text
		self.toks = tokenize(text)
		self.lines = text.split("\n")
		self.funcs = {}
		toks, depth, start, i, n = self.toks, 0, 0, 0, len(self.toks)
		while i < n:
			k, v, ln = toks[i]
			if k == "op" and v == "{":
				name, _, lo = cfacts._def_name(toks, i, start)
				close = _match_close(toks, i, "{", "}")
				if name:
					params, _ = params_of(toks, lo, i, name)
					local = {}
					for dm in _LOCAL_DECL.finditer(_text(toks[lo:close])):
						local[dm.group(3)] = dm.group(1)
					self.funcs[name] = {"lo": i + 1, "hi": close, "params": params, "locals": local,
							    "name": name}
				i = close + 1
				start = i
				continue
			if k == "op" and v == ";":
				start = i + 1
			i += 1
		self._globals = {}
		self._consts = None
		self._top = None
		self._calls = None

	def calls_of(self, name):
		"""(function, token index, argument texts) of the calls of name."""
		if self._calls is None:
			self._calls = {}
			toks = self.toks
			for fname in sorted(self.funcs):
				fn = self.funcs[fname]
				for i in range(fn["lo"], fn["hi"]):
					if toks[i][0] == "id" and toks[i + 1][1] == "(" and toks[i - 1][1] not in ("->", "."):
						self._calls.setdefault(toks[i][1], []).append((fn, i))
		return [(fn, i, [_text(x) for x in split_args(self.toks, i + 1, _match_close(self.toks, i + 1, "(", ")"))])
			for fn, i in self._calls.get(name, ())]

	def global_kind(self, name):
		"""'static', 'extern' (a file-scope variable not static) or None."""
		if name not in self._globals:
			if self._top is None:
				self._top = "\n".join(l for l in self.lines if l[:1].isalpha() or l[:1] in "_}")
			m = re.search(_GLOBAL % re.escape(name), self._top, re.M) or \
				re.search(_MACRO_GLOBAL % re.escape(name), self._top, re.M)
			kind = None if not m else ("static" if m.group(0).startswith("static") else "extern")
			if m is None:
				# 'static struct s { ... } name;': the struct line says static
				m = re.search(r"^(?:[A-Za-z_][^\n(]*)?\}\s*%s\s*(?:\[[^\]]*\])?\s*[;=]" % re.escape(name), self._top, re.M)
				if m:
					head = [l for l in self._top[:m.start() + 1 + m.group(0).find("}")].split("\n")
						if l[:1].isalpha()]
					kind = "static" if head and head[-1].startswith("static") else "extern"
			self._globals[name] = kind
		return self._globals[name]

	def const(self, name):
		"""The value of a #define constant expression of this file, or None."""
		if self._consts is None:
			self._consts = dict((k, _COMMENT.sub(" ", v)) for k, v in _DEFINE.findall(self.text))
		seen = set()

		def ev(t):
			for _ in range(8):
				new = re.sub(r"\b([A-Z_][A-Z0-9_]*)\b", lambda m: "(%s)" % self._consts.get(m.group(1), "?"), t)
				if new == t:
					break
				t = new
			t = re.sub(r"(\d)[uUlL]+", r"\1", t)
			if not _NUMEXPR.match(t):
				return None
			try:
				return int(eval(t, {"__builtins__": {}}))
			except Exception:
				return None
		if name in seen:
			return None
		if re.match(r"^(?:0[xX][0-9a-fA-F]+|\d+)[uUlL]*$", name):
			return ev(name)
		return ev(name) if name in self._consts else None

	def line_cols(self, line, text):
		"""(col, colend) of a statement on line: its first character and
		the ';' that ends it (or the line's end)."""
		s = self.lines[line - 1] if 0 < line <= len(self.lines) else ""
		col = len(s) - len(s.lstrip())
		end = s.find(";", col)
		return col, (end if end >= 0 else len(s.rstrip()))


def task_state_name(toks):
	"""The waiters-table state name of a TASK_* argument, or ''."""
	t = _text(toks).replace(" ", "")
	if not re.match(r"^TASK_[A-Z_]+(?:\|TASK_[A-Z_]+)*$", t):
		return ""
	return t.replace("TASK_", "")


def at_key(at):
	"""'file:line' sorted by file, then line as a number."""
	rel, _, line = at.rpartition(":")
	return rel, int(line) if line.isdigit() else 0


def expr_key(expr, fv, fn):
	"""(key, display text) of an lvalue expression read or written in
	function fn of FileView fv: global:NAME.M.. or member:STRUCT.M..,
	or ('', text)."""
	m = _EXPR.match(expr)
	if not m:
		return "", expr
	base = m.group(1)
	mem = [x for x in re.split(r"\s*(?:->|\.)\s*", m.group(2)) if x]
	shown = re.sub(r"^[&*(\s]+|[\s)]+$", "", expr).replace(" ", "")
	if fn is not None and (base in fn["locals"] or base in fn["params"]):
		t = fn["locals"].get(base)
		if t and mem:
			return "member:%s.%s" % (t, ".".join(mem)), shown
		return "", shown
	if fv.global_kind(base):
		return "global:%s" % ".".join([base] + mem), shown
	return "", shown


def _lvalue_at(toks, j):
	"""The start index of the member/global expression whose last name is
	toks[j] (walking back over '->' and '.')."""
	while j >= 2 and toks[j - 1][1] in ("->", ".") and toks[j - 2][0] == "id":
		j -= 2
	return j


def _before_call(toks, j, lo):
	"""(callee name, argument index) when toks[j] starts a call argument
	'&x' directly, else (None, -1)."""
	if j - 1 < lo or toks[j - 1][1] != "&":
		return None, -1
	k, depth, idx = j - 2, 0, 0
	while k >= lo:
		v = toks[k][1]
		if v in (")", "]"):
			depth += 1
		elif v in ("(", "["):
			if depth == 0:
				if v == "(" and toks[k - 1][0] == "id":
					return toks[k - 1][1], idx
				return None, -1
			depth -= 1
		elif v == "," and depth == 0:
			idx += 1
		elif v in (";", "{", "}") and depth == 0:
			return None, -1
		k -= 1
	return None, -1


def guard_of(toks, i, lo, params):
	"""The text of the 'if (...)' test right around the statement at
	toks[i] when it tests a parameter, else ''."""
	j = i - 1
	if j >= lo and toks[j][1] == "{":
		j -= 1
	if j < lo or toks[j][1] != ")":
		return ""
	o = cfacts._match_open(toks, j, "(", ")")
	if o <= lo or toks[o - 1][1] != "if":
		return ""
	test = toks[o + 1:j]
	if any(t[0] == "id" and t[1] in params for t in test):
		return _text(test)
	return ""


def predicate(toks, s, e, lo, hi, fv, depth=0):
	"""How the read toks[s..e] is tested: ('zero', None, neg) for a
	comparison with 0 (neg: the test is true when it is non-zero),
	('bit', CONST, neg) for a bit test (neg: true when the bits are
	clear), or None.  A local assigned the value is followed to its
	test."""
	prev = toks[s - 1][1] if s > lo else ""
	nxt = toks[e + 1][1] if e + 1 < hi else ""
	after = toks[e + 2] if e + 2 < hi else ("", "", 0)
	if prev == "&" and s - 2 >= lo and toks[s - 2][1] == "(" and toks[s - 3][0] == "id" \
			and READ_CALLS.match(toks[s - 3][1]):
		# atomic_read(&x) / test_bit(N, &x): the call is the read
		name = toks[s - 3][1]
		close = _match_close(toks, s - 2, "(", ")")
		if name.startswith("test_bit"):
			a = split_args(toks, s - 2, close)
			bit = fv.const(_text(a[0])) if a else None
			neg = 1 if s - 4 >= lo and toks[s - 4][1] == "!" else 0
			return ("bit", (1 << bit) if bit is not None and bit < 64 else None, neg)
		return predicate(toks, s - 3, close, lo, hi, fv, depth)
	if nxt == "&" and after[0] in ("id", "num"):
		neg = 1 if prev == "(" and s - 2 >= lo and toks[s - 2][1] == "!" else 0
		return ("bit", fv.const(after[1]), neg)
	if nxt in ("==", "!=") and after[1] == "0" or prev in ("==", "!=") and s - 2 >= lo and toks[s - 2][1] == "0":
		op = nxt if nxt in ("==", "!=") else prev
		return ("zero", None, 0 if op == "==" else 1)
	if prev == "!" and nxt != "(":
		return ("zero", None, 0)
	if nxt == "?" or prev in ("if", "return") and nxt in (")", ";"):
		return ("zero", None, 1)
	if prev == "(" and s - 2 >= lo and toks[s - 2][1] in ("if", "while") and nxt == ")":
		return ("zero", None, 1)
	if prev == "=" and nxt == ";" and s - 2 >= lo and toks[s - 2][0] == "id" and depth < 2:
		var = toks[s - 2][1]
		for k in range(e + 2, hi):
			if toks[k][1] == var and toks[k - 1][1] not in ("->", ".") and toks[k + 1][1] != "=":
				return predicate(toks, k, k, lo, hi, fv, depth + 1)
	return None


def call_negation(toks, j, hi):
	"""How the value of the call at toks[j] is tested where it is made:
	1 when '!f()' or 'f() == 0' (also through '(n = f())'), 0 when as a
	truth value or '!= 0', None for another comparison."""
	neg = 1 if toks[j - 1][1] == "!" else 0
	k = _match_close(toks, j + 1, "(", ")") + 1
	while k < hi and toks[k][1] == ")":
		k += 1
	nxt = toks[k][1] if k < hi else ""
	if nxt in ("==", "!=") and k + 1 < hi and toks[k + 1][1] == "0":
		return neg + (1 if nxt == "==" else 0)
	if nxt in ("==", "!=", "<", ">", "<=", ">=", "+", "-", "*", "/", "&", "|", "^", "<<", ">>"):
		return None
	return neg


def write_op(toks, s, j, lo):
	"""The operation by which the lvalue toks[s..j] is written: an
	assignment operator, '++'/'--', or the name of a writing call; with
	the operand text.  (None, '') when it is only read."""
	nxt = toks[j + 1][1] if j + 1 < len(toks) else ""
	if nxt in cfacts._ASSIGN_OPS:
		end = j + 2
		while end < len(toks) and toks[end][1] not in (";", ",", ")") :
			end += 1
		return nxt, _text(toks[j + 2:end])
	prev = toks[s - 1][1] if s > lo else ""
	if prev in ("++", "--"):
		return prev, ""
	callee, idx = _before_call(toks, s, lo)
	if callee and WRITE_CALLS.match(callee):
		lp = s - 2
		while lp >= lo and not (toks[lp][1] == "(" and toks[lp - 1][1] == callee):
			lp -= 1
		a = split_args(toks, lp, _match_close(toks, lp, "(", ")")) if lp >= lo else []
		return callee, (_text(a[0]) if a and idx > 0 else "")
	return None, ""


def makes_true(op, operand, pred, fv):
	"""Whether a write can make the condition true (pred: predicate()'s
	tuple), False when it cannot, None when unknown."""
	if pred is None or op is None:
		return None
	kind, const, neg = pred
	dec = op in ("--", "-=") or bool(DEC_CALLS.match(op))
	inc = op in ("++", "+=") or op.startswith(("atomic_inc", "atomic64_inc", "atomic_add", "refcount_inc"))
	if kind == "zero":
		if op == "=" and operand in ("0", "NULL", "false"):
			return not neg
		if dec or inc:
			return dec if not neg else inc
		return None
	clear = op == "&=" or bool(CLEAR_CALLS.match(op)) or op == "=" and operand == "0"
	setb = op == "|=" or bool(SET_CALLS.match(op))
	if not (clear or setb):
		return None
	if clear != bool(neg):
		return False
	val = None
	if op in ("&=", "|="):
		val = fv.const(operand.lstrip("~").strip("()"))
	elif op != "=":
		bit = fv.const(operand)
		val = (1 << bit) if bit is not None and bit < 64 else None
	if val is not None and const is not None:
		return bool(val & const)
	return True


# the token counts of a condition and of each helper it calls beyond which
# the test of its one input may not be what decides it
MAX_COND = 64
MAX_HELPER = 48

# how many files a queue or an input may be looked for in: a name that
# common (a member 'wait' of a struct every driver uses) is left unknown
MAX_FILES = 400
# the names the file index keeps across runs before it starts again
MAX_NAMES = 4000


class WakeCov:
	"""The wake coverage records of the reported waits of one run."""

	def __init__(self, tree, kn, cache):
		self.tree, self.kn, self.cache = tree, kn, cache
		w = kn.info["wakeups"]
		self.modes, self.bits, self.state_bits = w["modes"], w["bits"], w["states"]
		# calls that wake a task directly, not through a queue
		self.direct = set(x["name"] for x in kn.info.get("tasks", {}).get("wakers", []))
		self.views = {}
		self.hits = {}

	def view(self, rel):
		if rel not in self.views:
			try:
				with open(self.tree.abs[rel], errors="replace") as f:
					self.views[rel] = FileView(rel, f.read())
			except (OSError, KeyError):
				self.views[rel] = None
		return self.views[rel]

	def index(self, names):
		"""For each name, the files whose text mentions it.  One record per
		tree keeps, for every name asked so far, the files that mention it
		and the content each file had: a later run reads again only the
		files whose content changed, and every file only for new names."""
		names = sorted(set(n for n in names if n))
		if not names:
			return
		ckey = "wakecov-ids-" + sha1(self.tree.kdir.encode())[:12]
		st = self.cache.load("index", ckey)
		if not st or len(st[1]) > MAX_NAMES:
			st = ({}, {})
		shas, hits = st[0], dict((n, set(r)) for n, r in st[1].items())
		new = set(n for n in names if n not in hits)
		known = set(hits)
		for n in new:
			hits[n] = set()
		dirty = bool(new)
		read = []
		for rel in self.tree.files:
			sha = self.tree.sha(rel)
			want = new if shas.get(rel) == sha else known | new
			if not want:
				continue
			if want is not new:
				for n in known:
					hits[n].discard(rel)
				shas[rel] = sha
				dirty = True
			read.append((rel, want))
		# the identifiers of every file to read, in one pass of the C tool
		# (scripts/nstok.c --ids; a file it cannot read mentions nothing)
		held = ctok.mentions(known | new, [self.tree.abs[rel] for rel, _ in read], getattr(self.tree, "jobs", 1))
		for (rel, want), ids in zip(read, held):
			for n in (ids or set()) & want:
				hits[n].add(rel)
		for rel in set(shas) - set(self.tree.files):
			del shas[rel]
			for n in hits:
				hits[n].discard(rel)
			dirty = True
		if dirty:
			self.cache.store((shas, dict((n, sorted(r)) for n, r in hits.items())), "index", ckey)
		self.hits = hits

	def files_for(self, key, rel):
		"""The files to search for key: the waiter's file for a static
		global, else those that mention both the struct type (or the
		global) and the last member."""
		if not key:
			return []
		what, _, path = key.partition(":")
		parts = path.split(".")
		if what == "global":
			fv = self.view(rel)
			if fv is not None and fv.global_kind(parts[0]) == "static":
				return [rel]
		files = set(self.hits.get(parts[0], ())) & set(self.hits.get(parts[-1], ()))
		files.add(rel)
		return sorted(files) if len(files) <= MAX_FILES else [rel]

	@staticmethod
	def names_of(key):
		if not key:
			return []
		path = key.partition(":")[2].split(".")
		return [path[0], path[-1]]

	def wakes(self, mode, state):
		"""Whether a wakeup of mode wakes a task in waiters-table state."""
		if state not in self.state_bits or mode not in self.bits:
			return None
		return bool(set(self.bits[mode]) & set(self.state_bits[state]))

	def wakers_in(self, fv, fn, key):
		"""The wake calls on queue key in function fn of fv: dicts with
		the token index, call, mode and guard."""
		toks, out = fv.toks, []
		for i in range(fn["lo"], fn["hi"]):
			k, v, ln = toks[i]
			if k != "id" or toks[i + 1][1] != "(" or v not in self.modes:
				continue
			if i > 0 and toks[i - 1][1] in ("->", "."):
				continue
			a = split_args(toks, i + 1, _match_close(toks, i + 1, "(", ")"))
			if not a or expr_key(_text(a[0]), fv, fn)[0] != key:
				continue
			mode = self.modes[v]
			if mode.startswith("arg:"):
				n = int(mode[4:])
				mode = _text(a[n]) if len(a) > n else ""
			out.append({"i": i, "at": "%s:%d" % (fv.rel, ln), "function": fn["name"], "call": v, "mode": mode,
				    "guard": guard_of(toks, i, fn["lo"], fn["params"]), "file": fv.rel})
		return out

	def direct_in(self, fv, fn, after):
		"""The file:line of the direct task wakeups (wake_up_process(),
		wake_up_state(), wake_q_add(): sleep_info.json tasks.wakers) in
		function fn of fv after token index after.  Whom they wake is not
		followed: any of them may be the waiter's."""
		toks = fv.toks
		return ["%s:%d" % (fv.rel, toks[i][2]) for i in range(max(after, fn["lo"]), fn["hi"])
			if toks[i][0] == "id" and toks[i][1] in self.direct and toks[i + 1][1] == "("
			and toks[i - 1][1] not in ("->", ".")]

	def callers(self, files, fv, fname):
		"""(FileView, function, token index, argument texts) of the calls
		of fname in files (its own file only when it is static)."""
		static = re.search(r"^static\b[^;{]*\b%s\s*\(" % re.escape(fname), fv.text, re.M)
		out = []
		for rel in ([fv.rel] if static else files):
			v2 = self.view(rel)
			if v2 is not None:
				out += [(v2, fn, i, args) for fn, i, args in v2.calls_of(fname)]
		return out

	def wait_of(self, f):
		"""(FileView, function, queue text, queue key, state name, cond
		token range or None) of finding f's wait, or None when its wait
		has no queue."""
		shape, prim = f["shape"], f["primitive"]
		if shape not in ("wait_event", "prepare_to_wait", "set_current_state"):
			return None
		fv = self.view(f["file"])
		fn = fv and fv.funcs.get(f["function"])
		if not fn:
			return None
		toks = fv.toks
		if shape == "set_current_state":
			return self.own_loop_queue(f, fv, fn)
		for i in range(fn["lo"], fn["hi"]):
			if toks[i][1] == prim and toks[i][2] == f["line"] and toks[i + 1][1] == "(":
				break
		else:
			return None
		close = _match_close(toks, i + 1, "(", ")")
		args = split_args(toks, i + 1, close)
		if not args or not args[0]:
			return None
		queue = _text(args[0])
		key = expr_key(queue, fv, fn)[0]
		cond, state = None, ""
		if shape == "wait_event":
			w = self.kn.waiters.get(prim)
			if w is not None:
				state = w["state"]
				if state == "state":
					state = task_state_name(args[2] if len(args) > 2 else [])
				ci = w["cond"]
			else:
				ci = 1
			if len(args) > ci and args[ci]:
				# the tokens of the argument, as indices into toks
				start = i + 2
				for a in args[:ci]:
					start += len(a) + 1
				cond = (start, start + len(args[ci]))
		elif len(args) > 2:
			state = task_state_name(args[2])
		return fv, fn, queue, key, state, cond

	def own_loop_queue(self, f, fv, fn):
		"""wait_of() for an open-coded set_current_state() loop: the queue
		of the last add_wait_queue*() before the state is set on line
		f["line"] (pmu_read()), the state set there; the loop's condition
		is not read (cond None), so it has no inputs."""
		toks, queue, state = fv.toks, None, ""
		for i in range(fn["lo"], fn["hi"]):
			k, v, ln = toks[i]
			if k != "id" or toks[i + 1][1] != "(" or ln > f["line"]:
				continue
			args = split_args(toks, i + 1, _match_close(toks, i + 1, "(", ")"))
			if v in ("add_wait_queue", "add_wait_queue_exclusive") and args and args[0]:
				queue = _text(args[0])
			elif v == f["primitive"] and ln == f["line"] and args:
				state = task_state_name(args[0])
		if queue is None:
			return None
		return fv, fn, queue, expr_key(queue, fv, fn)[0], state, None

	def inputs(self, fv, fn, lo, hi, qkey, neg=0, depth=0, out=None, seen=None, sizes=None):
		"""key -> {'shown', 'preds'} of the globals and members read in
		toks[lo:hi] of function fn, and in the same file's helpers called
		there (two levels); preds: predicate() tuples with the negations
		of the calls around them added."""
		out = {} if out is None else out
		seen = set() if seen is None else seen
		if sizes is not None:
			sizes.append(hi - lo)
		toks = fv.toks
		for j in range(lo, hi):
			k, v, _ = toks[j]
			if k != "id" or v in cfacts.KEYWORDS or toks[j - 1][1] in ("->", "."):
				continue
			if toks[j + 1][1] == "(":
				h = fv.funcs.get(v)
				if h is not None and depth < 2 and v not in seen and v != fn["name"]:
					seen.add(v)
					n = call_negation(toks, j, hi)
					self.inputs(fv, h, h["lo"], h["hi"], qkey, None if n is None or neg is None else neg + n,
						    depth + 1, out, seen, sizes)
				continue
			e = j
			while e + 2 < hi and toks[e + 1][1] in ("->", ".") and toks[e + 2][0] == "id" and toks[e + 3][1] != "(":
				e += 2
			key, shown = expr_key(_text(toks[j:e + 1]), fv, fn)
			if not key or key == qkey:
				continue
			callee, _ = _before_call(toks, j, lo)
			if callee and not READ_CALLS.match(callee):
				continue	# &x->lock handed to mutex_lock()
			if write_op(toks, j, e, lo)[0] is not None:
				continue
			rec = out.setdefault(key, {"shown": shown, "preds": set()})
			p = predicate(toks, j, e, lo, hi, fv)
			rec["preds"].add((p[0], p[1], (p[2] + neg) % 2) if p and neg is not None else None)
		return out

	def writers(self, files, key, last, pred):
		"""The writes of input key in files: dicts with the FileView,
		function, token index, op, statement and makes_true."""
		out = []
		for rel in files:
			fv = self.view(rel)
			if fv is None:
				continue
			toks = fv.toks
			for name in sorted(fv.funcs):
				fn = fv.funcs[name]
				for j in range(fn["lo"], fn["hi"]):
					if toks[j][1] != last or toks[j][0] != "id" or toks[j + 1][1] in ("->", ".", "("):
						continue
					s = _lvalue_at(toks, j)
					if expr_key(_text(toks[s:j + 1]), fv, fn)[0] != key:
						continue
					op, operand = write_op(toks, s, j, fn["lo"])
					if op is None:
						continue
					ln = toks[j][2]
					out.append({"fv": fv, "fn": fn, "i": j, "line": ln, "op": op,
						    "write": fv.lines[ln - 1].strip() if ln <= len(fv.lines) else "",
						    "makes_true": makes_true(op, operand, pred, fv)})
		return out

	def prepare(self, findings):
		"""Look the queues and inputs of the findings' waits up, and index
		the files that mention their names (one pass over the tree)."""
		self.waits = {}
		names = []
		for f in findings:
			w = self.wait_of(f)
			if w is None:
				continue
			fv, fn, queue, key, state, cond = w
			sizes = []
			ins = self.inputs(fv, fn, cond[0], cond[1], key, sizes=sizes) if cond else {}
			# a missed wakeup only for a condition small enough that
			# its one input's test is its value (module doc)
			simple = bool(sizes) and sizes[0] <= MAX_COND and all(n <= MAX_HELPER for n in sizes[1:])
			self.waits[id(f)] = (w, ins, simple)
			names += self.names_of(key)
			for k in ins:
				names += self.names_of(k)
		self.index(names)

	def record(self, f):
		"""finding f's wake coverage record (module doc), and what missed()
		needs, or (None, None) when its wait has no queue."""
		got = self.waits.get(id(f))
		if got is None:
			return None, None
		(fv, fn, queue, key, state, cond), ins, simple = got
		task_state = self.kn.states.get(state, ("TASK_" + state if state else "",))[0]
		qfiles = self.files_for(key, fv.rel)
		wakers = []
		for rel in qfiles:
			v2 = self.view(rel)
			for name in sorted(v2.funcs) if v2 else ():
				wakers += self.wakers_in(v2, v2.funcs[name], key)
		for wk in wakers:
			wk["wakes"] = self.wakes(wk["mode"], state)
		single = None
		if len(ins) == 1 and simple:
			(ikey, irec), = ins.items()
			preds = set(p for p in irec["preds"] if p is not None)
			if len(preds) == 1:
				single = (ikey, irec["shown"], preds.pop())
		writers = []
		for ikey in sorted(ins):
			pred = single[2] if single and single[0] == ikey else None
			ifiles = self.files_for(ikey, fv.rel)
			for w in self.writers(ifiles, ikey, self.names_of(ikey)[-1], pred):
				w["input"] = ikey
				w["own"] = [wk for wk in wakers if wk["file"] == w["fv"].rel
					    and wk["function"] == w["fn"]["name"] and wk["i"] > w["i"]]
				w["direct"] = self.direct_in(w["fv"], w["fn"], w["i"])
				w["calls"] = []
				for v3, fn3, ci, args in self.callers(sorted(set(ifiles) | set(qfiles)), w["fv"], w["fn"]["name"]):
					after = [wk for wk in wakers if wk["file"] == v3.rel and wk["function"] == fn3["name"]
						 and wk["i"] > ci]
					w["calls"].append((v3, fn3, args, after))
					w["direct"] += self.direct_in(v3, fn3, ci)
				w["woken_by"] = w["own"] + [wk for c in w["calls"] for wk in c[3]]
				writers.append(w)
		rec = {
			"queue": queue, "key": key, "state": task_state,
			"wakers": sorted(({"at": wk["at"], "function": wk["function"], "call": wk["call"],
					   "wakes": wk["wakes"], "guard": wk["guard"]} for wk in wakers),
					 key=lambda x: (at_key(x["at"]), x["call"])),
			"inputs": sorted(ins),
			"writers": sorted(({"at": "%s:%d" % (w["fv"].rel, w["line"]), "function": w["fn"]["name"],
					    "write": w["write"], "input": w["input"], "makes_true": w["makes_true"],
					    "woken_by": sorted(set(wk["at"] for wk in w["woken_by"]), key=at_key),
					    "direct": sorted(set(w["direct"]), key=at_key),
					    "right_mode": (any(wk["wakes"] is not False for wk in w["woken_by"])
							   if w["woken_by"] else None)} for w in writers),
					  key=lambda x: (at_key(x["at"]), x["write"], x["input"])),
			"polls": None,
		}
		return rec, {"single": single, "writers": writers, "state": state, "task_state": task_state,
			     "queue": queue, "wait": (fv, fn), "wakers": wakers}

	def missed(self, f, info):
		"""The missed wakeup findings of finding f's wait (module doc)."""
		if not info or info["single"] is None:
			return []
		ikey, shown, pred = info["single"]
		kind, _, neg = pred
		verb = {("zero", 0): "decrements", ("zero", 1): "increments",
			("bit", 1): "clears", ("bit", 0): "sets"}[(kind, neg)]
		wfv, wfn = info["wait"]
		q = info["queue"].lstrip("&").strip()
		out = []
		for w in info["writers"]:
			if w["makes_true"] is not True or (w["fv"] is wfv and w["fn"] is wfn) or w["direct"]:
				continue	# (a direct wakeup after the write may be the waiter's)
			head = "%s() %s %s, which ends the %s() in %s() on line %d, but " % (
				w["fn"]["name"], verb, shown, f["primitive"], f["function"], f["line"])
			wk = w["woken_by"]
			if wk and all(x["wakes"] is False for x in wk):
				calls = sorted(set(x["call"] + "()" for x in wk))
				msg = "wakes it only with %s, which does not wake %s" % (" or ".join(calls), info["task_state"])
				out.append(self.finding(f, w, "wrong_mode", head + msg, wk[0], info))
				continue
			if not wk:
				out.append(self.finding(f, w, "unwoken", head + "neither it nor a caller wakes %s" % q, None, info))
				continue
			if any(not x["guard"] for x in w["own"]) or any(c[3] for c in w["calls"]):
				continue
			g = w["own"][0]["guard"]
			params = w["fn"]["params"]
			idx = next((params.index(t) for t in re.findall(r"\w+", g) if t in params), -1)
			for v3, fn3, args, _ in sorted(w["calls"], key=lambda c: (c[0].rel, c[1]["name"])):
				a = args[idx] if 0 <= idx < len(args) else ""
				if a in ("true", "1") or re.match(r"^[1-9]\d*$", a):
					continue
				msg = "wakes %s only if %s, which %s() passes as %s" % (q, g, fn3["name"], a)
				out.append(self.finding(f, w, "guarded", head + msg, w["own"][0], info))
				break
		return out

	def finding(self, f, w, how, msg, waker, info):
		"""A missed_wakeup finding (findings.json record) at writer w of
		the wait of finding f; "wait": what its changelog quotes (the
		waiter, its state and queue, the waker found after the write, and
		the other wakeups of the queue that wake the waiter's state)."""
		rel, line = w["fv"].rel, w["line"]
		col, colend = w["fv"].line_cols(line, w["write"])
		call = waker["call"] if waker else w["fn"]["name"]
		locs = ["%s:%d" % (rel, line), "%s:%d" % (f["file"], f["line"])]
		chain = [w["fn"]["name"], call] if waker else [w["fn"]["name"]]
		return {
			"fingerprint": fingerprint(rel, w["fn"]["name"], "missed_wakeup",
						   [how, f["file"], f["function"], w["input"]]),
			"file": rel, "line": line, "col": col, "colend": colend,
			"function": w["fn"]["name"], "shape": f["shape"], "primitive": f["primitive"],
			"role": "", "locked": "", "kind": "missed_wakeup", "call": call, "call_line": line,
			"effect": "silent", "group": "missed_wakeup", "chain": chain, "confidence": "medium",
			"doubts": 1, "chain_locs": locs,
			"paths": [{"call": call, "line": line, "col": col, "chain": chain, "chain_locs": locs,
				   "effect": "silent", "confidence": "medium"}],
			"message": "WARNING: missed wakeup: %s [confidence: medium]" % msg,
			"after_loop": None, "blocks": False, "missed": how, "wait_at": "%s:%d" % (f["file"], f["line"]),
			"wait": {"function": f["function"], "primitive": f["primitive"], "state": info["task_state"],
				 "queue": info["queue"], "waker_at": waker["at"] if waker else None,
				 "others": sorted(({"at": wk["at"], "function": wk["function"], "call": wk["call"]}
						   for wk in info["wakers"] if wk["wakes"] is not False
						   and wk["function"] != w["fn"]["name"]),
						  key=lambda x: (at_key(x["at"]), x["call"]))},
		}


def _code_digest():
	with open(__file__, "rb") as f:
		return sha1(f.read())[:12]


CODE_DIGEST = _code_digest()


def wake_coverage(findings, tree, kn, cache, tdig=""):
	"""Attach finding["wakers"] to each finding whose wait has a queue;
	return the missed wakeup findings, sorted, one per fingerprint.
	tdig, the digest of the whole tree's content: the result is kept
	under it and the findings' waits, so that a warm run reads it back."""
	ckey = None
	if tdig:
		ids = [[f["file"], f["line"], f["function"], f["shape"], f["primitive"]] for f in findings]
		ckey = "wakecov-res-" + sha1((tdig + kn.digest + CODE_DIGEST + repr(ids)).encode())[:16]
		got = cache.load("index", ckey)
		if got is not None and len(got[0]) == len(findings):
			for f, rec in zip(findings, got[0]):
				if rec is not None:
					f["wakers"] = rec
			return got[1]
	# in a process of its own: the file views of a wait whose queue is
	# named in a few hundred files (bcachefs's journal on 6.12) took
	# 300-480 MiB on top of all the run held (common.run_spawned())
	recs, out, dropped = run_spawned("nestsleep.analysis.wakecov", "_wake_coverage_child", findings,
					 dict((rel, tree.sha(rel)) for rel in tree.files), tree.abs, tree.kdir,
					 getattr(tree, "jobs", 1), kn.path, cache.root)
	cache.dropped += dropped
	for f, rec in zip(findings, recs):
		if rec is not None:
			f["wakers"] = rec
	if ckey:
		cache.store((recs, out), "index", ckey)
	return out


class _Files:
	"""What WakeCov reads of the scanned tree (scan.Tree): each file's
	content hash and path, the tree's root."""

	def __init__(self, shas, abs_, kdir, jobs):
		self.files = dict((rel, (sha,)) for rel, sha in shas.items())
		self.abs, self.kdir, self.jobs = abs_, kdir, jobs

	def sha(self, rel):
		return self.files[rel][0]


def _wake_coverage_child(findings, shas, abs_, kdir, jobs, kn_path, cache_root):
	"""_wake_coverage() in the process run_spawned() started: each
	finding's record (or None), the missed wakeups, the damaged cache
	files dropped."""
	cache = Cache(cache_root)
	out = _wake_coverage(findings, _Files(shas, abs_, kdir, jobs), Knowledge(kn_path), cache)
	return [f.get("wakers") for f in findings], out, cache.dropped


def _wake_coverage(findings, tree, kn, cache):
	wc = WakeCov(tree, kn, cache)
	wc.prepare(findings)
	out = {}
	for f in findings:
		rec, info = wc.record(f)
		if rec is None:
			continue
		f["wakers"] = rec
		for m in wc.missed(f, info):
			out.setdefault(m["fingerprint"], m)
	return sorted(out.values(), key=lambda m: (m["file"], m["line"], m["col"], m["message"]))
