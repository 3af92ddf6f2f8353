# SPDX-License-Identifier: GPL-2.0-only
"""The layout steps a rewrite's text goes through, so that checkpatch.pl
reads it as the kernel's own: lines wrapped to MAX_COLS at && and || and
at a call's commas (wrap_cond(), wrap_call(), wrap_long()), the body of a
rewritten if laid out again (if_bodies()), braces where coding-style.rst
has them (join_else(), join_braces()), a blank line spatch dropped put
back (keep_blank()), a wait_woken() loop re-indented one tab a level
(reindent()), leading spaces as tabs (retab()) and '!(a == b)' read as
'a != b' (flip_compare()).  spatch 1.1.1 can be told to do none of them."""

import difflib
import re

from nestsleep.fix.ctext import LINES, cols, mask, match_close, split_top

MAX_COLS = 80


def wrap_call(ind, head, args, tail=";"):
	"""head(args...)tail at indent ind, wrapped to MAX_COLS with the
	continuation aligned to the open parenthesis."""
	one = "%s%s(%s)%s" % (ind, head, ", ".join(args), tail)
	if cols(one) <= MAX_COLS:
		return [one]
	lines = []
	cur = "%s%s(" % (ind, head)
	align = cols(cur)
	cont = "\t" * (align // 8) + " " * (align % 8)
	for k, a in enumerate(args):
		piece = a + (", " if k < len(args) - 1 else ")" + tail)
		if cols(cur + piece.rstrip()) > MAX_COLS and not cur.endswith("("):
			lines.append(cur.rstrip())
			cur = cont
		cur += piece
	lines.append(cur.rstrip())
	return lines


def logic_cuts(m, level):
	"""Offsets just after each ' ||' and ' &&' at bracket depth level."""
	cuts = []
	depth = 0
	for j in range(len(m)):
		c = m[j]
		if c in "([{":
			depth += 1
		elif c in ")]}":
			depth -= 1
		elif depth == level and m[j:j + 4] in (" || ", " && "):
			cuts.append(j + 3)
	return cuts


def wrap_cond(ind, cond, pre="if (", post=")"):
	"""'if (cond)' wrapped at top-level || and && like the seeds do."""
	one = "%s%s%s%s" % (ind, pre, cond, post)
	if cols(one) <= MAX_COLS:
		return [one]
	m = mask(cond)
	cuts = logic_cuts(m, 0)
	inner = 0
	if not cuts and cond.startswith("(") and match_close(m, 0) == len(cond) - 1:
		# one parenthesized whole: cut at its own || and &&, and align
		# the continuation inside its parenthesis
		inner = 1
		cuts = logic_cuts(m, 1)
	if not cuts:
		return [one]
	pieces, s = [], 0
	for c in cuts:
		pieces.append(cond[s:c].strip())
		s = c
	pieces.append(cond[s:].strip())
	align = cols(ind + pre) + inner
	cont = "\t" * (align // 8) + " " * (align % 8)
	lines = []
	cur = ind + pre
	for k, p in enumerate(pieces):
		piece = p + (" " if k < len(pieces) - 1 else post)
		if cols(cur + piece.rstrip()) > MAX_COLS and cur.strip() not in ("", pre.strip()):
			lines.append(cur.rstrip())
			cur = cont
		cur += piece
	lines.append(cur.rstrip())
	out = []
	for ln in lines:
		out += _split_inner(ln)
	return out


def _split_inner(line):
	"""Break a line that is still too long at an && or || inside
	parentheses, aligned after the parenthesis that opens that group."""
	if cols(line) <= MAX_COLS:
		return [line]
	m = mask(line)
	stack = []
	best = None
	for j, c in enumerate(m):
		if c == "(":
			stack.append(j)
		elif c == ")" and stack:
			stack.pop()
		elif stack and m[j:j + 4] in (" && ", " || ") and cols(line[:j + 3]) <= MAX_COLS:
			best = (j, stack[-1])
	if best is None:
		return _split_compare(line)
	j, par = best
	align = cols(line[:par + 1])
	cont = "\t" * (align // 8) + " " * (align % 8)
	return [line[:j + 3]] + _split_inner(cont + line[j + 4:])


def _split_compare(line):
	"""Break a line that is still too long after its last ==, != or
	bitwise & or | that fits, with the right operand aligned under the
	left one, as the kernel breaks such conditions (xen-netfront's
	XenbusState tests, pi433's register & mask)."""
	if cols(line) <= MAX_COLS:
		return [line]
	m = mask(line)
	best = None
	for mm in re.finditer(r" (?:[=!]=|&|\|) ", m):
		if cols(line[:mm.start() + 3]) <= MAX_COLS:
			best = mm.start()
	if best is None:
		return [line]
	lead = re.match(r"^[ \t]*(?:if \(|while \(!?\(?)?", line).group(0)
	align = cols(lead)
	cont = "\t" * (align // 8) + " " * (align % 8)
	op = m.index(" ", best + 1)
	return [line[:op]] + _split_compare(cont + line[op + 1:])


def retab(line):
	"""Leading blanks as tabs then fewer than 8 spaces (checkpatch: "code
	indent should use tabs"); spatch 1.1.1 sometimes aligns a wrapped
	argument list with spaces only."""
	lead = re.match(r"^[ \t]*", line).group(0)
	if "        " not in lead:
		return line
	n = cols(lead)
	return "\t" * (n // 8) + " " * (n % 8) + line[len(lead):]


def wrap_long(old, new):
	"""new with its added 'if (cond)' and 'while (!(cond))' lines wrapped
	at the top-level && and || to MAX_COLS columns.  This is the one layout
	step left to Python: spatch 1.1.1 prints an expression it moves (the
	wait's condition) on one line, whatever its length, and breaks lines
	only between the arguments of a call it writes."""
	seen = set(LINES.findall(old))
	out = []
	for line in join_else(old, LINES.findall(new)):
		if line in seen:
			out.append(line)
			continue
		line = retab(flip_compare(line))
		body = line.rstrip("\n")
		if cols(body) <= MAX_COLS:
			out.append(line)
			continue
		mm = re.match(r"^([ \t]*)(if \(|while \(!\(|while \()", body)
		bm = mask(body)
		o = len(mm.group(0)) - 1 if mm else -1
		c = match_close(bm, mm.start(2) + mm.group(2).index("(")) if mm else -1
		if c < 0:
			out.append(line)
			continue
		pre = mm.group(2)
		cond_e = c - (1 if pre.endswith("!(") else 0)
		if pre.endswith("!("):
			c2 = match_close(bm, o)
			if c2 != c - 1:
				out.append(line)
				continue
		cond = body[o + 1:cond_e]
		post = body[cond_e:]
		lines = wrap_cond(mm.group(1), cond, pre=pre, post=post)
		call = re.match(r"^([A-Za-z_]\w*)\(", cond)
		cm = mask(cond)
		if len(lines) == 1 and call and match_close(cm, call.end() - 1) == len(cond) - 1:
			# one call, as signal_pending_state(state, current): at its commas
			args = [cond[s:e].strip() for s, e in split_top(cm, call.end(), len(cond) - 1)]
			lines = wrap_call(mm.group(1), pre + call.group(1), args, tail=post)
		lines = [y for x in lines for y in _split_compare(x)]
		out += [x + "\n" for x in lines]
	return "".join(out)


def if_bodies(old, new):
	"""new with the body of each added 'if (...) {' line laid out as
	checkpatch.pl reads it, since the if line is new: a body indented off
	the if's level is re-indented, whitespace only, and a body of one
	statement on one line loses its braces (coding-style.rst).  spatch
	1.1.1 keeps the body of a rewritten 'if (wait_event*(...)) {' as it
	was: saa7164 fops_read() indents it after the wait's continuation
	line.  The text rewrite (plan_wait_event_text()) does this with
	wait_event.if_body()."""
	seen = set(LINES.findall(old))
	out = LINES.findall(new)
	i = 0
	while i < len(out):
		mm = re.match(r"^([ \t]*)if \(.*\) \{\n$", out[i])
		if out[i] in seen or not mm:
			i += 1
			continue
		# the line that closes the if's brace: '}' alone, not '} else {'
		depth, j = 1, i + 1
		while j < len(out) and not (depth == 1 and out[j].lstrip().startswith("}")):
			depth += _depth(out[j])[1]
			j += 1
		if j >= len(out) or out[j].strip() != "}":
			i += 1
			continue
		ind, body = mm.group(1), out[i + 1:j]
		inner = ind + "\t"
		full = [x for x in body if x.strip()]
		if len(body) == 1 and full and full[0].strip().endswith(";") and not re.search(r"[{}]", mask(full[0])):
			out[i:j + 1] = [out[i].rstrip()[:-1].rstrip() + "\n", inner + full[0].strip() + "\n"]
			i += 2
			continue
		base = min((re.match(r"^[ \t]*", x).group(0) for x in full), key=cols, default=inner)
		if base != inner:
			out[i + 1:j] = [inner + x[len(base):] if x.startswith(base) else x for x in body]
		i = j + 1
	return "".join(out)


_FLIP = {"==": "!=", "!=": "==", ">=": "<", "<=": ">", ">": "<=", "<": ">="}


def _top_ops(mi):
	"""(index, operator) of the operators at depth 0 of masked text mi;
	'->' is a member access, not an operator."""
	ops, depth, j = [], 0, 0
	while j < len(mi):
		c = mi[j]
		if c in "([{":
			depth += 1
		elif c in ")]}":
			depth -= 1
		elif depth == 0 and c == "-" and mi[j + 1:j + 2] == ">":
			j += 2
			continue
		elif depth == 0 and c in "=!<>&|?,+-*/%^":
			two = mi[j:j + 3] if mi[j:j + 3] in ("<<=", ">>=") else mi[j:j + 2]
			op = two if two in ("==", "!=", ">=", "<=", "&&", "||", "<<", ">>", "<<=", ">>=") else c
			ops.append((j, op))
			j += len(op)
			continue
		j += 1
	return ops


def flip_compare(line):
	"""'while (!(a == b))' -> 'while (a != b)', and the same for !=, <,
	<=, > and >= (issue 32: '!(x >= 0)' reads 'x < 0'), when the one
	comparison is the whole condition: spatch negates the wait's condition
	as !(cond), which a reader would not write for one comparison.  And
	'while (!!f(x))' -> 'while (f(x))' when f(x) is one operand: a loop
	test only asks whether it is non-zero."""
	m = re.match(r"^([ \t]*while \()!!(.*)(\)[ \t]*\{?[ \t]*\n?)$", line)
	if m and match_close(mask(line), len(m.group(1)) - 1) == len(m.group(1)) + 2 + len(m.group(2)) \
			and not _top_ops(mask(m.group(2))):
		return m.group(1) + m.group(2) + m.group(3)
	m = re.match(r"^([ \t]*while \()!\((.*)\)(\)[ \t]*\{?[ \t]*\n?)$", line)
	if not m:
		return line
	inner = m.group(2)
	if match_close(mask(line), len(m.group(1)) + 1) != len(m.group(1)) + 2 + len(inner):
		return line	# '!(a) == (b)': the parenthesis does not hold it all
	ops = _top_ops(mask(inner))
	if len(ops) != 1 or ops[0][1] not in _FLIP:
		return line
	j, o = ops[0]
	if inner[:j].lstrip().startswith("!"):
		return line	# '!a == b' compares the negation
	return m.group(1) + inner[:j].rstrip() + " " + _FLIP[o] + " " + inner[j + len(o):].lstrip() + m.group(3)


def join_else(old, lines):
	"""lines (new text) with the braces spatch adds around an if arm put
	where coding-style.rst has them: an added '{' joined to its 'if (...)'
	or 'else', an added '}' joined to the 'else' under it ('} else'), and
	a blank line left before an added closing brace dropped.  spatch 1.1.1
	prints such a brace on a line of its own (checkpatch ERRORs "that open
	brace { should be on the previous line" and "else should follow close
	brace '}'").  Only lines the rewrite added are touched."""
	lines = keep_blank(LINES.findall(old), lines)
	sm = difflib.SequenceMatcher(None, LINES.findall(old), lines, autojunk=False)
	added = set()
	for tag, i1, i2, j1, j2 in sm.get_opcodes():
		if tag in ("replace", "insert"):
			added.update(range(j1, j2))
	out, new_out = join_braces(lines, added)
	return [x for x in reindent(out, new_out) if x]


def keep_blank(old, lines):
	"""lines with a blank line put back where spatch dropped it together
	with a statement it removed: a run of removed lines that holds one
	blank line, between two kept lines of code that are not a block's
	opening or closing brace (6.12 tty_port_block_til_ready(): the blank
	line before the removed prepare_to_wait() had kept the if above apart
	from the comment below)."""
	sm = difflib.SequenceMatcher(None, old, lines, autojunk=False)
	out = list(lines)
	for tag, i1, i2, j1, j2 in reversed(sm.get_opcodes()):
		if tag != "delete" or j1 == 0 or j1 >= len(lines):
			continue
		gone = old[i1:i2]
		if sum(1 for x in gone if not x.strip()) != 1 or len(gone) < 2:
			continue
		before, after = lines[j1 - 1].strip(), lines[j1].strip()
		if before and after and not before.endswith("{") and not after.startswith("}"):
			out.insert(j1, "\n")
	return out


def join_braces(lines, added):
	out = []
	new_out = []     # whether each line of out was added
	for k, line in enumerate(lines):
		new = k in added
		if new and out and new_out[-1] and not out[-1].strip() and line.strip() == "}":
			out.pop()
			new_out.pop()
		mm = re.match(r"^([ \t]*)\{\n", line)
		if mm and new and out and \
				re.match(r"^%s(?:(?:\}\s*)?else\s*|(?:(?:\}\s*)?else\s+)?if\s*\(.*\))\n" % mm.group(1), out[-1]):
			out[-1] = out[-1][:-1] + " {\n"
			new_out[-1] = True
			continue
		mm = re.match(r"^([ \t]*)else\b", line)
		if mm and out and new_out[-1] and out[-1] == mm.group(1) + "}\n":
			out[-1] = mm.group(1) + "} " + line[len(mm.group(1)):]
			continue
		out.append(line)
		new_out.append(new)
	return out, new_out


def _depth(line):
	"""(parentheses, braces) that the line leaves open."""
	m = mask(line)
	return m.count("(") - m.count(")"), m.count("{") - m.count("}")


def reindent(lines, new):
	"""Each run of added lines that holds a wait_woken() loop, indented
	from its first line by its braces, one tab a level, as coding-style.rst
	has it.  spatch 1.1.1 indents added code after the original code around
	it, so a function indented oddly (6.12 saa7164 fops_read(): an if body
	two tabs in) got the same odd steps inside the new loop.  A line that
	continues a call keeps its place against the line above it."""
	out = list(lines)
	k = 0
	while k < len(out):
		if not new[k]:
			k += 1
			continue
		e = k
		while e < len(out) and new[e]:
			e += 1
		if any("wait_woken(" in x for x in out[k:e]):
			base = re.match(r"^[ \t]*", out[k]).group(0)
			# a first line '} else {' closes a block the run is inside of
			level = 1 if out[k].strip().startswith("}") else 0
			parens, shift, one = 0, None, False
			for i in range(k, e):
				body = out[i].strip()
				was = re.match(r"^[ \t]*", out[i]).group(0)
				if not body:
					continue
				if parens > 0 and shift is not None:
					# a continuation line: moves as its statement's first line did
					out[i] = (retab(was) if shift == 0 else _shift(was, shift)) + body + "\n"
				else:
					lv = level - (1 if body.startswith("}") else 0) + (1 if one else 0)
					want = base + "\t" * max(lv, 0)
					shift = cols(want) - cols(was)
					out[i] = want + body + "\n"
					one = bool(re.match(r"^(?:\}\s*)?(?:if|while|for|else)\b", body)) and \
						not body.endswith("{") and not body.endswith(";")
				dp, db = _depth(body)
				parens += dp
				level += db
			_rewrap_calls(out, k, e)
		k = e
	return out


def _rewrap_calls(out, k, e):
	"""A call statement in out[k:e] that spans lines, wrapped again at its
	new indentation (a call that now fits goes on one line)."""
	i = k
	while i < e:
		j = i
		while j < e - 1 and _depth("".join(out[i:j + 1]))[0] > 0:
			j += 1
		if j > i:
			ind = re.match(r"^[ \t]*", out[i]).group(0)
			st = " ".join(x.strip() for x in out[i:j + 1])
			mm = re.match(r"^((?:[A-Za-z_][\w.>-]* = )?[A-Za-z_]\w*)\((.*)\);$", st)
			sm = mask(st)
			if mm and match_close(sm, mm.end(1)) == len(st) - 2:
				args = [st[a:b].strip() for a, b in split_top(sm, mm.end(1) + 1, len(st) - 2)]
				lines = [x + "\n" for x in wrap_call(ind, mm.group(1), args)]
				out[i:j + 1] = lines + [""] * (j + 1 - i - len(lines))
		i = j + 1


def _shift(ind, n):
	"""The indentation ind moved n columns, in tabs then spaces."""
	c = max(cols(ind) + n, 0)
	return "\t" * (c // 8) + " " * (c % 8)
