# SPDX-License-Identifier: GPL-2.0-only
"""Polls: whether a wait's condition blocks on every pass.

A call that waits for state outside kernel memory (a xenstore read, a USB
control transfer) or sleeps on a timer (msleep(), usleep_range(): see
cocci/sleep_info.json "polls") blocks on every call and returns in TASK_RUNNING,
so a wait whose condition makes one never sleeps in its own schedule(): it
re-reads the condition until it holds.  Such a wait works without any
wake_up*() of its queue; a wait_woken() rewrite does not, so the fixer
(scripts/nestsleep/fix/polls.py) asks whether a waker is there.

The finding's paths are searched: a chain that passes through a "polls"
function, with no parameter test it needs ("needs": the chain may not run
on every pass), reached from the condition.  Only the chain is read: a
condition whose call reaches a polls function by a path other than its
best chains is not seen (left for a summary of unconditional paths).
"""

from nestsleep.knowledge import Knowledge

_KN = None


def poll_functions(kn=None):
	"""{name: what it waits for} from sleep_info.json "polls"."""
	global _KN
	if kn is None:
		if _KN is None:
			_KN = Knowledge()
		kn = _KN
	return dict(kn.info.get("polls", {}).get("functions", {}))


def polls(finding, ana=None, kn=None):
	"""{"via": [chain up to the polling function], "reason": ...} when the
	wait's condition blocks on every pass through a "polls" function, else
	None.  ana (the resolve.Analysis) is not read yet."""
	if finding.get("role") == "cmd" or finding.get("shape") not in ("wait_event", "prepare_to_wait",
									"set_current_state"):
		return None
	fns = poll_functions(kn)
	paths = finding.get("paths") or [{"chain": finding.get("chain", []),
					  "chain_locs": finding.get("chain_locs", [])}]
	for p in paths:
		if p.get("needs"):
			continue
		chain = p.get("chain", [])
		for i, name in enumerate(chain):
			if name in fns:
				via = list(chain[:i + 1])
				locs = p.get("chain_locs", [])
				at = (" at %s" % locs[0]) if locs else ""
				return {"via": via, "reason": "%s() %s%s" % (name, fns[name],
									(" (through %s)" % " -> ".join(
										x + "()" for x in via[:-1])) if i else "") + at}
	return None
