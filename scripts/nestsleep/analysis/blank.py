# SPDX-License-Identifier: GPL-2.0-only
"""Blank: the copy of a C file that the match phase gives spatch.

spatch's time grows with the text it parses and matches, and the rule only
looks inside the few functions that hold a wait.  blank() returns the text
with every other function definition replaced by spaces, newlines kept, so
that every kept token has the line and the column it has in the file and
the rule's positions need no mapping.  Kept as they are:

  - every preprocessor line, also inside a blanked body;
  - everything outside function bodies: macros, types, declarations, the
    struct initialisers of ops tables;
  - a body that holds a name of keep(): the wait primitives and their
    derived wrappers, the state setters, the state-carrying helpers, and
    any name with a word of scan.WAIT_WORDS in it;
  - a body that holds a preprocessor conditional (#if, #else, ...);
  - a function whose header is not a plain 'type name(params)': a header
    that is a macro call (SYSCALL_DEFINE3(...)), an upper-case name, an
    attribute or annotation after the parameters;
  - the whole file, when its braces do not balance, or when one branch of
    a preprocessor conditional opens or closes a brace the others do not:
    the depth of a brace is then not the same in every configuration.

Of a function blanked nothing stays but its preprocessor lines: spatch
sees no definition (its header too is blanked, but for one that a
conditional precedes, where only the body is), so its rules have nothing
to evaluate there."""

import hashlib
import re

from nestsleep.analysis.scan import WAIT_WORDS


def _code_digest():
	"""This module's source: part of the match cache key, so that a
	result matched on a copy blanked by other code is never trusted."""
	with open(__file__, "rb") as f:
		return hashlib.sha1(f.read()).hexdigest()[:12]


CODE_DIGEST = _code_digest()

# comments and literals; a '//' comment goes on over a backslash-newline
_COMMENT_STR = re.compile(r"""
	/\*.*?(?:\*/|\Z)
	|//(?:[^\n\\]|\\.|\\\n)*
	|"(?:\\.|\\\n|[^"\\\n])*"
	|'(?:\\.|\\\n|[^'\\\n])*'
""", re.X | re.S)
_NOT_NL = re.compile(r"[^\n]")
_PP_LINE = re.compile(r"^[ \t]*#", re.M)
_PP_COND = re.compile(r"[ \t]*#[ \t]*(if|ifdef|ifndef|elif|elifdef|elifndef|else|endif)\b")
_EVENT = re.compile(r"[{};]")
_IDENT = re.compile(r"[A-Za-z_]\w*")
_FIRST = re.compile(r"\S")
_WAIT_WORDS = tuple(w.decode() for w in WAIT_WORDS)
# names before a '(' that make the '{' after its ')' no plain function body
_NOT_NAME = frozenset("""
	if while for switch return sizeof typeof __typeof__ __typeof do else case
	struct union enum __attribute__ __attribute asm __asm__ __asm _Static_assert
	static_assert __aligned __packed __section __acquires __releases __must_hold
	__cond_lock __printf __scanf __alloc_size __diag_ignore
""".split())


def _mask(text):
	"""text with comments and literals as spaces (newlines kept)."""
	return _COMMENT_STR.sub(lambda m: _NOT_NL.sub(" ", m.group(0)), text)


def _pp_spans(masked):
	"""(start, end, directive) of each preprocessor line of masked text,
	its continuation lines included (end: its last newline); directive:
	'if', 'ifdef', ..., 'else', 'endif' for a conditional, else ''."""
	out = []
	n = len(masked)
	for m in _PP_LINE.finditer(masked):
		s = m.start()
		if out and s < out[-1][1]:
			continue	# a '#' on a continuation line
		e = masked.find("\n", s)
		while e != -1 and (masked[e - 1] == "\\" or masked[e - 2:e] == "\\\r"):
			e = masked.find("\n", e + 1)
		if e == -1:
			e = n
		c = _PP_COND.match(masked, s)
		out.append((s, e, c.group(1) if c else ""))
	return out


def _code_only(masked, pps):
	"""masked with the preprocessor lines as spaces too."""
	parts, last = [], 0
	for s, e, _ in pps:
		parts.append(masked[last:s])
		parts.append(_NOT_NL.sub(" ", masked[s:e]))
		last = e
	parts.append(masked[last:])
	return "".join(parts)


def _bodies(code, pps):
	"""(open, close, head start) of each top-level brace pair of code, or
	None when the braces do not balance, or when a branch of a
	preprocessor conditional opens or closes a brace of its own."""
	events = [(s, 0, kind) for s, e, kind in pps if kind]
	events += [(m.start(), 1, m.group(0)) for m in _EVENT.finditer(code)]
	events.sort()
	out = []
	depth = 0
	groups = []	# [depth at the #if, lowest depth in the branch]
	head, opened = 0, 0
	for p, what, c in events:
		if what == 0:
			if c.startswith("if"):
				groups.append([depth, depth])
				continue
			if not groups or depth != groups[-1][0] or groups[-1][1] < depth:
				return None
			if c == "endif":
				low = groups.pop()[1]
				if groups:
					groups[-1][1] = min(groups[-1][1], low)
			continue
		if c == "{":
			if depth == 0:
				opened = p
			depth += 1
		elif c == "}":
			depth -= 1
			if depth < 0:
				return None
			if groups:
				groups[-1][1] = min(groups[-1][1], depth)
			if depth == 0:
				out.append((opened, p, head))
				head = p + 1
		elif depth == 0:
			head = p + 1
	if depth != 0 or groups:
		return None
	return out


def _plain_function(code, open_, head):
	"""Whether the '{' at open_ opens the body of a function whose header
	(code[head:open_]) reads 'type ... name(params)'."""
	h = code[head:open_].rstrip()
	if not h.endswith(")") or "=" in h:
		return False
	depth = 0
	for j in range(len(h) - 1, -1, -1):
		if h[j] == ")":
			depth += 1
		elif h[j] == "(":
			depth -= 1
			if depth == 0:
				break
	else:
		return False
	before = h[:j].rstrip()
	m = re.search(r"([A-Za-z_]\w*)$", before)
	if not m:
		return False
	name = m.group(1)
	if name in _NOT_NAME or not any(c.islower() for c in name):
		return False
	# a return type (or a storage class) before the name: a header that is
	# a macro call (SYSCALL_DEFINE3(...)) has none
	return _IDENT.search(before[:m.start()]) is not None


_HOLDS = {}


def _holder(keep):
	"""holds(text, lo, hi): whether text[lo:hi] holds a name of keep, or
	a word of WAIT_WORDS inside any name (in masked text only names hold
	those words)."""
	h = _HOLDS.get(keep)
	if h is None:
		names = re.compile(r"(?<!\w)(?:%s)(?!\w)" % "|".join(map(re.escape, sorted(keep)))) if keep else None

		def h(text, lo, hi):
			body = text[lo:hi]
			if any(w in body for w in _WAIT_WORDS):
				return True
			return names is not None and names.search(body) is not None
		_HOLDS[keep] = h
	return h


def blank(text, keep=frozenset()):
	"""text with the bodies of the functions that need no matching blanked
	(module doc); keep: the names whose presence keeps a body."""
	return _blank(text, keep)[0]


def blank_lines(text, keep=frozenset()):
	"""(blank(text, keep), the line of the '{' of each blanked body, how
	many bodies that may be a function's are left: a header that ends
	with ')' and holds no '=')."""
	out, spans, left = _blank(text, keep)
	lines, last, ln = [], 0, 1
	for open_ in spans:
		ln += text.count("\n", last, open_)
		last = open_
		lines.append(ln)
	return out, lines, left


def _blank(text, keep):
	masked = _mask(text)
	pps = _pp_spans(masked)
	code = _code_only(masked, pps)
	bodies = _bodies(code, pps)
	if not bodies:
		return text, [], None
	conds = [s for s, e, c in pps if c]
	holds = _holder(frozenset(keep))
	out, last = [], 0
	spans = []
	ci = 0
	left = 0
	for open_, close, head in bodies:
		while ci < len(conds) and conds[ci] < open_:
			ci += 1
		h = code[head:open_].rstrip()
		may_be_function = h.endswith(")") and "=" not in h
		# kept: a conditional inside the body, a header that is not
		# plain, a body that names a name of keep (its preprocessor
		# lines included)
		if (ci < len(conds) and conds[ci] < close) or not _plain_function(code, open_, head) \
				or holds(masked, open_ + 1, close):
			left += may_be_function
			continue
		# the whole definition, from the first token of its header to
		# its closing brace; only the body when a conditional comes
		# between the two (the header may differ between its branches)
		start = _FIRST.search(code, head, open_).start()
		if ci > 0 and conds[ci - 1] >= start:
			out.append(text[last:open_ + 1])
			out.append(_blank_code(text, open_ + 1, close, pps))
			last = close
		else:
			out.append(text[last:start])
			out.append(_blank_code(text, start, close + 1, pps))
			last = close + 1
		spans.append(open_)
	if not out:
		return text, [], left
	out.append(text[last:])
	return "".join(out), spans, left


def _blank_code(text, lo, hi, pps):
	"""text[lo:hi] as spaces and newlines, its preprocessor lines kept."""
	parts, last = [], lo
	for s, e, _ in pps:
		if e <= lo or s >= hi:
			continue
		parts.append(_NOT_NL.sub(" ", text[last:s]))
		parts.append(text[s:e])
		last = e
	parts.append(_NOT_NL.sub(" ", text[last:hi]))
	return "".join(parts)
