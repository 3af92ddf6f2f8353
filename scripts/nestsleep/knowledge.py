# SPDX-License-Identifier: GPL-2.0-only
"""cocci/sleep_info.json, the kernel knowledge, behind one accessor."""

import json
import re

from nestsleep import SLEEP_INFO
from nestsleep import gen_builtin
from nestsleep.analysis.cfacts import Words
from nestsleep.common import sha1


class Knowledge:
	"""cocci/sleep_info.json, in the shapes the analysis needs."""

	def __init__(self, path=None):
		self.path = path or SLEEP_INFO
		with open(self.path, "rb") as f:
			raw = f.read()
		self.digest = sha1(raw)[:12]
		self.info = json.loads(raw)
		t = gen_builtin.tables(self.info)
		self.sleepers = t["NS_SLEEPERS"]
		self.gfp_arg = t["NS_GFP_ARG"]
		self.blocking_gfp = set(t["NS_BLOCKING_GFP"])
		self.nonblocking_gfp = set(self.info["nonblocking_gfp"])
		self.provenance_free = set(self.info["provenance_free"]["functions"])
		self.not_sleeping = set(t["NS_NOT_SLEEPING"])
		self.restore = frozenset(t["NS_RESTORE"])
		self.waiters = self.info["waiters"]["table"]
		self.roots = self.info["waiters"]["roots"]
		self.annotations = set(self.info["annotations"]["functions"])
		self.guards = {}	# guard class -> its lock function
		self.guard_calls, self.scoped_calls = frozenset(), frozenset()
		for g in self.info["groups"]:
			self.guards.update(g.get("guard_classes", {}))
			self.guard_calls |= frozenset(g.get("guard_calls", ()))
			self.scoped_calls |= frozenset(g.get("scoped_calls", ()))
		ss = self.info["state_setters"]
		self.words = Words(set=frozenset(ss["set"]), prepare=frozenset(ss["prepare"]),
				   running=frozenset(ss["running"]), on_zero=frozenset(ss.get("on_zero", ())),
				   annotations=frozenset(self.annotations),
				   guards=self.guard_calls,
				   asserts=frozenset(self.info["asserts"]["functions"]))
		# waiters-table state name -> (TASK_* expression, signal test or None)
		self.states = {k: (v["task_state"], v["signal_test"]) for k, v in self.info["states"]["table"].items()}
		# scheduler entry point -> its wait_woken() timeout, or None
		self.schedulers = dict(self.info["schedulers"]["functions"])
		self.reasons = {g["name"]: g["reason"] for g in self.info["groups"]}
		# tests of the current task's own state, without white space
		st = self.info.get("state_tests", {})
		self.state_reads = frozenset(re.sub(r"\s+", "", x) for x in st.get("reads", ()))
		self.state_running = frozenset(re.sub(r"\s+", "", x) for x in st.get("running", ()))

	def want_args(self, name):
		return name in self.gfp_arg

	def primitive(self, call):
		"""(group, effect) if the call is a sleeping primitive, 'no' if it is
		known not to sleep, None if it must be resolved."""
		name = call["name"]
		if name in self.guard_calls:
			lock = self.guards.get(call.get("guard", ""))
			if lock:
				return self.sleepers[lock]
			return "no"
		if name in self.sleepers:
			return self.sleepers[name]
		if name in self.gfp_arg:
			args = call.get("args")
			if args is None:
				return "no"
			i = self.gfp_arg[name]
			if i < len(args):
				toks = set(re.findall(r"\w+", args[i]))
				if toks & self.blocking_gfp:
					return ("gfp_alloc", "warns")
			if any(p == i and k == "p" for p, k, _ in call.get("pa", ())):
				# the caller's gfp decides (summarize.py)
				return ("gfp_alloc", "warns")
			return "no"
		if name in self.not_sleeping or name in self.restore or name in self.annotations:
			return "no"
		return None
