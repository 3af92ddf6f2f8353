# SPDX-License-Identifier: GPL-2.0-only
"""Summarize: a fixpoint over the call graph gives each function its best
witness chain down to a sleeping primitive (cocci/sleep_info.json)."""


def summarize(nodes, rounds):
	"""Best witness chain from each node to a sleeping primitive: fewest
	doubts, then shortest, then by name (_better).  Rounds read only the
	previous round's summaries, so the result does not depend on the
	order in which the graph was built; a node's witness is replaced
	whenever a better one appears, until nothing changes or after rounds
	rounds."""
	summ = {}
	for _ in range(rounds):
		nxt = dict(summ)
		for node, d in nodes.items():
			best = summ.get(node)
			for c, tg in d["calls"]:
				w = witness(c, tg, summ, node[0])
				if w is not None and (best is None or _better(w, best)):
					best = w
			if best is not None:
				nxt[node] = best
		if nxt == summ:
			break
		summ = nxt
	return summ


def witness(c, tg, summ, at):
	"""(chain, effect, group, penalty, locs) through call c, made in file
	at, or None. locs[i] is the (file, line) of the call chain[i]."""
	kind = tg[0]
	here = [(at, c["line"])]
	if kind == "prim":
		group, effect = tg[2]
		pen = 1 if c["name"] in ("might_sleep_if",) else 0
		return ([c["name"]], effect, group, pen, here)
	if kind in ("direct", "pointer"):
		best = None
		for t in tg[1]:
			s = summ.get(t)
			if s is None:
				continue
			pen = s[3]
			if kind == "pointer":
				hop = "%s=%s" % (tg[2], t[1])
				pen += 2
			else:
				hop = c["name"]
				if len(tg[1]) > 1:
					pen += 1
			w = ([hop] + s[0], s[1], s[2], pen, here + s[4])
			if best is None or _better(w, best):
				best = w
		return best
	return None


def _better(w, best):
	"""Order of witnesses: fewer doubts; then one that does not end in a
	scheduler entry point (for a set_current_state()/prepare_to_wait() site
	that is usually the intended sleep, and costs the finding confidence);
	then shorter, then by name (stable)."""
	return (w[3], w[2] == "schedule", len(w[0]), w[0]) < (best[3], best[2] == "schedule", len(best[0]), best[0])


def confidence(pen):
	return "high" if pen == 0 else ("medium" if pen <= 2 else "low")
