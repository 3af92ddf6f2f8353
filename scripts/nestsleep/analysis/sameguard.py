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
state_tests; this one also applies to states carried out of a helper and
to the returns of a thread function.

A thread function (thread_exit Site) that sets the state under 'if (E)'
and then, in the same block with no jump between, tests 'if (E)' again
around a block that restores TASK_RUNNING or calls schedule(), returns
with the state restored on every run: aoe's kthread() sets
TASK_INTERRUPTIBLE under 'if (!more)' and then calls schedule() under
'if (!more)' (drivers/block/aoe/aoecmd.c:1242-1251).  The rule follows the
other branch of the second test to the return.  This is here and not in
the SmPL rule because Coccinelle does not correlate two tests of one
condition: each branch of each test is a path of its own."""

import re

from nestsleep.analysis import cfacts

# the window shapes whose setter the Site names (pipeline.WINDOW_SHAPES)
SHAPES = ("set_current_state", "prepare_to_wait")
# the statements that leave the straight way down a block
JUMPS = ("break", "continue", "goto", "return")
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
		self.prepare = set(kn.words.prepare)
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
	def _changed(toks, lo, hi, e, addr_only=False):
		"""Whether the body toks[lo:hi] may change a member chain of e
		(with addr_only, take its address)."""
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
					if addr_only and toks[j - 1][1] != "&":
						continue
					if cfacts.writes(toks[j - 1][1], toks[j + m][1]):
						return True
		return False

	def excluded(self, r):
		"""Whether no run can reach Site r's call in the window its setter
		opened, by the tests above."""
		if r.shape not in SHAPES + ("carried_state", "thread_exit"):
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
		if r.shape == "thread_exit":
			# the 'call' is kthread_exit() after the return on line cline
			calls = [j for j in range(lo, hi) if toks[j][2] == r.cline and toks[j][1] == "return"]
		if calls and all(self.runs_running(toks, lo + 1, hi, c) for c in calls):
			return True
		if r.shape == "carried_state" or len(setters) != 1 or not calls:
			return False
		s = setters[0]
		gotos = {}
		for j in range(lo, hi - 1):
			if toks[j][1] == "goto":
				gotos.setdefault(toks[j + 1][1], []).append(j)
		gm = cfacts.guard_map(toks, lo + 1, hi, atoms,
				      label_reset=lambda j: any(g > s for g in gotos.get(toks[j][1], ())),
				      restores=lambda a, e: self._restores(toks, a, e))
		if r.shape == "thread_exit":
			# E may be assigned before the setter (aoe's 'more =
			# k->fn(k->id);' each time round): the walk checks that
			# nothing between the two tests changes it
			tests = [t for t in gm.get(s, ()) if len(t) == 2 and _pure(t[0])
				 and not self._changed(toks, lo + 1, hi, t[0], addr_only=True)]
			return bool(tests) and self._exit_restored(toks, lo + 1, hi, s, tests) is True
		tests = [t for t in gm.get(s, ()) if len(t) == 2 and _pure(t[0])
			 and not self._changed(toks, lo + 1, hi, t[0])]
		if not tests:
			return False
		for c in calls:
			ctx = set(gm.get(c, ()))
			if not any((e, not pol) in ctx or ("R", e, pol) in ctx for e, pol in tests):
				return False
		return True

	def _restores_block(self, toks, a, e):
		"""Whether statement toks[a..e] always restores TASK_RUNNING: one
		restoring call, or a block with one at its top level that no jump
		comes before and no state setter follows ('{ schedule();
		remove_wait_queue(...); }')."""
		if self._restores(toks, a, e):
			return True
		if toks[a][1] != "{" or e >= len(toks) or toks[e][1] != "}":
			return False
		setters = self.running | self.prepare
		j = a + 1
		while j < e:
			k = max(cfacts.stmt_end(toks, j, e), j)
			if self._restores(toks, j, k):
				return not any(t[1] in setters for t in toks[k + 1:e])
			if any(t[1] in JUMPS for t in toks[j:k + 1]):
				return False
			j = k + 1
		return False

	def _exit_restored(self, toks, a, b, s, tests):
		"""Walk the statements of toks[a:b] down to the one holding setter
		s, then on from there: True when a later 'if (C) RESTORE' with a
		test of s among C's true tests comes before any jump, None when the
		walk must give up (a jump, a label, s inside a switch, or the end
		of a loop body, which may lead back to a jump before s), False
		when the block ends first (the enclosing one goes on)."""
		j = a
		while j < b and not (j <= s <= max(cfacts.stmt_end(toks, j, b), j)):
			j = max(cfacts.stmt_end(toks, j, b), j) + 1
		if j >= b:
			return None
		e = max(cfacts.stmt_end(toks, j, b), j)
		v = toks[j][1]
		if j == s:
			got = False
		elif v == "{":
			got = self._exit_restored(toks, j + 1, e, s, tests)
		elif v == "if":
			rp = cfacts._match_close(toks, j + 1, "(", ")")
			te = cfacts.stmt_end(toks, rp + 1, e + 1)
			if s <= te:
				got = self._exit_restored(toks, rp + 1, te + 1, s, tests)
			else:
				got = self._exit_restored(toks, te + 2, e + 1, s, tests)
		elif v in ("for", "while", "do"):
			# the body's end leads to the loop test, and the loop may
			# go round to a jump before s: only a restore inside counts
			a2 = j + 1 if v == "do" else cfacts._match_close(toks, j + 1, "(", ")") + 1
			got = self._exit_restored(toks, a2, cfacts.stmt_end(toks, a2, e + 1) + 1, s, tests)
			return got if got is True else None
		else:
			return None
		if got is not False:
			return got
		j = e + 1
		while j < b:
			e = max(cfacts.stmt_end(toks, j, b), j)
			if toks[j][1] == "if":
				rp = cfacts._match_close(toks, j + 1, "(", ")")
				te = cfacts.stmt_end(toks, rp + 1, e + 1)
				pos = atoms(cfacts._text(toks[j + 2:rp]))[0]
				if any(t in pos and not self._changed(toks, s, j, t[0]) for t in tests) and \
						self._restores_block(toks, rp + 1, te):
					return True
			if any(t[1] in JUMPS or (t[0] == "id" and k + 1 <= e and toks[k + 1][1] == ":")
			       for k, t in enumerate(toks[j:e + 1], j)):
				return None
			j = e + 1
		return False
