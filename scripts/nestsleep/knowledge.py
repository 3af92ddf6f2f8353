# SPDX-License-Identifier: GPL-2.0-only
"""cocci/sleep_info.json, the kernel knowledge, behind one accessor.

Each entry of the file (an object with a "reason", a "NAME_reason" beside
a list, a top-level list of names) names its "source" (or "NAME_source"):
kernel lines, "path/file.c:LINE" in the 6.1 tree or "6.12:path:LINE", and
"label:<tree-id>:<fingerprint>" for a hand label in reports/labels/.  An
entry whose only sources are labels was taught by a reviewer, not shown in
the kernel: a chain that ends in such a group gets one more doubt
(pipeline.label_doubt())."""

import json
import re

from nestsleep import SLEEP_INFO
from nestsleep import gen_builtin
from nestsleep.analysis.cfacts import Words, is_teardown
from nestsleep.common import sha1


def entries(info):
	"""(section, source list) of every entry of sleep_info.json: each
	object with a reason or a source, each NAME_source beside its list,
	under the top-level key it belongs to."""
	out = []

	def walk(sec, node):
		if isinstance(node, dict):
			if "reason" in node or "source" in node:
				out.append((sec, list(node.get("source", ()))))
			for k, v in node.items():
				if k.endswith("_source") and k != "source":
					out.append((sec, list(v)))
				else:
					walk(sec, v)
		elif isinstance(node, list):
			for v in node:
				walk(sec, v)

	for k, v in info.items():
		if k.endswith("_source"):
			out.append((k[:-len("_source")], list(v)))
		elif k != "about":
			walk(k, v)
	return out


def label_only(sources):
	"""Whether a source list rests on hand labels alone."""
	return bool(sources) and all(s.startswith("label:") for s in sources)


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
		# the puts: name -> "body" or the index of the release argument
		pr = self.info["put_release"]
		self.puts = {k: v["release"] for k, v in pr["functions"].items()}
		self.teardown = frozenset(pr["teardown_words"])
		ss = self.info["state_setters"]
		self.words = Words(set=frozenset(ss["set"]), prepare=frozenset(ss["prepare"]),
				   running=frozenset(ss["running"]), on_zero=frozenset(ss.get("on_zero", ())),
				   annotations=frozenset(self.annotations),
				   guards=self.guard_calls,
				   asserts=frozenset(self.info["asserts"]["functions"]),
				   puts=frozenset(self.puts),
				   put_args=tuple(sorted((k, v) for k, v in self.puts.items() if isinstance(v, int))),
				   release_members=frozenset(pr["release_members"]), teardown=self.teardown,
				   regions=tuple((n, r["kind"], side)
						 for r in self.info["atomic_regions"]["regions"]
						 for side in ("enter", "exit") for n in r[side])
				   + tuple((n, "", "drops") for n in self.info["atomic_regions"]["drops"]))
		# waiters-table state name -> (TASK_* expression, signal test or None)
		self.states = {k: (v["task_state"], v["signal_test"]) for k, v in self.info["states"]["table"].items()}
		# scheduler entry point -> its wait_woken() timeout, or None
		self.schedulers = dict(self.info["schedulers"]["functions"])
		self.reasons = {g["name"]: g["reason"] for g in self.info["groups"]}
		# tests of the current task's own state, without white space
		st = self.info.get("state_tests", {})
		self.state_reads = frozenset(re.sub(r"\s+", "", x) for x in st.get("reads", ()))
		self.state_running = frozenset(re.sub(r"\s+", "", x) for x in st.get("running", ()))
		# the groups, and their primitives, that only a hand label taught
		self.label_only_groups = frozenset(g["name"] for g in self.info["groups"]
						   if label_only(g.get("source", ())))
		self.label_only = frozenset(fn for g in self.info["groups"] if g["name"] in self.label_only_groups
					    for fn in list(g.get("functions", ())) + list(g.get("gfp_arg", {})))

	def source_counts(self):
		"""Per top-level section: how many entries, how many name a kernel
		line, how many rest on hand labels alone."""
		out = {}
		for sec, src in entries(self.info):
			c = out.setdefault(sec, {"entries": 0, "kernel": 0, "label_only": 0})
			c["entries"] += 1
			c["kernel"] += any(not s.startswith("label:") for s in src)
			c["label_only"] += label_only(src)
		return out

	def want_args(self, name):
		# the puts and the teardown calls: which object they are on
		# (cfacts.mark_puts())
		return name in self.gfp_arg or name in self.puts or is_teardown(name, self.teardown)

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
