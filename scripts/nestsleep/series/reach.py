# SPDX-License-Identifier: GPL-2.0-only
"""How a wait is reached at run time, for a changelog.

From the wait's function, callers are followed breadth-first across files
(up to 4 levels) until an entry is found: a function started as a kthread, a
work item or a threaded interrupt handler, a designated initializer
'.member = fn' of 'struct S var', an assignment 'x->member = fn;', or a
function named as an argument of a macro or call.  Callers of a static
function are looked for in its own file (and the .c files that #include
it); callers of another function in the directory tree of its Makefile,
and in the whole tree when it is exported or named in a header under
include/.  Every search
is one grep per level and scope, so a series' worth of waits stays cheap."""

import bisect
import os
import re
import subprocess

ENTRY_STRUCTS = ("file_operations", "proc_ops", "v4l2_file_operations", "block_device_operations",
		 "tty_operations", "net_device_ops")

# callee -> (kind, argument index of the function)
STARTERS = {"kthread_run": ("kthread", 0), "kthread_create": ("kthread", 0),
	    "kthread_run_on_cpu": ("kthread", 0), "kthread_create_on_node": ("kthread", 0),
	    "kthread_create_on_cpu": ("kthread", 0), "kthread_create_worker": ("kthread", 0),
	    "INIT_WORK": ("work", 1), "INIT_DELAYED_WORK": ("work", 1), "INIT_WORK_ONSTACK": ("work", 1),
	    "INIT_DEFERRABLE_WORK": ("work", 1), "INIT_DELAYED_WORK_ONSTACK": ("work", 1),
	    "DECLARE_WORK": ("work", 1), "DECLARE_DELAYED_WORK": ("work", 1),
	    "request_threaded_irq": ("irq", 2), "devm_request_threaded_irq": ("irq", 3)}
KIND_WORDS = {"kthread": "a kthread function started with %s()",
	      "work": "a work item function set up with %s()",
	      "irq": "a threaded interrupt handler passed to %s()"}
# a name in these is no use of the function
NOT_USES = re.compile(r"EXPORT_SYMBOL\w*|EXPORT_\w*SYMBOL\w*|ALLOW_ERROR_INJECTION|NOKPROBE_SYMBOL|"
		      r"EXPORT_TRACEPOINT_SYMBOL\w*|BTF_ID\w*|__ADDRESSABLE|typeof|__typeof__|sizeof$")
# the order an entry is preferred in, among those of one level
ORDER = ("syscall", "kthread", "work", "irq", "ioctl", "fops", "member", "assign", "arg", "ref")
# a function defined by SYSCALL_DEFINEn(name, ...): its span is named
# "sys:<name>:<macro>", an entry of its own (reached from user space)
_SYSCALL_RE = re.compile(r"((?:COMPAT_)?SYSCALL_DEFINE\d)\s*\(\s*(\w+)")
DEPTH = 4
MAX_NAMES = 3

_CODE = {}
_SPANS = {}
_INCLUDERS = {}
_MEMO = {}

_BLANK_RE = re.compile(r"//[^\n]*|/\*.*?\*/|\"(?:\\.|[^\"\\\n])*\"|'(?:\\.|[^'\\\n])*'", re.S)
_BRACE_RE = re.compile(r"[{}]")
_LABEL_RE = re.compile(r"\n ?(?!default\b)[A-Za-z_]\w*:[ \t]*(?=\n)")
_FUNC_RE = re.compile(r"^(?:[A-Za-z_][\w \t\*]*?\b)?(\w+)\s*\([^;{]*\)\s*\{", re.M)
_DESIG_DECL = re.compile(r"struct\s+(\w+)\s+(?:const\s+)?(?:__\w+\s+)*(\w+)\s*(?:\[[^\]]*\]\s*)*"
			 r"(?:__\w+(?:\([^()]*\))?\s*)*=\s*$")


def _blank(m):
	s = m.group(0)
	if s[0] in "\"'":
		return s[0] + re.sub(r"[^\n]", " ", s[1:-1]) + s[-1]
	return re.sub(r"[^\n]", " ", s)


def _read(kdir, rel):
	"""(raw text, code text with comments and string contents blanked) or None."""
	key = (kdir, rel)
	if key not in _CODE:
		try:
			with open(os.path.join(kdir, rel), errors="replace") as f:
				raw = f.read()
		except OSError:
			_CODE[key] = None
		else:
			_CODE[key] = (raw, _BLANK_RE.sub(_blank, raw))
	return _CODE[key]


def _spans(kdir, rel, code):
	"""[(body start, body end, name)] of the functions defined in rel."""
	key = (kdir, rel)
	if key not in _SPANS:
		out = []
		end = 0
		for m in _FUNC_RE.finditer(code):
			start = m.end() - 1
			if start < end:
				continue
			depth, end = 0, len(code)
			for b in _BRACE_RE.finditer(code, start):
				depth += 1 if b.group(0) == "{" else -1
				if not depth:
					end = b.start()
					break
			sc = _SYSCALL_RE.match(code, m.start(1))
			out.append((start, end, "sys:%s:%s" % (sc.group(2), sc.group(1)) if sc else m.group(1)))
		_SPANS[key] = out
	return _SPANS[key]


def _enclosing(kdir, rel, code, pos):
	"""The function whose body holds pos, or the macro whose #define does."""
	spans = _spans(kdir, rel, code)
	i = bisect.bisect_right(spans, (pos, len(code) + 1, "")) - 1
	if i >= 0 and spans[i][0] < pos <= spans[i][1]:
		return spans[i][2]
	# a #define, continued over backslashed lines
	ls = code.rfind("\n", 0, pos) + 1
	while ls > 1 and code[ls - 2] == "\\":
		ls = code.rfind("\n", 0, ls - 1) + 1
	m = re.match(r"[ \t]*#[ \t]*define[ \t]+(\w+)\(", code[ls:pos])
	return m.group(1) if m else None


def _after_label(kdir, rel, code, pos):
	"""Whether a label (at the start of a line: the error exits of a probe)
	comes before pos in its function's body."""
	spans = _spans(kdir, rel, code)
	i = bisect.bisect_right(spans, (pos, len(code) + 1, "")) - 1
	if i < 0 or not spans[i][0] < pos <= spans[i][1]:
		return False
	return bool(_LABEL_RE.search(code, spans[i][0], pos))


def _is_static(code, name):
	"""Whether name is defined static in code (None when no definition is seen)."""
	for m in re.finditer(r"(?<![\w.>])%s\s*\([^;{]*\)\s*\{" % re.escape(name), code):
		head = re.split(r"[;{}]|\n[ \t]*#[^\n]*", code[max(0, m.start() - 300):m.start()])[-1]
		if head.count("(") == head.count(")") and "=" not in head:
			return bool(re.search(r"\bstatic\b", head))
	return None


def _grep(kdir, names, dirs, fixed=False):
	"""kdir-relative .c/.h files under dirs that hold one of names as a word."""
	if not names or not dirs:
		return []
	pat = "|".join(sorted(names)) if not fixed else names[0]
	cmd = ["grep", "-rl", "-F" if fixed else "-wE", "--include=*.c", "--include=*.h", "-e", pat, "--"] + dirs
	r = subprocess.run(cmd, cwd=kdir, capture_output=True, text=True, env=dict(os.environ, LC_ALL="C"))
	out = []
	for x in r.stdout.splitlines():
		x = os.path.normpath(x)
		if not x.startswith(("tools/", "scripts/", "Documentation/")):
			out.append(x)
	return out


def _includers(kdir, rel):
	"""The files in rel's directory tree that #include the .c file rel."""
	key = (kdir, rel)
	if key not in _INCLUDERS:
		base = os.path.basename(rel)
		out = []
		for f in _grep(kdir, [base + '"'], [os.path.dirname(rel) or "."], fixed=True):
			src = _read(kdir, f)
			if f != rel and src and re.search(r'#\s*include\s*"(?:[^"]*/)?%s"' % re.escape(base), src[1]):
				out.append(f)
		_INCLUDERS[key] = out
	return _INCLUDERS[key]


def _callee(code, pos):
	"""(name, argument index) of the innermost call or macro use whose
	parentheses hold pos, or None."""
	depth, args = 0, 0
	i = pos - 1
	lo = max(0, pos - 4000)
	while i >= lo:
		c = code[i]
		if c in ")]":
			depth += 1
		elif c in "([":
			if depth:
				depth -= 1
			elif c == "[":
				return None
			else:
				m = re.search(r"(\w+)\s*$", code[max(0, i - 80):i])
				return (m.group(1), args) if m else None
		elif c == "," and not depth:
			args += 1
		elif c in ";{}" and not depth:
			return None
		i -= 1
	return None


def _struct_of(code, pos):
	"""(struct type, variable) of the initializer that holds pos."""
	depth = 0
	i = pos - 1
	lo = max(0, pos - 20000)
	while i >= lo:
		c = code[i]
		if c == "}":
			depth += 1
		elif c == "{":
			if depth:
				depth -= 1
			else:
				m = _DESIG_DECL.search(code[max(0, i - 300):i])
				if m:
					return m.group(1), m.group(2)
		elif c == ";" and not depth:
			return None
		i -= 1
	return None


def _line(raw, pos):
	"""(line number, the line trimmed) of pos."""
	ls = raw.rfind("\n", 0, pos) + 1
	le = raw.find("\n", pos)
	return raw.count("\n", 0, pos) + 1, " ".join(raw[ls:le if le >= 0 else len(raw)].split())


def _uses(kdir, rel, name):
	"""The uses of name in rel: ('call', caller) or (kind, words)."""
	src = _read(kdir, rel)
	if not src:
		return
	raw, code = src
	for m in re.finditer(r"(?<![\w.>])%s\b" % re.escape(name), code):
		pos, after = m.start(), code[m.end():m.end() + 200]
		if re.match(r"\s*\(", after):
			caller = _enclosing(kdir, rel, code, pos)
			if caller and caller != name:
				yield ("call", (caller, _after_label(kdir, rel, code, pos), pos))
			continue
		before = code[max(0, pos - 200):pos]
		if re.match(r"\s*\w", after) or re.search(r"(?:struct|enum|union|goto|#\s*define)\s+$", before):
			continue
		call = _callee(code, pos)
		if call and call[0] in STARTERS and STARTERS[call[0]][1] == call[1]:
			yield (STARTERS[call[0]][0], KIND_WORDS[STARTERS[call[0]][0]] % call[0])
			continue
		d = re.search(r"\.\s*(\w+)\s*=\s*&?\s*$", before)
		if d and re.match(r"\s*[,}]", after):
			st = _struct_of(code, pos)
			if st:
				member, (stype, var) = d.group(1), st
				kind = "ioctl" if "ioctl" in member else "fops" if stype in ENTRY_STRUCTS else "member"
				yield (kind, "the .%s member of %s (struct %s)" % (member, var, stype))
				continue
		a = re.search(r"([\w\]\[]+(?:\s*(?:->|\.)\s*[\w\]\[]+)+)\s*=\s*&?\s*$", before)
		if a and re.match(r"\s*;", after):
			yield ("assign", re.sub(r"\s+", "", a.group(1)))
			continue
		if call and NOT_USES.match(call[0]):
			continue
		line, text = _line(raw, pos)
		if call:
			if call[1]:
				start = code.rfind(call[0] + "(", max(0, pos - 4000), pos)
				text = _line(raw, start)[1] + " ... " + text if 0 <= start < raw.rfind("\n", 0, pos) else text
			yield ("arg", (call[0], line, text))
		else:
			yield ("ref", (line, text))


def _where(rel, home):
	return os.path.basename(rel) if rel == home else rel


def _describe(kind, words, head, rel, home, via):
	"""The sentence for an entry of kind found for head in rel; via are the
	functions from head down to the wait (empty when head is the wait)."""
	fn = via[-1] if via else head
	chain = ": " + " -> ".join("%s()" % x for x in via) if via else ""
	inn = " in %s" % rel if rel != home else ""
	if kind in ("kthread", "work", "irq"):
		return "%s() is %s%s%s%s" % (fn, "called from " if via else "", words, inn, chain)
	if kind in ("ioctl", "fops", "member"):
		return "%s() is %s%s%s%s" % (fn, "called from " if via else "", words, inn, chain)
	if kind == "syscall":
		return "%s() is called from the %s() system call (%s(%s, ...) in %s)%s" % (
			fn, words[0], words[1], words[0], _where(rel, home), chain)
	if kind == "assign":
		if via:
			return "%s() is called through %s (assigned in %s)%s" % (fn, words, _where(rel, home), chain)
		return "%s() is assigned to %s (%s)" % (fn, words, _where(rel, home))
	if kind == "arg":
		what = "named as an argument of %s() at %s:%d (\"%s\")" % (words[0], _where(rel, home), words[1],
									   words[2])
	else:
		what = "named at %s:%d (\"%s\")" % (_where(rel, home), words[0], words[1])
	if via:
		return "%s() is called from %s(), %s%s" % (fn, head, what, chain)
	return "%s() is %s" % (fn, what)


def _build_dir(kdir, rel):
	"""The directory of rel's nearest Makefile or Kbuild: the files built
	with it (nfp/nfpcore/*.c are built by nfp/Makefile)."""
	d = os.path.dirname(rel)
	while d and not any(os.path.isfile(os.path.join(kdir, d, x)) for x in ("Makefile", "Kbuild")):
		d = os.path.dirname(d)
	return d or os.path.dirname(rel) or "."


def _scopes(kdir, level):
	"""({search dir: names}, {name: files}) for the (name, file) pairs of
	one level: a static function's own file and its includers, another's
	directory tree, or the whole tree when it is exported or named in a
	header under include/."""
	dirs, files, wide, maybe = {}, {}, [], []
	for name, rel in level:
		src = _read(kdir, rel)
		code = src[1] if src else ""
		if rel.endswith(".c") and _is_static(code, name):
			files.setdefault(name, set()).update([rel] + _includers(kdir, rel))
			continue
		dirs.setdefault(_build_dir(kdir, rel), set()).add(name)
		if rel.startswith("include/") or re.search(r"\bEXPORT_\w*SYMBOL\w*\(\s*%s\s*\)" % re.escape(name), code):
			wide.append(name)
		else:
			maybe.append(name)
	if maybe:
		wide += sorted(_grep_names(kdir, maybe, ["include"]))
	for d in dirs:
		dirs[d] -= set(wide)
	if wide:
		dirs.setdefault(".", set()).update(wide)
	return {d: n for d, n in dirs.items() if n}, files


def _grep_names(kdir, names, dirs):
	"""Which of names occur as a word in the files under dirs."""
	found = set()
	pat = re.compile(r"\b(%s)\b" % "|".join(map(re.escape, names)))
	for f in _grep(kdir, names, dirs):
		src = _read(kdir, f)
		if src:
			found.update(pat.findall(src[1]))
	return found


def _args_at(code, pos):
	"""The argument texts of the call whose name starts at pos."""
	lp = code.find("(", pos)
	out, depth, start = [], 0, lp + 1
	for i in range(lp, min(len(code), lp + 4000)):
		c = code[i]
		if c in "([{":
			depth += 1
		elif c in ")]}":
			depth -= 1
			if depth == 0:
				out.append(code[start:i].strip())
				return out
		elif c == "," and depth == 1:
			out.append(code[start:i].strip())
			start = i + 1
	return out


_CONST = {}


def _const(kdir, rel, name, depth=0):
	"""The value of an enumerator or object-like #define named name, from
	the files built with rel and include/ (first definition found), or
	None."""
	key = (kdir, _build_dir(kdir, rel), name)
	if key in _CONST:
		return _CONST[key]
	_CONST[key] = None
	pat = r"(?:#\s*define\s+%s\s+([^\n]+)|\b%s\s*=\s*([^,}\n;]+))" % (name, name)
	for f in _grep(kdir, [name], [_build_dir(kdir, rel) or ".", "include"]):
		src = _read(kdir, f)
		m = src and re.search(pat, src[1])
		if m:
			_CONST[key] = _value(kdir, rel, (m.group(1) or m.group(2)).strip(), depth + 1)
			break
	return _CONST[key]


def _value(kdir, rel, text, depth=0):
	"""The integer value of a constant expression of numbers and named
	constants (+ | & << >> ~ - parentheses), or None."""
	if depth > 6 or not re.match(r"^[\w\s()+|&<>~-]+$", text):
		return None
	out = []
	for tok in re.findall(r"0[xX][0-9a-fA-F]+|\d+|[A-Za-z_]\w*|<<|>>|[()+|&~-]", text):
		if re.match(r"^(0[xX][0-9a-fA-F]+|\d+)$", tok):
			out.append(str(int(tok, 0)))
		elif re.match(r"^[A-Za-z_]", tok):
			if tok in ("BIT",):
				out.append("1 <<")
				continue
			v = _const(kdir, rel, tok, depth)
			if v is None:
				return None
			out.append(str(v))
		else:
			out.append(tok)
	try:
		return int(eval(" ".join(out), {"__builtins__": {}}, {}))	# digits and operators only
	except Exception:
		return None


def param_names(kdir, rel, func):
	"""The parameter names of func's definition in rel, or None."""
	src = _read(kdir, rel)
	m = src and re.search(r"\b%s\s*\(([^;{)]*)\)\s*\{" % re.escape(func), src[1])
	if not m or m.group(1).strip() in ("", "void"):
		return None
	out = []
	for p in m.group(1).split(","):
		w = re.findall(r"[A-Za-z_]\w*", p)
		out.append(w[-1] if w else "")
	return out


def _may_pass(kdir, rel, code, pos, needs, nparams=None):
	"""Whether the call at pos may meet the tests needs ([param index, op,
	value]) the wait's sleeping chain makes of its function's parameters:
	False only when a constant argument decides a test against it
	(abw_start_sync() passes CS_VERBOSE, and the chain needs
	CS_SERIALIZE)."""
	args = _args_at(code, pos)
	for j, op, val in needs:
		if nparams and len(args) < nparams:
			# a macro argument stands for several (drbd's NS(conn, C_CONNECTED)
			# is mask and val): only the last parameter is still known
			if j != nparams - 1:
				continue
			j = len(args) - 1
		if j >= len(args):
			continue
		a = args[j]
		if op in ("bit", "nobit"):
			v, b = _value(kdir, rel, a), _value(kdir, rel, val)
			if v is None or b is None:
				continue
			if bool(v & b) != (op == "bit"):
				return False
		elif op in ("nz", "z") and a in ("0", "NULL", "false"):
			if op == "nz":
				return False
		elif op in ("eq", "ne") and re.match(r"^[A-Z_][A-Z0-9_]*$", a) and re.match(r"^[A-Z_][A-Z0-9_]*$", val):
			if (a == val) != (op == "eq"):
				return False
	return True


def _reach(kdir, rel, func, depth, needs=(), homes=()):
	"""Breadth-first over the callers: a node is (function, its file, the
	functions from its callee down to func, whether a call on the way
	follows a label).  At the first level with an entry, the entry of the
	best kind wins, and among those one reached without a call after a
	label (an error exit of a probe) is preferred.  homes: when the sleep
	is only through a function pointer's implementation, the files of the
	implementations; an entry elsewhere sets up an object whose pointer
	is another function, so only entries in homes count (calls are
	followed everywhere)."""
	level = [(func, rel, [], False)]
	seen = {(func, rel)}
	callers = None
	for _ in range(depth + 1):
		dirs, files = _scopes(kdir, [(n, r) for n, r, _v, _l in level])
		cands = {}
		for d, names in dirs.items():
			for f in _grep(kdir, sorted(names), [d]):
				for n in names:
					cands.setdefault(n, set()).add(f)
		best, nxt = None, {}
		for name, home, via, late in level:
			for f in sorted(cands.get(name, set()) | files.get(name, set()), key=lambda x: (x != home, x)):
				src = _read(kdir, f)
				if f != home and f.endswith(".c") and src and _is_static(src[1], name):
					continue	# a static function of the same name
				for kind, what in _uses(kdir, f, name):
					if kind == "call" and what[0] and what[0].startswith("sys:"):
						rank = (ORDER.index("syscall"), late)
						if best is None or rank < best[0]:
							best = (rank, "syscall", tuple(what[0].split(":")[1:]), name, f, via)
						continue
					if kind == "call":
						if needs and not via and not _may_pass(kdir, f, _read(kdir, f)[1], what[2], needs,
										     len(param_names(kdir, rel, func) or ())):
							continue	# its constants rule the sleep out
						key, late2 = (what[0], f), late or what[1]
						if key not in seen or (key in nxt and nxt[key][3] and not late2):
							seen.add(key)
							nxt[key] = (what[0], f, [name] + via, late2)
						continue
					if homes and f not in homes:
						continue	# another driver's object: its op may not sleep
					rank = (ORDER.index(kind), late)
					if best is None or rank < best[0]:
						best = (rank, kind, what, name, f, via)
		if callers is None:
			callers = [(n, f) for n, f, _v, _l in nxt.values()]
		if best:
			_rank, kind, what, head, f, via = best
			return {"kind": kind, "text": _describe(kind, what, head, f, rel, ([head] + via) if via else []),
				"callers": callers}
		level = list(nxt.values())
		if not level:
			break
	return {"kind": None, "text": None, "callers": callers or []}


def _result(kdir, rel, func, depth=DEPTH, needs=(), impls=()):
	needs = tuple(tuple(x) for x in needs or ())
	homes = tuple(sorted(set(x[2] for x in impls or ())))
	key = (os.path.realpath(kdir), rel, func, depth, needs, homes)
	if key not in _MEMO:
		_MEMO[key] = _reach(key[0], rel, func, depth, needs, homes)
	return _MEMO[key]


def reached(kdir, rel, func, depth=DEPTH, needs=()):
	"""(kind, how func is reached) or None when no entry is found within
	depth levels of callers.  kind is 'kthread', 'work', 'irq', 'ioctl',
	'fops' (a member of an ENTRY_STRUCTS struct), 'member', 'assign', 'arg'
	or 'ref'."""
	r = _result(kdir, rel, func, depth, needs)
	return (r["kind"], r["text"]) if r["kind"] else None


def _called_from(callers, home):
	names = ["%s() (%s)" % (n, _where(f, home)) for n, f in callers]
	if len(names) > MAX_NAMES:
		names = names[:MAX_NAMES] + ["%d more" % (len(names) - MAX_NAMES)]
	return names[0] if len(names) == 1 else "%s and %s" % (", ".join(names[:-1]), names[-1])


def _impl_words(impls):
	return " or ".join("%s when it is %s() (%s)" % x for x in impls)


def reached_text(kdir, rel, func, needs=(), impls=()):
	"""One sentence: how func is reached, or what is known of its callers.
	needs: the tests of func's parameters its sleeping chain makes; a
	caller whose constants fail one is not a way in.  impls: [(pointer,
	implementation, file)] when the sleep is only through those
	(series.unit_impls()): the entry named is one in their files."""
	r = _result(kdir, rel, func, DEPTH, needs, impls)
	if impls and not r["kind"]:
		return "%s() sleeps here only through %s, and no caller from %s was found within %d levels." % (
			func, _impl_words(impls), " or ".join(sorted(set(x[2] for x in impls))), DEPTH)
	if impls:
		return "%s; there %s." % (r["text"], " and ".join("%s is %s()" % x[:2] for x in impls))
	if r["kind"]:
		return r["text"] + "."
	if r["callers"]:
		return "How %s() is reached at run time is not known; it is called from %s." % (
			func, _called_from(r["callers"], rel))
	return "No caller of %s() was found in the tree; it may be called through a pointer." % func


def reached_sentences(kdir, items):
	"""The sentences for [(file, function[, needs])]: first those reached
	from an entry, then those with callers but no entry, then those
	without callers (several of these in one sentence)."""
	known, unknown, none = [], [], []
	for it in items:
		rel, func, needs, impls = (tuple(it) + ((), ()))[:4]
		r = _result(kdir, rel, func, DEPTH, needs, impls)
		if r["kind"]:
			known.append(reached_text(kdir, rel, func, needs, impls))
		elif r["callers"] or impls:
			unknown.append(reached_text(kdir, rel, func, needs, impls))
		else:
			none.append(func + "()")
	if len(none) > 1:
		unknown.append("No caller of %s or %s was found in the tree; they may be called through a pointer." % (
			", ".join(none[:-1]), none[-1]))
	elif none:
		it = [tuple(x) for x in items if x[1] + "()" == none[0]][0]
		unknown.append(reached_text(kdir, it[0], it[1], (it + ((),))[2]))
	if any(" -> " in t for t in known):
		known.append("These paths follow the calls only: the conditions around the wait on them are not "
			     "evaluated.")
	return known + unknown
