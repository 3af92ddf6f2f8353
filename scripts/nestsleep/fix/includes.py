# SPDX-License-Identifier: GPL-2.0-only
"""The #include lines of a fix: where one goes, and whether it is needed.

place(): the file's include block is its #include lines that are not under
an #if/#ifdef (a header's include guard apart) and come before its first
function definition; a new <header> goes there, after the last <linux/...>
name that sorts before it (the file's own order), else before the block's
first line (a file whose only includes are local: "saa7164.h").  An #include
under #ifdef CONFIG_X, or after a function, is never the place.

add(): the #include line of a fix as an Edit of its unit, where place()
puts it, unless Walker.reaches() finds the file gets the header already.

Walker.reaches(): whether the file already gets a header through its own
#include lines, followed statically and transitively: "x.h" relative to the
including file's directory, <x.h> (and an unresolved "x.h") in the kernel's
search path for x86 (LINUXINCLUDE and USERINCLUDE, Makefile:561-576 in 6.1:
arch/x86/include, arch/x86/include/generated, include, then the uapi
directories).  An #include under a condition is not followed (the
configuration is not known), nor one whose file is not found (a directory's
own -I flags).  The walk stops at MAX_FILES files or MAX_DEPTH levels; a
header not reached by then is added (adding a header the file already gets
is harmless, missing one breaks the build).  The lead's build of each
patched object confirms a dropped include; the walk is what decides.
"""

import os
import re

from nestsleep.fix.ctext import mask
from nestsleep.fix.edits import Edit, Refuse

MAX_FILES = 4000
MAX_DEPTH = 40

# the kernel's include search path (Makefile LINUXINCLUDE, USERINCLUDE), x86
SEARCH = ("arch/x86/include", "arch/x86/include/generated", "include", "arch/x86/include/uapi",
	  "arch/x86/include/generated/uapi", "include/uapi", "include/generated/uapi")

_DIRECTIVE = re.compile(r"^[ \t]*#[ \t]*(\w+)[ \t]*(.*)$", re.M)
_INCLUDE_ARG = re.compile(r'^(<([^>\s]+)>|"([^"\s]+)")')


def strip_comments(text):
	"""text with its comments blanked (newlines kept); string and char
	literals are skipped over, so a '/*' inside one is no comment."""
	out = []
	i, n = 0, len(text)
	while i < n:
		c = text[i]
		if c == "/" and text.startswith("/*", i):
			j = text.find("*/", i + 2)
			j = n if j < 0 else j + 2
			out.append(re.sub(r"[^\n]", " ", text[i:j]))
			i = j
		elif c == "/" and text.startswith("//", i):
			j = text.find("\n", i)
			j = n if j < 0 else j
			out.append(" " * (j - i))
			i = j
		elif c in "\"'":
			j = i + 1
			while j < n and text[j] != c and text[j] != "\n":
				j += 2 if text[j] == "\\" else 1
			j = min(j + 1, n)
			out.append(text[i:j])
			i = j
		else:
			j = i + 1
			while j < n and text[j] not in "/\"'":
				j += 1
			out.append(text[i:j])
			i = j
	return "".join(out)


def scan(text):
	"""[(start, end, name, quoted, conditional)] of text's #include lines:
	start and end span the whole line (its newline included); conditional
	when under an #if/#ifdef/#ifndef that is not the include guard (an
	#ifndef X whose next directive is #define X)."""
	s = strip_comments(text)
	dirs = [(mm.start(), mm.end(), mm.group(1), mm.group(2).strip()) for mm in _DIRECTIVE.finditer(s)]
	out = []
	stack = []   # True for a real condition, False for the include guard
	for k, (a, b, d, arg) in enumerate(dirs):
		if d in ("if", "ifdef", "ifndef"):
			guard = (d == "ifndef" and not out and not stack and k + 1 < len(dirs) and
				 dirs[k + 1][2] == "define" and dirs[k + 1][3].split()[:1] == arg.split()[:1])
			stack.append(not guard)
		elif d == "endif":
			if stack:
				stack.pop()
		elif d == "include":
			mm = _INCLUDE_ARG.match(arg)
			if mm:
				end = b + 1 if b < len(text) else b
				out.append((a, end, mm.group(2) or mm.group(3), bool(mm.group(3)), any(stack)))
	return out


def first_function(text):
	"""Offset of the '{' of text's first function definition, or -1: a
	top-level '{' right after a ')' (the parameter list, or an attribute
	like __releases(x)), with no '=' at the top level of what precedes it
	(an initializer)."""
	m = mask(text)
	depth, seg = 0, 0
	for i, c in enumerate(m):
		if c in "([":
			depth += 1
		elif c in ")]":
			depth -= 1
		elif c == "{":
			if depth == 0:
				head = m[seg:i]
				flat = re.sub(r"\([^()]*\)", "", head)
				while flat != re.sub(r"\([^()]*\)", "", flat):
					flat = re.sub(r"\([^()]*\)", "", flat)
				if head.rstrip().endswith(")") and "=" not in flat:
					return i
			depth += 1
		elif c == "}":
			depth -= 1
			if depth == 0:
				seg = i + 1
		elif c == ";" and depth == 0:
			seg = i + 1
	return -1


def block(text):
	"""The include block: scan()'s unconditional #include lines before
	the first function."""
	ff = first_function(text)
	return [x for x in scan(text) if not x[4] and (ff < 0 or x[0] < ff)]


def place(text, header):
	"""Offset at which '#include <header>' goes in text, or None when the
	file has no include block."""
	incs = block(text)
	if not incs:
		return None
	linux = [x for x in incs if not x[3] and x[2].startswith("linux/")]
	if not linux:
		# no <linux/...> line to sort among: before the first include
		# (system headers before local ones)
		return incs[0][0]
	if not header.startswith("linux/"):
		return linux[-1][1]
	names = [x[2] for x in linux]
	if sum(a > b for a, b in zip(names, names[1:])) <= 2:
		# sorted, or nearly (spi-nor's core.c has err.h before errno.h
		# before delay.h): before the first name after the last one
		# that sorts before header
		before = [k for k, x in enumerate(names) if x < header]
		if not before:
			return linux[0][0]
		if before[-1] + 1 < len(linux):
			return linux[before[-1] + 1][0]
	return linux[-1][1]


def add(walker, ft, u, rel, header):
	"""Add #include <header> to the file's include block, in its order
	(place()), unless the file already gets header through its #include
	lines (walker.reaches()).  Text, because spatch 1.1.1 adds a line
	after an #include only when the rule names that header literally:
	'#include <...>@p' matches every include, but a '+' line under it is
	dropped, so the place (after the include that sorts before header,
	in this file) cannot be chosen by the rule."""
	if any(name == header and not quoted and not cond for _s, _e, name, quoted, cond in scan(ft.t)):
		return
	if walker.reaches(rel, header):
		return
	at = place(ft.t, header)
	if at is None:
		raise Refuse("manual", "no #include block before the first function to add <%s> to" % header)
	u.add(rel, Edit(at, at, "#include <%s>\n" % header, key=("inc", header)))


class Walker:
	"""The headers a file gets through its #include lines, in one tree."""

	def __init__(self, kdir):
		self.kdir = os.path.abspath(kdir)
		self.search = [os.path.join(self.kdir, d) for d in SEARCH if os.path.isdir(os.path.join(self.kdir, d))]
		self.direct = {}     # path -> [included paths]
		self.closures = {}   # path -> (set of paths, capped)

	def resolve(self, name, quoted, here):
		if quoted:
			p = os.path.normpath(os.path.join(here, name))
			if os.path.isfile(p):
				return p
		for d in self.search:
			p = os.path.normpath(os.path.join(d, name))
			if os.path.isfile(p):
				return p
		return None

	def includes_of(self, path):
		if path not in self.direct:
			try:
				with open(path, errors="surrogateescape") as f:
					text = f.read()
			except OSError:
				text = ""
			here = os.path.dirname(path)
			out = []
			for _s, _e, name, quoted, cond in scan(text):
				if not cond:
					p = self.resolve(name, quoted, here)
					if p and p not in out:
						out.append(p)
			self.direct[path] = out
		return self.direct[path]

	def closure(self, path):
		"""(the files path includes, transitively; capped): breadth first,
		at most MAX_FILES files and MAX_DEPTH levels."""
		path = os.path.normpath(os.path.join(self.kdir, path))
		if path not in self.closures:
			seen, level, depth, capped = set(), [path], 0, False
			while level:
				if depth >= MAX_DEPTH:
					capped = True
					break
				nxt = []
				for p in level:
					for q in self.includes_of(p):
						if q not in seen and q != path:
							seen.add(q)
							nxt.append(q)
				if len(seen) > MAX_FILES:
					capped = True
					break
				level, depth = nxt, depth + 1
			self.closures[path] = (seen, capped)
		return self.closures[path]

	def reaches(self, rel, header):
		"""True when rel gets <header> through its #include lines; False
		when it does not, or the walk was capped before reaching it, or
		the tree has no such header."""
		target = self.resolve(header, False, "")
		if target is None:
			return False
		seen, _capped = self.closure(rel)
		return target in seen
