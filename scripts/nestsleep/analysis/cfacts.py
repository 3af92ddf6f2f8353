# SPDX-License-Identifier: GPL-2.0-only
"""Per-file facts for nestsleep's whole-tree analysis, from a light C tokenizer.

Coccinelle matches the wait sites (cocci/nested_sleep.cocci); this module only
extracts what the interprocedural summary needs from the files that define
callees, cheaply and without dropping functions spatch cannot parse:

  functions  name -> line, static, calls (name, line, kind, base, args,
             and the argument facts pa, cond, prov, acond, va described at
             annotate_calls()), local struct types, sched_annotate_sleep()
             line, whether the function may return with the task in a
             non-running state (carry), and whether it returns true only
             in TASK_RUNNING (run_true, runs_on_true())
  macros     function-like #defines: parameters and the calls in the body
  structs    struct name -> {field: struct type}
  ops        (struct type or None, member, function) from initializers and
             assignments, for calls through function pointers

The facts depend only on the file's bytes, so they are cached by content hash.
The kernel names the extractor must know (state setters, annotations, lock
guards) come from cocci/sleep_info.json as a Words value (knowledge.py).
"""

import dataclasses
import re

from nestsleep.analysis import ctok

FACTS_VERSION = 9


def _code_digest(tool_source):
	"""The extractor's own source and that of its C tokenizer
	(scripts/nstok.c): part of every facts cache key, so that facts made
	by another version of either are never trusted (a FACTS_VERSION bump
	can be forgotten)."""
	import hashlib
	with open(__file__, "rb") as f:
		return hashlib.sha1(f.read() + tool_source).hexdigest()[:12]


CODE_DIGEST = _code_digest(ctok._source_bytes())

_COMMENT_STR = re.compile(r"""
	/\*.*?\*/
	|//[^\n]*
	|"(?:\\.|[^"\\\n])*"
	|'(?:\\.|[^'\\\n])*'
""", re.X | re.S)

_PP = re.compile(r"[ \t]*#")
_LEAD_WS = re.compile(r"[ \t\r\f\v]*")
# the tokens (identifiers, numbers, operators, the quotes of blanked
# literals); findall() skips what is not one (blanks, stray characters)
_SIG = re.compile(r"""[A-Za-z_]\w*|\.?\d[\w.]*|->|\+\+|--|<<=|>>=|<<|>>|<=|>=|==|!=|&&|\|\||"""
		  r"""[-+*/%&|^]=|\.\.\.|[{}()\[\];,.<>=!~?:+\-*/%&|^\#"']""")
_KIND = dict([(c, "id") for c in "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz_"]
	     + [(c, "num") for c in "0123456789"] + [('"', "str"), ("'", "str")])

KEYWORDS = frozenset("""
	if while for switch return sizeof typeof __typeof__ __typeof do else case
	goto break continue default struct union enum static inline const volatile
	__attribute__ asm __asm__ volatile defined _Static_assert static_assert
	__builtin_expect likely unlikely __same_type __alignof__ alignof offsetof
	__builtin_constant_p __is_constexpr
""".split())

ANNOTATIONS = frozenset("""
	__acquires __releases __must_hold __attribute__ __printf __scanf
	__cond_lock __no_sanitize_address __diag_ignore __alloc_size __malloc
	__section __aligned __weak __init __exit __cold __always_inline
	__must_check noinline notrace __used __maybe_unused __visible
""".split())



@dataclasses.dataclass(frozen=True)
class Words:
	"""Kernel names, from cocci/sleep_info.json (Knowledge.words):
	set and prepare, the task-state setters (state_setters); running, those
	that end a window when called with TASK_RUNNING; annotations, calls that
	mark a nested sleep as checked; guards, the scope-based lock guards;
	on_zero, the setters that set the state only when they return 0;
	asserts, the calls that do not return when their argument holds;
	puts, the puts whose sleep is their release (put_release), with
	put_args the (put, index of its release argument) pairs;
	release_members, the members that hold release callbacks; teardown,
	the words of the names of calls that unpublish an object;
	regions, (name, kind, side) for the calls that begin ('enter') or end
	('exit') an atomic region, or leave it around their own sleep
	('drops'; sleep_info.json atomic_regions)."""
	set: frozenset = frozenset()
	prepare: frozenset = frozenset()
	running: frozenset = frozenset()
	on_zero: frozenset = frozenset()
	annotations: frozenset = frozenset()
	guards: frozenset = frozenset()
	asserts: frozenset = frozenset()
	puts: frozenset = frozenset()
	put_args: tuple = ()
	release_members: frozenset = frozenset()
	teardown: frozenset = frozenset()
	regions: tuple = ()


def _blank(m):
	"""Replace a comment or literal by spaces, keeping newlines (line numbers)."""
	s = m.group(0)
	nl = "\n" * s.count("\n")
	if s[0] in "\"'":
		return s[0] + s[0] + nl
	return " " + nl


def tokenize(text):
	"""Return a list of (kind, value, line) for C source text: those of
	tokenize_py(), from the C tokenizer (ctok.py, scripts/nstok.c), or
	from tokenize_py() for a text the tool refuses."""
	toks = ctok.tokenize_c(text)
	return toks if toks is not None else tokenize_py(text)


def tokenize_py(text):
	"""Return a list of (kind, value, line) for C source text: the
	reference that scripts/nstok.c follows (test_ctok.py).

	Preprocessor lines become one ('pp', text, line) token each, with
	continuation lines joined; each quote of a (blanked) string or
	character literal becomes a ('str', '"', line) token.  The text is
	read a line at a time, a regex finding the tokens of each line: the
	whole tree's extraction spent a quarter of its time here.  Change
	both or neither."""
	lines = _COMMENT_STR.sub(_blank, text).split("\n")
	toks = []
	append, findall, kind_of = toks.append, _SIG.findall, _KIND.get
	n = len(lines)
	i = 0
	while i < n:
		s = lines[i]
		line = i + 1
		i += 1
		if not s:
			continue
		k = -1
		if _PP.match(s):
			k = 0
		else:
			m = _LEAD_WS.match(s)
			if m.end() and s.startswith("#", m.end()):
				k = m.end()
		if k >= 0:
			pp = s[k:]
			while pp.endswith("\\") and i < n:
				pp += "\n" + lines[i]
				i += 1
			append(("pp", pp, line))
			continue
		for v in findall(s):
			kind = kind_of(v[0])
			if kind is None:	# '.5' is a number, '.' and '...' operators
				kind = "num" if v[0] == "." and len(v) > 1 and v[1] != "." else "op"
			append((kind, v, line))
	return toks


def _match_close(toks, i, open_, close):
	"""Index of the token closing the bracket at toks[i], or len(toks)."""
	depth = 0
	for j in range(i, len(toks)):
		v = toks[j][1]
		if toks[j][0] != "op":
			continue
		if v == open_:
			depth += 1
		elif v == close:
			depth -= 1
			if depth == 0:
				return j
	return len(toks)


def _match_open(toks, i, open_, close):
	depth = 0
	for j in range(i, -1, -1):
		v = toks[j][1]
		if toks[j][0] != "op":
			continue
		if v == close:
			depth += 1
		elif v == open_:
			depth -= 1
			if depth == 0:
				return j
	return -1


_WORDY = frozenset(("id", "num"))


def _text(toks):
	"""The tokens as text, a blank only between two words."""
	if len(toks) == 1:
		return toks[0][1]
	out = []
	prev = ""
	for k, v, _ in toks:
		if k in _WORDY and prev in _WORDY:
			out.append(" ")
		out.append(v)
		prev = k
	return "".join(out)


def split_args(toks, lp, rp):
	"""Split the tokens between parentheses lp..rp at top-level commas."""
	args, cur, depth = [], [], 0
	for t in toks[lp + 1:rp]:
		if t[0] == "op" and t[1] in "([{":
			depth += 1
		elif t[0] == "op" and t[1] in ")]}":
			depth -= 1
		if depth == 0 and t[0] == "op" and t[1] == ",":
			args.append(cur)
			cur = []
		else:
			cur.append(t)
	if cur or args:
		args.append(cur)
	return args


def short_arg_texts(toks, lp, limit=12):
	"""_strip(_text(a)) for each argument a of split_args() of the call
	whose '(' is toks[lp], or '' for one of more than limit tokens: the
	split, the close and the texts in one pass, without keeping the long
	ones (annotate_calls() runs it for every call of the tree)."""
	out, cur, cnt, depth = [], [], 0, 0
	for j in range(lp + 1, len(toks)):
		t = toks[j]
		if t[0] == "op":
			v = t[1]
			if v in _OPENERS:
				depth += 1
			elif v in _CLOSERS:
				if depth == 0:
					break
				depth -= 1
			elif v == "," and depth == 0:
				out.append(_strip(_text(cur)) if cnt <= limit else "")
				cur, cnt = [], 0
				continue
		cnt += 1
		if cnt <= limit:
			cur.append(t)
	if cnt or out:
		out.append(_strip(_text(cur)) if cnt <= limit else "")
	return out


_OPENERS = frozenset("([{")
_CLOSERS = frozenset(")]}")


def split_args_text(s):
	"""split_args() on text: the top-level comma-separated parts of an
	argument list, stripped."""
	out, cur, depth = [], "", 0
	for ch in s:
		if ch in "([{":
			depth += 1
		elif ch in ")]}":
			depth -= 1
		if ch == "," and depth == 0:
			out.append(cur.strip())
			cur = ""
		else:
			cur += ch
	if cur.strip():
		out.append(cur.strip())
	return out


def _base_text(toks, i):
	"""Text of the expression before '->' or '.' at toks[i] (e.g. 'rb->access')."""
	j = i - 1
	while j >= 0:
		k, v, _ = toks[j]
		if k == "id":
			if j - 1 >= 0 and toks[j - 1][1] in ("->", "."):
				j -= 2
				continue
			break
		if v == "]":
			j = _match_open(toks, j, "[", "]") - 1
			continue
		if v == ")":
			o = _match_open(toks, j, "(", ")")
			if o > 0 and toks[o - 1][0] == "id" and toks[o - 1][1] not in KEYWORDS:
				j = o - 1
				if j - 1 >= 0 and toks[j - 1][1] in ("->", "."):
					j -= 2
					continue
				break
			j = o
			break
		return ""
	j = max(j, 0)
	return _text(toks[j:i])


_LOCAL_DECL = re.compile(r"\bstruct\s+(\w+)\s*(\*+\s*(?:const\s+)?)?(\w+)\s*(?=[;,=)\[])")


def stmt_expr_calls(toks, lo, hi):
	"""Token indices of the calls that take a GNU statement expression
	'({ ... })' as an argument (spatch skips such arguments)."""
	out = set()
	for k in range(lo, hi - 1):
		if toks[k][1] != "{" or toks[k - 1][1] != "(":
			continue
		depth = 0
		for j in range(k - 2, lo - 1, -1):
			v = toks[j][1]
			if v == ")":
				depth += 1
			elif v == "(":
				if depth == 0:
					if j > 0 and toks[j - 1][0] == "id":
						out.add(j - 1)
					break
				depth -= 1
			elif v in (";", "{", "}") and depth == 0:
				break
	return out


def calls_in(toks, lo, hi, want_args, force_args=(), guards=frozenset(), keep_index=False):
	"""Calls in toks[lo:hi]: dicts with name, line, kind, base, args, and
	for a lock guard (a name in guards) its class; with keep_index, the
	token index of the name in '_i' (for annotate_calls())."""
	out = []
	for i in range(lo, hi):
		k, v, ln = toks[i]
		if k != "id" or i + 1 >= hi or toks[i + 1][1] != "(":
			continue
		if v in KEYWORDS:
			continue
		prev = toks[i - 1][1] if i > 0 else ""
		call = {"name": v, "line": ln}
		if keep_index:
			call["_i"] = i
		if prev in ("->", "."):
			call["kind"] = "arrow" if prev == "->" else "dot"
			call["base"] = _base_text(toks, i - 1)
		elif i >= 1 and toks[i - 1][0] == "id" and toks[i - 1][1] not in KEYWORDS \
				and prev not in ("return", "else"):
			# 'int foo(' inside a body: a declaration, not a call
			continue
		if v in guards:
			rp = _match_close(toks, i + 1, "(", ")")
			a = split_args(toks, i + 1, rp)
			if a and a[0]:
				call["guard"] = _text(a[0])
		if i in force_args:
			rp = _match_close(toks, i + 1, "(", ")")
			call["args"] = [_text(a)[:2000] for a in split_args(toks, i + 1, rp)]
			call["stmt_expr"] = True
		elif want_args(v):
			rp = _match_close(toks, i + 1, "(", ")")
			call["args"] = [_text(a)[:200] for a in split_args(toks, i + 1, rp)]
		out.append(call)
	return out


def _state_arg_running(toks, i):
	rp = _match_close(toks, i + 1, "(", ")")
	txt = _text(toks[i + 2:rp])
	return txt.strip() == "TASK_RUNNING", rp


def returns_nonrunning(toks, lo, hi, restore, words):
	"""Linear approximation: after a call that sets a non-running state, is a
	'return' (or the end of the function) reached before the state is restored
	(schedule*(), finish_wait(), __set_current_state(TASK_RUNNING), ...)?"""
	armed = None
	sets = False
	zero_var = None	# holds the value of an on_zero setter (ret = prepare_to_wait_event())
	i = lo
	while i < hi:
		k, v, ln = toks[i]
		if k == "id" and i + 1 < hi and toks[i + 1][1] == "(":
			if v in words.set or v in words.prepare:
				zero_var = None
				if v in words.on_zero and i >= 2 and toks[i - 1][1] == "=" and toks[i - 2][0] == "id":
					zero_var = toks[i - 2][1]
				running, rp = _state_arg_running(toks, i) if v in words.set else (False, i)
				if running:
					armed = None
				elif v in words.prepare:
					# prepare_to_wait(wq, &w, state): third argument
					rp = _match_close(toks, i + 1, "(", ")")
					a = split_args(toks, i + 1, rp)
					if len(a) < 3 or _text(a[-1]) != "TASK_RUNNING":
						armed = ln
						sets = True
				else:
					armed = ln
					sets = True
			elif v in restore:
				armed = None
		elif k == "id" and v == "return" and armed is not None:
			if not _returns_restore(toks, i + 1, hi, restore) and not _on_nonzero(toks, lo, i, zero_var):
				return armed, True
		i += 1
	return armed, sets


def _restores_here(toks, a, e, restore, words):
	"""Whether statement toks[a..e] is a plain call that leaves the task
	running: a window-ending call, or a setter with TASK_RUNNING."""
	if toks[a][0] != "id" or a + 1 > e or toks[a + 1][1] != "(":
		return False
	if toks[a][1] in restore:
		return True
	return toks[a][1] in words.set and _state_arg_running(toks, a)[0]


def runs_on_true(toks, lo, hi, restore, words):
	"""Whether the body toks[lo:hi] returns a non-zero constant only after
	a statement that leaves the task running, in its own block or an
	enclosing one, with no state set since (io_run_task_work(): 'if
	(task_work_pending(current)) { __set_current_state(TASK_RUNNING); ...
	return 1; } return 0;'), or sets a returned flag only then ('ret =
	true;' ... 'return ret;').  Every return must be a constant or such a
	flag, and one must be non-zero.  A caller that tests 'if (f())' knows the task runs on the
	true branch."""
	seen = {"true": 0, "bad": False, "ret": set()}
	flags = {}	# local -> whether every non-zero store to it ran in TASK_RUNNING
	stores = {}	# local -> its non-zero stores

	def block(a, b, running):
		j = a
		while j < b and not seen["bad"]:
			v = toks[j][1]
			if toks[j][0] == "pp":
				j += 1
				continue
			e = max(stmt_end(toks, j, b), j)
			if v == "return":
				val = _text(toks[j + 1:e]).strip("()")
				if val in ("0", "false"):
					pass
				elif re.match(r"^(?:[1-9]\d*|true)$", val):
					seen["true"] += 1
					if not running:
						seen["bad"] = True
				elif val in flags:
					seen["ret"].add(val)
				else:
					seen["bad"] = True
			elif v == "{":
				block(j + 1, e, running)
			elif v in ("if", "for", "while", "switch", "do", "else"):
				# nested statements inherit the state; what they change
				# does not leave them
				k = j
				while k <= e:
					if toks[k][1] == "{":
						ke = _match_close(toks, k, "{", "}")
						block(k + 1, min(ke, e), running)
						k = ke + 1
						continue
					if toks[k][1] == "return":
						ke = max(stmt_end(toks, k, e + 1), k)
						block(k, ke + 1, running)
						k = ke + 1
						continue
					if toks[k][0] == "id" and toks[k][1] in (words.set | words.prepare) and \
							not _restores_here(toks, k, e, restore, words):
						running = False
					k += 1
			else:
				for k in range(j, e + 1):
					if toks[k][0] == "id" and k + 1 <= e and toks[k + 1][1] == "(" and \
							toks[k][1] in (words.set | words.prepare):
						running = False
				if _restores_here(toks, j, e, restore, words):
					running = True
				# a flag returned later: 'bool ret = false;', 'ret = true;'
				if e - j >= 3 and toks[e][1] == ";" and toks[e - 2][1] == "=" and toks[e - 3][0] == "id" \
						and toks[e - 4][1] not in ("*", "->", "."):
					var, val = toks[e - 3][1], toks[e - 1][1]
					if val in ("0", "false"):
						flags.setdefault(var, True)
					elif re.match(r"^(?:[1-9]\d*|true)$", val):
						flags[var] = flags.get(var, True) and running
						stores[var] = stores.get(var, 0) + 1
					else:
						flags[var] = False
			j = e + 1

	block(lo, hi, False)
	if any(not flags.get(v, False) for v in seen["ret"]):
		return False
	return seen["true"] + sum(stores.get(v, 0) for v in seen["ret"]) > 0 and not seen["bad"]


def carry_cond(calls, words):
	"""The parameter tests under which every state setter among calls
	runs (bcache's mca_cannibalize_lock(): 'if (op) prepare_to_wait()'),
	so the function can return with the state set only when they hold;
	[] if a setter runs unconditionally."""
	common = None
	for c in calls:
		if c["name"] not in words.set and c["name"] not in words.prepare or c.get("running"):
			continue
		cs = set(tuple(x) for x in c.get("cond", ()))
		common = cs if common is None else common & cs
		if not common:
			return []
	return sorted(list(x) for x in common) if common else []


def _on_nonzero(toks, lo, i, var):
	"""Whether the return at i is the body of 'if (var)' (or 'var < 0',
	'var != 0'), var holding an on_zero setter's value: the setter did not
	set the state on that path."""
	if var is None:
		return False
	j = i - 1
	if j < lo or toks[j][1] != ")":
		return False
	o = j - 1
	while o > lo and toks[o][1] != "(":
		o -= 1
	if o - 1 < lo or toks[o - 1][1] != "if":
		return False
	test = [t[1] for t in toks[o + 1:j]]
	return test in ([var], [var, "<", "0"], [var, "!=", "0"])


def _returns_restore(toks, lo, hi, restore):
	"""Whether the return expression from lo calls a window-ending
	function ('return schedule_timeout(t);'): it runs before the
	function returns, so this return leaves in TASK_RUNNING."""
	i = lo
	while i < hi and toks[i][1] != ";":
		if toks[i][0] == "id" and toks[i][1] in restore and i + 1 < hi and toks[i + 1][1] == "(":
			return True
		i += 1
	return False


# -- argument facts: under which parameter values a call runs --------------
#
# Each call may carry
#   pa    [[pos, "p", i] | [pos, "c", text]]: argument pos is the enclosing
#         function's parameter i (not assigned in the body), or a constant
#         (an upper-case name, a number, NULL, false, true, or an '|' of them)
#   cond  [[i, op, val]]: tests of parameter i that hold whenever the call
#         runs, from the enclosing if/else and from an earlier
#         'if (C) return ...;' in the same block.  op is nz, z (zero or
#         NULL), bit, nobit (param & val), eq, ne (param == val) or
#         blocking, nonblocking (gfpflags_allow_blocking(param))
#   acond the tests that hold when the first argument is true
#         (might_sleep_if(gfpflags_allow_blocking(gfp)))
#   prov  ["c", text] | ["p", i]: the first argument is a local variable
#         (or its address) that an earlier call of this function allocated
#         with this gfp (every such call agreeing); see
#         sleep_info.json's provenance_free
# summarize.py maps them through each call site's constants.

_CONST = re.compile(r"^(?:[A-Z_][A-Z0-9_]*|0[xX][0-9a-fA-F]+[uUlL]*|\d+[uUlL]*|NULL|false|true)"
		    r"(?:\|(?:[A-Z_][A-Z0-9_]*|0[xX][0-9a-fA-F]+[uUlL]*|\d+[uUlL]*))*$")
_NEG = {"nz": "z", "z": "nz", "bit": "nobit", "nobit": "bit", "eq": "ne", "ne": "eq",
	"blocking": "nonblocking", "nonblocking": "blocking"}
_ASSIGN_OPS = frozenset(("=", "+=", "-=", "*=", "/=", "%=", "&=", "|=", "^=", "<<=", ">>=", "++", "--"))


_WS = re.compile(r"\s+")
_PARENS = re.compile(r"^(?:unlikely|likely)?\((.*)\)$")
_WORD = re.compile(r"\w+")
_ONE_WORD = re.compile(r"^(\w+)$")
_EQ = re.compile(r"^(\w+)(==|!=)(\w+)$")
_BIT = re.compile(r"^(\w+)&([A-Z_][A-Z0-9_]*)$")
_BLOCKING = re.compile(r"^gfpflags_allow_blocking\((\w+)\)$")
_ADDR = re.compile(r"^&\w+$")
_WORD_PARENS = re.compile(r"(?<![\w)\]])\((\w+)\)")


def is_const(t):
	"""Whether argument text t is a constant (see pa above)."""
	t = _strip(_WS.sub("", t))
	return bool(_CONST.match(t)) and t != "__VA_ARGS__"


def _strip(t):
	"""Text without enclosing parentheses and likely()/unlikely()."""
	while True:
		if not t.endswith(")"):
			return t
		m = _PARENS.match(t)
		if not m or not _balanced(m.group(1)):
			return t
		t = m.group(1)


def _balanced(t):
	d = 0
	for ch in t:
		if ch == "(":
			d += 1
		elif ch == ")":
			d -= 1
			if d < 0:
				return False
	return d == 0


def _split_top(t, sep):
	if sep not in t:
		return [t]
	out, cur, d, i = [], "", 0, 0
	while i < len(t):
		ch = t[i]
		if ch == "(":
			d += 1
		elif ch == ")":
			d -= 1
		if d == 0 and t.startswith(sep, i):
			out.append(cur)
			cur = ""
			i += len(sep)
			continue
		cur += ch
		i += 1
	out.append(cur)
	return out


def _atom(t, params):
	"""(param index, op, val) for one test of a parameter, or None.  A
	word in parentheses is the word ('(__sleep_us) != 0', a macro's
	habit)."""
	t = _strip(_WORD_PARENS.sub(r"\1", t))
	neg = False
	while t.startswith("!") and not t.startswith("!="):
		neg = not neg
		t = _strip(t[1:])
	m = _ONE_WORD.match(t)
	a = None
	if m and m.group(1) in params:
		a = (params[m.group(1)], "nz", "")
	m = _EQ.match(t)
	if m and m.group(1) in params:
		v = m.group(3)
		if v in ("NULL", "0", "false"):
			a = (params[m.group(1)], "z" if m.group(2) == "==" else "nz", "")
		elif _CONST.match(v):
			a = (params[m.group(1)], "eq" if m.group(2) == "==" else "ne", v)
	m = _BIT.match(t)
	if m and m.group(1) in params:
		a = (params[m.group(1)], "bit", m.group(2))
	m = _BLOCKING.match(t)
	if m and m.group(1) in params:
		a = (params[m.group(1)], "blocking", "")
	if a is None:
		return None
	return (a[0], _NEG[a[1]], a[2]) if neg else a


def split_cond(t, atom, negate):
	"""The tests atom() finds in condition text t that hold when t is
	true (its && parts), and those that hold when it is false (the
	negated || parts)."""
	t = _strip(t)
	ands, ors = _split_top(t, "&&"), _split_top(t, "||")
	pos = [a for a in (atom(x) for x in ands) if a] if len(ors) == 1 else []
	neg = [negate(a) for a in (atom(x) for x in ors) if a] if len(ands) == 1 else []
	return pos, neg


def cond_atoms(t, params):
	"""The parameter tests that hold when condition text t is true, and
	those when it is false."""
	return split_cond(t, lambda x: _atom(x, params), lambda a: (a[0], _NEG[a[1]], a[2]))


def loop_around(toks, line):
	"""(keyword line, last line) of the innermost for/while/do loop whose
	body holds a statement on line, a line after the loop's keyword, or
	None.  The body of a do loop ends at its 'while (...);', which is
	part of the loop."""
	best = None
	n = len(toks)
	for j in range(n - 1):
		k, v, ln = toks[j]
		if k != "id" or v not in ("for", "while", "do") or ln > line:
			continue
		if v == "do":
			body = j + 1
		else:
			if toks[j + 1][1] != "(":
				continue
			rp = _match_close(toks, j + 1, "(", ")")
			if rp + 1 >= n or toks[rp + 1][1] == ";":
				continue	# a do loop's tail, or an empty body
			body = rp + 1
		e = stmt_end(toks, body, n)
		if v == "do":
			e = stmt_end(toks, j, n)
		if ln < line <= toks[e][2] and toks[body][2] <= line:
			if best is None or ln >= best[0]:
				best = (ln, toks[e][2])
	return best


def labels_between(toks, first, last):
	"""Whether a goto label ('name:' at a statement's start) stands on a
	line in first..last."""
	for j in range(1, len(toks) - 1):
		k, v, ln = toks[j]
		if first <= ln <= last and k == "id" and toks[j + 1][1] == ":" \
				and v not in ("default", "case") and toks[j - 1][1] in (";", "{", "}"):
			return True
	return False


def block_macro(toks, j, hi):
	"""Whether the statement at toks[j] is a macro that heads a block,
	'name(...) { ... }': scoped_guard(), scoped_cond_guard()
	(include/linux/cleanup.h), list_for_each_entry() and the other loop
	macros.  No C statement has that shape otherwise."""
	if toks[j][0] != "id" or toks[j][1] in KEYWORDS or j + 1 >= hi or toks[j + 1][1] != "(":
		return False
	rp = _match_close(toks, j + 1, "(", ")")
	return rp + 1 < hi and toks[rp + 1][1] == "{"


def stmt_end(toks, j, hi):
	"""Index of the last token of the statement that starts at toks[j]."""
	if j >= hi:
		return hi - 1
	if toks[j][0] == "pp":
		return j	# a #define or #if line between statements
	v = toks[j][1]
	if v == "{":
		return min(_match_close(toks, j, "{", "}"), hi - 1)
	if v == "if":
		rp = _match_close(toks, j + 1, "(", ")")
		e = stmt_end(toks, rp + 1, hi)
		if e + 1 < hi and toks[e + 1][1] == "else":
			return stmt_end(toks, e + 2, hi)
		return e
	if v in ("for", "while", "switch") and j + 1 < hi and toks[j + 1][1] == "(":
		rp = _match_close(toks, j + 1, "(", ")")
		if v == "while" and rp + 1 < hi and toks[rp + 1][1] == ";":
			return rp + 1
		return stmt_end(toks, rp + 1, hi)
	if v == "do":
		e = stmt_end(toks, j + 1, hi)
		return stmt_end(toks, e + 1, hi)
	if block_macro(toks, j, hi):
		return stmt_end(toks, _match_close(toks, j + 1, "(", ")") + 1, hi)
	d = 0
	k = j
	while k < hi:
		w = toks[k][1]
		if toks[k][0] == "op":
			if w in "([{":
				d += 1
			elif w in ")]}":
				d -= 1
				if d < 0:
					return k - 1
			elif w == ";" and d == 0:
				return k
		k += 1
	return hi - 1


def _exits(toks, lo, end, leave=("return",)):
	"""Whether the statement toks[lo..end] always leaves by one of the
	keywords leave ('return', and 'goto' where every label forgets the
	tests met before it)."""
	if lo > end or lo >= len(toks):
		return False
	if toks[lo][1] in leave:
		return True
	if toks[lo][1] != "{":
		return False
	j, last = lo + 1, None
	while j < end:
		last = j
		j = max(stmt_end(toks, j, end), j) + 1
	return last is not None and toks[last][1] in leave


_TERN_STOP = frozenset((";", "{", "}", ",", "?", ":", "return") + tuple(
	("=", "+=", "-=", "*=", "/=", "%=", "&=", "|=", "^=", "<<=", ">>=")))


def _tern_scan(toks, j, b, stops):
	"""Index of the first token from toks[j] on, at depth 0, that ends a
	part of a ?:  an unmatched closer, a token in stops, or a ':' that
	no ?: nested in the part takes; b + 1 if none."""
	d = n = 0
	while j <= b:
		v = toks[j][1]
		if v in _OPENERS:
			d += 1
		elif v in _CLOSERS:
			if d == 0:
				return j
			d -= 1
		elif d == 0 and v == "?":
			n += 1
		elif d == 0 and v == ":":
			if n == 0:
				return j
			n -= 1
		elif d == 0 and v in stops:
			return j
		j += 1
	return j


def ternaries(toks, a, b, atoms):
	"""[(first, last, tests)] for the branches of each 'C ? X : Y' in
	toks[a..b]: X's tokens run under atoms(C)'s true tests, Y's under its
	false ones.  C reaches back to an unmatched '(' or '[', a comma, an
	assignment or the statement's start (?: binds looser than || and &&);
	Y reaches forward to an unmatched ')', ']' or '}', a comma, a ';' or
	the ':' of an enclosing ?:."""
	out = []
	b = min(b, len(toks) - 1)	# an unbalanced body's bound may be past the end
	for q in range(a, b + 1):
		if toks[q][1] != "?" or toks[q][0] != "op":
			continue
		s, d = q - 1, 0
		while s >= a:
			v = toks[s][1]
			if v in _CLOSERS:
				d += 1
			elif v in _OPENERS:
				if d == 0:
					break
				d -= 1
			elif d == 0 and v in _TERN_STOP:
				break
			s -= 1
		pos, neg = atoms(_text(toks[s + 1:q]))
		if not pos and not neg:
			continue
		c = _tern_scan(toks, q + 1, b, ())
		if c > b or toks[c][1] != ":":
			continue
		e = _tern_scan(toks, c + 1, b, (",", ";"))
		if pos:
			out.append((q + 1, c - 1, tuple(pos)))
		if neg:
			out.append((c + 1, e - 1, tuple(neg)))
	return out


def guard_map(toks, lo, hi, atoms, label_reset=None, restores=None, asserts=frozenset(), gotos=False,
	      ternary=False):
	"""{token index: tuple of tests} for the tokens of the body toks[lo:hi]
	that run under some.  atoms(condition text) gives the tests that hold
	when the condition is true and those when it is false; they hold in
	the branches, and the false ones after 'if (C) return ...;' and after
	'A(C);' for A in asserts (BUG_ON()).  A label
	forgets the tests met since its block began (label_reset(token index)
	may say that no goto makes that necessary).  With restores(lo, end),
	whether a statement only restores TASK_RUNNING, 'if (C) restore;'
	adds ("R",) + test for the true tests of C to what follows.  With
	gotos (only without label_reset: every label then forgets), 'if (C)
	goto L;' leaves like a return: nfp_alloc_bar()'s 'if (nonblocking)
	goto err_nobar;' guards the wait after it.  With ternary, the
	branches of 'C ? X : Y' inside a statement run under the tests of C
	('atomic ? udelay(w) : usleep_range(w, 2 * w);', ternaries())."""
	out = {}
	leave = ("return", "goto") if gotos and label_reset is None else ("return",)

	def mark(a, b, cur):
		tern = ternaries(toks, a, b, atoms) if ternary else ()
		if cur or tern:
			for k in range(a, b + 1):
				more = tuple(x for s, e, t in tern if s <= k <= e for x in t)
				if cur or more:
					out[k] = cur + more

	def block(a, b, cur):
		base = cur
		j = a
		while j < b:
			v = toks[j][1]
			if toks[j][0] == "pp":
				j += 1
				continue
			if toks[j][0] == "id" and j + 1 < b and toks[j + 1][1] == ":" and v not in ("case", "default"):
				if label_reset is None or label_reset(j):
					cur = base	# a goto may arrive without the tests met since
				j += 2
				continue
			if v in ("case", "default"):
				k = j
				while k < b and toks[k][1] != ":":
					k += 1
				j = k + 1
				continue
			if v == "if" and j + 1 < b and toks[j + 1][1] == "(":
				rp = _match_close(toks, j + 1, "(", ")")
				pos, neg = atoms(_text(toks[j + 2:rp]))
				mark(j, rp, cur)
				te = stmt_end(toks, rp + 1, b)
				stmt(rp + 1, te, cur + tuple(pos))
				if te + 1 < b and toks[te + 1][1] == "else":
					ee = stmt_end(toks, te + 2, b)
					stmt(te + 2, ee, cur + tuple(neg))
					j = max(ee, j) + 1
				else:
					if _exits(toks, rp + 1, te, leave):
						cur = cur + tuple(neg)
					elif restores is not None and restores(rp + 1, te):
						cur = cur + tuple(("R",) + tuple(a) for a in pos)
					j = max(te, j) + 1
				continue
			if (v in ("for", "while", "switch") and j + 1 < b and toks[j + 1][1] == "(") or block_macro(toks, j, b):
				e = stmt_end(toks, j, b)
				rp = _match_close(toks, j + 1, "(", ")")
				mark(j, rp, cur)
				if rp + 1 <= e:
					stmt(rp + 1, e, cur)
				j = max(e, j) + 1
				continue
			if v == "do":
				be = stmt_end(toks, j + 1, b)
				stmt(j + 1, be, cur)
				e = stmt_end(toks, be + 1, b)
				mark(be + 1, e, cur)
				j = max(e, j) + 1
				continue
			if v == "{":
				e = stmt_end(toks, j, b)
				block(j + 1, e, cur)
				j = max(e, j) + 1
				continue
			if v == "(" and j + 1 < b and toks[j + 1][1] == "{":
				# a statement expression: a macro's '({ ... })' body
				ce = _match_close(toks, j + 1, "{", "}")
				block(j + 2, ce, cur)
				e = stmt_end(toks, j, b)
				mark(ce, e, cur)
				j = max(e, j) + 1
				continue
			e = stmt_end(toks, j, b)
			mark(j, e, cur)
			if v in asserts and j + 1 < b and toks[j + 1][1] == "(":
				# BUG_ON(C); does not return when C holds
				rp = _match_close(toks, j + 1, "(", ")")
				if rp + 1 == e:
					cur = cur + tuple(atoms(_text(toks[j + 2:rp]))[1])
			j = max(e, j) + 1

	def stmt(a, e, cur):
		if a > e:
			return
		if toks[a][1] == "{":
			block(a + 1, e, cur)
		else:
			block(a, e + 1, cur)

	block(lo, hi, ())
	return out


def writes(prev, nxt):
	"""Whether an lvalue between the tokens prev and nxt is written, or
	its address taken: 'x = ', 'x += ', 'x++', '++x', '&x'.  '&p->member',
	'++p->member' and '&p[i]' write or take the address of a member or an
	element, not of p."""
	return nxt in _ASSIGN_OPS or prev in _ADDR_OR_STEP and nxt not in _DEREF


_ADDR_OR_STEP = frozenset(("&", "++", "--"))
_DEREF = frozenset(("->", ".", "["))


def _assigned(toks, lo, hi, names):
	"""The names among names that the body toks[lo:hi] may change."""
	out = set()
	for j in range(lo, hi):
		k, v, _ = toks[j]
		if k != "id" or v not in names or (j > 0 and toks[j - 1][1] in ("->", ".")):
			continue
		if writes(toks[j - 1][1] if j > lo else "", toks[j + 1][1] if j + 1 < hi else ""):
			out.add(v)
	return out


def params_of(toks, lo, brace, name):
	"""Parameter names of the function whose declarator is toks[lo:brace],
	and the indices of those declared gfp_t."""
	for j in range(lo, brace):
		if toks[j][1] == name and j + 1 < brace and toks[j + 1][1] == "(":
			rp = _match_close(toks, j + 1, "(", ")")
			names, gfp = [], []
			for i, a in enumerate(split_args(toks, j + 1, rp)):
				ids = [t[1] for t in a if t[0] == "id"]
				m = re.search(r"\(\*(\w+)\)", _text(a))
				names.append(m.group(1) if m else (ids[-1] if ids and ids != ["void"] else ""))
				if "gfp_t" in ids:
					gfp.append(i)
			return names, gfp
	return [], []


def atomic_regions(toks, lo, hi, calls, regions):
	"""Mark 'atomic' the calls (with their token index in '_i', in order)
	of the body toks[lo:hi] made while it holds a spinlock or an rwlock,
	or has interrupts or preemption off: after an enter of regions
	(Words.regions) and before the exit of the same kind, on the same
	lock text for a lock; not the calls that leave the region around
	their own sleep (schedule_preempt_disabled()).  An exit that a return or a goto follows in its
	block ('if (!busy) { spin_unlock(&l); return 0; }') ends the region
	only on that path, so it is not counted."""
	if not regions:
		return
	kinds = {n: (k, side) for n, k, side in regions}
	held = []	# (kind, key), innermost last
	for c in calls:
		r = kinds.get(c["name"])
		if held and (r is None or r[1] != "drops"):
			c["atomic"] = True
		if r is None or r[1] == "drops":
			continue
		kind, enter = r[0], r[1] == "enter"
		i = c["_i"]
		key = ""
		if kind in ("spinlock", "rwlock"):
			a = short_arg_texts(toks, i + 1)
			key = a[0].lstrip("&") if a else ""
		if enter:
			held.append((kind, key))
			continue
		if _exit_path(toks, lo, hi, i):
			continue
		for j in range(len(held) - 1, -1, -1):
			if held[j] == (kind, key):
				del held[j]
				break
		else:
			# another spelling of the lock: the innermost of its kind
			for j in range(len(held) - 1, -1, -1):
				if held[j][0] == kind:
					del held[j]
					break


def _exit_path(toks, lo, hi, i):
	"""Whether the call at toks[i] is in a block, other than the body
	toks[lo:hi] itself, that a return or goto leaves after it."""
	d, o = 0, i - 1
	while o >= lo:
		v = toks[o][1]
		if v == "}":
			d += 1
		elif v == "{":
			if d == 0:
				break
			d -= 1
		o -= 1
	if o < lo:
		return False
	d = 0
	for j in range(i, hi):
		v = toks[j][1]
		if v == "{":
			d += 1
		elif v == "}":
			if d == 0:
				return False
			d -= 1
		elif d == 0 and v in ("return", "goto"):
			return True
	return False


def _annotate(toks, lo, hi, calls, params, gfp_params=(), asserts=frozenset(), running_setters=frozenset()):
	"""annotate_calls(), or none of its facts for a body too deeply
	nested to walk (no facts only loses precision)."""
	try:
		annotate_calls(toks, lo, hi, calls, params, gfp_params, asserts, running_setters)
	except RecursionError:
		for c in calls:
			for k in ("_i", "pa", "cond", "prov", "va", "acond", "running"):
				c.pop(k, None)


def annotate_calls(toks, lo, hi, calls, params, gfp_params=(), asserts=frozenset(),
		   running_setters=frozenset()):
	"""Add pa, cond and prov (see above) to calls (with their token index
	in '_i'), made in a body toks[lo:hi] whose parameters are params; mark
	'running' the calls of running_setters that set TASK_RUNNING."""
	changed = _assigned(toks, lo, hi, set(p for p in params if p))
	pidx = {p: i for i, p in enumerate(params) if p and p not in changed}
	if pidx:
		pidx.update(param_copies(toks, lo, hi, pidx))

	def atoms(t):
		if not pidx or pidx.keys().isdisjoint(_WORD.findall(t)):
			return (), ()
		return cond_atoms(t, pidx)
	tested = pidx and _tests_param(toks, lo, hi, pidx)
	guards = guard_map(toks, lo, hi, atoms, asserts=asserts, gotos=True, ternary=True) if tested else {}
	alloc = {}	# local -> set of ("c", gfp) / ("p", i) of the calls that take it
	gfp_names = {params[i]: i for i in gfp_params if params[i] in pidx}
	for c in calls:
		i = c.pop("_i")
		if c["name"] in running_setters and _state_arg_running(toks, i)[0]:
			c["running"] = True
		# only short arguments can be a parameter, a constant or a gfp
		texts = short_arg_texts(toks, i + 1)
		if texts == ["__VA_ARGS__"] and "..." in params:
			c["va"] = params.index("...")
		pa = []
		for pos, t in enumerate(texts):
			if t in pidx:
				pa.append([pos, "p", pidx[t]])
			elif _CONST.match(t) and t != "__VA_ARGS__":
				pa.append([pos, "c", t])
		if pa:
			c["pa"] = pa
		if texts and (c["name"] == "might_sleep_if" or "gfpflags_allow_blocking" in texts[0]):
			# might_sleep_if(gfpflags_allow_blocking(gfp)), or
			# read_poll_timeout()'s might_sleep_if((__sleep_us) != 0):
			# what its first argument being true says about the
			# parameters
			at = cond_atoms(texts[0], pidx)[0]
			if at:
				c["acond"] = [list(x) for x in at]
		g = guards.get(i)
		if g:
			c["cond"] = [list(x) for x in g]
		if texts:
			v = texts[0].lstrip("&")
			if _ONE_WORD.match(v) and len(alloc.get(v, ())) == 1 and ("x", "") not in alloc[v]:
				c["prov"] = list(next(iter(alloc[v])))
		# the allocations: 'v = f(..., gfp)' or 'f(&v, ..., gfp)'
		gf = set()
		for t in texts:
			if t in gfp_names:
				gf.add(("p", gfp_names[t]))
			elif "GFP_" in t:
				gf.add(("c", t))
		tgt = []
		if i >= 2 and toks[i - 1][1] == "=" and toks[i - 2][0] == "id" and not gf:
			alloc.setdefault(toks[i - 2][1], set()).add(("x", ""))
		if gf:
			if i >= 2 and toks[i - 1][1] == "=" and toks[i - 2][0] == "id":
				tgt.append(toks[i - 2][1])
			tgt += [t[1:] for t in texts if _ADDR.match(t)]
			for v in tgt:
				alloc.setdefault(v, set()).update(gf)


_ROOT = re.compile(r"^[\s&*(]*([A-Za-z_]\w*)")


def is_teardown(name, words):
	"""Whether a callee's name has a teardown word (sleep_info.json
	put_release.teardown_words) between underscores: device_del,
	kobject_del, kernfs_remove, device_unregister."""
	return bool(words) and not words.isdisjoint(name.split("_"))


def _object(args):
	"""The object a put or teardown call is on: the first name of its
	first argument ('d' for '&d->ref' and 'd->kn'), or None."""
	m = _ROOT.match(args[0]) if args else None
	return m.group(1) if m else None


def mark_puts(funcs, ops, words):
	"""Mark put_last the calls of a put (words.puts) that may drop the
	last reference, so that its release chain costs no doubt
	(summarize.witnesses()).  A put sleeps only through its release,
	which runs only on the last reference; a put is taken as possibly
	the last only in a release or teardown path, recognised from the
	file itself so that it holds on any kernel:
	  - the function is a release callback: assigned to a .release
	    member (kobj_type, struct device, file_operations: the
	    callbacks lib/kobject.c kobject_cleanup(), drivers/base/core.c
	    device_release() and fs/file_table.c __fput() call on the last
	    reference), or passed as the release argument of a put
	    (kref_put(&d->ref, d_release));
	  - the function is a put itself (put_device() -> kobject_put():
	    the wrapper passes its caller's reference on, so the doubt, if
	    any, is its caller's, counted once);
	  - an earlier call of the function, on the same object (the same
	    first name of its first argument), is a teardown (is_teardown()):
	    the owner's reference was dropped or the object unpublished, as
	    in device_unregister(): device_del(dev); put_device(dev);
	    (drivers/base/core.c).
	Anywhere else, and first of all after a get of the same object in
	the same function (a temporary reference: sysfs_notify()'s
	kernfs_get(); kernfs_notify(); kernfs_put();), the put is the last
	only if the owner's reference goes concurrently: a doubt."""
	if not words.puts:
		return
	released = set(fn for _, m, fn, _ in ops if m in words.release_members)
	pargs = dict(words.put_args)
	for f in funcs.values():
		for c in f["calls"]:
			i = pargs.get(c["name"])
			a = c.get("args") or ()
			if i is not None and i < len(a):
				m = _ROOT.match(a[i])
				if m:
					released.add(m.group(1))
	for name, f in funcs.items():
		own = name in released or name in words.puts
		gone = set()
		for c in f["calls"]:
			obj = _object(c.get("args"))
			if c["name"] in words.puts:
				if own or obj is not None and obj in gone:
					c["put_last"] = True
			elif obj is not None and is_teardown(c["name"], words.teardown):
				gone.add(obj)


def _tests_param(toks, lo, hi, pidx):
	"""Whether the body toks[lo:hi] tests a parameter in an if, a
	BUG_ON() or the condition of a ?: (the guard walk only pays then)."""
	for j in range(lo, hi - 1):
		v = toks[j][1]
		if v in ("if", "BUG_ON") and toks[j + 1][1] == "(":
			rp = _match_close(toks, j + 1, "(", ")")
			if any(toks[k][1] in pidx for k in range(j + 2, rp)):
				return True
		elif v == "?" and toks[j][0] == "op":
			k = j - 1
			while k >= lo and toks[k][1] not in (";", "{", "}"):
				if toks[k][1] in pidx:
					return True
				k -= 1
	return False


def param_copies(toks, lo, hi, pidx):
	"""{local: parameter index} for the locals of the body toks[lo:hi]
	declared as a copy of a parameter in pidx and never written again:
	read_poll_timeout() (include/linux/iopoll.h:40 in 6.1 and 6.12)
	declares 'unsigned long __sleep_us = (sleep_us);' and then tests
	only __sleep_us ('if (__sleep_us) usleep_range(...)')."""
	copy, bad = {}, set()
	hi = min(hi, len(toks))

	def at(i):
		return toks[i][1] if i < hi else ""
	for j in range(lo + 2, hi - 2):
		# 'T v = p;' or 'T v = (p);': a declaration, the type before v
		if toks[j][1] != "=" or toks[j - 1][0] != "id":
			continue
		k = j + 2 if at(j + 1) == "(" else j + 1
		if at(k) not in pidx or k > j + 1 and at(k + 1) != ")":
			continue
		if at(k + (2 if k > j + 1 else 1)) not in (";", ","):
			continue
		v, prev = toks[j - 1][1], toks[j - 2]
		if v in pidx or v in copy or prev[0] != "id" or prev[1] in KEYWORDS:
			bad.add(v)
			continue
		copy[v] = pidx[toks[k][1]]
	if not copy:
		return {}
	# written anywhere else: not a copy
	for j in range(lo + 1, hi - 1):
		k, v, _ = toks[j]
		if k != "id" or v not in copy or toks[j - 1][1] in ("->", "."):
			continue
		nxt = toks[j + 1][1]
		if nxt == "=" and toks[j - 1][0] == "id" and toks[j - 1][1] not in KEYWORDS:
			continue	# the declaration itself
		if writes(toks[j - 1][1], nxt):
			bad.add(v)
	return {v: i for v, i in copy.items() if v not in bad}


_INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*"([^"\n]+)"', re.M)


def extract(text, want_args, restore, words, tokenize=tokenize):
	"""All facts of one C file (see module doc).  want_args(name): keep the
	arguments of calls to name; restore: the calls that end a window; words:
	the kernel names (Words); tokenize: tokenize_py to take the Python
	tokenizer (the tests compare the two)."""
	includes = _INCLUDE.findall(text)
	toks = tokenize(text)
	funcs, macros, structs, ops = {}, {}, {}, []
	n = len(toks)
	depth = 0
	stmt_start = 0
	i = 0
	while i < n:
		k, v, ln = toks[i]
		if k == "pp":
			m = re.match(r"\s*#\s*define\s+(\w+)\(([^)]*)\)(.*)", v, re.S)
			if m:
				body = m.group(3).replace("\\\n", " \n")
				btoks = tokenize(body)
				# the body's first line: after a parameter list that
				# may go on over continuation lines
				bl = ln + v[:m.start(3)].count("\n")
				for t in range(len(btoks)):
					btoks[t] = (btoks[t][0], btoks[t][1], bl + btoks[t][2] - 1)
				# a parameter list may go on over continuation lines
				params = [p.strip() for p in m.group(2).replace("\\\n", " ").split(",") if p.strip()]
				mcalls = calls_in(btoks, 0, len(btoks), lambda nm: True,
						  guards=words.guards, keep_index=True)
				atomic_regions(btoks, 0, len(btoks), mcalls, words.regions)
				_annotate(btoks, 0, len(btoks), mcalls, params, asserts=words.asserts)
				macros[m.group(1)] = {
					"line": ln, "params": params,
					"calls": mcalls,
					"annotate": any(t[1] in words.annotations for t in btoks),
					"body": _text(btoks)[:2000],
				}
			i += 1
			continue
		if k == "op" and v == "{":
			if depth == 0:
				name, is_static, lo = _def_name(toks, i, stmt_start)
				close = _match_close(toks, i, "{", "}")
				if name:
					body_calls = calls_in(toks, i + 1, close, want_args,
							      stmt_expr_calls(toks, i + 1, close), words.guards, True)
					params, gfp = params_of(toks, lo, i, name)
					atomic_regions(toks, i + 1, close, body_calls, words.regions)
					_annotate(toks, i + 1, close, body_calls, params, gfp, words.asserts, words.set)
					ann = None
					for c in body_calls:
						if c["name"] in words.annotations:
							ann = c["line"]
							break
					# a helper that puts the task back into TASK_RUNNING
					# before it sleeps does not sleep in the caller's state
					for j in range(i + 1, close):
						if toks[j][0] == "id" and toks[j][1] in words.running \
								and toks[j + 1][1] == "(" and _state_arg_running(toks, j)[0]:
							if ann is None or toks[j][2] < ann:
								ann = toks[j][2]
							break
					decl_txt = _text(toks[lo:close])
					local = {}
					for dm in _LOCAL_DECL.finditer(decl_txt):
						local[dm.group(3)] = dm.group(1) + ("*" if dm.group(2) else "")
					funcs[name] = {
						"line": toks[i][2], "def_line": _name_line(toks, lo, i, name),
						"static": is_static, "calls": body_calls, "annotate": ann,
						"locals": local, "end": toks[close - 1][2] if close < n else ln,
					}
					funcs[name]["carry"], funcs[name]["setter"] = \
						returns_nonrunning(toks, i + 1, close, restore, words)
					if funcs[name]["carry"]:
						cc = carry_cond(body_calls, words)
						if cc:
							funcs[name]["carry_cond"] = cc
					try:
						if any(c["name"] in restore or c["name"] in words.set for c in body_calls) \
								and runs_on_true(toks, i + 1, close, restore, words):
							funcs[name]["run_true"] = True
					except RecursionError:
						pass
				else:
					_aggregate(toks, i, close, stmt_start, structs, ops)
				i = close + 1
				stmt_start = i
				continue
		if k == "op" and v == ";" and depth == 0:
			stmt_start = i + 1
		i += 1
	# assignments of functions to members anywhere: x->m = f; x.m = f;
	for j in range(2, n - 2):
		if toks[j][1] == "=" and toks[j - 1][0] == "id" and toks[j - 2][1] in ("->", ".") \
				and toks[j + 1][0] == "id" and toks[j + 2][1] in (";", ","):
			ops.append([None, toks[j - 1][1], toks[j + 1][1], toks[j][2]])
	mark_puts(funcs, ops, words)
	return {"version": FACTS_VERSION, "functions": funcs, "macros": macros,
		"structs": structs, "ops": ops, "includes": includes}


def _name_line(toks, lo, brace, name):
	for j in range(lo, brace):
		if toks[j][1] == name:
			return toks[j][2]
	return toks[brace][2]


def _def_name(toks, brace, stmt_start):
	"""If '{' at toks[brace] opens a function body, return its name."""
	j = brace - 1
	while j >= stmt_start:
		if toks[j][1] == ")":
			o = _match_open(toks, j, "(", ")")
			if o <= stmt_start or toks[o - 1][0] != "id":
				return None, False, stmt_start
			nm = toks[o - 1][1]
			if nm in ANNOTATIONS or nm.startswith("__"+"attribute"):
				j = o - 2
				continue
			if nm in KEYWORDS:
				return None, False, stmt_start
			head = [t[1] for t in toks[stmt_start:o - 1]]
			if "=" in head or "struct" in head and head[-1:] == ["struct"]:
				return None, False, stmt_start
			return nm, ("static" in head), stmt_start
		if toks[j][0] == "id" and toks[j][1] in ANNOTATIONS | {"__init", "__exit", "__sched"}:
			j -= 1
			continue
		if toks[j][0] == "id" and toks[j][1].isupper():
			j -= 1
			continue
		return None, False, stmt_start
	return None, False, stmt_start


def _aggregate(toks, brace, close, stmt_start, structs, ops):
	"""struct definitions and struct initializers at file scope."""
	head = toks[stmt_start:brace]
	hv = [t[1] for t in head]
	if len(hv) >= 2 and hv[-2] == "struct" and head[-1][0] == "id":
		sname = hv[-1]
		fields = {}
		body = toks[brace + 1:close]
		txt = _text(body)
		for fm in re.finditer(r"\bstruct\s+(\w+)\s*\*+\s*(?:const\s+)?(\w+)\s*;", txt):
			fields[fm.group(2)] = fm.group(1)
		for fm in re.finditer(r"\(\s*\*\s*(\w+)\s*\)\s*\(", txt):
			fields.setdefault(fm.group(1), "()")
		structs[sname] = fields
		return
	if "=" in hv and "struct" in hv:
		si = hv.index("struct")
		if si + 1 < len(hv):
			sname = hv[si + 1]
			_initializer(toks, brace, close, sname, ops)


def _initializer(toks, lo, hi, sname, ops):
	depth = 0
	for j in range(lo, hi):
		v = toks[j][1]
		if v == "{":
			depth += 1
		elif v == "}":
			depth -= 1
		elif v == "." and j + 3 < hi and toks[j + 1][0] == "id" and toks[j + 2][1] == "=":
			# only the struct's own members: depth 1 (plain) or 2 (array of structs)
			val = j + 3
			if toks[val][1] == "&":
				val += 1
			if toks[val][0] == "id" and toks[val + 1][1] in (",", "}"):
				ops.append([sname, toks[j + 1][1], toks[val][1], toks[j][2]])
