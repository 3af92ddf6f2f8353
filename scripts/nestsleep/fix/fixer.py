# SPDX-License-Identifier: GPL-2.0-only
"""nestsleep's auto-fixer: rewrite nested sleeps into the wait_woken() form.

The checker (cocci/nested_sleep.cocci + scripts/nestsleep/analysis/) finds the wait
sites; this package turns each finding into a source edit, or says why it
cannot.  Start at Fixer.run(): it plans every finding into a unit (one
function, one patch), through the module of its shape, then finishes each
unit.  Python picks the sites, the names (clash-free in the function) and
the refusals; semantic patches make the edits where spatch 1.1.1 can.
One module per rewrite, each paired with its rule in cocci/:

  wait_event*(wq, cond, ...)     -> wait_event.py, fix_wait_event.cocci
  a prepare_to_wait() loop that -> finish_wait.py, finish_after_loop.cocci
  leaves its entry queued
  a loop whose state outlives it -> restore.py, restore_after_loop.cocci
  prepare_to_wait() loops        -> prepare_to_wait.py, fix_prepare_to_wait.cocci
  prepare_to_wait() loops on an  -> entries.py, restore_after_loop.cocci
  entry with its own wake func.     (NESTSLEEP_BEFORE): a restore before the call
  set_current_state() loops on a -> set_current_state.py, fix_set_current_state.cocci
  wait queue
  set_current_state() loops of a -> own_queue.py, fix_set_current_state.cocci
  thread on no queue                (more passes), a queue of its own
  a set_current_state() out of   -> setter.py, move_setter.cocci: moved
  its loop's place                  after the call, or dropped
  a thread that leaves its loop  -> thread_exit.py, restore_thread_exit.cocci
  with its state set

Each shape is a pair of plain functions taking the Fixer: plan_<shape>(fx,
f, u) checks the site of finding f and records it in unit u, or raises
Refuse; rewrite_<shape>(fx, u) runs its rule when the unit is complete
(finish()).  Shared pieces: ctext.py (C text: mask, brackets, names),
edits.py (FileText, Edit, Unit, Refuse, text and diffs), spatch.py (the
spatch driver), layout.py (the checkpatch layout of rewritten text),
sites.py (calls, statements and loops in a function), includes.py (the
#include lines).

Each rewrite then goes through the poll rule (polls.py) and the waker rule
(wakers.py): every direct waker of the task (wake_up_process() and
friends) becomes a wake_up*() of the queue, or the site is refused; a wait
whose task pointer is stored nowhere needs none.  wakers.py finds the
wakers and picks the new call and queue of each; cocci/fix_wakers.cocci
converts them (one spatch run per file, in finish()), and a waker it
leaves refuses the unit.

Every finding gets a "fix" record: status "patch", "report-only" (the
variant has no safe wait_woken form) or "manual" (the shape is outside what
this rewriter proves correct), with the reason.
"""

import os
import re

from nestsleep.fix import (entries, finish_wait, includes, own_queue, polls, prepare_to_wait, restore,
			   set_current_state, setter, thread_exit, wait_event, wakers)
from nestsleep.fix.edits import Edit, FileText, Refuse, Unit, apply_edits, min_conf, unified_diff
from nestsleep.fix.wait_event import REPORT_ONLY


def plan_prepare_to_wait(fx, f, u):
	"""A prepare_to_wait*() loop: converted (prepare_to_wait.py), or, when
	its entry has a wake function of its own, never converted, and
	TASK_RUNNING restored before the sleeping call (entries.py); an
	entry passed in by the callers is checked by entries.py first."""
	rel, ft, t, m, o, c = entries.loop_site(fx, f)
	preps, ent = entries.entry_of(fx, ft, o, c)
	wake = entries.own_wake_function(ft, o, c, ent)
	if wake:
		entries.plan_restore_before_call(fx, f, u, preps, ent, wake)
	elif ent and re.match(r"^[A-Za-z_]\w*$", ent):
		# the entry is a parameter: converted with its callers' entries
		prepare_to_wait.plan_prepare_to_wait(fx, f, u, entries.plan_entry_param(fx, f, ft, o, c, ent))
	else:
		prepare_to_wait.plan_prepare_to_wait(fx, f, u)


def plan_set_current_state(fx, f, u):
	"""A set_current_state() loop: a setter out of its place is moved or
	dropped (setter.py); else the loop is rewritten on the wait queue its
	thread adds itself to (set_current_state.py), or, on none, on a queue
	of its own (own_queue.py)."""
	setters, state, adds = set_current_state.loop_setters(fx, f)
	if setter.plan_setter(fx, f, u, setters, state):
		return
	try:
		if adds:
			set_current_state.plan_set_current_state(fx, f, u, setters, state, adds)
		else:
			own_queue.plan_own_queue(fx, f, u, setters, state)
	except Refuse as r:
		# a loop the wait_woken() rewrites refuse (a waker they cannot
		# convert): the setter's move needs no waker converted
		if u.findings or u.kind:
			raise
		u.__init__(u.rel, u.func, None)
		try:
			if setter.plan_setter(fx, f, u, setters, state, fits=True):
				return
		except Refuse:
			pass
		u.__init__(u.rel, u.func, None)
		raise r


def rewrite_set_current_state(fx, u):
	"""The rule's passes for the loop planned by plan_set_current_state()."""
	if u.own.get("onqueue"):
		set_current_state.rewrite_set_current_state(fx, u)
	else:
		own_queue.rewrite_own_queue(fx, u)


# shape -> its plan; a shape not here has no rule (restore.plan_state_helper())
PLANS = {
	"wait_event": wait_event.plan_wait_event,
	"prepare_to_wait": plan_prepare_to_wait,
	"set_current_state": plan_set_current_state,
	"thread_exit": thread_exit.plan_thread_exit,
}

# the kinds of fix of a loop whose state outlives it (Fixer.plan_after_loop())
AFTER_KINDS = ("finish_wait", "restore")

# what a unit records for its rule -> the rewrite that runs it, in this order
REWRITES = (
	("sites", wait_event.rewrite_wait_events),
	("ptw", prepare_to_wait.rewrite_prepare_to_wait),
	("own", rewrite_set_current_state),
	("setter", setter.rewrite_setter),
)


class Fixer:
	"""What the rewrites share: the tree, its knowledge and facts, the
	file texts (text()), the waker rule, and the steps every unit goes
	through (run(), plan(), finish(), diff())."""

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
			self.rule = wakers.WakerRule(self, kn)

	def wakers(self, u, rel, func, queue, state, stop_tested, span, f=None):
		"""The poll rule (scripts/nestsleep/fix/polls.py): a wait that polls
		today keeps a waker on queue, or the site is refused.  Then the
		waker rule (scripts/nestsleep/fix/wakers.py): every direct waker of the
		task is converted to a wakeup of queue, or the site is refused."""
		if f is not None:
			polls.check(self, f, u, rel, func, queue, state)
		if self.rule is None:
			raise Refuse("manual", "no tree facts to search the wakers with")
		self.rule.check({"rel": rel, "func": func, "queue": queue, "state": state,
				 "stop_tested": stop_tested, "span": span}, u)
		rec = (f or {}).get("wakers") or {}
		if "(" in (rec.get("queue") or "") and not rec.get("wakers") and not any(u.waker_sites.values()):
			# wait_woken() is woken only through its queue.  A queue read
			# through a call (vsock's sk_sleep(sk)) is woken under the
			# name the call reads (sk->sk_wq's wait, by the socket
			# callbacks), which the search for wake_up*(<queue>) cannot
			# match: with none found and none added, nothing shows the
			# rewritten wait ends
			raise Refuse("manual", "the queue %s is read through a call, and no wake_up*() naming it was "
				     "found: its wakeups come under the name the call reads, which the waker search "
				     "does not follow, so nothing shows that the wait_woken() form would be woken; "
				     "convert by hand" % rec["queue"])

	def text(self, rel):
		if rel not in self.files:
			self.files[rel] = FileText(os.path.join(self.kdir, rel))
		return self.files[rel]

	def include(self, ft, u, rel, header):
		"""#include <header> for the unit, where the file needs it
		(includes.add())."""
		includes.add(self.walker(), ft, u, rel, header)

	def walker(self):
		if self._walker is None:
			self._walker = includes.Walker(self.kdir)
		return self._walker

	# -- entry point -------------------------------------------------------

	def run(self, findings):
		"""Attach a 'fix' record to every finding; return the units."""
		if self.rule is not None:
			self.rule.prepare(sorted(set((f["file"], f["function"]) for f in findings
						     if not f.get("locked") and f["shape"] in ("wait_event", "prepare_to_wait",
											"set_current_state"))))
		units = self.plan_all(findings)
		out = []
		for key, u in units.items():
			try:
				self.finish(u)
			except Refuse as r:
				for g in u.findings:
					g["fix"] = refused(r, g, key)
				continue
			diff = self.diff(u.edits)
			rec = {"status": "patch", "reason": "; ".join(dict.fromkeys(u.reasons)), "kind": u.kind,
			       "confidence": u.confidence, "caveats": list(dict.fromkeys(u.caveats)),
			       "unit": "%s:%s" % key, "files": sorted(u.edits), "wakers": u.wakers, "diff": diff}
			for g in u.findings:
				g["fix"] = dict(rec, confidence=min_conf(rec["confidence"], g["confidence"]))
			out.append(u)
		return out

	def plan_all(self, findings):
		"""{(file, function): unit} of the findings planned; a refused
		finding gets its 'fix' record, and a "manual" refusal refuses the
		whole function."""
		units = {}
		refused_units = {}
		for f in findings:
			key = (f["file"], f["function"])
			if key in refused_units:
				f["fix"] = dict(refused_units[key])
				continue
			try:
				u = units.get(key)
				if u is None:
					u = Unit(f["file"], f["function"], None)
				self.plan(f, u)
				units[key] = u
				u.findings.append(f)
			except Refuse as r:
				f["fix"] = refused(r, f, key)
				if r.status == "manual" and key in units:
					# one site of the function cannot be rewritten: patch none of it
					refused_units[key] = f["fix"]
					for g in units.pop(key).findings:
						g["fix"] = dict(f["fix"])
		return units

	def plan(self, f, u):
		"""Plan finding f into unit u through its shape's plan (PLANS), or
		the restore after its loop (restore.py); raises Refuse."""
		shape = f["shape"]
		if f.get("locked"):
			v = self.table.get(f["primitive"], {})
			if v.get("locked") == "wq.lock" or f["locked"] == "wq.lock":
				raise Refuse("report-only", REPORT_ONLY["locked"] % "wq.lock")
			raise Refuse("report-only", REPORT_ONLY["lock"] % f["locked"])
		restore_after = f.get("after_loop") and shape in ("prepare_to_wait", "set_current_state")
		if u.kind and (u.kind in AFTER_KINDS) != bool(restore_after):
			raise Refuse("manual", "the function mixes a %s wait with one whose state outlives its loop"
				     % (u.kind if restore_after else kind_of(f)))
		if restore_after:
			self.plan_after_loop(f, u)
			return
		if shape in ("prepare_to_wait", "set_current_state") and u.kind == shape:
			pass    # the whole loop of this function is rewritten already
		else:
			PLANS.get(shape, restore.plan_state_helper)(self, f, u)
		# entries.py's restore before the call and setter.py's move name their own kinds
		kind = "restore_call" if u.restore_call else "setter" if u.setter else kind_of(f)
		if u.kind and u.kind != kind:
			raise Refuse("manual", "the function mixes %s and %s waits" % (u.kind, kind))
		u.kind = kind
		u.confidence = min_conf(u.confidence, f["confidence"])

	def plan_after_loop(self, f, u):
		"""A loop whose state outlives it: finish_wait() after a
		prepare_to_wait() loop that leaves its entry queued with nothing
		after it to finish the wait (finish_wait.py), else the restore
		of TASK_RUNNING after it (restore.py)."""
		kind = finish_wait.plan_finish_after_loop(self, f, u)
		if kind is None:
			restore.plan_restore_after_loop(self, f, u)
			kind = "restore"
		if u.kind and u.kind != kind:
			raise Refuse("manual", "the function has a wait loop that leaves its entry queued and one "
				     "whose wait is finished after it")
		u.kind = kind
		u.confidence = min_conf(u.confidence, f["confidence"])

	def finish(self, u):
		"""Run the rules of the complete unit u (REWRITES, then the waker
		rule), and put its edits in order; two that overlap refuse it."""
		for what, rewrite in REWRITES:
			if getattr(u, what):
				rewrite(self, u)
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


def refused(r, f, key):
	"""The 'fix' record of finding f in the unit key, refused by r."""
	return {"status": r.status, "reason": r.reason, "kind": kind_of(f), "confidence": f["confidence"],
		"caveats": [], "unit": "%s:%s" % key, "files": [], "wakers": [], "diff": ""}


def kind_of(f):
	return {"wait_event": "wait_event", "prepare_to_wait": "prepare_to_wait",
		"set_current_state": "set_current_state"}.get(f["shape"], f["shape"])


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
