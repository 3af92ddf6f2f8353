# SPDX-License-Identifier: GPL-2.0-only
"""C source as text, for the rewrites: a mask with comments and literals
blanked (mask()), bracket matching and the blocks around an offset, line
and indentation helpers, a statement on one line (flat()), the names a
function already uses (idents(), pick_name()) and what reads as a
declaration (is_decl_line()).  Nothing here knows a wait shape."""

import re


def mask(text):
	"""Copy of text with comments and string/char literal contents replaced
	by spaces (newlines kept), so that brackets can be matched on it."""
	out = list(text)
	i, n = 0, len(text)
	while i < n:
		c = text[i]
		if c == "/" and i + 1 < n and text[i + 1] == "*":
			j = text.find("*/", i + 2)
			j = n if j < 0 else j + 2
			for k in range(i, j):
				if out[k] != "\n":
					out[k] = " "
			i = j
		elif c == "/" and i + 1 < n and text[i + 1] == "/":
			j = text.find("\n", i)
			j = n if j < 0 else j
			for k in range(i, j):
				out[k] = " "
			i = j
		elif c in "\"'":
			j = i + 1
			while j < n and text[j] != c and text[j] != "\n":
				j += 2 if text[j] == "\\" else 1
			for k in range(i + 1, min(j, n)):
				out[k] = " "
			i = j + 1
		elif c == "#" and (i == 0 or text[i - 1] == "\n"):
			# preprocessor line (with continuations): blank it
			j = i
			while True:
				e = text.find("\n", j)
				if e < 0:
					e = n
					break
				if e > 0 and text[e - 1] == "\\":
					j = e + 1
					continue
				break
			for k in range(i, e):
				if out[k] != "\n":
					out[k] = " "
			i = e
		else:
			i += 1
	return "".join(out)


def match_close(m, i):
	"""Index of the bracket closing the one at m[i]."""
	pairs = {"(": ")", "[": "]", "{": "}"}
	stack = []
	for j in range(i, len(m)):
		c = m[j]
		if c in pairs:
			stack.append(pairs[c])
		elif c in ")]}":
			if not stack or stack.pop() != c:
				return -1
			if not stack:
				return j
	return -1


def split_top(m, s, e, sep=","):
	"""Spans of the top-level comma-separated parts of m[s:e] (parts
	separated by sep, when given: ';' for the statements of a statement
	expression)."""
	parts, depth, start = [], 0, s
	for j in range(s, e):
		c = m[j]
		if c in "([{":
			depth += 1
		elif c in ")]}":
			depth -= 1
		elif c == sep and depth == 0:
			parts.append((start, j))
			start = j + 1
	parts.append((start, e))
	return parts


def open_block(m, i):
	"""Index of the '{' of the innermost block that contains position i."""
	depth = 0
	for j in range(i - 1, -1, -1):
		c = m[j]
		if c == "}":
			depth += 1
		elif c == "{":
			if depth == 0:
				return j
			depth -= 1
	return -1


def function_body(m, i):
	"""(open, close) of the outermost block around i: the function body."""
	o = open_block(m, i)
	while o >= 0:
		up = open_block(m, o)
		if up < 0:
			break
		o = up
	if o < 0:
		return -1, -1
	return o, match_close(m, o)


def line_start(t, i):
	return t.rfind("\n", 0, i) + 1


def line_end(t, i):
	e = t.find("\n", i)
	return len(t) if e < 0 else e


def indent_at(t, i):
	s = line_start(t, i)
	j = s
	while j < len(t) and t[j] in " \t":
		j += 1
	return t[s:j]


def prev_nonspace(m, i):
	j = i - 1
	while j >= 0 and m[j].isspace():
		j -= 1
	return j


def next_nonspace(m, i):
	j = i
	while j < len(m) and m[j].isspace():
		j += 1
	return j


def flat(t, m, s, e):
	"""Source text t[s:e] on one line: runs of blanks outside literals become
	one space.  None if it holds a comment (kept as it is then)."""
	if "/*" in t[s:e] or "//" in t[s:e]:
		frag = t[s:e]
		if m[s:e].count("/") != frag.count("/"):
			return None
	out = []
	sp = False
	for j in range(s, e):
		c = t[j]
		if c.isspace() and m[j].isspace() and (c != " " or m[j] == " ") and not _in_literal(t, m, j):
			if not sp:
				out.append(" ")
			sp = True
		else:
			out.append(c)
			sp = False
	r = "".join(out).strip()
	# no blank between a function name and its '(', or inside parentheses
	rm = mask(r)
	res = []
	for j, c in enumerate(r):
		if c == " " and rm[j] == " ":
			nxt = rm[j + 1] if j + 1 < len(rm) else ""
			prv = rm[j - 1] if j else ""
			if nxt == ")" or prv == "(" or prv == "[" or nxt == "]":
				continue
			if nxt == "(" and (prv.isalnum() or prv == "_"):
				word = re.search(r"(\w+)$", r[:j]).group(1)
				if word not in ("if", "while", "for", "switch", "return", "sizeof", "typeof"):
					continue
		res.append(c)
	return "".join(res)


def _in_literal(t, m, j):
	"""True when t[j] is inside a string or character literal: mask()
	keeps the quotes and blanks what is between them (escaped quotes and
	comments included), so an odd count of one quote before j on its
	line means j is inside."""
	seg = m[m.rfind("\n", 0, j) + 1:j]
	return seg.count('"') % 2 == 1 or seg.count("'") % 2 == 1


def cols(line):
	n = 0
	for c in line:
		n = (n // 8 + 1) * 8 if c == "\t" else n + 1
	return n


IDENT = re.compile(r"[A-Za-z_]\w*")


def idents(s):
	return set(IDENT.findall(s))


C_KEYWORDS = frozenset("auto break case char const continue default do double else enum extern float for goto if "
		       "inline int long register restrict return short signed sizeof static struct switch typedef "
		       "union unsigned void volatile while bool true false".split())
DECL_RE = re.compile(r"^\s*(?:(?:static|const|volatile|unsigned|signed|struct|enum|union|register)\s+)*"
		     r"[A-Za-z_]\w*(?:\s+[A-Za-z_]\w*)?[\s\*]+[A-Za-z_]\w*\s*(?:\[[^\]]*\])?\s*(?:=.*)?"
		     r"(?:,\s*\**\s*[A-Za-z_]\w*\s*(?:\[[^\]]*\])?\s*)*[;,]\s*$")
DECL_MACRO_RE = re.compile(r"^\s*(?:DEFINE_\w+|DECLARE_\w+|LIST_HEAD|__label__)\b")
NOT_DECL = {"return", "goto", "break", "continue", "else", "case", "default", "do"}


def is_decl_line(line):
	s = line.strip()
	if not s or s.split()[0] in NOT_DECL or s.startswith(("if ", "if(", "for", "while", "switch")):
		return False
	if DECL_MACRO_RE.match(line):
		return True
	if "(" in s.split("=")[0]:
		return False
	return bool(DECL_RE.match(line))


def pick_name(taken, choices):
	for c in choices:
		if c not in taken:
			taken.add(c)
			return c
	k = 2
	while "%s%d" % (choices[0], k) in taken:
		k += 1
	taken.add("%s%d" % (choices[0], k))
	return "%s%d" % (choices[0], k)


LINES = re.compile(r"[^\n]*\n|[^\n]+$")
