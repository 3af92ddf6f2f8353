# SPDX-License-Identifier: GPL-2.0-only
"""Summarize: a fixpoint over the call graph gives each function its best
witness chains down to a sleeping primitive (cocci/sleep_info.json).

A chain may hold only for some values of the function's parameters (a
mutex_lock() under 'if (flags & F_UNLOCKED)', a kvfree() of memory a
non-blocking gfp allocated, might_sleep_if(gfpflags_allow_blocking(gfp))).
Such a chain carries those tests (Witness.conds, over parameter indices;
cfacts.py's pa/cond/prov/acond facts).  At each call the tests are mapped
through the arguments: a constant decides a test (a chain that needs a
test the constant fails is dropped), a parameter passed on moves the test
to the caller, anything else leaves it undecided (kept as possible).  Each
function keeps its best chains under different tests (at most KEEP), so
that a caller whose constants rule out the best one falls back on the
next.

A chain with a call made in an atomic region (cfacts.atomic_regions(): a
spinlock held, interrupts or preemption off) gets one doubt, once: a sleep
there would be a 'sleeping function called from invalid context' bug on
every run, rarer than a chain that is wrong (sleep_info.json
atomic_regions)."""

import re

from nestsleep.model import Witness

KEEP = 4	# chains kept per function, under different tests
WIDE_FANOUT = 8	# a function pointer with more targets is one more doubt
_NUM = re.compile(r"^(?:0[xX]([0-9a-fA-F]+)|(\d+))[uUlL]*$")


class Args:
	"""How constants decide parameter tests, from the knowledge: the gfp
	words and the primitives whose sleep depends on where their memory
	came from (sleep_info.json provenance_free)."""

	def __init__(self, kn=None, exact=True):
		# exact=False: every chain holds whatever the arguments (a
		# superset, for the tree-wide names that may sleep in a window)
		self.exact = exact
		self.blocking = frozenset(kn.blocking_gfp) if kn else frozenset()
		self.nonblocking = frozenset(kn.nonblocking_gfp) if kn else frozenset()
		self.prov_free = frozenset(kn.provenance_free) if kn else frozenset()
		self.gfp_arg = dict(kn.gfp_arg) if kn else {}
		self.puts = frozenset(kn.puts) if kn else frozenset()

	@staticmethod
	def _zero(text):
		"""True if text is a zero constant, False if a non-zero one, None
		if not a number."""
		if text in ("NULL", "false"):
			return True
		if text == "true":
			return False
		m = _NUM.match(text)
		if not m:
			return None
		return int(m.group(1) or m.group(2), 16 if m.group(1) else 10) == 0

	def test(self, op, val, text):
		"""Whether test op/val holds for a parameter whose argument is the
		constant text: True, False, or None (cannot tell)."""
		if op in ("nonblocking", "nobit", "z", "ne"):
			r = self.test({"nonblocking": "blocking", "nobit": "bit", "z": "nz", "ne": "eq"}[op], val, text)
			return None if r is None else not r
		z = self._zero(text)
		words = set(re.findall(r"\w+", text))
		if op == "nz":
			return None if z is None else not z
		if op == "bit":
			if z:
				return False
			return True if val in words else None
		if op == "eq":
			if text == val:
				return True
			if re.match(r"^[A-Z_][A-Z0-9_]*$", text) or z is not None:
				# a different named constant (enumerators are distinct
				# in practice; see nested_sleep.cocci's caveats)
				return False
			return None
		if op == "blocking":
			if words & self.blocking:
				return True
			if z or words & self.nonblocking:
				return False
			return None
		return None


GFP_TESTS = ("blocking", "nonblocking")


def map_conds(conds, c, args):
	"""The tests conds of a callee's chain seen at call c: None if the
	call's constants rule the chain out, else the tests moved to the
	caller's parameters (with the call's own guards, c's cond), and
	whether a gfp test met an argument that is neither (a gfp computed
	at run time: one more doubt)."""
	pa = {p: (k, v) for p, k, v in c.get("pa", ())}
	va = c.get("va")
	out = set(tuple(x) for x in c.get("cond", ()))
	guessed = False
	for j, op, val in conds:
		if va is not None:
			out.add((va + j, op, val))
			continue
		k, v = pa.get(j, (None, None))
		if k == "c":
			if args.test(op, val, v) is False:
				return None, False
		elif k == "p":
			out.add((v, op, val))
		elif op in GFP_TESTS:
			guessed = True
	return frozenset(out), guessed


def _contradicts(conds):
	"""Whether conds hold two tests no value passes (nz and z, eq A and
	eq B, ...)."""
	seen = {}
	for j, op, val in conds:
		seen.setdefault(j, set()).add((op, val))
	for tests in seen.values():
		for op, val in tests:
			if op in ("nz", "z") and (({"nz": "z", "z": "nz"}[op], "") in tests):
				return True
			if op in ("blocking", "nonblocking") and (("nonblocking" if op == "blocking" else "blocking", "") in tests):
				return True
			if op == "bit" and ("nobit", val) in tests or op == "eq" and ("ne", val) in tests:
				return True
			if op == "eq" and any(o == "eq" and v != val for o, v in tests):
				return True
	return False


def summarize(nodes, rounds, exclude=(), args=None):
	"""Best witness chains from each node to a sleeping primitive, best
	first: fewest doubts, then shortest, then by name (Witness.order()),
	at most KEEP under different parameter tests.  Rounds read only the
	previous round's summaries, so the result does not depend on the
	order in which the graph was built; a node's chains are replaced
	whenever better ones appear, until nothing changes or after rounds
	rounds.  Chains that end in a primitive of a group in exclude are not
	considered."""
	args = args or Args()
	callers = {}
	for node, d in nodes.items():
		for c, tg in d["calls"]:
			for t in tg.nodes:
				callers.setdefault(t, set()).add(node)
	summ = {}
	todo = set(nodes)
	for _ in range(rounds):
		# only a node whose callees changed in the last round can change
		nxt = dict(summ)
		changed = set()
		for node in todo:
			d = nodes[node]
			cands = list(summ.get(node, ()))
			for c, tg in d["calls"]:
				cands += witnesses(c, tg, summ, node[0], exclude, args)
			if cands:
				k = keep(cands)
				if k != summ.get(node):
					nxt[node] = k
					changed.add(node)
		if not changed:
			break
		summ = nxt
		todo = set(n for c in changed for n in callers.get(c, ()))
	return summ


def keep(cands):
	"""The chains worth keeping: best first, each one only if no better
	kept chain needs a subset of its tests (that one holds whenever it
	does)."""
	out = []
	for w in sorted(set(cands), key=lambda w: (w.order(), sorted(w.conds))):
		if any(k.conds <= w.conds for k in out):
			continue
		out.append(w)
		if len(out) >= KEEP:
			break
	return tuple(out)


def witnesses(c, tg, summ, at, exclude=(), args=None):
	"""The witnesses through call c (made in file at) whose CallTarget is
	tg, given the summaries summ of the callees, with their tests mapped
	to the caller's parameters."""
	args = args or Args()
	here = ((at, c["line"]),)
	out = []
	if tg.kind == "prim":
		if tg.group in exclude:
			return out
		pen, conds = 0, frozenset(tuple(x) for x in c.get("cond", ()) if args.exact)
		if c["name"] in ("might_sleep_if",):
			pen = 1
			conds |= frozenset(tuple(x) for x in c.get("acond", ()))
		if c["name"] in args.gfp_arg:
			# kmalloc(n, gfp) with the function's own gfp
			i = args.gfp_arg[c["name"]]
			conds |= frozenset((v, "blocking", "") for p, k, v in c.get("pa", ())
					   if k == "p" and p == i)
			# a gfp chosen at run time ('atomic ? GFP_NOWAIT : GFP_KERNEL')
			a = c.get("args") or []
			words = set(re.findall(r"\w+", a[i])) if i < len(a) else set()
			if words & args.blocking and words & args.nonblocking:
				pen = 1
		if not args.exact:
			conds = frozenset()
		conds = _prov(c, c["name"], conds, args)
		atomic = bool(c.get("atomic"))
		if conds is not None and not _contradicts(conds):
			out.append(Witness((c["name"],), tg.effect, tg.group, pen + atomic, here, conds, atomic))
		return out
	if tg.kind not in ("direct", "pointer"):
		return out
	for t in tg.nodes:
		for s in summ.get(t, ()):
			conds, guessed = map_conds(s.conds, c, args) if args.exact else (frozenset(), False)
			if conds is None:
				continue
			conds = _prov(c, s.chain[-1], conds, args)
			if conds is None or _contradicts(conds):
				continue
			pen = s.penalty + (1 if guessed else 0)
			# the first call of the chain in an atomic region: a sleep
			# there is a bug of its own, rarer than a wrong chain
			atomic = s.atomic or bool(c.get("atomic"))
			pen += atomic and not s.atomic
			if tg.kind == "pointer":
				hop = "%s=%s" % (tg.info, t[1])
				pen += 2 if len(tg.nodes) <= WIDE_FANOUT else 3
			else:
				hop = c["name"]
				if len(tg.nodes) > 1:
					pen += 1
				if hop in args.puts and not c.get("put_last"):
					# a put sleeps only in its release, on the last
					# reference: a doubt outside a release or
					# teardown path (cfacts.mark_puts())
					pen += 1
			out.append(Witness((hop,) + s.chain, s.effect, s.group, pen, here + s.locs, conds, atomic))
	return out


def _prov(c, prim, conds, args):
	"""conds with the provenance test of call c if its chain ends in
	prim, a provenance_free primitive: None if c frees memory that a
	constant non-blocking gfp allocated."""
	p = c.get("prov")
	if not p or prim not in args.prov_free or not args.exact:
		return conds
	if p[0] == "c":
		return None if args.test("blocking", "", p[1]) is False else conds
	return conds | {(p[1], "blocking", "")}


def witness(c, tg, summ, at, exclude=(), args=None):
	"""The best Witness through call c, or None."""
	best = None
	for w in witnesses(c, tg, summ, at, exclude, args):
		if w.better_than(best):
			best = w
	return best


def confidence(pen):
	return "high" if pen == 0 else ("medium" if pen <= 2 else "low")
