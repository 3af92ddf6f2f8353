# SPDX-License-Identifier: GPL-2.0-only
"""The import graph of the two packages: scripts/nestsleep/ (the checker,
the fixer, the series, the boot orchestration) and kernel-boot/nsboot/
(configure, build, boot and parse a kernel; it knows nothing of what is
tested).

Every import of every module is read with ast, wherever it stands (at the
top, or inside a function), without importing anything:

  import a.b.c            an edge to a.b.c (or to the deepest package of
                          it that is a module of ours)
  from a.b import c       an edge to a.b.c when c is a submodule, else to a.b
  from . import c         the same, relative to the importing module

Importing a.b.c also runs a/__init__.py and a/b/__init__.py; those
implicit edges to the enclosing packages are not drawn (every submodule
would otherwise be in a cycle with an __init__.py that imports it).
Imports made from a string (importlib) are not seen.

Two rules: the graph has no cycle (each one is printed, with the import
lines that make it), and no module of kernel-boot/nsboot/ imports
nestsleep (nsboot is a leaf: nestsleep calls it, never the reverse)."""

import ast
import os
import unittest
from typing import Dict, List, Set, Tuple

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# package name -> the directory that holds it
ROOTS = {'nestsleep': os.path.join(TOP, 'scripts'), 'nsboot': os.path.join(TOP, 'kernel-boot')}

# (importing module, imported module) -> the 'file:line' of each import
Edges = Dict[Tuple[str, str], List[str]]


def modules() -> Dict[str, str]:
	"""Dotted module name -> its file, for every .py of both packages."""
	out = {}
	for pkg, root in ROOTS.items():
		for d, dirs, files in os.walk(os.path.join(root, pkg)):
			dirs[:] = sorted(x for x in dirs if x != '__pycache__')
			for f in sorted(files):
				if not f.endswith('.py'):
					continue
				parts = os.path.relpath(os.path.join(d, f), root)[:-3].split(os.sep)
				if parts[-1] == '__init__':
					parts.pop()
				out['.'.join(parts)] = os.path.join(d, f)
	return out


def _deepest(name: str, mods: Dict[str, str]) -> str:
	"""name, or the longest prefix of it that is one of our modules; ''."""
	parts = name.split('.')
	while parts:
		if '.'.join(parts) in mods:
			return '.'.join(parts)
		parts.pop()
	return ''


def imports_of(name: str, path: str, mods: Dict[str, str]) -> List[Tuple[str, int, str]]:
	"""(imported name as written, line, our module it resolves to or '')
	for every import statement of the module."""
	with open(path) as f:
		tree = ast.parse(f.read(), path)
	is_pkg = os.path.basename(path) == '__init__.py'
	out = []
	for node in ast.walk(tree):
		if isinstance(node, ast.Import):
			for a in node.names:
				out.append((a.name, node.lineno, _deepest(a.name, mods)))
		elif isinstance(node, ast.ImportFrom):
			base = node.module or ''
			if node.level:
				pkg = name.split('.') if is_pkg else name.split('.')[:-1]
				pkg = pkg[:len(pkg) - (node.level - 1)]
				base = '.'.join(pkg + ([base] if base else []))
			for a in node.names:
				sub = base + '.' + a.name
				if sub in mods:
					out.append((sub, node.lineno, sub))
				else:
					out.append((base, node.lineno, _deepest(base, mods)))
	return out


def graph() -> Tuple[Dict[str, Set[str]], Edges, Dict[str, List[Tuple[str, int, str]]]]:
	"""(module -> the modules it imports, where each edge is written, every
	import of each module)."""
	mods = modules()
	adj: Dict[str, Set[str]] = {m: set() for m in mods}
	where: Edges = {}
	every = {}
	for m, path in mods.items():
		every[m] = imports_of(m, path, mods)
		for _written, line, target in every[m]:
			at = '%s:%d' % (os.path.relpath(path, TOP), line)
			if target and target != m:
				adj[m].add(target)
				if at not in where.setdefault((m, target), []):
					where[(m, target)].append(at)
	return adj, where, every


def strongly_connected(adj: Dict[str, Set[str]]) -> List[List[str]]:
	"""Tarjan's components of more than one module, each sorted."""
	index: Dict[str, int] = {}
	low: Dict[str, int] = {}
	stack: List[str] = []
	on: Set[str] = set()
	comps: List[List[str]] = []

	def visit(v: str) -> None:
		index[v] = low[v] = len(index)
		stack.append(v)
		on.add(v)
		for w in sorted(adj[v]):
			if w not in index:
				visit(w)
				low[v] = min(low[v], low[w])
			elif w in on:
				low[v] = min(low[v], index[w])
		if low[v] == index[v]:
			comp = []
			while True:
				w = stack.pop()
				on.discard(w)
				comp.append(w)
				if w == v:
					break
			if len(comp) > 1:
				comps.append(sorted(comp))

	for v in sorted(adj):
		if v not in index:
			visit(v)
	return sorted(comps)


def one_cycle(comp: List[str], adj: Dict[str, Set[str]]) -> List[str]:
	"""The shortest cycle through the first module of a component (breadth
	first inside it), as [m0, m1, ..., m0]."""
	start, inside = comp[0], set(comp)
	prev = {start: ''}
	queue = [start]
	while queue:
		v = queue.pop(0)
		for w in sorted(adj[v] & inside):
			if w == start:
				path = [v]
				while prev[path[-1]]:
					path.append(prev[path[-1]])
				return list(reversed(path)) + [start]
			if w not in prev:
				prev[w] = v
				queue.append(w)
	return comp


def describe(comps: List[List[str]], adj: Dict[str, Set[str]], where: Edges) -> str:
	out = []
	for comp in comps:
		cyc = one_cycle(comp, adj)
		out.append('cycle: %s' % ' -> '.join(cyc))
		for a, b in zip(cyc, cyc[1:]):
			out.append('  %s imports %s at %s' % (a, b, ', '.join(where[(a, b)])))
		if len(comp) > len(cyc) - 1:
			out.append('  (one component of %d modules: %s)' % (len(comp), ', '.join(comp)))
	return '\n'.join(out)


class ImportGraphTest(unittest.TestCase):

	def test_graph_is_read(self):
		"""The walk sees the imports it must: one inside a function, and a
		'from package import submodule'."""
		adj, _where, _every = graph()
		self.assertIn('nestsleep.analysis.pipeline', adj['nestsleep.cli'])	# inside _coccicheck()
		self.assertIn('nestsleep.series.series', adj['nestsleep.cli'])		# from nestsleep.series import series

	def test_no_cycle(self):
		adj, where, _every = graph()
		comps = strongly_connected(adj)
		if comps:
			self.fail('%d import cycle(s):\n%s' % (len(comps), describe(comps, adj, where)))

	def test_nsboot_imports_no_nestsleep(self):
		"""kernel-boot/nsboot/ is a leaf: it takes its cache directory and
		its inputs from its caller."""
		_adj, _where, every = graph()
		paths = modules()
		bad = ['%s:%d: %s' % (os.path.relpath(paths[m], TOP), line, written)
		       for m, imps in sorted(every.items()) if m.split('.')[0] == 'nsboot'
		       for written, line, _t in imps if written.split('.')[0] == 'nestsleep']
		if bad:
			self.fail('nsboot imports nestsleep:\n' + '\n'.join(bad))


if __name__ == '__main__':
	unittest.main()
