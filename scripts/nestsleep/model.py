# SPDX-License-Identifier: GPL-2.0-only
"""The typed values the analysis stages hand each other.

A Node is (file, name, kind): a function ('f') or a macro ('m') defined
in file.  A CallTarget says where one call may go; a Witness is the best
chain from a call down to a sleeping primitive.  Findings leave the
analysis as dicts (findings.json, fixtures/findings.schema.json), since the
fixer, the series writer and triage all read and extend them.
"""

import dataclasses
import enum
from typing import FrozenSet, Optional, Tuple

Node = Tuple[str, str, str]
Loc = Tuple[str, int]


class FileFlag(enum.IntFlag):
	"""What the scan saw in a file's text (scan.py keeps these per file)."""
	WAIT = 1	# a wait primitive's name: wait_event*, prepare_to_wait, ...
	STATE = 2	# a task-state setter: set_current_state(), ...
	DEFINES = 4	# a #define, so it may define a wait wrapper


@dataclasses.dataclass(frozen=True)
class CallTarget:
	"""Where a call goes.  kind: 'prim' (a sleeping primitive: group and
	effect), 'no' (known not to sleep, or unresolved), 'direct' (the
	definitions of its name) or 'pointer' (the functions an ops-table
	member may hold; info is the 'base->member' text)."""
	kind: str
	nodes: Tuple[Node, ...] = ()
	group: str = ""
	effect: str = ""
	info: str = ""


NO_TARGET = CallTarget("no")


@dataclasses.dataclass(frozen=True)
class Witness:
	"""A chain of calls from a call site down to a sleeping primitive.
	chain[i] is the callee of hop i (a 'base->member=fn' text for a
	function pointer), locs[i] the (file, line) of that call; penalty
	counts the doubts on the way (summarize.confidence()); conds are the
	tests of the first function's parameters under which the chain runs
	(summarize.py); atomic, whether a call on the way is made in an
	atomic region (cfacts.atomic_regions())."""
	chain: Tuple[str, ...]
	effect: str
	group: str
	penalty: int
	locs: Tuple[Loc, ...]
	conds: FrozenSet[Tuple[int, str, str]] = frozenset()
	atomic: bool = False	# a hop lies in an atomic region (its one doubt counted)

	def order(self):
		"""Fewer doubts first; then one that does not end in a scheduler
		entry point (for a set_current_state()/prepare_to_wait() site
		that is usually the intended sleep, and costs the finding
		confidence); then shorter, then by name, then by the lines of
		its calls: two calls of the same callee in one function
		(xenbus_xs.c join()'s two kasprintf()s) must not be picked by
		the order a set happens to hold them in."""
		return (self.penalty, self.group == "schedule", len(self.chain), self.chain, self.locs)

	def better_than(self, other: Optional["Witness"]) -> bool:
		return other is None or self.order() < other.order()


@dataclasses.dataclass(frozen=True)
class Site:
	"""One candidate call in a wait's non-running window, as the rule
	reports it (cocci/nested_sleep.cocci ns_record(); match.py).  shape is
	how the wait is written: wait_event (site is the macro; role says
	whether the call is in its condition or its cmd, argn which argument),
	prepare_to_wait, set_current_state (state is the state set) or
	carried_state (a helper returned with the state set).  line/col/colend
	locate the wait, cline/ccol the call; kind is 'call' or 'member' (a call
	through base->call)."""
	shape: str
	site: str
	file: str
	line: int
	col: int
	colend: int
	func: str
	call: str
	kind: str
	base: str
	cline: int
	ccol: int
	args: str = ""
	role: str = ""
	locked: str = ""
	state: str = ""
	argn: int = -1
	stmt_expr: bool = False

	@classmethod
	def from_rec(cls, rec):
		"""A Site from the rule's JSON record (cached as a dict)."""
		names = set(f.name for f in dataclasses.fields(cls))
		return cls(**{k: v for k, v in rec.items() if k in names})


@dataclasses.dataclass(frozen=True)
class SitePath:
	"""One sleeping path of a finding: the Site's call and its Witness,
	with the penalty the wait's shape adds and locs starting at the call."""
	site: Site
	chain: Tuple[str, ...]
	effect: str
	group: str
	penalty: int
	locs: Tuple[Loc, ...]
	# False when the chain ends in the bare might_sleep() annotation and no
	# other chain through the call reaches a primitive that blocks
	blocks: bool = True
	# a chain through the same call that ends in a primitive whose sleep
	# does not hang on the allocation flags or a page fault (the first
	# chain's group is one of those): xenbus_read() -> join() ->
	# kasprintf() beside xs_talkv() -> read_reply() -> wait_event()
	also: Tuple[str, ...] = ()
	# the tests of the waiting function's parameters the chain needs
	# ((index, op, value): drbd_req_state()'s mutex_lock() needs
	# 'f & CS_SERIALIZE'), so a caller passing other constants is no way in
	needs: Tuple[Tuple, ...] = ()
