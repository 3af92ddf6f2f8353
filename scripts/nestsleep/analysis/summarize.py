# SPDX-License-Identifier: GPL-2.0-only
"""Summarize: a fixpoint over the call graph gives each function its best
witness chain down to a sleeping primitive (cocci/sleep_info.json)."""

from nestsleep.model import Witness


def summarize(nodes, rounds, exclude=()):
	"""Best witness chain from each node to a sleeping primitive: fewest
	doubts, then shortest, then by name (Witness.order()).  Rounds read only the
	previous round's summaries, so the result does not depend on the
	order in which the graph was built; a node's witness is replaced
	whenever a better one appears, until nothing changes or after rounds
	rounds.  Chains that end in a primitive of a group in exclude are not
	considered."""
	summ = {}
	for _ in range(rounds):
		nxt = dict(summ)
		for node, d in nodes.items():
			best = summ.get(node)
			for c, tg in d["calls"]:
				w = witness(c, tg, summ, node[0], exclude)
				if w is not None and w.better_than(best):
					best = w
			if best is not None:
				nxt[node] = best
		if nxt == summ:
			break
		summ = nxt
	return summ


def witness(c, tg, summ, at, exclude=()):
	"""The best Witness through call c (made in file at) whose CallTarget
	is tg, given the summaries summ of the callees; or None.  A primitive
	of a group in exclude is no witness."""
	here = ((at, c["line"]),)
	if tg.kind == "prim":
		if tg.group in exclude:
			return None
		pen = 1 if c["name"] in ("might_sleep_if",) else 0
		return Witness((c["name"],), tg.effect, tg.group, pen, here)
	if tg.kind not in ("direct", "pointer"):
		return None
	best = None
	for t in tg.nodes:
		s = summ.get(t)
		if s is None:
			continue
		pen = s.penalty
		if tg.kind == "pointer":
			hop = "%s=%s" % (tg.info, t[1])
			pen += 2
		else:
			hop = c["name"]
			if len(tg.nodes) > 1:
				pen += 1
		w = Witness((hop,) + s.chain, s.effect, s.group, pen, here + s.locs)
		if w.better_than(best):
			best = w
	return best


def confidence(pen):
	return "high" if pen == 0 else ("medium" if pen <= 2 else "low")
