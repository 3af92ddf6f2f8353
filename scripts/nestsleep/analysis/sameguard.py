# SPDX-License-Identifier: GPL-2.0-only
"""Same guard: a window opened under 'if (E)' cannot reach a call that runs
only when E is false, nor a call after 'if (E) finish_wait(...);', as long
as the function does not change E.

The rule follows every path from the state setter to the call, and
Coccinelle does not correlate two tests of one condition.  tap_do_read()
and vhost_chr_read_iter() test !noblock around both prepare_to_wait() and
finish_wait(); snd_hdac_bus_get_response() tests !bus->polling_mode around
prepare_to_wait() and again to choose schedule_timeout() over msleep().
Each reported path there goes through the other branch of the second test,
which no run takes.

E must be free of calls and assignments, and nothing in the function may
assign it, take its address, or assign a prefix of it (bus in
bus->polling_mode).  A callee or another thread that changes E is not
seen: the check trusts that a condition tested twice in one function is
meant to be the same both times.

A test of the task's own state is path sensitivity of another kind: a
call that runs only where get_current_state() == TASK_RUNNING,
task_is_running(current) or READ_ONCE(current->__state) == TASK_RUNNING
said so, with no state setter in between, runs in TASK_RUNNING whatever
set the state before (a freezable kthread's try_to_freeze() after its
work path, or a waker, set TASK_RUNNING).  The tests are sleep_info.json
state_tests; this one also applies to states carried out of a helper."""

import re

from nestsleep.analysis import cfacts

# the window shapes whose setter the Site names (pipeline.WINDOW_SHAPES)
SHAPES = ("set_current_state", "prepare_to_wait")
_CHAIN = re.compile(r"[A-Za-z_]\w*(?:(?:->|\.)[A-Za-z_]\w*)*")


def _one(x):
	"""(expression text, polarity) of one test: '!E' is (E, False)."""
	x, pol = cfacts._strip(x), True
	while x.startswith("!") and not x.startswith("!="):
		x, pol = cfacts._strip(x[1:]), not pol
	return (x, pol)


def atoms(text):
	"""The tests (expression text, polarity) that hold when condition text
	is true, and those when it is false."""
	return cfacts.split_cond(text, _one, lambda a: (a[0], not a[1]))


def _pure(e):
	"""No call, no assignment, no increment in expression text e."""
	return "(" not in e and "++" not in e and "--" not in e and not re.search(r"(^|[^=!<>])=($|[^=])", e)


def running_test(text, reads, running):
	"""True when condition atom text holds exactly when the current task
	is TASK_RUNNING, False when exactly when it is not, else None.
	reads are the expressions that read the state, running the predicates
	that say it is TASK_RUNNING (sleep_info.json state_tests); TASK_RUNNING
	is 0 (include/linux/sched.h)."""
	t, pol = cfacts._strip(re.sub(r"\s+", "", text)), True
	while t.startswith("!") and not t.startswith("!="):
		t, pol = cfacts._strip(t[1:]), not pol
	if t in running:
		return pol
	if t in reads:
		return not pol
	for op in ("==", "!="):
		parts = cfacts._split_top(t, op)
		if len(parts) != 2:
			continue
		a, b = (cfacts._strip(x) for x in parts)
		if b in reads:
			a, b = b, a
		if a in reads and b in ("TASK_RUNNING", "0"):
			return pol if op == "==" else not pol
	return None


def _block_end(toks, j, hi):
	"""Index of the '}' that closes the innermost block around toks[j]."""
	d = 0
	for k in range(j - 1, -1, -1):
		v = toks[k][1]
		if toks[k][0] != "op":
			continue
		if v == "}":
			d += 1
		elif v == "{":
			if d == 0:
				return min(cfacts._match_close(toks, k, "{", "}"), hi)
			d -= 1
	return hi


class SameGuard:
	def __init__(self, tree, facts, kn):
		self.tree, self.facts = tree, facts
		self.restore = set(kn.restore)
		self.running = set(kn.words.set)
		self.setters = frozenset(kn.words.set) | frozenset(kn.words.prepare)
		self.reads, self.predicates = kn.state_reads, kn.state_running
		self._toks = {}

	def _running_ranges(self, toks, lo, hi):
		"""(first, last) token ranges of the body toks[lo:hi] that run only
		when a test of the task's own state said TASK_RUNNING: the branch
		of 'if (running)', the else of 'if (!running)', and the rest of
		the block after 'if (!running) { ...; continue; }' (or break,
		return, goto)."""
		def atom(x):
			v = running_test(x, self.reads, self.predicates)
			return None if v is None else ("RUN", v)
		out = []
		for j in range(lo, hi - 1):
			if toks[j][1] != "if" or toks[j + 1][1] != "(":
				continue
			rp = cfacts._match_close(toks, j + 1, "(", ")")
			pos, neg = cfacts.split_cond(cfacts._text(toks[j + 2:rp]), atom, lambda a: (a[0], not a[1]))
			if not pos and not neg:
				continue
			te = cfacts.stmt_end(toks, rp + 1, hi)
			if ("RUN", True) in pos:
				out.append((rp + 1, te))
			if te + 1 < hi and toks[te + 1][1] == "else":
				if ("RUN", True) in neg:
					out.append((te + 2, cfacts.stmt_end(toks, te + 2, hi)))
			elif ("RUN", True) in neg and cfacts._exits(toks, rp + 1, te, ("return", "goto", "continue", "break")):
				out.append((te + 1, _block_end(toks, j, hi)))
		return out

	def runs_running(self, toks, lo, hi, c):
		"""Whether the call at toks[c] runs only in TASK_RUNNING: it stands
		in a range of _running_ranges() with no state setter between the
		test and the call."""
		for a, b in self._running_ranges(toks, lo, hi):
			if a <= c <= b and not any(toks[k][1] in self.setters and toks[k + 1][1] == "("
						   for k in range(a, c)):
				return True
		return False

	def tokens(self, rel):
		if rel not in self._toks:
			try:
				with open(self.tree.abs[rel], "rb") as f:
					text = f.read().decode("utf-8", "replace")
				self._toks[rel] = cfacts.tokenize(text)
			except (OSError, KeyError):
				self._toks[rel] = []
		return self._toks[rel]

	def _restores(self, toks, a, e):
		"""Whether statement toks[a..e] is one call that restores
		TASK_RUNNING (finish_wait(), __set_current_state(TASK_RUNNING))."""
		if a > e or e >= len(toks):
			return False
		if toks[a][1] == "{" and toks[e][1] == "}":
			a, e = a + 1, e - 1
		if e - a < 3 or toks[a][0] != "id" or toks[a + 1][1] != "(" or toks[e][1] != ";":
			return False
		rp = cfacts._match_close(toks, a + 1, "(", ")")
		if rp != e - 1:
			return False
		if toks[a][1] in self.restore:
			return True
		return toks[a][1] in self.running and cfacts._text(toks[a + 2:rp]) == "TASK_RUNNING"

	@staticmethod
	def _changed(toks, lo, hi, e):
		"""Whether the body toks[lo:hi] may change a member chain of e."""
		for chain in _CHAIN.findall(e):
			if re.match(r"^[A-Z_][A-Z0-9_]*$", chain):
				continue
			parts = re.split(r"(->|\.)", chain)
			for n in range(1, len(parts) + 1, 2):
				pre = parts[:n]
				m = len(pre)
				for j in range(lo, hi - m):
					if [t[1] for t in toks[j:j + m]] != pre or toks[j - 1][1] in ("->", "."):
						continue
					if cfacts.writes(toks[j - 1][1], toks[j + m][1]):
						return True
		return False

	def excluded(self, r):
		"""Whether no run can reach Site r's call in the window its setter
		opened, by the tests above."""
		if r.shape not in SHAPES + ("carried_state",):
			return False
		fn = self.facts.get(r.file)["functions"].get(r.func)
		toks = self.tokens(r.file)
		if fn is None or not toks:
			return False
		lo = next((j for j, t in enumerate(toks) if t[2] == fn["line"] and t[1] == "{"), None)
		if lo is None:
			return False
		hi = cfacts._match_close(toks, lo, "{", "}")

		def at(line, name):
			return [j for j in range(lo, hi) if toks[j][2] == line and toks[j][1] == name
				and j + 1 < hi and toks[j + 1][1] == "("]
		setters, calls = at(r.line, r.site), at(r.cline, r.call)
		if calls and all(self.runs_running(toks, lo + 1, hi, c) for c in calls):
			return True
		if r.shape not in SHAPES or len(setters) != 1 or not calls:
			return False
		s = setters[0]
		gotos = {}
		for j in range(lo, hi - 1):
			if toks[j][1] == "goto":
				gotos.setdefault(toks[j + 1][1], []).append(j)
		gm = cfacts.guard_map(toks, lo + 1, hi, atoms,
				      label_reset=lambda j: any(g > s for g in gotos.get(toks[j][1], ())),
				      restores=lambda a, e: self._restores(toks, a, e))
		tests = [t for t in gm.get(s, ()) if len(t) == 2 and _pure(t[0])
			 and not self._changed(toks, lo + 1, hi, t[0])]
		if not tests:
			return False
		for c in calls:
			ctx = set(gm.get(c, ()))
			if not any((e, not pol) in ctx or ("R", e, pol) in ctx for e, pol in tests):
				return False
		return True
