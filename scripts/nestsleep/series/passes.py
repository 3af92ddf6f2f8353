# SPDX-License-Identifier: GPL-2.0-only
"""On which passes of an open-coded wait loop the nested call runs, read
from the code shape, for the effect paragraph (series/effect.py).

fault_spin(): the loop sets the task state once, before its first pass
(set_current_state() / prepare_to_wait*() outside the loop, none inside),
and the sleeping call is guarded by the value the loop's exit tests and
stores a negative errno in it when it fails:

	set_current_state(TASK_INTERRUPTIBLE);
	for (;;) {
		...
		if (ret > 0 && copy_to_user(buf, p, ret))
			ret = -EFAULT;
		...
		if (ret >= 0)
			break;
		...
		schedule();
	}

(drivers/macintosh/via-pmu.c:2184-2211 in 6.1).  When the call succeeds,
ret is still > 0 and the loop breaks: the call runs on the pass that ends
the wait, and a sleep in it only makes the warning.  When it fails, ret is
negative, the exit is not taken, and nothing sets the state again: after a
failure that slept (a fault that waited for the page), the task stays in
TASK_RUNNING and every later schedule() returns at once, so the loop spins
until another exit is taken.  A shape this does not recognise gets the
general text, which says only what holds on any pass.
"""

import os
import re

from nestsleep.fix.ctext import mask, match_close, open_block

STATE_SET = re.compile(r"\b(?:set_current_state|prepare_to_wait\w*)\s*\(")
LOOP = re.compile(r"\b(?:for|while)\s*\(|\bdo\s*\{")
ERRNO = re.compile(r"^\s*(\w+)\s*=\s*(-E[A-Z0-9]+)\s*;\s*$")
# a test of V that a negative V fails: V >= 0, V > 0, V >= N (N >= 0)
EXIT = r"^\s*%s\s*(?:>=\s*\d+|>\s*\d+)\s*$"


def _pos(text, line, pat):
	"""The offset of the first match of pat on 1-based line, or -1."""
	start = 0
	for _ in range(line - 1):
		start = text.find("\n", start) + 1
		if start == 0:
			return -1
	end = text.find("\n", start)
	m = pat.search(text, start, end if end >= 0 else len(text))
	return m.start() if m else -1


def _open_paren(m, e):
	"""Index of the '(' that the ')' at m[e] closes, or -1."""
	depth = 0
	for j in range(e, -1, -1):
		if m[j] == ")":
			depth += 1
		elif m[j] == "(":
			depth -= 1
			if depth == 0:
				return j
	return -1


def _loop_around(m, i):
	"""(start of the loop keyword, '{', '}') of the innermost loop whose
	block holds offset i; None when i is in no loop."""
	o = open_block(m, i)
	while o >= 0:
		j = o - 1
		while j >= 0 and m[j].isspace():
			j -= 1
		if m[j] == ")":
			p = _open_paren(m, j)
			w = re.search(r"\b(for|while)\s*$", m[:p]) if p >= 0 else None
			if w:
				return w.start(), o, match_close(m, o)
		elif re.search(r"\bdo$", m[:j + 1]):
			return j - 1, o, match_close(m, o)
		o = open_block(m, o)
	return None


def _if_around(m, c):
	"""(cond start, cond end, then start, then end) of the if whose
	condition holds offset c; None otherwise."""
	for im in reversed(list(re.finditer(r"\bif\s*\(", m[:c]))):
		p = im.end() - 1
		e = match_close(m, p)
		if e < c:
			continue
		j = e + 1
		while j < len(m) and m[j].isspace():
			j += 1
		if m[j] == "{":
			return p + 1, e, j + 1, match_close(m, j)
		return p + 1, e, j, m.find(";", j) + 1
	return None


def fault_spin(kdir, f):
	"""The shape of the module docstring for finding f (an open-coded loop:
	'line' the state set, 'call_line' the call), as {"call", "var",
	"fail", "exit", "set"}; None when the code is not of that shape."""
	try:
		with open(os.path.join(kdir, f["file"]), errors="replace") as fp:
			text = fp.read()
	except OSError:
		return None
	m = mask(text)
	s = _pos(m, f.get("line") or 0, STATE_SET)
	c = _pos(m, f.get("call_line") or 0, re.compile(r"\b%s\s*\(" % re.escape(f.get("call") or "")))
	if s < 0 or c < 0:
		return None
	loop = _loop_around(m, c)
	if not loop or not s < loop[0] or STATE_SET.search(m, loop[1], loop[2]):
		return None
	st = _if_around(m, c)
	if not st or LOOP.search(m, st[0], c):
		return None
	then = ERRNO.match(m[st[2]:st[3]].strip("{} \t\n"))
	if not then:
		return None
	var, fail = then.group(1), then.group(2)
	guard = m[st[0]:c]
	if not re.match(r"^\s*%s\s*>\s*0\s*&&\s*$" % re.escape(var), guard):
		return None
	# the next exit the value meets: 'if (V >= 0) break;' with no write to
	# V between the call's statement and it
	for em in re.finditer(r"\bif\s*\(", m[st[3]:loop[2]]):
		p = st[3] + em.end() - 1
		e = match_close(m, p)
		if not re.search(r"\b%s\b" % re.escape(var), m[p:e]):
			continue
		between = m[st[3]:p]
		if re.search(r"\b%s\s*(?:[-+*/|&^]?=(?!=)|\+\+|--)" % re.escape(var), between):
			return None
		cond = " ".join(m[p + 1:e].split())
		if re.match(EXIT % re.escape(var), cond) and re.match(r"^\s*break\s*;", m[e + 1:]):
			return {"call": f["call"], "var": var, "fail": fail, "exit": cond,
				"set": STATE_SET.match(m, s).group(0).rstrip("( \t")}
		return None
	return None
