# SPDX-License-Identifier: GPL-2.0-only
"""Resolve: follow the calls found at the wait sites through the definitions
of their callees, file by file, through macros, static inlines and
ops-table function pointers, into a call graph."""

import os
import re

from nestsleep.analysis import summarize as summarize_mod
from nestsleep.model import NO_TARGET, CallTarget

MAX_DEPTH = 8          # hops from a wait site to a primitive
MAX_ROUNDS = 4 * MAX_DEPTH  # summarize() stops improving witnesses after this
MAX_CANDIDATES = 12    # definitions of one name we are willing to consider
MAX_FANOUT = 32        # targets of a function pointer called in a window
                       # or in a function the window calls
DEEP_FANOUT = 8        # ... and of one called further down


class Analysis:
	def __init__(self, tree, facts, kn):
		self.tree, self.facts, self.kn = tree, facts, kn
		self.nodes = {}       # (file, name) -> {"calls": [(call, targets)], "annotate": line}
		self.summary = {}     # node -> its best Witnesses (summarize.keep())
		self.args = summarize_mod.Args(kn)
		self.summaries_without = {}  # group -> summaries avoiding it
		self._resolve_cache = {}

	# -- definitions ------------------------------------------------------

	def _visible(self, rel, from_rel):
		if rel.startswith("arch/"):
			arch = rel.split("/")[1]
			if arch != "x86" and not from_rel.startswith("arch/%s/" % arch):
				return False
		if rel.endswith(".h") and not rel.startswith("include/") and not re.match(r"arch/[^/]+/include/", rel):
			# a driver-local header: visible from its own directory and from
			# the files that include it by a quoted path
			d = os.path.dirname(from_rel)
			if os.path.dirname(rel) == d:
				return True
			for inc in self.facts.get(from_rel).get("includes", ()):
				if os.path.normpath(os.path.join(d, inc)) == rel:
					return True
			return False
		return True

	def candidates(self, name, from_rel):
		"""Files that may hold the definition of name seen from from_rel."""
		c = [r for r in self.tree.defs.get(name, ()) if r != from_rel and self._visible(r, from_rel)]
		return c

	def resolve(self, name, from_rel):
		"""Definitions of name visible from from_rel: list of (file, name, kind)."""
		key = (name, from_rel)
		if key in self._resolve_cache:
			return self._resolve_cache[key]
		own = self.facts.get(from_rel)
		if name in own["functions"]:
			out = [(from_rel, name, "f")]
		elif name in own["macros"]:
			out = [(from_rel, name, "m")]
		else:
			out = []
			cands = self.candidates(name, from_rel)
			if len(cands) <= MAX_CANDIDATES:
				self.facts.ensure(cands)
				for rel in cands:
					f = self.facts.get(rel)
					fn = f["functions"].get(name)
					if fn is not None and not (fn["static"] and rel.endswith(".c")):
						out.append((rel, name, "f"))
					elif name in f["macros"] and rel.endswith(".h"):
						out.append((rel, name, "m"))
		self._resolve_cache[key] = out
		return out

	def struct_fields(self, sname):
		for rel in self.tree.struct_defs.get(sname, ())[:MAX_CANDIDATES]:
			self.facts.ensure([rel])
			s = self.facts.get(rel)["structs"].get(sname)
			if s is not None:
				return s
		return None

	def base_type(self, rel, func, base):
		"""Struct type of the expression 'base' inside function func."""
		b = re.sub(r"\s+", "", base)
		b = b.replace("(*", "").replace(")", "")
		parts = re.split(r"->|\.", b)
		if not parts or not re.match(r"^[A-Za-z_]\w*$", parts[0]):
			return None
		fn = self.facts.get(rel)["functions"].get(func)
		if fn is None:
			return None
		t = fn["locals"].get(parts[0])
		if t is None:
			return None
		t = t.rstrip("*")
		for field in parts[1:]:
			field = re.sub(r"\[.*$", "", field)
			fields = self.struct_fields(t)
			if not fields or field not in fields or fields[field] == "()":
				return None
			t = fields[field]
		return t

	def pointer_targets(self, sname, member):
		"""Functions assigned to sname.member in initializers across the tree."""
		files = [r for r in self.tree.inits.get(sname, ()) if member in self.tree.members(r)]
		self.facts.ensure(files)
		out = []
		for rel in files:
			for s, m, fn, line in self.facts.get(rel)["ops"]:
				if s == sname and m == member and (rel, fn) not in out:
					out.append((rel, fn))
		return out

	def prefetch(self, pairs):
		"""Extract, in one parallel batch, the files that may define the
		callees in pairs [(name, from_rel)], so that resolve() finds their
		facts ready instead of tokenizing them one by one."""
		need = set()
		for name, rel in pairs:
			own = self.facts.get(rel)
			if name in own["functions"] or name in own["macros"] or self.kn.primitive({"name": name}) == "no":
				continue
			if name in self.kn.sleepers:
				continue
			c = self.candidates(name, rel)
			if len(c) <= MAX_CANDIDATES:
				need.update(c)
		self.facts.ensure(sorted(need))

	# -- graph ------------------------------------------------------------

	def expand(self, roots):
		"""Build the call graph reachable from roots [(file, name, kind)]."""
		frontier = list(roots)
		depth = 0
		while frontier and depth < MAX_DEPTH:
			nxt = []
			self.facts.ensure([r for r, _, _ in frontier])
			pairs = set()
			for rel, name, kind in frontier:
				f = self.facts.get(rel)
				d = f["functions"].get(name) if kind == "f" else f["macros"].get(name)
				for c in (d or {}).get("calls", ()):
					if not c.get("kind"):
						pairs.add((c["name"], rel))
			self.prefetch(pairs)
			for node in frontier:
				if node in self.nodes:
					continue
				rel, name, kind = node
				f = self.facts.get(rel)
				d = f["functions"].get(name) if kind == "f" else f["macros"].get(name)
				if d is None:
					self.nodes[node] = {"calls": [], "annotate": None}
					continue
				ann = d.get("annotate")
				if kind == "m":
					ann = 0 if ann else None
				edges = []
				for c in d["calls"]:
					if ann is not None and c["line"] >= ann:
						continue
					if c["name"] == name:
						continue
					tg = self.call_targets(c, rel, name, MAX_FANOUT if depth == 0 else DEEP_FANOUT)
					edges.append((c, tg))
					for t in tg.nodes:
						if t not in self.nodes:
							nxt.append(t)
				self.nodes[node] = {"calls": edges, "annotate": ann}
			frontier = nxt
			depth += 1

	def call_targets(self, call, rel, func, fanout=MAX_FANOUT):
		"""The CallTarget of call, made in function func of file rel.

		A function pointer with more than fanout targets is not followed.
		Core code that calls a driver's op in its window (mmc's
		host->ops->enable_sdio_irq()) or in a helper the window calls
		(tty_port_carrier_raised()'s port->ops->carrier_raised()) needs
		the whole table of drivers; a generic member further down (->init,
		->send, ->urb_dequeue) would bring in every driver's version of it
		and cost the cold run more than it finds, so expand() follows at
		most DEEP_FANOUT targets below the second hop.  A table the calling
		file fills itself is already extracted and keeps the wide limit."""
		if call.get("kind") in ("arrow", "dot") or call.get("kind") == "member":
			t = self.base_type(rel, func, call.get("base", ""))
			if t is None:
				return NO_TARGET
			pt = self.pointer_targets(t, call["name"])
			# an ops table the calling file fills itself is the one it
			# calls (tpm_tis_core.c's own tpm_tis ops for chip->ops)
			own = [x for x in pt if x[0] == rel]
			targets = []
			for trel, fn in own or pt:
				targets += self.resolve(fn, trel)
			if not targets or len(targets) > (MAX_FANOUT if own else fanout):
				return NO_TARGET
			return CallTarget("pointer", tuple(targets),
					  info="%s->%s" % (re.sub(r"\s+", "", call.get("base", "")), call["name"]))
		p = self.kn.primitive(call)
		if p == "no":
			return NO_TARGET
		if p is not None:
			group, effect = p
			return CallTarget("prim", group=group, effect=effect)
		return CallTarget("direct", tuple(self.resolve(call["name"], rel)))

	def summarize(self, exact=True):
		"""Summaries of every node of the graph (summarize.summarize).
		exact=False ignores the argument tests: a superset of the chains,
		cheaper, enough to know which names may sleep at all."""
		self.args = summarize_mod.Args(self.kn, exact)
		self.summary = summarize_mod.summarize(self.nodes, MAX_ROUNDS, args=self.args)
		self.summaries_without = {}

	def summary_without(self, group):
		"""Summaries whose chains do not end in group, a group name or a
		tuple of them (computed once)."""
		if group not in self.summaries_without:
			ex = group if isinstance(group, tuple) else (group,)
			self.summaries_without[group] = summarize_mod.summarize(self.nodes, MAX_ROUNDS, exclude=ex, args=self.args)
		return self.summaries_without[group]

	def witness(self, c, tg, summ, at, exclude=()):
		return summarize_mod.witness(c, tg, summ, at, exclude, self.args)
