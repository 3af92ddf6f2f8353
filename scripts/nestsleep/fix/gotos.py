# SPDX-License-Identifier: GPL-2.0-only
"""Gotos that leave a prepare_to_wait*() loop (prepare_to_wait.py).

The rewrite keeps every goto: it turns the one finish_wait() after the
loop into remove_wait_queue() and queues the entry once, before the loop.
That is only right when each goto that leaves the loop reaches that
finish_wait() on every path, and when nothing else reaches it:

  every path   from the goto's label, a straight run of plain statements,
               labels and "goto X;" (followed) up to the finish_wait():
               no return, no branch, not past the end of the function
               (6.1 net/sctp/socket.c:9293, "do_dead: err = -ESRCH; goto
               out;");
  queued       every goto to a label on such a path comes from the loop
               body or from another such path, and a label on it is
               entered by fall-through only from the loop's end, a
               return, a goto or a statement of such a path.
               remove_wait_queue() is list_del() of the entry
               (6.1 kernel/sched/wait.c:50, include/linux/wait.h:209): on
               an entry that add_wait_queue() never queued, or queued and
               already removed, it unlinks what is not there; finish_wait()
               (kernel/sched/wait.c:392) tests list_empty_careful() first
               and tolerates both, so a path the old code got away with is
               refused here.

check_gotos() refuses, with the reason, whatever does not hold."""

import re

from nestsleep.fix.ctext import match_close, next_nonspace, prev_nonspace
from nestsleep.fix.edits import Refuse

IDENT = r"[A-Za-z_]\w*"
LABEL = re.compile(r"(?<![\w:])(%s)\s*:(?!:)" % IDENT)
GOTO = re.compile(r"\bgoto\b")
GOTO_STMT = re.compile(r"goto\s+(%s)\s*;" % IDENT)
BRANCH = re.compile(r"(?:if|else|for|while|do|switch|break|continue|case|default)\b")
KEYWORDS = {"default", "case"}


def labels_in(m, o, c):
	"""{label: offset of its name} of the statement labels in m[o:c]."""
	out = {}
	for mm in LABEL.finditer(m, o, c):
		b = prev_nonspace(m, mm.start() - 1)
		if mm.group(1) in KEYWORDS or (b >= 0 and m[b] not in ";{}:"):
			continue
		out[mm.group(1)] = mm.start()
	return out


def gotos_in(m, o, c):
	"""[(label, offset, end)] of the goto statements in m[o:c]."""
	out = []
	for mm in GOTO.finditer(m, o, c):
		g = GOTO_STMT.match(m, mm.start())
		if not g:
			raise Refuse("manual", "a computed goto in the function")
		out.append((g.group(1), mm.start(), g.end()))
	return out


def line_of(t, i):
	return t.count("\n", 0, i) + 1


class Walk:
	"""The straight-line paths from labels to the finish_wait() at fin."""

	def __init__(self, ft, o, c, fin, labels):
		self.ft, self.o, self.c, self.fin, self.labels = ft, o, c, fin, labels
		self.seen = set()       # labels on a path
		self.spans = []         # (start, end) of each statement on a path

	def label_end(self, name):
		p = self.labels[name]
		return self.ft.m.index(":", p) + 1

	def walk(self, name, bo, bc, first):
		"""Follow label name to finish_wait(); raise Refuse if it may
		return or branch first."""
		here = set()
		while name is not None:
			if name not in self.labels:
				raise Refuse("manual", "a goto to a label that cannot be found (%s)" % name)
			if bo < self.labels[name] < bc:
				return
			if self.labels[name] < bc:
				raise Refuse("manual", "a goto from the wait loop jumps back before the loop to %s:; the "
					     "entry would be queued twice" % name)
			if name in here:
				raise Refuse("manual", "the gotos from %s: never reach finish_wait()" % first)
			if name in self.seen:
				return
			here.add(name)
			name = self.run(name, first)
		self.seen |= here

	def run(self, name, first):
		"""From label name, the next label to follow, or None at fin."""
		m, fin = self.ft.m, self.fin
		i = self.label_end(name)
		while True:
			i = next_nonspace(m, i)
			if i == fin[1]:
				return None
			if i >= self.c or m[i] == "}":
				raise Refuse("manual", "a goto from the wait loop to %s: reaches the end of the function "
					     "without finish_wait()" % first)
			lm = LABEL.match(m, i)
			if lm and lm.group(1) not in KEYWORDS:
				i = lm.end()
				continue
			g = GOTO_STMT.match(m, i)
			if g:
				self.spans.append((i, g.end()))
				return g.group(1)
			if re.match(r"return\b", m[i:i + 7]):
				if self.labels[first] > fin[1] and not m[fin_end(m, fin):self.labels[first]].strip(" \t\n;"):
					raise Refuse("manual", "a goto from the wait loop to %s: jumps past finish_wait()" % first)
				raise Refuse("manual", "a goto from the wait loop reaches %s:, which returns before "
					     "finish_wait()" % first)
			if m[i] == "{" or BRANCH.match(m, i):
				raise Refuse("manual", "the path from %s: to finish_wait() branches; only a straight run "
					     "of statements is followed" % first)
			e = stmt_end(m, i, self.c)
			self.spans.append((i, e))
			i = e


def fin_end(m, fin):
	"""Offset after the ';' of the finish_wait() statement fin."""
	return m.index(";", fin[3]) + 1


def stmt_end(m, i, c):
	"""Offset after the ';' that ends the plain statement at m[i]."""
	j = i
	while j < c:
		if m[j] in "([":
			j = match_close(m, j) + 1
			continue
		if m[j] in "{}":
			raise Refuse("manual", "a block on the path from a goto label to finish_wait()")
		if m[j] == ";":
			return j + 1
		j += 1
	raise Refuse("manual", "a statement on the path to finish_wait() does not end")


def check_gotos(ft, o, c, bo, bc, fin):
	"""Refuse unless every goto that leaves the loop m[bo:bc] reaches the
	finish_wait() fin (name, pos, open, close) after it on every path, and
	nothing reaches those paths but the loop."""
	m, t = ft.m, ft.t
	labels = labels_in(m, o, c)
	gotos = gotos_in(m, o, c)
	inner = [g for g in gotos if bo < g[1] < bc]
	for name, p in labels.items():
		if bo < p < bc and any(not (bo < g[1] < bc) for g in gotos if g[0] == name):
			raise Refuse("manual", "a goto enters the wait loop at %s:" % name)
	w = Walk(ft, o, c, fin, labels)
	for name, gp, ge in inner:
		w.walk(name, bo, bc, name)
	# the labels between the loop and finish_wait(), on the loop's own exit
	w.seen |= set(n for n, p in labels.items() if bc < p < fin[1])
	for name, gp, ge in gotos:
		if name in w.seen and not (bo < gp < bc) and not any(s <= gp < e for s, e in w.spans):
			raise Refuse("manual", "%s: is also reached by the goto on line %d, where the entry is not "
				     "queued by the wait loop: remove_wait_queue() there would unlink an entry that "
				     "add_wait_queue() never queued, or one already removed" % (name, line_of(t, gp)))
	for name in w.seen:
		check_entry(ft, w, name, bc)
	return any(not (bo < labels.get(g[0], -1) < bc) for g in inner)


def check_entry(ft, w, name, bc):
	"""Label name is entered by fall-through only from the loop's end, a
	return, a goto, another label on a path or a statement of a path."""
	m = ft.m
	b = prev_nonspace(m, w.labels[name] - 1)
	if b == bc:
		return
	if m[b] == ":":
		prev = [n for n, p in w.labels.items() if w.label_end(n) == b + 1]
		if prev and prev[0] in w.seen:
			return
	elif m[b] == ";":
		if any(s <= b < e for s, e in w.spans):
			return
		s = b - 1
		while s > w.o and m[s] not in ";{}:":
			s -= 1
		if re.match(r"(?:return|goto)\b", m[next_nonspace(m, s + 1):b]):
			return
	raise Refuse("manual", "%s: is also entered by fall-through from code the wait loop does not "
		     "reach; remove_wait_queue() there could unlink an entry never queued" % name)
