# SPDX-License-Identifier: GPL-2.0-only
"""The text a rewrite works on and what it changes: a source file as the
rewrites see it (FileText: its bytes, its mask, line:col offsets), an Edit
of it, the Unit that gathers the edits of one patch, the Refuse that turns
a unit down with its reason, and the steps between texts and edits
(text_edits(), apply_edits(), unified_diff())."""

import difflib
import os
import shutil
import subprocess
import tempfile

from nestsleep.fix.ctext import LINES, mask


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
		self.restore_call = False  # entries.py: TASK_RUNNING restored before the call
		self.setter = None     # the setter for move_setter.cocci: moved or dropped
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


def text_edits(old, new):
	"""The Edits that turn text old into new, a run of changed lines each."""
	a = LINES.findall(old)
	b = LINES.findall(new)
	starts = [0]
	for line in a:
		starts.append(starts[-1] + len(line))
	out = []
	for op, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
		if op != "equal":
			out.append(Edit(starts[i1], starts[i2], "".join(b[j1:j2])))
	return out


def apply_edits(text, edits):
	out = []
	last = 0
	for e in sorted(edits, key=Edit.order):
		out.append(text[last:e.s])
		out.append(e.text)
		last = e.e
	out.append(text[last:])
	return "".join(out)


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


def lower(conf):
	return {"high": "medium", "medium": "low", "low": "low"}[conf]


def min_conf(a, b):
	order = ["low", "medium", "high"]
	return order[min(order.index(a), order.index(b))]
