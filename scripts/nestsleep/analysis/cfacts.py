# SPDX-License-Identifier: GPL-2.0-only
"""Per-file facts for nestsleep's whole-tree analysis, from a light C tokenizer.

Coccinelle matches the wait sites (cocci/nested_sleep.cocci); this module only
extracts what the interprocedural summary needs from the files that define
callees, cheaply and without dropping functions spatch cannot parse:

  functions  name -> line, static, calls (name, line, kind, base, args),
             local struct types, sched_annotate_sleep() line, and whether the
             function may return with the task in a non-running state
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

FACTS_VERSION = 7


def _code_digest():
	"""The extractor's own source: part of every facts cache key, so that
	facts made by another version of this file are never trusted (a
	FACTS_VERSION bump can be forgotten)."""
	import hashlib
	with open(__file__, "rb") as f:
		return hashlib.sha1(f.read()).hexdigest()[:12]


CODE_DIGEST = _code_digest()

_TOKEN = re.compile(r"""
	(?P<nl>\n)
	|(?P<ws>[ \t\r\f\v]+)
	|(?P<id>[A-Za-z_]\w*)
	|(?P<num>\.?\d[\w.]*)
	|(?P<op>->|\+\+|--|<<=|>>=|<<|>>|<=|>=|==|!=|&&|\|\||[-+*/%&|^]=|\.\.\.|[{}()\[\];,.<>=!~?:+\-*/%&|^\#])
	|(?P<other>.)
""", re.X)

_COMMENT_STR = re.compile(r"""
	/\*.*?\*/
	|//[^\n]*
	|"(?:\\.|[^"\\\n])*"
	|'(?:\\.|[^'\\\n])*'
""", re.X | re.S)

_PP = re.compile(r"[ \t]*#")

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
	on_zero, the setters that set the state only when they return 0."""
	set: frozenset = frozenset()
	prepare: frozenset = frozenset()
	running: frozenset = frozenset()
	on_zero: frozenset = frozenset()
	annotations: frozenset = frozenset()
	guards: frozenset = frozenset()


def _blank(m):
	"""Replace a comment or literal by spaces, keeping newlines (line numbers)."""
	s = m.group(0)
	nl = "\n" * s.count("\n")
	if s[0] in "\"'":
		return s[0] + s[0] + nl
	return " " + nl


def tokenize(text):
	"""Return a list of (kind, value, line) for C source text.

	Preprocessor lines become one ('pp', text, line) token each, with
	continuation lines joined; string and character literals become
	('str', '""', line)."""
	text = _COMMENT_STR.sub(_blank, text)
	toks = []
	line = 1
	pos = 0
	n = len(text)
	at_bol = True
	while pos < n:
		if at_bol:
			m = _PP.match(text, pos)
			if m:
				end = pos
				start_line = line
				while True:
					e = text.find("\n", end)
					if e < 0:
						e = n
					if e > 0 and text[e - 1] == "\\" and e < n:
						end = e + 1
						line += 1
						continue
					break
				toks.append(("pp", text[pos:e], start_line))
				pos = e
				continue
		m = _TOKEN.match(text, pos)
		kind = m.lastgroup
		val = m.group(kind)
		pos = m.end()
		if kind == "nl":
			line += 1
			at_bol = True
			continue
		if kind == "ws":
			continue
		at_bol = False
		if kind == "other":
			if val in "\"'":
				kind = "str"
			else:
				continue
		toks.append((kind if kind != "num" else "num", val, line))
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


def _text(toks):
	out = []
	prev = None
	for k, v, _ in toks:
		if prev is not None and (prev[0] in ("id", "num") and k in ("id", "num")):
			out.append(" ")
		out.append(v)
		prev = (k, v)
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


def calls_in(toks, lo, hi, want_args, force_args=(), guards=frozenset()):
	"""Calls in toks[lo:hi]: dicts with name, line, kind, base, args, and
	for a lock guard (a name in guards) its class."""
	out = []
	for i in range(lo, hi):
		k, v, ln = toks[i]
		if k != "id" or i + 1 >= hi or toks[i + 1][1] != "(":
			continue
		if v in KEYWORDS:
			continue
		prev = toks[i - 1][1] if i > 0 else ""
		call = {"name": v, "line": ln}
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


_INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*"([^"\n]+)"', re.M)


def extract(text, want_args, restore, words):
	"""All facts of one C file (see module doc).  want_args(name): keep the
	arguments of calls to name; restore: the calls that end a window; words:
	the kernel names (Words)."""
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
				for t in range(len(btoks)):
					btoks[t] = (btoks[t][0], btoks[t][1], ln + btoks[t][2] - 1)
				params = [p.strip() for p in m.group(2).split(",") if p.strip()]
				macros[m.group(1)] = {
					"line": ln, "params": params,
					"calls": calls_in(btoks, 0, len(btoks),
							  lambda nm: True, guards=words.guards),
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
							      stmt_expr_calls(toks, i + 1, close), words.guards)
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
