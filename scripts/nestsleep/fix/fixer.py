# SPDX-License-Identifier: GPL-2.0-only
"""nestsleep's auto-fixer: rewrite nested sleeps into the wait_woken() form.

The checker (cocci/nested_sleep.cocci + scripts/nestsleep/analysis/) finds the wait
sites; this module turns each finding into a source edit, or says why it
cannot.  It picks the sites, the names (clash-free in the function) and
the refusals; semantic patches make the edits where spatch 1.1.1 can:

  wait_event*(wq, cond, ...)     -> cocci/fix_wait_event.cocci:
                                    DEFINE_WAIT_FUNC + add_wait_queue + a
                                    while (!cond) loop around wait_woken(),
                                    with the variant's signal and timeout
                                    rules (virtio_balloon 3d2a3774c1b0, vfio
                                    41be3e261817, ceph 5c341ee32881); the
                                    text rewrite plan_wait_event_text() only
                                    for a statement-expression or assigning
                                    condition
  a loop whose state outlives it -> cocci/restore_after_loop.cocci
  prepare_to_wait() loops        -> cocci/fix_prepare_to_wait.cocci:
                                    add_wait_queue() before the loop,
                                    wait_woken() for schedule(),
                                    remove_wait_queue() for finish_wait()
                                    (md/raid5 ee1aa06ba325)
  set_current_state() loops on a -> cocci/fix_set_current_state.cocci:
  wait queue                        wait_woken() on that queue (Bluetooth
                                    cmtp f06d977309d0, bnep 25717382c1dd)
  set_current_state() loops of a -> cocci/fix_set_current_state.cocci:
  thread on no queue                a queue of its own (hidp 5da8e47d849d);
                                    the file-scope queue head, the wake
                                    function and the forwarded entries are
                                    text (plan_own_queue())

Each rewrite then goes through the waker rule (scripts/nestsleep/fix/wakers.py): every
direct waker of the task (wake_up_process() and friends) becomes a
wake_up*() of the queue, or the site is refused; a wait whose task pointer
is stored nowhere needs none.  wakers.py finds the wakers and picks the new
call and queue of each; cocci/fix_wakers.cocci converts them (one spatch run
per file, in finish()), and a waker it leaves refuses the unit.

Every finding gets a "fix" record: status "patch", "report-only" (the
variant has no safe wait_woken form) or "manual" (the shape is outside what
this rewriter proves correct), with the reason.
"""

import difflib
import json
import os
import re
import shutil
import subprocess
import tempfile

from nestsleep import COCCI_DIR
from nestsleep.analysis import cfacts
from nestsleep.analysis.match import cocci_options
from nestsleep.fix import includes

RESTORE_RULE = os.path.join(COCCI_DIR, "restore_after_loop.cocci")
WAIT_EVENT_RULE = os.path.join(COCCI_DIR, "fix_wait_event.cocci")
PREPARE_RULE = os.path.join(COCCI_DIR, "fix_prepare_to_wait.cocci")
SCS_RULE = os.path.join(COCCI_DIR, "fix_set_current_state.cocci")
WAKERS_RULE = os.path.join(COCCI_DIR, "fix_wakers.cocci")
MACRO_HINTS = os.path.join(COCCI_DIR, "nestsleep.macros.h")

MAX_COLS = 80

REPORT_ONLY = {
	"locked": "the condition runs with %s held, so a sleep there is a sleep in atomic context, and "
		  "add_wait_queue() would self-deadlock on the held lock; wait_woken() does not fix this: "
		  "move the sleeping call out from under the lock by hand",
	"lock": "the condition runs under the spinlock passed to the macro (%s), with interrupts off: a "
		"sleep there is a sleep in atomic context, which wait_woken() does not fix",
	"ktime": "the hrtimeout variants take a ktime_t and sleep on an hrtimer; wait_woken() takes "
		 "jiffies, so there is no exact wait_woken() form",
	"swait": "swait queues have no wait-queue entry with a wake function, so woken_wake_function() "
		 "would never run",
	"rcuwait": "an rcuwait has no wait queue: the waker wakes the task directly, so woken_wake_function() "
		   "would never run",
	"wait_var": "wait_var_event*() waits on a hashed bit wait queue keyed by the variable; its wakers "
		    "call wake_up_var(), whose wake function filters by key, which woken_wake_function() does not",
	"exclusive": "an exclusive waiter that leaves on a signal must pass on a wakeup it consumed: "
		     "prepare_to_wait_event() dequeues it under the queue lock before the condition is "
		     "tested again, and wait_woken() has no such step, so the wakeup could be lost to the "
		     "other exclusive waiters",
	"io": "io_wait_event() accounts the sleep as iowait through io_schedule(); io_schedule_prepare() and "
	      "io_schedule_finish() are not exported to modules in 6.1, so wait_woken() would lose the accounting",
}


# ---------------------------------------------------------------------------
# C text helpers: a mask with comments and literals blanked, paren matching

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


def split_top(m, s, e):
	"""Spans of the top-level comma-separated parts of m[s:e]."""
	parts, depth, start = [], 0, s
	for j in range(s, e):
		c = m[j]
		if c in "([{":
			depth += 1
		elif c in ")]}":
			depth -= 1
		elif c == "," and depth == 0:
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


def plain_names(decls, pre, cond, taken):
	"""A statement expression's locals without the leading underscores
	that a macro argument needs against shadowing ('int __count' in
	wiphy_unregister()'s wait_event()): in the loop body they are plain
	locals, so '__count' becomes 'count' where that name is free in the
	function."""
	ren = {}
	for d in decls:
		for m in re.finditer(r"\b(_+([A-Za-z]\w*))\s*(?=[;=,\[])", d):
			new = m.group(2)
			if new not in taken and new not in ren.values() and new not in C_KEYWORDS:
				ren[m.group(1)] = new
	if not ren:
		return decls, pre, cond
	sub = lambda t: re.sub(r"\b(%s)\b" % "|".join(map(re.escape, ren)), lambda m: ren[m.group(1)], t)
	return [sub(d) for d in decls], [x if x is None else sub(x) for x in pre], sub(cond)


C_KEYWORDS = frozenset("auto break case char const continue default do double else enum extern float for goto if "
		       "inline int long register restrict return short signed sizeof static struct switch typedef "
		       "union unsigned void volatile while bool true false".split())


def split_cond(cond):
	"""(loop_decls, pre_statements, test) for a wait condition, so that the
	rewritten loop passes checkpatch: a statement-expression condition
	'({ decls; stmts; value; })' is unpacked into the loop body, and an
	assignment that is evaluated first, '(x = f()) != 0 || ...', is hoisted
	into a statement of its own.  Both keep the order of evaluation."""
	c = cond.strip()
	m = mask(c)
	if c.startswith("({") and c.endswith("})") and match_close(m, 0) == len(c) - 1:
		inner_s, inner_e = 2, len(c) - 2
		parts = []
		depth, start = 0, inner_s
		for j in range(inner_s, inner_e):
			ch = m[j]
			if ch in "([{":
				depth += 1
			elif ch in ")]}":
				depth -= 1
			elif ch == ";" and depth == 0:
				parts.append(c[start:j].strip())
				start = j + 1
		tail = c[start:inner_e].strip()
		if tail or not parts or any("{" in mask(p) for p in parts):
			return None
		value = parts[-1]
		vm = mask(value)
		while value.startswith("(") and match_close(vm, 0) == len(value) - 1:
			value = value[1:-1].strip()
			vm = mask(value)
		decls, stmts = [], []
		for p in parts[:-1]:
			if not p:
				continue
			if is_decl_line(p + ";") and not stmts:
				decls.append(p + ";")
			else:
				stmts.append(p + ";")
		d2, s2, test = split_cond(value) or ([], [], value)
		return decls + d2, stmts + s2, test
	if c.startswith("("):
		e = match_close(m, 0)
		if e > 0:
			a = re.match(r"^\(\s*([A-Za-z_][\w]*(?:\s*(?:->|\.)\s*[A-Za-z_]\w*)*)\s*=(?!=)\s*(.*)\)$", c[:e + 1],
				     re.S)
			if a and "=" not in mask(a.group(2)).replace("==", "").replace("!=", "").replace("<=", "") \
					.replace(">=", ""):
				lv, rhs = a.group(1), a.group(2).strip()
				rest = c[e + 1:].strip()
				test = lv + (" " + rest if rest else "")
				return [], ["%s = %s;" % (lv, rhs)], test
	return [], [], c


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


def pointer_to(expr):
	"""&expr for a wait_queue_head_t lvalue as the macros take it."""
	e = expr.strip()
	mm = re.match(r"^\*\s*([A-Za-z_][\w]*(?:(?:->|\.)[A-Za-z_]\w*)*)$", e)
	if mm:
		return mm.group(1)
	if re.match(r"^[A-Za-z_][\w]*(?:\s*(?:->|\.)\s*[A-Za-z_]\w*|\[[^\]]*\])*$", e):
		return "&" + re.sub(r"\s+", "", e)
	return "&(%s)" % e


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


def pre_statement(ind, x):
	"""A statement unpacked from a ({ }) condition, as checkpatch wants it:
	'if (c) s;' on two lines, long lines wrapped."""
	mm = re.match(r"^if\s*\(", x)
	if mm:
		xm = mask(x)
		e = match_close(xm, mm.end() - 1)
		body = x[e + 1:].strip() if e > 0 else ""
		if body and not body.startswith("{") and "else" not in idents(xm[e + 1:]):
			return wrap_cond(ind, x[mm.end():e].strip()) + [ind + "\t" + body]
	a = re.match(r"^([A-Za-z_][\w.>-]*\s*=)(?!=)\s*(.*);$", x, re.S)
	if a and cols(ind + x) > MAX_COLS:
		return wrap_cond(ind, a.group(2), pre=a.group(1) + " ", post=";")
	return [ind + x]


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


# ---------------------------------------------------------------------------
# Edits

class Edit:
	__slots__ = ("s", "e", "text", "key")

	def __init__(self, s, e, text, key=None):
		self.s, self.e, self.text, self.key = s, e, text, key

	def order(self):
		# at one offset, declarations and includes go first, the
		# includes in the order of their names
		inc = self.key[1] if self.key and self.key[0] == "inc" else ""
		return (self.s, self.e, 0 if self.key else 1, inc)


class Unit:
	"""The edits of one patch: one function (plus its wakers)."""

	def __init__(self, rel, func, kind):
		self.rel, self.func, self.kind = rel, func, kind
		self.edits = {}        # rel -> [Edit]
		self.findings = []
		self.caveats = []
		self.wakers = []
		self.reasons = []
		self.confidence = "high"
		self.sites = {}        # "line:col" -> a wait_event*() site for fix_wait_event.cocci
		self.taken = set()     # names in scope in the function
		self.includes = set()
		self.text_sites = 0    # sites rewritten by plan_wait_event_text()
		self.ptw = None        # the loop for fix_prepare_to_wait.cocci
		self.own = None        # the loop for fix_set_current_state.cocci (own queue)
		self.waker_sites = {}  # rel -> {"line:col": waker} for fix_wakers.cocci
		self.dead_copies = {}  # rel -> {(function, name): "file:line"} for fix_wakers.cocci

	def add(self, rel, edit):
		self.edits.setdefault(rel, []).append(edit)


class FileText:
	"""A source file as the rewrites see it: its bytes kept as they are
	(surrogateescape), and a file whose lines all end in CRLF seen with
	LF endings, which diff() puts back."""

	def __init__(self, path):
		with open(path, errors="surrogateescape", newline="") as f:
			t = f.read()
		self.crlf = "\r\n" in t and t.count("\n") == t.count("\r\n")
		self.t = t.replace("\r\n", "\n") if self.crlf else t
		self.m = mask(self.t)

	def lines(self, text):
		"""text (self.t or a rewrite of it) as diff lines, in the file's own
		line endings.  Split at LF only: str.splitlines() also breaks at a
		form feed or a lone CR, which diff and patch do not."""
		lines = [l + "\n" for l in text.split("\n")]
		if text.endswith("\n"):
			lines.pop()
		elif lines:
			lines[-1] = lines[-1][:-1]
		if self.crlf:
			lines = [l[:-1] + "\r\n" if l.endswith("\n") else l for l in lines]
		return lines

	def offset(self, line, col):
		pos = 0
		for _ in range(line - 1):
			pos = self.t.index("\n", pos) + 1
		return pos + col


class Refuse(Exception):
	def __init__(self, status, reason):
		Exception.__init__(self, reason)
		self.status, self.reason = status, reason


def signal_caveat(sig, need_val):
	"""The caveat on the signal test of a rewritten wait_event*(): its
	-ERESTARTSYS only where the macro's value was used."""
	if need_val:
		return "signals: %s is tested after the condition, as ___wait_event() does, and gives -ERESTARTSYS" % sig
	return ("signals: %s is tested after the condition, as ___wait_event() does, and ends the wait; the "
		"macro's -ERESTARTSYS was not used here, and nothing takes its place" % sig)


def lower(conf):
	return {"high": "medium", "medium": "low", "low": "low"}[conf]


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


class Fixer:
	def __init__(self, kdir, kn, tree=None, facts=None, ana=None, m_abs=None):
		self.kdir, self.kn = kdir, kn
		self.tree, self.facts, self.ana = tree, facts, ana
		self.m_abs = m_abs
		self.files = {}
		self._walker = None
		self.table = kn.waiters
		self.rule = None
		self.own_threads = {}   # (file, thread) -> the function given its own queue
		if tree is not None and facts is not None:
			from nestsleep.fix import wakers
			self.rule = wakers.WakerRule(self, kn)

	def wakers(self, u, rel, func, queue, state, stop_tested, span, f=None):
		"""The poll rule (scripts/nestsleep/fix/polls.py): a wait that polls
		today keeps a waker on queue, or the site is refused.  Then the
		waker rule (scripts/nestsleep/fix/wakers.py): every direct waker of the
		task is converted to a wakeup of queue, or the site is refused."""
		if f is not None:
			from nestsleep.fix import polls
			polls.check(self, f, u, rel, func, queue, state)
		if self.rule is None:
			raise Refuse("manual", "no tree facts to search the wakers with")
		self.rule.check({"rel": rel, "func": func, "queue": queue, "state": state,
				 "stop_tested": stop_tested, "span": span}, u)

	def text(self, rel):
		if rel not in self.files:
			self.files[rel] = FileText(os.path.join(self.kdir, rel))
		return self.files[rel]

	# -- entry point -------------------------------------------------------

	def run(self, findings):
		"""Attach a 'fix' record to every finding; return the units."""
		units = {}
		refused = {}
		if self.rule is not None:
			self.rule.prepare(sorted(set((f["file"], f["function"]) for f in findings
						     if not f.get("locked") and f["shape"] in ("wait_event", "prepare_to_wait",
											"set_current_state"))))
		for f in findings:
			key = (f["file"], f["function"])
			if key in refused:
				f["fix"] = dict(refused[key])
				continue
			try:
				u = units.get(key)
				if u is None:
					u = Unit(f["file"], f["function"], None)
				self.plan(f, u)
				units[key] = u
				u.findings.append(f)
			except Refuse as r:
				f["fix"] = {"status": r.status, "reason": r.reason, "kind": kind_of(f),
					    "confidence": f["confidence"], "caveats": [], "unit": "%s:%s" % key,
					    "files": [], "wakers": [], "diff": ""}
				if r.status == "manual" and key in units:
					# one site of the function cannot be rewritten: patch none of it
					refused[key] = f["fix"]
					for g in units.pop(key).findings:
						g["fix"] = dict(f["fix"])
		out = []
		for key, u in units.items():
			try:
				self.finish(u)
			except Refuse as r:
				for g in u.findings:
					g["fix"] = {"status": r.status, "reason": r.reason, "kind": kind_of(g),
						    "confidence": g["confidence"], "caveats": [], "unit": "%s:%s" % key,
						    "files": [], "wakers": [], "diff": ""}
				continue
			diff = self.diff(u.edits)
			rec = {"status": "patch", "reason": "; ".join(dict.fromkeys(u.reasons)), "kind": u.kind,
			       "confidence": u.confidence, "caveats": list(dict.fromkeys(u.caveats)),
			       "unit": "%s:%s" % key, "files": sorted(u.edits), "wakers": u.wakers, "diff": diff}
			for g in u.findings:
				g["fix"] = dict(rec, confidence=min_conf(rec["confidence"], g["confidence"]))
			out.append(u)
		return out

	def plan(self, f, u):
		shape = f["shape"]
		if f.get("locked"):
			v = self.table.get(f["primitive"], {})
			if v.get("locked") == "wq.lock" or f["locked"] == "wq.lock":
				raise Refuse("report-only", REPORT_ONLY["locked"] % "wq.lock")
			raise Refuse("report-only", REPORT_ONLY["lock"] % f["locked"])
		restore = f.get("after_loop") and shape in ("prepare_to_wait", "set_current_state")
		if u.kind and (u.kind == "restore") != bool(restore):
			raise Refuse("manual", "the function mixes a %s wait with one whose state outlives its loop"
				     % (u.kind if restore else kind_of(f)))
		if restore:
			self.plan_restore_after_loop(f, u)
			u.kind = "restore"
			u.confidence = min_conf(u.confidence, f["confidence"])
			return
		if shape == "wait_event":
			self.plan_wait_event(f, u)
		elif shape in ("prepare_to_wait", "set_current_state") and u.kind == shape:
			pass    # the whole loop of this function is rewritten already
		elif shape == "prepare_to_wait":
			self.plan_prepare_to_wait(f, u)
		elif shape == "set_current_state":
			self.plan_set_current_state(f, u)
		elif shape == "thread_exit":
			raise Refuse("manual", "the thread function %s() returns to kthread() with the task state "
				     "set: restore TASK_RUNNING before it returns" % f["function"])
		else:
			raise Refuse("manual", "the task state is set inside %s(), a helper that returns with it "
				     "still set: the wait loop spans two functions; restore TASK_RUNNING before the "
				     "sleeping call or restructure by hand" % f["primitive"])
		if u.kind and u.kind != kind_of(f):
			raise Refuse("manual", "the function mixes %s and %s waits" % (u.kind, kind_of(f)))
		u.kind = kind_of(f)
		u.confidence = min_conf(u.confidence, f["confidence"])

	def plan_restore_after_loop(self, f, u):
		"""Every sleeping call of f runs after the wait loop has ended,
		with the state it set not yet restored (hpet_read()'s put_user()
		after the break): the loop is right as it is, and one
		__set_current_state(TASK_RUNNING) after it is the fix
		(cocci/restore_after_loop.cocci).  The restore at the label the
		loop's gotos reach stays."""
		rel = f["file"]
		ft = self.text(rel)
		toks = cfacts.tokenize(ft.t)
		loop = cfacts.loop_around(toks, f["line"])
		if loop is None or loop[0] != f["after_loop"]:
			raise Refuse("manual", "cannot find the wait loop on line %s" % f["after_loop"])
		last = max(p["line"] for p in f["paths"])
		nxt = next((t for t in toks if t[2] > loop[1]), None)
		if nxt is None or nxt[1] == "}" or nxt[2] > last:
			raise Refuse("manual", "the wait loop on line %d ends its block: put "
				     "__set_current_state(TASK_RUNNING) on every way out of it by hand" % loop[0])
		if cfacts.labels_between(toks, loop[1] + 1, last):
			raise Refuse("manual", "a goto label between the wait loop on line %d and the sleeping call "
				     "may be reached from inside the loop: restore TASK_RUNNING before the call by hand"
				     % loop[0])
		kw = next(t[1] for t in toks if t[2] == loop[0] and t[1] in ("for", "while", "do"))
		if kw == "do":
			env = {"NESTSLEEP_NEXT": str(nxt[2])}
		else:
			env = {"NESTSLEEP_LOOPS": str(loop[0])}
		edits = self.spatch_edits(rel, RESTORE_RULE, env)
		if not edits:
			raise Refuse("manual", "%s could not place the restore after the wait loop on line %d"
				     % (os.path.basename(RESTORE_RULE), loop[0]))
		for e in edits:
			e.key = ("restore", rel, loop[0])
			u.add(rel, e)
		u.reasons.append("the wait loop on line %d leaves with the task state still set, and %s() runs "
				 "after it: TASK_RUNNING is now restored as soon as the loop ends; the loop itself, "
				 "its wakeups and its exits by goto are unchanged" % (loop[0], f["call"]))

	def spatch_edits(self, rel, rule, env, extra=()):
		"""Run the patch rule on file rel (a copy: the tree is read-only)
		with env; its changes as Edits on the file's text."""
		ft = self.text(rel)
		new = self.spatch_text(ft.t, os.path.basename(rel), rule, env, extra)
		return [] if new is None else text_edits(ft.t, new)

	def spatch_text(self, text, name, rule, env, extra=()):
		"""The patch rule's output on text (a file called name), or None
		when spatch fails."""
		tmp = tempfile.mkdtemp(prefix="nestsleep-fix-")
		try:
			src = os.path.join(tmp, name)
			out = src + ".out"
			with open(src, "w", errors="surrogateescape", newline="") as fp:
				fp.write(text)
			cmd = ["spatch", "--sp-file", rule, "-D", "patch", "--very-quiet", src, "-o", out]
			cmd += cocci_options(rule) + list(extra)
			# the cleanup.h guards (6.5+): without the hints spatch drops a
			# function that uses scoped_guard() (tty_port_block_til_ready())
			if os.path.isfile(MACRO_HINTS):
				cmd += ["--macro-file", MACRO_HINTS]
			proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
					      env=dict(os.environ, **env))
			if proc.returncode != 0 or not os.path.exists(out):
				return None
			with open(out, errors="surrogateescape", newline="") as fp:
				return fp.read()
		finally:
			shutil.rmtree(tmp, ignore_errors=True)

	def finish(self, u):
		if u.sites:
			self.rewrite_wait_events(u)
		if u.ptw:
			self.rewrite_prepare_to_wait(u)
		if u.own:
			self.rewrite_own_queue(u)
		if u.waker_sites:
			self.rule.rewrite(u)
		for rel, edits in u.edits.items():
			edits.sort(key=Edit.order)
			uniq = []
			for e in edits:
				if e.key and any(x.key == e.key for x in uniq):
					continue
				if uniq and e.s < uniq[-1].e:
					raise Refuse("manual", "two rewrites overlap in %s" % rel)
				uniq.append(e)
			u.edits[rel] = uniq

	def diff(self, edits_by_file):
		out = []
		for rel in sorted(edits_by_file):
			ft = self.text(rel)
			new = apply_edits(ft.t, edits_by_file[rel])
			out.append(unified_diff("".join(ft.lines(ft.t)), "".join(ft.lines(new)), self.shown(rel)))
		return "".join(out)

	def shown(self, rel):
		"""The path a diff names: relative to M= for an external module, so
		that 'cd M && patch -p1' applies it."""
		if os.path.isabs(rel) and self.m_abs and rel.startswith(self.m_abs.rstrip("/") + "/"):
			return os.path.relpath(rel, self.m_abs)
		return rel

	# -- shared pieces -------------------------------------------------------

	def block_decls(self, ft, u, rel, pos, decls, tag):
		"""Declare decls at the top of the block around pos (once per block).
		Text, for plan_wait_event_text() only (a statement-expression
		condition spatch cannot match, or a hoisted assignment); the
		semantic patches declare their own names."""
		o = open_block(ft.m, pos)
		if o < 0:
			raise Refuse("manual", "the wait is not inside a block")
		self.decls_at(ft, u, rel, o, decls, tag)

	def decls_at(self, ft, u, rel, o, decls, tag):
		t = ft.t
		if re.search(r"\bswitch\s*\([^{};]*\)\s*$", ft.m[max(0, o - 300):o]):
			# a jump to a case label would skip the initialization
			raise Refuse("manual", "the wait is in a switch case without its own braces: "
				     "a jump to a later case label would skip the wait entry's initialization")
		first = line_end(t, o) + 1
		if first >= len(t):
			raise Refuse("manual", "unexpected end of file")
		ind = indent_at(t, next_nonspace(ft.m, first)) if t[first:line_end(t, first)].strip() else None
		if not ind:
			ind = indent_at(t, o) + "\t"
		nxt = t[first:line_end(t, first)]
		text = "".join("%s%s\n" % (ind, d) for d in decls)
		if nxt.strip() and not is_decl_line(nxt):
			text += "\n"
		u.add(rel, Edit(first, first, text, key=("decl", o, tag)))

	def include(self, ft, u, rel, header):
		"""Add #include <header> to the file's include block, in its order
		(fix/includes.py: place()), unless the file already gets header
		through its #include lines (includes.Walker.reaches()).
		Text, because spatch 1.1.1 adds a line after an #include only
		when the rule names that header literally: '#include <...>@p'
		matches every include, but a '+' line under it is dropped, so
		the place (after the include that sorts before header, in this
		file) cannot be chosen by the rule."""
		if any(name == header and not quoted and not cond for _s, _e, name, quoted, cond in includes.scan(ft.t)):
			return
		if self.walker().reaches(rel, header):
			return
		at = includes.place(ft.t, header)
		if at is None:
			raise Refuse("manual", "no #include block before the first function to add <%s> to" % header)
		u.add(rel, Edit(at, at, "#include <%s>\n" % header, key=("inc", header)))

	def walker(self):
		if self._walker is None:
			self._walker = includes.Walker(self.kdir)
		return self._walker

	def taken_names(self, ft, pos):
		o, c = function_body(ft.m, pos)
		if o < 0:
			raise Refuse("manual", "cannot find the enclosing function")
		return idents(ft.m[o:c]), (o, c)

	# -- wait_event ----------------------------------------------------------

	def plan_wait_event(self, f, u):
		"""Check that the wait_event*() site of f can be rewritten, and
		record it for cocci/fix_wait_event.cocci, which makes the edit
		(rewrite_wait_events(), when the unit is complete)."""
		prim = f["primitive"]
		v = self.table.get(prim)
		if v is None:
			raise Refuse("report-only", "%s() is a wait macro defined outside wait.h; rewrite the "
				     "macro or its users by hand" % prim)
		if v["family"] in ("swait", "rcuwait", "wait_var"):
			raise Refuse("report-only", REPORT_ONLY[v["family"]])
		if v["locked"] == "wq.lock":
			raise Refuse("report-only", REPORT_ONLY["locked"] % "wq.lock")
		if v["locked"]:
			if f.get("role") == "cmd":
				raise Refuse("manual", "the sleeping call is in the cmd of %s(), which runs with the lock "
					     "dropped but the task state set; the macro cannot be replaced by wait_woken() "
					     "without re-taking the lock by hand" % prim)
			raise Refuse("report-only", REPORT_ONLY["lock"] % "lock")
		if v["timeout"] == "ktime":
			raise Refuse("report-only", REPORT_ONLY["ktime"])
		if prim == "io_wait_event":
			raise Refuse("report-only", REPORT_ONLY["io"])
		state, sig = self.kn.states.get(v["state"], (None, None))
		if v["exclusive"] and (sig or v["state"] == "state"):
			raise Refuse("report-only", REPORT_ONLY["exclusive"])
		rel, ft, pos, pc, args = self.macro_call(f, prim)
		if self.poll_method(ft, pos):
			raise Refuse("report-only", "the wait is inside a ->poll() method, which must not block at "
				     "all: poll_wait() and a mask are the fix, not wait_woken()")
		ctx = self.context(ft, pos, pc, prim, v)
		if v["state"] == "state":
			state = args[2]
			sig = "signal_pending_state(%s, current)" % state
		if state is None:
			raise Refuse("manual", "unknown task state %s" % v["state"])
		cmd = [args[k] for k in v["cmd"]]
		if prim.endswith("_cmd") and len(args) >= 4:
			cmd = [args[2], args[3]]
		timeout = v["timeout"] == "jiffies"
		if cmd and (sig or timeout or len(args) != 4):
			raise Refuse("manual", "%s() has a cmd and a signal test or timeout; only wait_event_cmd() "
				     "is rewritten" % prim)
		need_val = ctx["use"] != "discard" and v["value"] != "void"
		form = "cmd" if cmd else ("signal_" if sig else "") + ("timeout" if timeout else "")
		form = form.rstrip("_") or ("signal" if sig else "plain")
		if args[v["cond"]].startswith("({") or re.search(r"[^=!<>+\-*/%&|^]=[^=]", mask(args[v["cond"]])):
			return self.plan_wait_event_text(f, u, v, prim)
		if u.text_sites:
			raise Refuse("manual", "the function has waits for both the semantic patch and the text "
				     "rewrite")
		if ctx["use"] == "if" and ctx["if_expr"].endswith("< 0") and not sig:
			raise Refuse("report-only", "the value of %s() is never negative" % prim)
		key = "%d:%d" % (f["line"], f["col"])
		if key not in u.sites:
			body, (o, c) = self.taken_names(ft, pos)
			u.taken |= body | self.param_names(ft, o) | set(x for a in args for x in idents(a))
			u.sites[key] = {"form": form, "queue": pointer_to(args[0]), "state": state, "test": sig,
					"exclusive": bool(v["exclusive"]), "value": need_val, "use": ctx["use"],
					"lvalue": ctx.get("lvalue"), "args": " ".join(args), "prim": prim, "pos": pos,
					"body": bool(ctx.get("body"))}
		if sig:
			u.includes.add("linux/sched/signal.h")
		what = "%s() becomes an add_wait_queue()/wait_woken()/remove_wait_queue() loop: the condition " \
		       "now runs in TASK_RUNNING, so a sleep in it no longer resets the wait's state" % prim
		u.reasons.append(what)
		if v["exclusive"]:
			u.caveats.append("exclusive wait: add_wait_queue_exclusive() keeps the tail queueing; the "
					 "wait has no signal test, so a wakeup it consumes is never dropped")
		if cmd:
			u.caveats.append("%s: cmd1 and cmd2 now run in TASK_RUNNING around wait_woken()" % prim)
		self.wakers(u, rel, f["function"], pointer_to(args[0]), state,
			    "kthread_should_stop()" in args[v["cond"]], (ctx["stmt"], ctx["repl_e"]), f)
		if sig:
			u.caveats.append(signal_caveat(sig, need_val))
		if timeout:
			u.caveats.append("timeout: the remaining jiffies are threaded through wait_woken(); the result "
					 "is 0 if the time ran out with the condition false, at least 1 if it is true")

	def plan_wait_event_text(self, f, u, v, prim):
		"""The text rewrite of a wait_event*() site, kept only for the two
		conditions fix_wait_event.cocci cannot take: a statement expression
		'({ ... })', which spatch 1.1.1 does not match as a macro argument
		(wiphy_unregister(), wpan_phy_unregister()), and an assignment in
		the condition, which the SmPL form would leave in an if condition
		(checkpatch: "do not use assignment in if condition") or inside
		'while (!(...))'; here it is hoisted into a statement of its own
		(rpmsg_send_offchannel_raw(), drbd's _drbd_request_state()).
		Everything else goes through the semantic patch."""
		rel, ft, pos, pc, args = self.macro_call(f, prim)
		t = ft.t
		ctx = self.context(ft, pos, pc, prim, v)
		if ctx.get("body"):
			raise Refuse("manual", "the wait is the unbraced body of an if/else/loop and its condition "
				     "needs the text rewrite: add braces first")
		if u.sites:
			raise Refuse("manual", "the function has waits for both the semantic patch and the text "
				     "rewrite")
		u.text_sites += 1
		taken, _ = self.taken_names(ft, pos)
		taken |= set(x for a in args for x in idents(a))
		ind = indent_at(t, ctx["stmt"])
		state, sig = self.kn.states.get(v["state"], (None, None))
		if v["state"] == "state":
			state = args[2]
			sig = "signal_pending_state(%s, current)" % state
		if state is None:
			raise Refuse("manual", "unknown task state %s" % v["state"])
		wq = pointer_to(args[0])
		cond = args[v["cond"]]
		cmd = [args[k] for k in v["cmd"]]
		if prim.endswith("_cmd") and len(args) >= 4:
			cmd = [args[2], args[3]]
		wname = pick_name(taken, ["wait", "wait_entry", "woken_wait"])
		timeout = args[-1] if v["timeout"] == "jiffies" else None
		need_val = ctx["use"] != "discard" and v["value"] != "void"
		decls = ["DEFINE_WAIT_FUNC(%s, woken_wake_function);" % wname]
		res = None
		if timeout is not None:
			res = pick_name(taken, ["timeout", "remaining", "tmo"])
			decls.append("long %s;" % res)
		elif need_val:
			lv = ctx.get("lvalue")
			if lv and re.match(r"^[A-Za-z_]\w*$", lv) and lv not in idents(" ".join(args)):
				res = lv
			else:
				res = pick_name(taken, ["ret", "err", "wait_ret"])
				decls.append("int %s;" % res)
		if ctx["use"] in ("discard",) or (timeout is None and v["value"] == "void"):
			pass
		if wname != "wait" and "wait" in idents(" ".join(args)):
			pass
		# the loop, after wait.h's ___wait_event() and ___wait_cond_timeout()
		i1 = ind + "\t"
		i2 = i1 + "\t"
		L = []
		if timeout is not None:
			L.append("%s%s = %s;" % (ind, res, timeout))
		elif need_val and sig:
			L.append("%s%s = 0;" % (ind, res))
		elif need_val:
			L.append("%s%s = 0;" % (ind, res))
		add = "add_wait_queue_exclusive" if v["exclusive"] else "add_wait_queue"
		L += wrap_call(ind, add, [wq, "&" + wname])
		L.append("%sfor (;;) {" % ind)
		sc = split_cond(cond)
		if sc is None:
			raise Refuse("manual", "the condition is a statement expression that cannot be unpacked")
		ldecls, pre, cond = plain_names(*sc, taken)
		if re.search(r"[^=!<>+\-*/%&|^]=[^=]", mask(cond)):
			# checkpatch forbids an assignment in an if condition: evaluate
			# the condition, in the same order, into a bool first
			done = pick_name(taken, ["done", "cond_met", "woken_cond"])
			decls.append("bool %s;" % done)
			pre = pre + [None]
			pre_cond = cond
			cond = done
		if ldecls:
			L += ["%s%s" % (i1, d) for d in ldecls] + [""]
		for x in pre:
			if x is None:
				L += wrap_cond(i1, pre_cond, pre="%s = " % cond, post=";")
			else:
				L += pre_statement(i1, x)
		if timeout is not None:
			L += wrap_cond(i1, cond, post=") {")
			L += ["%sif (!%s)" % (i2, res), "%s\t%s = 1;" % (i2, res), "%sbreak;" % i2, "%s}" % i1]
			L += ["%sif (!%s)" % (i1, res), "%sbreak;" % i2]
		else:
			L += wrap_cond(i1, cond)
			L.append("%sbreak;" % i2)
		if sig:
			if res is not None:
				L += ["%sif (%s) {" % (i1, sig), "%s%s = -ERESTARTSYS;" % (i2, res), "%sbreak;" % i2,
				      "%s}" % i1]
			else:
				L += ["%sif (%s)" % (i1, sig), "%sbreak;" % i2]
		if cmd:
			L += ["%s%s;" % (i1, cmd[0])]
		if timeout is not None:
			L += wrap_call(i1, "%s = wait_woken" % res, ["&" + wname, state, res])
		else:
			L += wrap_call(i1, "wait_woken", ["&" + wname, state, "MAX_SCHEDULE_TIMEOUT"])
		if len(cmd) > 1:
			L += ["%s%s;" % (i1, cmd[1])]
		L.append("%s}" % ind)
		L += wrap_call(ind, "remove_wait_queue", [wq, "&" + wname])
		use = ctx["use"]
		if use == "assign" and res != ctx["lvalue"]:
			L.append("%s%s = %s;" % (ind, ctx["lvalue"], res))
		elif use == "return":
			L.append("%sreturn %s;" % (ind, res))
		if use == "if":
			text = "\n".join(L) + "\n"
			u.add(rel, Edit(ctx["ins"], ctx["ins"], text))
			u.add(rel, Edit(ctx["repl_s"], ctx["repl_e"], ctx["if_expr"] % res))
			self.if_body(ft, u, rel, ctx["repl_e"], ind)
			self.block_decls(ft, u, rel, ctx["stmt"], decls, res)
		else:
			text = "\n".join(L) + "\n"
			u.add(rel, Edit(ctx["repl_s"], ctx["repl_e"], text))
			self.block_decls(ft, u, rel, ctx["stmt"], decls, res)
		self.include(ft, u, rel, "linux/wait.h")
		if sig:
			self.include(ft, u, rel, "linux/sched/signal.h")
		what = "%s() becomes an add_wait_queue()/wait_woken()/remove_wait_queue() loop: the condition " \
		       "now runs in TASK_RUNNING, so a sleep in it no longer resets the wait's state" % prim
		u.reasons.append(what)
		if v["exclusive"]:
			u.caveats.append("exclusive wait: add_wait_queue_exclusive() keeps the tail queueing, but a "
					 "waiter woken exclusively that then leaves on a signal may swallow the wakeup, "
					 "where prepare_to_wait_event() would pass it on")
			u.confidence = lower(u.confidence)
		if cmd:
			u.caveats.append("%s: cmd1 and cmd2 now run in TASK_RUNNING around wait_woken()" % prim)
		self.wakers(u, rel, f["function"], wq, state, "kthread_should_stop()" in args[v["cond"]],
			    (ctx["stmt"], ctx["repl_e"]), f)
		if sig:
			u.caveats.append(signal_caveat(sig, need_val))
		if timeout is not None:
			u.caveats.append("timeout: the remaining jiffies are threaded through wait_woken(); the result "
					 "is 0 if the time ran out with the condition false, at least 1 if it is true")

	def if_body(self, ft, u, rel, e, ind):
		"""The 'if' line is rewritten, so checkpatch.pl reads its body too:
		a braced body with one simple statement loses its braces, and a body
		indented off the if's level is re-indented (whitespace only)."""
		t, m = ft.t, ft.m
		j = next_nonspace(m, e)
		if j < len(m) and m[j] == ")":
			e = j + 1
		bo = next_nonspace(m, e)
		if bo >= len(m) or m[bo] != "{" or t[e:bo].count("\n"):
			return
		bc = match_close(m, bo)
		if bc < 0 or t[line_start(t, bc):bc].strip() or m[bc + 1:line_end(t, bc)].strip():
			return
		body = t[bo + 1:bc]
		mb = m[bo + 1:bc]
		if t[bo + 1:line_end(t, bo)].strip():
			return
		lines = body.split("\n")[1:-1]
		stmts = [x for x in mb.split(";")[:-1]]
		inner = ind + "\t"
		if len(stmts) == 1 and not re.search(r"[{}]", mb) and mb == body and mb.strip().endswith(";") \
				and len([x for x in lines if x.strip()]) == 1:
			u.add(rel, Edit(e, line_end(t, bc), "\n%s%s" % (inner, lines[0].strip() if lines[0].strip()
								  else [x for x in lines if x.strip()][0].strip())))
			return
		cur = [re.match(r"^[ \t]*", x).group(0) for x in lines if x.strip()]
		if not cur:
			return
		base = min(cur, key=cols)
		if base == inner:
			return
		fixed = [inner + x[len(base):] if x.startswith(base) else x for x in lines]
		u.add(rel, Edit(line_end(t, bo) + 1, line_start(t, bc), "".join(x + "\n" for x in fixed)))

	def macro_call(self, f, prim):
		"""(file, FileText, offset, closing parenthesis, argument texts)
		of the wait macro call f reports."""
		rel = f["file"]
		ft = self.text(rel)
		t, m = ft.t, ft.m
		pos = ft.offset(f["line"], f["col"])
		if not t.startswith(prim, pos):
			raise Refuse("manual", "the source at the reported position is not %s()" % prim)
		po = next_nonspace(m, pos + len(prim))
		if po >= len(m) or m[po] != "(":
			raise Refuse("manual", "cannot find the arguments of %s()" % prim)
		pc = match_close(m, po)
		if pc < 0:
			raise Refuse("manual", "unbalanced parentheses in %s()" % prim)
		args = [flat(t, m, s, e) for s, e in split_top(m, po + 1, pc)]
		if any(a is None for a in args):
			raise Refuse("manual", "a comment inside the macro arguments")
		return rel, ft, pos, pc, args

	def poll_method(self, ft, pos):
		"""True when the function around pos is a ->poll() method: it
		takes a poll_table (the file_operations and proto_ops signature)."""
		o, _ = function_body(ft.m, pos)
		if o < 0:
			return False
		head = ft.m[max(0, ft.m.rfind(";", 0, o), ft.m.rfind("}", 0, o)):o]
		return re.search(r"\bpoll_table\s*\*", head) is not None

	def param_names(self, ft, o):
		"""The identifiers of the function header before the body at o:
		its parameters, which a new local must not redeclare."""
		head = ft.m[max(0, ft.m.rfind(";", 0, o), ft.m.rfind("}", 0, o)):o]
		return idents(head)

	def rewrite_wait_events(self, u):
		"""Run cocci/fix_wait_event.cocci on the unit's wait_event*() sites,
		with the names it may use: one wait entry for the function, and the
		variables that carry a value (the caller's own variable when one
		site alone assigns the value to a plain local)."""
		rel = u.rel
		ft = self.text(rel)
		sites = u.sites
		taken = u.taken
		vals = [s for s in sites.values() if s["value"] and s["form"] in ("signal", "timeout",
										     "signal_timeout")]
		names = {"wait": pick_name(taken, ["wait", "wait_entry", "woken_wait"])}
		decls = []
		sig_vals = [s for s in vals if s["form"] == "signal"]
		to_vals = [s for s in sites.values() if s["form"] in ("timeout", "signal_timeout")]
		if sig_vals:
			lv = sig_vals[0].get("lvalue")
			if len(vals) == 1 and sig_vals[0]["use"] == "assign" and lv and \
					re.match(r"^[A-Za-z_]\w*$", lv) and lv not in idents(sig_vals[0]["args"]):
				names["ret"] = lv
			else:
				names["ret"] = pick_name(taken, ["ret", "err", "wait_ret"])
				decls.append(["int", names["ret"]])
		if to_vals:
			names["tmo"] = pick_name(taken, ["timeout", "remaining", "tmo"])
			decls.append(["long", names["tmo"]])
		names["decls"] = decls
		# One site per spatch run, from the last to the first: a rewrite
		# then moves no site still to come, and the declarations go in
		# with the first site, in the last run.  (spatch 1.1.1 rewrites
		# only one of two sites of a function in one run.)
		text = ft.t
		order = sorted(sites.items(), key=lambda kv: -kv[1]["pos"])
		for i, (k, s) in enumerate(order):
			# the declarations ("decls") go in with the last run only
			spec = {"names": dict(names, nodecls=i < len(order) - 1),
				"sites": {k: dict({x: s[x] for x in ("form", "queue", "state", "test")},
						  add="add_wait_queue_exclusive" if s["exclusive"]
						  else "add_wait_queue")}}
			env = {"NESTSLEEP_SITES": json.dumps(spec)}
			extra = []
			if s["body"]:
				extra += ["-D", "balance"]
			new = self.spatch_text(text, os.path.basename(rel), WAIT_EVENT_RULE, env, extra)
			if new is None or new == text:
				raise Refuse("manual", "%s could not rewrite %s() on line %s in this statement context"
					     % (os.path.basename(WAIT_EVENT_RULE), s["prim"], k.split(":")[0]))
			text = new
		edits = text_edits(ft.t, if_bodies(ft.t, wrap_long(ft.t, text)))
		for e in edits:
			u.add(rel, e)
		self.include(ft, u, rel, "linux/wait.h")
		for h in sorted(u.includes):
			self.include(ft, u, rel, h)

	def context(self, ft, pos, pc, prim, v):
		"""Where the macro's value goes: only whole-statement contexts are
		rewritten, so that moving the loop out cannot change the order of
		evaluation."""
		t, m = ft.t, ft.m
		after = next_nonspace(m, pc + 1)
		b = prev_nonspace(m, pos)
		ctx = {}
		before_word = re.search(r"([A-Za-z_]\w*)\s*$", m[:pos])

		def stmt_ok(s):
			p = prev_nonspace(m, s)
			if p < 0 or m[p] in ";{}":
				return "block"
			if m[p] == ":" and not re.search(r"\?[^;{}]*$", m[:p]):
				return "block"
			if m[p] == ")" or m[max(0, p - 3):p + 1] == "else":
				return "body"
			return None

		def line_alone(s, e):
			if t[line_start(t, s):s].strip():
				raise Refuse("report-only", "the wait shares its line with other code")
			rest = m[e:line_end(t, e)]
			if rest.strip():
				raise Refuse("report-only", "the wait shares its line with other code")

		if before_word and before_word.group(1) == "return" and m[after] == ";":
			s = before_word.start(1)
			where = stmt_ok(s)
			if where is None:
				raise Refuse("report-only", "unusual statement context")
			line_alone(s, after + 1)
			ctx.update(use="return", stmt=s, repl_s=line_start(t, s), repl_e=line_end(t, after) + 1,
				   body=where == "body")
		elif b >= 0 and m[b] == "=" and m[b - 1] not in "=!<>+-*/%&|^" and m[after] == ";":
			st = b - 1
			while st >= 0 and m[st] not in ";{}:":
				st -= 1
			# the lvalue right before '=': after nothing (a statement of
			# its block), 'else' or an if/for/while header (an unbraced
			# body: spatch adds the braces), or a type (a declaration)
			seg = m[st + 1:b]
			mm = re.search(r"([A-Za-z_]\w*(?:\s*(?:->|\.)\s*[A-Za-z_]\w*|\s*\[[^\]]*\])*)\s*$", seg)
			s = st + 1 + (mm.start(1) if mm else len(seg))
			lv = flat(t, m, s, b) if mm else None
			prefix = seg[:mm.start(1)].strip() if mm else seg.strip()
			if lv is None or (prefix and not re.search(r"(?:^|\W)else$|\)$", prefix)):
				whole = flat(t, m, next_nonspace(m, st + 1), b)
				if whole and re.match(r"^[A-Za-z_][\w\s\*]*\s\**[A-Za-z_]\w*$", whole):
					raise Refuse("report-only", "the value initializes a declaration (%s); moving the "
						     "wait out would put code before a declaration" % whole)
				raise Refuse("report-only", "the value is assigned to an expression (%s)" % (whole or "?"))
			where = stmt_ok(s)
			if where is None:
				raise Refuse("report-only", "the assignment is not a statement of its own")
			line_alone(s, after + 1)
			ctx.update(use="assign", lvalue=re.sub(r"\s+", "", lv), stmt=s, repl_s=line_start(t, s),
				   repl_e=line_end(t, after) + 1, body=where == "body")
		elif m[after] == ";" and (b < 0 or m[b] in ";{}:)" or m[max(0, b - 3):b + 1] == "else"):
			where = stmt_ok(pos)
			if where is None:
				raise Refuse("report-only", "unusual statement context")
			line_alone(pos, after + 1)
			ctx.update(use="discard", stmt=pos, repl_s=line_start(t, pos), repl_e=line_end(t, after) + 1,
				   body=where == "body")
		elif b >= 0 and m[b] in "(!":
			# if (w), if (!w), if (w < 0)
			neg = m[b] == "!"
			op = prev_nonspace(m, b) if neg else b
			if m[op] != "(":
				raise Refuse("report-only", "the value is used inside an expression")
			kw = re.search(r"(?:^|[^\w])(else\s+)?if\s*$", m[:op])
			if not kw:
				raise Refuse("report-only", "the value is used as a loop condition or a call argument")
			if kw.group(1):
				raise Refuse("report-only", "the wait is the condition of an 'else if'")
			tail = re.match(r"\s*(\)|<\s*0\s*\))", m[pc + 1:])
			if not tail:
				raise Refuse("report-only", "the value is part of a larger condition")
			s = kw.start() + (0 if m[kw.start()] == "i" else 1)
			if stmt_ok(s) != "block":
				raise Refuse("report-only", "the if statement is not a statement of its own block")
			if t[line_start(t, s):s].strip():
				raise Refuse("report-only", "the wait shares its line with other code")
			tail_txt = tail.group(1)
			expr = ("!%s" if neg else "%s") + (" < 0" if tail_txt.startswith("<") else "")
			ctx.update(use="if", stmt=s, ins=line_start(t, s), repl_s=(b if neg else pos),
				   repl_e=pc + 1 + tail.start(1) + (len(tail_txt) - 1 if tail_txt.startswith("<") else 0),
				   if_expr=expr)
			if v["value"] == "void":
				raise Refuse("report-only", "a void wait used as a value")
		else:
			raise Refuse("report-only", "the value is used inside an expression (a ?:, &&/|| chain, loop "
				     "condition or macro argument), where moving the wait out could change the order "
				     "of evaluation")
		return ctx


	# -- open-coded loops: shared pieces -------------------------------------

	def calls_in(self, ft, o, c, names):
		"""[(name, pos, open_paren, close_paren)] of calls to names in m[o:c]."""
		m = ft.m
		out = []
		rx = re.compile(r"\b(%s)\s*\(" % "|".join(names))
		for mm in rx.finditer(m, o, c):
			po = mm.end() - 1
			out.append((mm.group(1), mm.start(), po, match_close(m, po)))
		return out

	def statement(self, ft, pos, pc, what):
		"""(line_start, line_end+1, lvalue) of the statement 'call(...);' or
		'lv = call(...);' at pos, which must be alone on its lines."""
		t, m = ft.t, ft.m
		after = next_nonspace(m, pc + 1)
		if after >= len(m) or m[after] != ";":
			raise Refuse("manual", "the value of %s() is used inside an expression" % what)
		s = pos
		lv = None
		b = prev_nonspace(m, pos)
		if b >= 0 and m[b] == "=" and m[b - 1] not in "=!<>":
			st = b - 1
			while st >= 0 and m[st] not in ";{}":
				st -= 1
			s = next_nonspace(m, st + 1)
			lv = flat(t, m, s, b)
			b = prev_nonspace(m, s)
		if b >= 0 and m[b] not in ";{}:":
			raise Refuse("manual", "%s() is not a statement of its own block (it is conditional or "
				     "part of an expression)" % what)
		if t[line_start(t, s):s].strip() or m[after + 1:line_end(t, after)].strip():
			raise Refuse("manual", "%s() shares its line with other code" % what)
		return line_start(t, s), line_end(t, after) + 1, lv

	def delete_stmt(self, ft, u, rel, s, e):
		"""Delete the lines [s, e), and one blank line after them when they
		opened a block or followed a blank line."""
		t = ft.t
		prev = t[line_start(t, max(s - 1, 0)):max(s - 1, 0)].strip() if s > 0 else ""
		nxt_e = line_end(t, e)
		if e < len(t) and not t[e:nxt_e].strip() and (prev.endswith("{") or prev == ""):
			e = nxt_e + 1
		u.add(rel, Edit(s, e, ""))

	def loop_of(self, ft, pos):
		"""(loop_stmt_start, body_open, body_close) when the statement at pos
		is a statement of a for/while/do loop body, else None."""
		m = ft.m
		o = open_block(m, pos)
		if o < 0:
			return None
		# Not only the first statement: being on the queue from the top of
		# the body on only adds wakeups (a spurious pass), it loses none.
		hb = prev_nonspace(m, o)
		if hb >= 0 and m[hb] == ")":
			# for (...) { / while (...) {
			depth = 0
			j = hb
			while j >= 0:
				if m[j] == ")":
					depth += 1
				elif m[j] == "(":
					depth -= 1
					if depth == 0:
						break
				j -= 1
			kw = re.search(r"\b(for|while)\s*$", m[:j])
			if not kw:
				return None
			return kw.start(1), o, match_close(m, o)
		kw = re.search(r"\bdo\s*$", m[:o])
		if kw:
			return kw.start(), o, match_close(m, o)
		return None

	def loop_site(self, f):
		"""(rel, text, source, mask, body open, body close) of the function
		that holds an open-coded wait loop."""
		rel = f["file"]
		ft = self.text(rel)
		o, c = function_body(ft.m, ft.offset(f["line"], f["col"]))
		if o < 0:
			raise Refuse("manual", "cannot find the enclosing function")
		return rel, ft, ft.t, ft.m, o, c

	# -- prepare_to_wait loops -----------------------------------------------

	def plan_prepare_to_wait(self, f, u):
		"""Check that the prepare_to_wait*() loop of f can be rewritten, and
		record it for cocci/fix_prepare_to_wait.cocci, which makes the edit
		(rewrite_prepare_to_wait(), when the unit is complete)."""
		rel, ft, t, m, o, c = self.loop_site(f)
		if f["primitive"] == "prepare_to_wait_event":
			raise Refuse("manual", "prepare_to_wait_event() returns the signal state; convert by hand")
		preps = self.calls_in(ft, o, c, sorted(self.kn.words.prepare))
		fins = self.calls_in(ft, o, c, ["finish_wait"])
		sig = None
		for name, p, po, pc in preps:
			a = [flat(t, m, x, y) for x, y in split_top(m, po + 1, pc)]
			if None in a or len(a) != 3:
				raise Refuse("manual", "unexpected arguments of %s()" % name)
			if sig is None:
				sig = (name, a)
			elif (name, a) != sig:
				raise Refuse("manual", "the function calls prepare_to_wait*() with different queues, "
					     "entries or states")
		name, (q, ent, state) = sig
		if not ent.startswith("&") or not re.match(r"^[A-Za-z_]\w*$", ent[1:]):
			raise Refuse("manual", "the wait entry %s is not a local variable" % ent)
		entry = ent[1:]
		if len(re.compile(r"\bDEFINE_WAIT\s*\(\s*%s\s*\)\s*;" % re.escape(entry)).findall(m, o, c)) != 1:
			raise Refuse("manual", "the wait entry %s is not declared with DEFINE_WAIT()" % entry)
		for fn, p, po, pc in fins:
			a = [flat(t, m, x, y) for x, y in split_top(m, po + 1, pc)]
			if a != [q, ent]:
				raise Refuse("manual", "finish_wait() on another queue or entry")
		if not fins:
			raise Refuse("manual", "no finish_wait() for the entry")
		first = preps[0]
		loop = self.loop_of(ft, first[1])
		ls0, le0, _ = self.statement(ft, first[1], first[3], first[0])
		if loop:
			lstart, bo, bc = loop
			if not re.match(r"(for|while)\b", m[lstart:lstart + 5]):
				raise Refuse("manual", "the loop is a do ... while loop, which spatch 1.1.1 does not match")
			if t[line_start(t, lstart):lstart].strip():
				raise Refuse("manual", "the loop statement shares its line with other code")
			add_at = line_start(t, lstart)
		else:
			# before the loop (md/raid5): the first one adds, a re-arm after
			# schedule() goes away
			nxt = next_nonspace(m, first[3] + 2)
			if not re.match(r"(for|while)\b", m[nxt:nxt + 5]):
				if re.match(r"do\b", m[nxt:nxt + 3]):
					raise Refuse("manual", "the loop is a do ... while loop, which spatch 1.1.1 does not "
						     "match")
				raise Refuse("manual", "%s() is neither at the top of a loop nor right before one" % name)
			lstart = nxt
			bo = m.find("{", lstart)
			if bo < 0:
				raise Refuse("manual", "the loop has no braces")
			bc = match_close(m, bo)
			add_at = ls0
		for pname, p, po, pc in preps[1:]:
			if not (bo < p < bc):
				raise Refuse("manual", "%s() outside the wait loop" % pname)
			self.statement(ft, p, pc, pname)
			# a re-arm must follow a schedule()
			before = m[open_block(m, p) + 1:p]
			if not re.search(r"\bschedule(?:_timeout)?\s*\([^;]*\)\s*;\s*$", before):
				raise Refuse("manual", "%s() in the middle of the loop, not right after schedule()" % pname)
		self.check_exits(ft, bo, bc, fins, "finish_wait")
		for fn, p, po, pc in fins:
			if p < add_at:
				raise Refuse("manual", "finish_wait() before the wait loop")
		sched = self.schedules(ft, bo, bc, name)
		u.ptw = {"func": f["function"], "entry": entry, "queue": q, "state": state,
			 "add": "add_wait_queue_exclusive" if name == "prepare_to_wait_exclusive" else "add_wait_queue",
			 "form": "top" if loop else "before", "sched": sched, "prim": name}
		u.reasons.append("the %s() loop becomes an add_wait_queue()/wait_woken()/remove_wait_queue() loop: "
				 "the code between the old %s() and schedule() now runs in TASK_RUNNING, and a wakeup "
				 "that comes while it runs is kept by WQ_FLAG_WOKEN" % (name, name))
		self.wakers(u, rel, f["function"], q, state, bool(re.search(r"\bkthread_should_stop\s*\(",
									   m[min(lstart, ls0):bc])), (min(lstart, ls0), bc), f)
		if name == "prepare_to_wait_exclusive":
			u.caveats.append("exclusive wait: add_wait_queue_exclusive() keeps the tail queueing, but a "
					 "waiter woken exclusively that then leaves on a signal or a timeout may swallow "
					 "the wakeup, where finish_wait() would not pass it on either")
			u.confidence = lower(u.confidence)
		u.caveats.append("finish_wait() becomes remove_wait_queue() on every exit; each exit path removes "
				 "the entry once")

	def schedules(self, ft, s, e, what):
		"""["line:col"] of the schedule() calls in m[s:e], as spatch numbers
		them; refuses a scheduler with no wait_woken() form.  The rules
		rewrite the call where it stands (an unbraced 'if (!done)
		schedule();', a tested 'schedule_timeout(t) == 0'): wait_woken()
		returns what schedule_timeout() does, the time left."""
		t = ft.t
		out = []
		for name, pos, po, pc in self.calls_in(ft, s, e, list(self.kn.schedulers)):
			if not self.kn.schedulers[name]:
				raise Refuse("manual", "the loop sleeps in %s(), which has no wait_woken() form" % name)
			ls = line_start(t, pos)
			out.append("%d:%d" % (t.count("\n", 0, ls) + 1, pos - ls))
		if not out:
			raise Refuse("manual", "no schedule() between %s() and the end of the loop" % what)
		return out

	def rewrite_prepare_to_wait(self, u):
		"""Run cocci/fix_prepare_to_wait.cocci on the unit's loop."""
		rel = u.rel
		ft = self.text(rel)
		spec = dict((k, v) for k, v in u.ptw.items() if k != "prim")
		new = self.spatch_text(ft.t, os.path.basename(rel), PREPARE_RULE,
				       {"NESTSLEEP_SITES": json.dumps(spec)})
		if new is None or new == ft.t:
			raise Refuse("manual", "%s could not rewrite the %s() loop in this statement context"
				     % (os.path.basename(PREPARE_RULE), u.ptw["prim"]))
		for e in text_edits(ft.t, wrap_long(ft.t, new)):
			u.add(rel, e)

	def check_exits(self, ft, bo, bc, fins, what):
		"""Inside the loop, a removal must be followed by return: a break
		would reach the removal after the loop a second time."""
		m = ft.m
		for fn, p, po, pc in fins:
			if bo < p < bc:
				after = m[pc + 1:]
				mm = re.match(r"\s*;\s*(\w+)", after)
				if not mm or mm.group(1) != "return":
					raise Refuse("manual", "%s() inside the loop is not followed by return; a second "
						     "removal would corrupt the queue" % what)
		outside = [x for x in fins if not (bo < x[1] < bc)]
		if len(outside) != 1 or outside[0][1] < bc:
			raise Refuse("manual", "expected one %s() after the loop" % what)
		for kw in re.finditer(r"\bgoto\b", m[bo:bc]):
			raise Refuse("manual", "a goto leaves the wait loop")
		between = m[bc + 1:outside[0][1]]
		if between.strip():
			# the removal must come right after the loop (labels and
			# __set_current_state(TASK_RUNNING) allowed)
			rest = re.sub(r"__set_current_state\s*\(\s*TASK_RUNNING\s*\)\s*;|set_current_state\s*\(\s*"
				      r"TASK_RUNNING\s*\)\s*;", "", between)
			if rest.strip() and not re.match(r"^\s*(?:while\s*\([^;]*\)\s*;)?\s*$", rest):
				raise Refuse("manual", "code between the end of the loop and %s()" % what)

	# -- set_current_state loops ---------------------------------------------

	def setter_loop(self, ft, first):
		"""(start, body open, body close) of the loop whose top holds the
		setter first, or of the loop right after it; refuses otherwise."""
		m = ft.m
		loop = self.loop_of(ft, first[1])
		if loop:
			return loop
		lstart = next_nonspace(m, first[3] + 2)
		if not re.match(r"(for|while|do)\b", m[lstart:lstart + 6]):
			raise Refuse("manual", "%s() is neither at the top of a loop nor right before one" % first[0])
		bo = m.find("{", lstart)
		bc = match_close(m, bo) if bo >= 0 else -1
		if bc < 0:
			raise Refuse("manual", "the loop has no braces")
		return lstart, bo, bc

	def later_setters(self, ft, setters, bo, bc):
		"""Every setter after the first must be in the loop m[bo:bc], right
		after a schedule() (the re-arm of a loop that sets its state
		before it); the rules drop them all."""
		m = ft.m
		for name, p, po, pc, st in setters[1:]:
			if not (bo < p < bc):
				raise Refuse("manual", "%s(%s) outside the wait loop" % (name, st))
			before = m[open_block(m, p) + 1:p]
			if not re.search(r"\bschedule(?:_timeout)?\s*\([^;]*\)\s*;\s*$", before):
				raise Refuse("manual", "%s() in the middle of the loop, not right after schedule()" % name)
			self.statement(ft, p, pc, name)

	def plan_set_current_state(self, f, u):
		rel, ft, t, m, o, c = self.loop_site(f)
		setters = []
		for name, p, po, pc in self.calls_in(ft, o, c, ["set_current_state", "__set_current_state"]):
			st = flat(t, m, po + 1, pc)
			if st != "TASK_RUNNING":
				setters.append((name, p, po, pc, st))
		if not setters:
			raise Refuse("manual", "cannot find the set_current_state() call")
		state = setters[0][4]
		if any(x[4] != state for x in setters):
			raise Refuse("manual", "the function sets different task states")
		if state not in ("TASK_INTERRUPTIBLE", "TASK_UNINTERRUPTIBLE", "TASK_KILLABLE", "TASK_IDLE"):
			raise Refuse("manual", "unusual task state %s" % state)
		adds = self.calls_in(ft, o, c, ["add_wait_queue", "add_wait_queue_exclusive"])
		if not adds:
			self.plan_own_queue(f, u, setters, state)
			return
		qa = [flat(t, m, x, y) for x, y in split_top(m, adds[0][2] + 1, adds[0][3])]
		if len(adds) > 1 or len(qa) != 2 or not qa[1].startswith("&"):
			raise Refuse("manual", "the thread is on several wait queues")
		q, ent = qa
		entry = ent[1:]
		if not re.match(r"^[A-Za-z_]\w*$", entry):
			raise Refuse("manual", "the wait entry %s is not a local variable" % ent)
		# The edit is cocci/fix_set_current_state.cocci's "body" pass
		# (rewrite_own_queue()); this checks the shape it rewrites.
		dq = re.compile(r"\bDECLARE_WAITQUEUE\s*\(\s*%s\s*,\s*current\s*\)\s*;" % re.escape(entry)).search(m, o, c)
		if dq:
			entry_decl = "declare"
		else:
			dv = re.compile(r"\b(?:wait_queue_entry_t|struct\s+wait_queue_entry)\s+%s\s*;" % re.escape(entry)) \
				.search(m, o, c)
			iw = self.calls_in(ft, o, c, ["init_waitqueue_entry"])
			iw = [x for x in iw if flat(t, m, x[2] + 1, x[3]) == "&%s, current" % entry]
			if not dv or len(iw) != 1:
				raise Refuse("manual", "the wait entry %s is neither DECLARE_WAITQUEUE(%s, current) nor "
					     "initialized with init_waitqueue_entry(&%s, current)" % (entry, entry, entry))
			self.statement(ft, iw[0][1], iw[0][3], "init_waitqueue_entry")
			entry_decl = "init"
		# the loop: set_current_state() at its top (or right before it, and
		# again after schedule())
		first = setters[0]
		ls0, _, _ = self.statement(ft, first[1], first[3], first[0])
		loop = self.loop_of(ft, first[1])
		lstart, bo, bc = self.setter_loop(ft, first)
		if re.match(r"do\b", m[lstart:lstart + 3]):
			raise Refuse("manual", "the loop is a do ... while loop, which spatch 1.1.1 does not match "
				     "(\"not supported\"): convert it by hand")
		if adds[0][1] > ls0:
			raise Refuse("manual", "add_wait_queue() comes after the wait starts")
		self.later_setters(ft, setters, bo, bc)
		rems = self.calls_in(ft, o, c, ["remove_wait_queue"])
		if not any(flat(t, m, x[2] + 1, x[3]) == "%s, %s" % (q, ent) for x in rems if x[1] > bc):
			raise Refuse("manual", "no remove_wait_queue() after the loop")
		after = next_nonspace(m, bc + 1)
		u.own = {"func": f["function"], "entry": entry, "queue": q, "state": state,
			 "sched": self.schedules(ft, bo, bc, first[0]), "onqueue": True, "entry_decl": entry_decl,
			 # the restore right after the loop goes; the others stay
			 "restored": bool(re.match(r"(?:__)?set_current_state\s*\(\s*TASK_RUNNING\s*\)\s*;",
						   m[after:])),
			 "comments": self.setter_comments(t, setters)}
		lstart = loop[0] if loop else ls0
		u.reasons.append("the %s() loop on %s becomes a wait_woken() loop" % (first[0], q))
		self.wakers(u, rel, f["function"], q, state, bool(re.search(r"\bkthread_should_stop\s*\(",
									   m[min(lstart, ls0):bc])), (min(lstart, ls0), bc))
		u.confidence = lower(u.confidence)

	# -- set_current_state loops of a thread on no queue: a queue of its own --

	def plan_own_queue(self, f, u, setters, state):
		"""The set_current_state() loop of a thread that waits on no wait
		queue gets a queue of its own (Bluetooth hidp, 5da8e47d849d):
		static DECLARE_WAIT_QUEUE_HEAD(<thread>_wq), wait_woken() in the
		loop, every wake_up_process() of the thread -> wake_up*() of the
		queue, and entries the thread queues on other wait queues with
		init_waitqueue_entry(&e, current) forwarded to it by
		<thread>_wake_function().  The loop edit is
		cocci/fix_set_current_state.cocci (rewrite_own_queue()); this picks
		the loop, the names and the wakers, or refuses."""
		rel, ft, t, m, o, c = self.loop_site(f)
		func = f["function"]
		first = setters[0]
		self.statement(ft, first[1], first[3], first[0])
		lstart, bo, bc = self.setter_loop(ft, first)
		if re.match(r"do\b", m[lstart:lstart + 3]):
			raise Refuse("manual", "own queue: the loop is a do ... while loop, which spatch 1.1.1 does not "
				     "match (\"not supported\"); give the thread a wait queue of its own by hand")
		if t[line_start(t, lstart):lstart].strip():
			raise Refuse("manual", "the loop statement shares its line with other code")
		self.later_setters(ft, setters, bo, bc)
		body = m[bo:bc]
		# an inner sleep that replaces the pending one by design
		if re.search(r"\bkthread_parkme\s*\(", body):
			raise Refuse("manual", "own queue: the loop parks the thread with kthread_parkme(), whose sleep "
				     "replaces the pending one by design and which only kthread_unpark()'s direct "
				     "wakeup ends; a queue of its own would not change that")
		lastsched = max([mm.start() for mm in re.finditer(r"\bschedule(?:_timeout)?\s*\(", body)] or [-1])
		for mm in re.finditer(r"\b(msleep|msleep_interruptible|ssleep|usleep_range)\s*\(", body):
			if mm.start() > lastsched:
				raise Refuse("manual", "own queue: the loop sleeps in %s() with no schedule() after it: "
					     "that sleep replaces the pending one by design (a poll), there is no wakeup "
					     "to keep" % mm.group(1))
		for kw in re.finditer(r"\b(goto|return)\b", body):
			raise Refuse("manual", "own queue: a %s leaves the wait loop, which would leave the entry on the "
				     "thread's queue" % kw.group(1))
		sched = self.schedules(ft, bo, bc, first[0])
		if self.rule is None:
			raise Refuse("manual", "no tree facts to search the wakers with")
		th = self.rule.thread_of(rel, func)
		thread = sorted(e[1] for e in th.entries if e[0] == rel)[0] if any(
			e[0] == rel for e in th.entries) else func
		# one queue per thread and file: each unit is a patch of its own,
		# and two would each declare it
		own = self.own_threads
		if own.get((rel, thread), func) != func:
			raise Refuse("manual", "own queue: %s(), another loop of the thread %s(), already gets its queue; "
				     "convert both loops together by hand" % (own[(rel, thread)], thread))
		taken_file = idents(m)
		qname = pick_name(taken_file, ["%s_wq" % thread])
		wfname = pick_name(taken_file, ["%s_wake_function" % thread])
		taken, _ = self.taken_names(ft, ft.offset(f["line"], f["col"]))
		entry = pick_name(set(taken), ["wait"])
		q = "&" + qname
		forwards = self.rule.forwarded_entries(th)
		for r, fn, ent, kind, s0, e0 in forwards:
			if r != rel:
				raise Refuse("manual", "own queue: %s() in %s queues the thread on another wait queue "
					     "(entry %s), and the thread's queue would be static to %s; forward it by "
					     "hand" % (fn, r, ent, rel))
		u.own = {"func": func, "entry": entry, "queue": q, "state": state, "sched": sched,
			 "loop": t.count("\n", 0, lstart) + 1, "loop_at": lstart, "qname": qname,
			 "decl": self.last_top_decl(ft, o, c),
			 # the restores of TASK_RUNNING go only when nothing else in
			 # the function sets a state
			 "restores": not re.search(r"\b(?:%s|set_special_state)\s*\(" % "|".join(
				 sorted(self.kn.words.prepare)), m[o:c]),
			 "comments": self.setter_comments(t, setters)}
		u.reasons.append("the thread waits on no wait queue: it gets one of its own (%s, as the Bluetooth "
				 "hidp fix did), and the %s() loop becomes a wait_woken() loop on it"
				 % (qname, first[0]))
		self.rule.check({"rel": rel, "func": func, "queue": q, "state": state,
				 "stop_tested": bool(re.search(r"\bkthread_should_stop\s*\(", m[lstart:bc])),
				 "span": (min(lstart, first[1]), bc), "own": True,
				 "forwarded": [(r, fn, ent) for r, fn, ent, _, _, _ in forwards]}, u)
		users = [o]
		# Text: the forwarded entries live in other functions (the thread
		# function), outside the rule's one function; their declaration
		# and init_waitqueue_entry() are plain statements, and the wake
		# function they name must be written before that function, at
		# file scope, where a '+' line of a rule has no statement to
		# attach to.
		if forwards:
			interruptible = "INTERRUPTIBLE" in state and "UNINTERRUPTIBLE" not in state
			names = set((r, fn, ent) for r, fn, ent, _, _, _ in forwards)
			for r, fn, ent, kind, s0, e0 in forwards:
				if kind == "declare":
					u.add(rel, Edit(s0, e0, "DEFINE_WAIT_FUNC(%s, %s);" % (ent, wfname)))
					continue
				self.delete_stmt(ft, u, rel, line_start(t, s0), line_end(t, e0) + 1)
				# its declaration, maybe shared with other entries
				# (hidp: 'wait_queue_t ctrl_wait, intr_wait;')
				span = self.rule.func_span(r, fn)
				dv = re.compile(r"\b(?:wait_queue_entry_t|struct\s+wait_queue_entry)\s+"
						r"((?:\w+\s*,\s*)*%s\s*(?:,\s*\w+\s*)*);" % re.escape(ent))
				dm = dv.search(m, span[1], span[2])
				if not dm:
					raise Refuse("manual", "own queue: cannot find the declaration of the entry %s "
						     "in %s()" % (ent, fn))
				ents = [x.strip() for x in dm.group(1).split(",")]
				if any((r, fn, x) not in names for x in ents):
					raise Refuse("manual", "own queue: the entry %s of %s() shares its declaration with "
						     "an entry that is not forwarded" % (ent, fn))
				ind = indent_at(t, dm.start())
				u.add(rel, Edit(dm.start(), dm.end(), ("\n" + ind).join(
					"DEFINE_WAIT_FUNC(%s, %s);" % (x, wfname) for x in ents), key=("own-entry", dm.start())))
			fns = sorted(set((self.rule.func_span(r, fn)[0], fn) for r, fn, _, _, _, _ in forwards))
			at = self.top_start(ft, fns[0][0])
			users.append(at)
			sig = wrap_call("", "static int " + wfname, ["struct wait_queue_entry *wait", "unsigned int mode",
								      "int sync", "void *key"], tail="")
			u.add(rel, Edit(at, at, "%s\n{\n\t%s(%s);\n\treturn 0;\n}\n\n" % (
				"\n".join(sig), "wake_up_interruptible" if interruptible else "wake_up", q),
					key=("own-wakefn", wfname)))
			u.reasons.append("the entries the thread queues on other wait queues (%s) forward their wakeups "
					 "to %s through %s(), so that woken_wake_function() sees them" % (
						 ", ".join(sorted(set(x[2] for x in forwards))), qname, wfname))
		# Text: the queue head is a file-scope definition, which a rule
		# cannot add ahead of the first function that uses it.
		users += [x["s"] for x in u.waker_sites.get(rel, {}).values()]
		first_use = self.top_start(ft, min(users))
		at = first_use
		statics = [mm for mm in re.finditer(r"^static\s+(?:DECLARE|DEFINE)_\w+\([^;\n]*\);[ \t]*\n|"
						    r"^static\s+LIST_HEAD\([^;\n]*\);[ \t]*\n", t[:first_use], re.M)]
		if statics:
			at = statics[-1].end()
			text = "static DECLARE_WAIT_QUEUE_HEAD(%s);\n" % qname
		else:
			text = "static DECLARE_WAIT_QUEUE_HEAD(%s);\n\n" % qname
		u.add(rel, Edit(at, at, text, key=("own-queue", qname)))
		u.caveats.append("own queue: %s is one queue for every instance of the thread; a wakeup of one "
				 "instance also wakes the others, which test their condition and sleep again" % qname)
		own[(rel, thread)] = func
		u.confidence = lower(u.confidence)

	def setter_comments(self, t, setters):
		"""The lines (0-based) of the comments right above the setters,
		which spatch drops with them and own_edits() puts back.  Its last
		paragraph goes with the setter when that paragraph, and only it,
		speaks of the setter, as hidp's fix (5da8e47d849d) dropped "Note:
		set_current_state() performs any necessary memory-barriers for
		us."; a comment that is all about the setter goes whole."""
		comments = set()
		lines = t.split("\n")
		for name, p, po, pc, st in setters:
			k = t.count("\n", 0, p) - 1
			if k < 0 or not lines[k].strip().endswith("*/"):
				continue
			end = k
			while k > 0 and "/*" not in lines[k]:
				k -= 1
			block = list(range(k, end + 1))
			said = re.compile(r"\b(?:__)?%s\s*\(" % re.escape(name.lstrip("_")))
			seps = [i for i in block if lines[i].strip() == "*"]
			closing = [end] if lines[end].strip() == "*/" else []
			if seps:
				tail = [i for i in block if i >= seps[-1] and i not in closing]
				if any(said.search(lines[i]) for i in tail) and \
						not any(said.search(lines[i]) for i in block if i not in tail):
					block = [i for i in block if i not in tail]
			elif any(said.search(lines[i]) for i in block):
				block = []
			comments.update(block)
		return sorted(comments)

	def last_top_decl(self, ft, o, c):
		"""The line of the last of the declarations that open the body
		m[o:c] (a statement at a time, at the body's own level), or 0."""
		t, m = ft.t, ft.m
		j = o + 1
		line = 0
		while True:
			j = next_nonspace(m, j)
			if j >= c or m[j] in "{}":
				return line
			k, depth = j, 0
			while k < c and not (m[k] == ";" and depth == 0):
				if m[k] in "([{":
					depth += 1
				elif m[k] in ")]}":
					depth -= 1
				k += 1
			if k >= c or not is_decl_line(" ".join(m[j:k + 1].split())):
				return line
			line = t.count("\n", 0, j) + 1
			j = k + 1

	def top_start(self, ft, pos):
		"""Where a file-scope item can be inserted before the function whose
		definition starts at pos: after the previous top-level item and
		the blank lines that follow it, so before the function's own
		leading comment."""
		t, m = ft.t, ft.m
		j = max(m.rfind(";", 0, pos), m.rfind("}", 0, pos))
		while j >= 0 and open_block(m, j + 1) >= 0:
			j = max(m.rfind(";", 0, j), m.rfind("}", 0, j))
		s = line_end(t, j) + 1 if j >= 0 else 0
		while s < len(t) and t[s] == "\n":
			s += 1
		return s

	def rewrite_own_queue(self, u):
		"""Run cocci/fix_set_current_state.cocci on the unit's loop, in two
		passes: "body" (schedule() by position, the setters), then "wrap"
		(the queue around the loop, the entry), on the file "body" wrote,
		with the loop's line as it is there."""
		rel = u.rel
		ft = self.text(rel)
		spec = dict((k, v) for k, v in u.own.items() if k not in ("loop_at", "qname", "comments"))
		name = os.path.basename(rel)
		mid = self.spatch_text(ft.t, name, SCS_RULE, {"NESTSLEEP_SITES": json.dumps(dict(spec, **{"pass": "body"}))})
		if mid is None or mid == ft.t:
			raise Refuse("manual", "%s could not rewrite the loop body" % os.path.basename(SCS_RULE))
		if u.own.get("onqueue"):
			check_on_queue(ft.t, mid, u.own)
			for e in own_edits(ft.t, mid, u.own["comments"]):
				u.add(rel, e)
			return
		# the loop's line in the body pass's output: lines removed above it
		shift = sum(ft.t.count("\n", e.s, e.e) - e.text.count("\n")
			    for e in text_edits(ft.t, mid) if e.e <= u.own["loop_at"])
		spec = dict(spec, loop=u.own["loop"] - shift, **{"pass": "wrap"})
		new = self.spatch_text(mid, name, SCS_RULE, {"NESTSLEEP_SITES": json.dumps(spec)})
		if new is None or new == mid or "add_wait_queue(%s, &%s);" % (u.own["queue"], u.own["entry"]) not in new:
			raise Refuse("manual", "%s could not put the queue around the loop in this statement context"
				     % os.path.basename(SCS_RULE))
		if spec["decl"]:
			# the leading declarations are above the loop: the earlier
			# passes did not move them
			last = self.spatch_text(new, name, SCS_RULE, {"NESTSLEEP_SITES": json.dumps(dict(spec, **{
				"pass": "decl"}))})
			new = new if last is None else last
		if "DEFINE_WAIT_FUNC(%s, woken_wake_function);" % u.own["entry"] not in new:
			raise Refuse("manual", "%s could not declare the wait entry" % os.path.basename(SCS_RULE))
		for e in own_edits(ft.t, new, u.own["comments"]):
			u.add(rel, e)


def check_on_queue(old, new, spec):
	"""The "body" pass on a loop already on a queue did all of its
	edits, or the unit is refused: a half-converted wait (an entry
	woken by default_wake_function() under wait_woken(), a schedule()
	left) must never ship."""
	entry = spec["entry"]
	restores = r"\b(?:__)?set_current_state\s*\(\s*TASK_RUNNING\s*\)"
	missing = []
	if "DEFINE_WAIT_FUNC(%s, woken_wake_function);" % entry not in new:
		missing.append("the entry %s" % entry)
	if spec["entry_decl"] == "init" and re.search(r"\binit_waitqueue_entry\s*\(\s*&\s*%s\b"
							 % re.escape(entry), new):
		missing.append("init_waitqueue_entry()")
	if len(re.findall(r"\bwait_woken\s*\(\s*&%s\b" % re.escape(entry), new)) - \
			len(re.findall(r"\bwait_woken\s*\(\s*&%s\b" % re.escape(entry), old)) != len(spec["sched"]):
		missing.append("a schedule()")
	if len(re.findall(restores, old)) - len(re.findall(restores, new)) != int(spec["restored"]):
		missing.append("the restore of TASK_RUNNING after the loop")
	if missing:
		raise Refuse("manual", "%s did not rewrite %s in this statement context"
			     % (os.path.basename(SCS_RULE), ", ".join(missing)))


def unified_diff(old, new, shown):
	"""GNU diff -u -p of two texts, as 'a/shown' and 'b/shown'.  Its
	minimal diff keeps an unchanged line (a closing brace, a blank line)
	as context where difflib.unified_diff() shows it removed and added
	again, and -p names the function in each hunk header, as git does."""
	tmp = tempfile.mkdtemp(prefix="nestsleep-diff-")
	try:
		paths = []
		for name, text in (("a", old), ("b", new)):
			paths.append(os.path.join(tmp, name))
			with open(paths[-1], "w", errors="surrogateescape", newline="") as fp:
				fp.write(text)
		proc = subprocess.run(["diff", "-u", "-p", "--label", "a/" + shown, "--label", "b/" + shown] + paths,
				      stdout=subprocess.PIPE, stderr=subprocess.PIPE)
		if proc.returncode > 1:
			raise RuntimeError("diff failed: %s" % proc.stderr.decode(errors="replace").strip())
		return proc.stdout.decode(errors="surrogateescape")
	finally:
		shutil.rmtree(tmp, ignore_errors=True)


def own_edits(old, new, comments):
	"""text_edits(old, new) for fix_set_current_state.cocci's output, with
	two text fixes (spatch 1.1.1 cannot be told to do either): the comment
	right above a removed set_current_state() (lines 'comments' of old,
	0-based) is put back, as hidp's fix kept its comment, and a blank line
	left right after a '{' by a removed setter goes (checkpatch --strict:
	"Blank lines aren't necessary after an open brace")."""
	a = _LINES.findall(old)
	b = _LINES.findall(new)
	starts = [0]
	for line in a:
		starts.append(starts[-1] + len(line))
	keep = set(comments)
	out = []
	for op, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
		if op == "equal":
			continue
		text = "".join(a[i] for i in range(i1, i2) if i in keep) + "".join(b[j1:j2])
		e = i2
		if not text and i1 > 0 and a[i1 - 1].rstrip().endswith("{") and i2 < len(a) and not a[i2].strip():
			e = i2 + 1
		elif not text.strip("\n") and text and i1 > 0 and a[i1 - 1].rstrip().endswith("{"):
			text = ""
		out.append(Edit(starts[i1], starts[e], text))
	return out


def wrap_long(old, new):
	"""new with its added 'if (cond)' and 'while (!(cond))' lines wrapped
	at the top-level && and || to MAX_COLS columns.  This is the one layout
	step left to Python: spatch 1.1.1 prints an expression it moves (the
	wait's condition) on one line, whatever its length, and breaks lines
	only between the arguments of a call it writes."""
	seen = set(_LINES.findall(old))
	out = []
	for line in join_else(old, _LINES.findall(new)):
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
	Fixer.if_body()."""
	seen = set(_LINES.findall(old))
	out = _LINES.findall(new)
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
	lines = keep_blank(_LINES.findall(old), lines)
	sm = difflib.SequenceMatcher(None, _LINES.findall(old), lines, autojunk=False)
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


def text_edits(old, new):
	"""The Edits that turn text old into new, a run of changed lines each."""
	a = _LINES.findall(old)
	b = _LINES.findall(new)
	starts = [0]
	for line in a:
		starts.append(starts[-1] + len(line))
	out = []
	for op, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
		if op != "equal":
			out.append(Edit(starts[i1], starts[i2], "".join(b[j1:j2])))
	return out


_LINES = re.compile(r"[^\n]*\n|[^\n]+$")


def kind_of(f):
	return {"wait_event": "wait_event", "prepare_to_wait": "prepare_to_wait",
		"set_current_state": "set_current_state"}.get(f["shape"], f["shape"])


def min_conf(a, b):
	order = ["low", "medium", "high"]
	return order[min(order.index(a), order.index(b))]


def apply_edits(text, edits):
	out = []
	last = 0
	for e in sorted(edits, key=Edit.order):
		out.append(text[last:e.s])
		out.append(e.text)
		last = e.e
	out.append(text[last:])
	return "".join(out)


def combined_diff(fixer, units):
	"""One diff for all units, per file (units never overlap: a unit is a
	whole function)."""
	per = {}
	for u in units:
		for rel, edits in u.edits.items():
			per.setdefault(rel, [])
			for e in edits:
				if e.key and any(x.key == e.key for x in per[rel]):
					continue
				per[rel].append(e)
	return fixer.diff(per)
