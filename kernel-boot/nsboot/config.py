# SPDX-License-Identifier: GPL-2.0-only
#
# Kconfig fragments for nsboot: parse, merge, check the generated .config,
# and explain a symbol that did not take (its unmet "depends on").
#
# Modelled on the kernel's tools/testing/kunit/kunit_config.py.

"""Kconfig fragments: parse, merge, check, explain.

A fragment (kernel-boot/configs/*.config) is a .config subset with
comments:

	##: console and messages
	CONFIG_PRINTK=y			# tinyconfig has no printk at all
	# CONFIG_UNWINDER_GUESS is not set

'#' lines are comments, '##:' starts a section, and a value may carry a
trailing '# reason'.  After 'make olddefconfig' the generated .config must
hold every requested value; check_config() says, for each one that is
missing, what its Kconfig entry depends on and which part is unmet.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

from nsboot import HARNESS

CONFIGS_DIR = os.path.join(HARNESS, 'configs')
DEFAULT_FRAGMENTS = ('base', 'debug', 'lockdep')

CONFIG_IS_NOT_SET_PATTERN = re.compile(r'^# CONFIG_(\w+) is not set$')
CONFIG_PATTERN = re.compile(r'^CONFIG_(\w+)=("(?:[^"\\]|\\.)*"|\S+)(?:\s+#.*)?$')


class KconfigParseError(Exception):
	"""A fragment or .config line that is not Kconfig."""


@dataclass(frozen=True)
class KconfigEntry:
	"""One requested (or generated) symbol value.

	Example: KconfigEntry('PRINTK', 'y', 'configs/base.config:12')
	"""
	name: str
	value: str
	origin: str = field(default='', compare=False)

	def __str__(self) -> str:
		if self.value == 'n':
			return f'# CONFIG_{self.name} is not set'
		return f'CONFIG_{self.name}={self.value}'


class Kconfig:
	"""A set of Kconfig values, in the order they were given."""

	def __init__(self) -> None:
		self._entries: Dict[str, KconfigEntry] = {}

	def __eq__(self, other: object) -> bool:
		if not isinstance(other, Kconfig):
			return NotImplemented
		return self._entries == other._entries

	def __repr__(self) -> str:
		return ','.join(str(e) for e in self.as_entries())

	def __len__(self) -> int:
		return len(self._entries)

	def as_entries(self) -> List[KconfigEntry]:
		"""The entries, in insertion order."""
		return list(self._entries.values())

	def get(self, name: str) -> Optional[str]:
		"""The value of name (without CONFIG_), or None when absent."""
		e = self._entries.get(name)
		return e.value if e else None

	def values(self) -> Dict[str, str]:
		"""name -> value, for expression evaluation."""
		return {n: e.value for n, e in self._entries.items()}

	def add_entry(self, entry: KconfigEntry) -> None:
		"""Add or replace one value."""
		self._entries[entry.name] = entry

	def conflicting_options(self, other: 'Kconfig') -> List[Tuple[KconfigEntry, KconfigEntry]]:
		"""The symbols that self and other both set, to different values."""
		diff = []
		for name, e in self._entries.items():
			o = other._entries.get(name)
			if o is not None and o.value != e.value:
				diff.append((e, o))
		return diff

	def merge_in_entries(self, other: 'Kconfig') -> None:
		"""Add other's entries; other wins on a conflict."""
		for e in other.as_entries():
			self._entries[e.name] = e

	def missing_from(self, generated: 'Kconfig') -> List[Tuple[KconfigEntry, Optional[str]]]:
		"""Requested entries that generated does not have, with the value it has.

		A request for 'n' is met by an absent symbol, as in kunit.
		"""
		missing = []
		for name, e in self._entries.items():
			got = generated.get(name)
			if got is None:
				if e.value != 'n':
					missing.append((e, None))
			elif got != e.value:
				missing.append((e, got))
		return missing

	def is_subset_of(self, generated: 'Kconfig') -> bool:
		"""True when generated holds every requested value."""
		return not self.missing_from(generated)

	def to_fragment(self) -> str:
		"""Plain Kconfig text (no comments), as merge_config.sh wants it."""
		return ''.join(str(e) + '\n' for e in self.as_entries())


def parse_from_string(blob: str, origin: str = '') -> Kconfig:
	"""Parse a fragment or a .config.

	Raises KconfigParseError on a line that is neither a value nor a comment.
	"""
	kconfig = Kconfig()
	for lineno, raw in enumerate(blob.splitlines(), 1):
		line = raw.strip()
		if not line:
			continue
		where = f'{origin}:{lineno}' if origin else str(lineno)
		m = CONFIG_PATTERN.match(line)
		if m:
			kconfig.add_entry(KconfigEntry(m.group(1), m.group(2), where))
			continue
		m = CONFIG_IS_NOT_SET_PATTERN.match(line)
		if m:
			kconfig.add_entry(KconfigEntry(m.group(1), 'n', where))
			continue
		if line.startswith('#'):
			continue
		raise KconfigParseError(f'{where}: not a Kconfig line: {line}')
	return kconfig


def parse_file(path: str) -> Kconfig:
	"""Parse a fragment or .config file."""
	with open(path, encoding='utf-8', errors='replace') as f:
		return parse_from_string(f.read(), os.path.relpath(path) if not os.path.isabs(path) else path)


def resolve_fragment(name: str) -> str:
	"""A fragment name ('debug'), file, or directory -> a file path.

	Raises KconfigParseError when it does not exist, naming the choices.
	"""
	if os.path.isdir(name):
		cand = os.path.join(name, 'nsboot.config')
		if os.path.isfile(cand):
			return cand
	if os.path.isfile(name):
		return name
	cand = os.path.join(CONFIGS_DIR, name if name.endswith('.config') else name + '.config')
	if os.path.isfile(cand):
		return cand
	choices = sorted(f[:-len('.config')] for f in os.listdir(CONFIGS_DIR) if f.endswith('.config'))
	raise KconfigParseError(f'no fragment {name!r} (choices: {", ".join(choices)}, or a file)')


def load_fragments(names: Sequence[str], extra: Sequence[str] = ()) -> Kconfig:
	"""Merge fragments (names, files or dirs) and CONFIG_X=y strings.

	Two fragments that set one symbol to different values are refused,
	as kunit refuses them; 'extra' (the command line) may override.
	"""
	merged = Kconfig()
	for name in names:
		path = resolve_fragment(name)
		part = parse_file(path)
		conflicts = merged.conflicting_options(part)
		if conflicts:
			desc = '; '.join(f'{a} ({a.origin}) vs {b} ({b.origin})' for a, b in conflicts)
			raise KconfigParseError(f'conflicting fragments: {desc}')
		merged.merge_in_entries(part)
	if extra:
		merged.merge_in_entries(parse_from_string('\n'.join(
			e if e.startswith(('CONFIG_', '#')) else 'CONFIG_' + e for e in extra), 'command line'))
	return merged


# ---------------------------------------------------------------------------
# The Kconfig language, just enough to explain an unmet dependency.

@dataclass
class SymbolDef:
	"""One 'config NAME' entry (a symbol may have several)."""
	name: str
	origin: str
	type: str = ''
	prompt: bool = False
	prompt_if: List[str] = field(default_factory=list)
	depends: List[str] = field(default_factory=list)
	context: List['_Frame'] = field(default_factory=list)
	defaults: List[Tuple[str, str]] = field(default_factory=list)	# (value, 'if' condition)

	def all_depends(self) -> List[str]:
		"""Its own 'depends on' plus those of the enclosing if/menu/choice."""
		deps: List[str] = []
		for frame in self.context:
			deps.extend(frame.deps)
		return deps + self.depends


@dataclass
class _Frame:
	"""An enclosing 'if', 'menu' or 'choice' block and its conditions."""
	kind: str
	deps: List[str] = field(default_factory=list)


_TOKEN = re.compile(r'\s*(\$\((?:[^()]|\([^()]*\))*\)|"(?:[^"\\]|\\.)*"|\'[^\']*\'|&&|\|\||!=|<=|>=|[!()=<>]|[A-Za-z0-9_.\-+/]+)')


def _tokenize(expr: str) -> List[str]:
	tokens = []
	pos = 0
	expr = expr.strip()
	while pos < len(expr):
		m = _TOKEN.match(expr, pos)
		if not m:
			pos += 1
			continue
		tokens.append(m.group(1))
		pos = m.end()
	return tokens


class _Expr:
	"""A parsed Kconfig expression: ('or'|'and', a, b), ('not', a),
	('cmp', op, lhs, rhs) or ('sym', name)."""

	def __init__(self, text: str) -> None:
		self.text = text
		self._toks = _tokenize(text)
		self._i = 0
		self.tree = self._or() if self._toks else ('sym', 'y')

	def _peek(self) -> Optional[str]:
		return self._toks[self._i] if self._i < len(self._toks) else None

	def _next(self) -> str:
		t = self._toks[self._i]
		self._i += 1
		return t

	def _or(self) -> tuple:
		left = self._and()
		while self._peek() == '||':
			self._next()
			left = ('or', left, self._and())
		return left

	def _and(self) -> tuple:
		left = self._unary()
		while self._peek() == '&&':
			self._next()
			left = ('and', left, self._unary())
		return left

	def _unary(self) -> tuple:
		t = self._peek()
		if t == '!':
			self._next()
			return ('not', self._unary())
		if t == '(':
			self._next()
			inner = self._or()
			if self._peek() == ')':
				self._next()
			return inner
		if t is None:
			return ('sym', 'n')
		name = self._next()
		if self._peek() in ('=', '!=', '<', '<=', '>', '>='):
			op = self._next()
			rhs = self._next() if self._peek() is not None else ''
			return ('cmp', op, name, rhs)
		return ('sym', name)


_TRI = {'n': 0, 'm': 1, 'y': 2}


def _sym_value(name: str, values: Dict[str, str]) -> str:
	if name in ('y', 'm', 'n'):
		return name
	if name.startswith(('"', "'")):
		return name[1:-1]
	if name.startswith('$('):
		return 'n'	# a Kconfig macro ($(cc-option,...)): unknown here
	if re.fullmatch(r'-?(0x[0-9a-fA-F]+|\d+)', name):
		return name
	return values.get(name, 'n').strip('"')


def _eval(tree: tuple, values: Dict[str, str]) -> int:
	kind = tree[0]
	if kind == 'or':
		return max(_eval(tree[1], values), _eval(tree[2], values))
	if kind == 'and':
		return min(_eval(tree[1], values), _eval(tree[2], values))
	if kind == 'not':
		return 2 - _eval(tree[1], values)
	if kind == 'cmp':
		op, lhs, rhs = tree[1], _sym_value(tree[2], values), _sym_value(tree[3], values)
		if op in ('=', '!='):
			return 2 if (lhs == rhs) == (op == '=') else 0
		try:
			a, b = int(lhs, 0), int(rhs, 0)
		except ValueError:
			a, b = lhs, rhs	# type: ignore[assignment]
		ok = {'<': a < b, '<=': a <= b, '>': a > b, '>=': a >= b}[op]	# type: ignore[operator]
		return 2 if ok else 0
	return _TRI.get(_sym_value(tree[1], values), 0)


def _unmet(tree: tuple, values: Dict[str, str], need: int) -> List[str]:
	"""The leaves of tree that keep it below need, as 'SYM=value' strings."""
	if _eval(tree, values) >= need:
		return []
	kind = tree[0]
	if kind == 'and':
		return _unmet(tree[1], values, need) + _unmet(tree[2], values, need)
	if kind == 'or':
		alts = _unmet(tree[1], values, need) + _unmet(tree[2], values, need)
		return ['one of (' + ' || '.join(alts) + ')'] if len(alts) > 1 else alts
	if kind == 'not':
		inner = tree[1]
		if inner[0] == 'sym':
			return [f'{inner[1]}={_sym_value(inner[1], values)} (must be n)']
		return [f'!({_render(inner)})']
	if kind == 'cmp':
		return [f'{tree[2]}={_sym_value(tree[2], values)} (needs {tree[2]}{tree[1]}{tree[3]})']
	return [f'{tree[1]}={_sym_value(tree[1], values)}']


def _render(tree: tuple) -> str:
	kind = tree[0]
	if kind in ('or', 'and'):
		op = ' || ' if kind == 'or' else ' && '
		return f'({_render(tree[1])}{op}{_render(tree[2])})'
	if kind == 'not':
		return '!' + _render(tree[1])
	if kind == 'cmp':
		return f'{tree[2]}{tree[1]}{tree[3]}'
	return tree[1]


def evaluate(expr: str, values: Dict[str, str]) -> int:
	"""Evaluate a Kconfig expression to 0 (n), 1 (m) or 2 (y)."""
	return _eval(_Expr(expr).tree, values)


def unmet_terms(expr: str, values: Dict[str, str], need: int = 2) -> List[str]:
	"""The parts of expr that are not met, e.g. ['LOCK_DEBUGGING_SUPPORT=n']."""
	return _unmet(_Expr(expr).tree, values, need)


class KconfigTree:
	"""The Kconfig entries of a source tree, read from its Kconfig files.

	Only what explaining a dependency needs is kept: each symbol's
	definitions (type, prompt, depends on, enclosing if/menu/choice) and
	who selects it.
	"""

	def __init__(self, srctree: str, srcarch: str = 'x86') -> None:
		self.srctree = srctree
		self.srcarch = srcarch
		self.symbols: Dict[str, List[SymbolDef]] = {}
		self.selected_by: Dict[str, List[Tuple[str, str]]] = {}
		self._seen: set = set()
		self._parse(os.path.join(srctree, 'Kconfig'), [])

	def dir_size(self, origin: str) -> int:
		"""How many .c files the directory of a Kconfig entry holds: a
		rough build cost, to prefer a small driver as a selector."""
		d = os.path.join(self.srctree, os.path.dirname(origin.split(':')[0]))
		n = 0
		for _, _, files in os.walk(d):
			n += sum(1 for f in files if f.endswith('.c'))
		return n

	def _expand(self, path: str) -> str:
		return path.replace('$(SRCARCH)', self.srcarch).replace('$(ARCH)', self.srcarch)

	def _parse(self, path: str, stack: List[_Frame]) -> None:
		real = os.path.realpath(path)
		if real in self._seen or not os.path.isfile(real):
			return
		self._seen.add(real)
		try:
			with open(real, encoding='utf-8', errors='replace') as f:
				raw_lines = f.read().split('\n')
		except OSError:
			return
		rel = os.path.relpath(real, self.srctree)
		cur: Optional[object] = None	# the entry that attributes apply to
		help_indent: Optional[int] = None
		i = 0
		while i < len(raw_lines):
			lineno = i + 1
			line = raw_lines[i]
			i += 1
			while line.endswith('\\') and i < len(raw_lines):
				line = line[:-1] + ' ' + raw_lines[i]
				i += 1
			expanded = line.expandtabs(8)
			indent = len(expanded) - len(expanded.lstrip())
			stripped = line.strip()
			if help_indent is not None:
				if not stripped or indent > help_indent:
					continue
				help_indent = None
			if not stripped or stripped.startswith('#'):
				continue
			stripped = _strip_comment(stripped)
			word, _, rest = stripped.partition(' ')
			rest = rest.strip()
			if word in ('source', 'osource', 'rsource', 'orsource'):
				target = self._expand(rest.strip('"'))
				if word.startswith(('r', 'or')) and word != 'osource':
					target = os.path.join(os.path.dirname(rel), target)
				self._parse(os.path.join(self.srctree, target), stack)
				cur = None
			elif word in ('config', 'menuconfig'):
				sym = SymbolDef(rest, f'{rel}:{lineno}', context=list(stack))
				self.symbols.setdefault(rest, []).append(sym)
				cur = sym
			elif word == 'if':
				stack = stack + [_Frame('if', [rest])]
				cur = None
			elif word in ('menu', 'choice'):
				frame = _Frame(word)
				stack = stack + [frame]
				cur = frame
			elif word in ('endif', 'endmenu', 'endchoice'):
				kind = word[3:]
				for j in range(len(stack) - 1, -1, -1):
					if stack[j].kind == kind:
						stack = stack[:j]
						break
				cur = None
			elif word in ('comment', 'mainmenu'):
				cur = _Frame('comment')	# absorbs its attributes
			elif word in ('help', '---help---'):
				help_indent = indent
			elif word == 'depends' and rest.startswith('on'):
				expr = rest[2:].strip()
				if isinstance(cur, SymbolDef):
					cur.depends.append(expr)
				elif isinstance(cur, _Frame):
					cur.deps.append(expr)
			elif word == 'visible' and isinstance(cur, _Frame):
				pass	# 'visible if' hides a menu, it does not gate its symbols
			elif isinstance(cur, SymbolDef):
				self._attribute(cur, word, rest)

	def _attribute(self, sym: SymbolDef, word: str, rest: str) -> None:
		if word in ('bool', 'tristate', 'string', 'int', 'hex'):
			sym.type = word
			prompt, cond = _prompt_and_cond(rest)
			if prompt:
				sym.prompt = True
				if cond:
					sym.prompt_if.append(cond)
		elif word in ('def_bool', 'def_tristate', 'default'):
			if word != 'default':
				sym.type = word[4:]
			val, _, cond = rest.partition(' if ')
			sym.defaults.append((val.strip(), cond.strip()))
		elif word == 'prompt':
			prompt, cond = _prompt_and_cond(rest)
			sym.prompt = True
			if cond:
				sym.prompt_if.append(cond)
		elif word == 'select':
			target, _, cond = rest.partition(' if ')
			self.selected_by.setdefault(target.strip(), []).append((sym.name, cond.strip()))

	def explain(self, name: str, want: str, values: Dict[str, str], depth: int = 1,
		    requested: bool = True) -> str:
		"""Why CONFIG_name is not want in values; one line.

		Example: "depends on DEBUG_KERNEL && LOCK_DEBUGGING_SUPPORT;
		unmet: LOCK_DEBUGGING_SUPPORT=n (no prompt; selected by ...)"
		"""
		defs = self.symbols.get(name)
		if not defs:
			return f'no such symbol in {self.srcarch} Kconfig (a typo, or another architecture)'
		parts: List[str] = []
		if want == 'n':
			active = [f'{s}' + (f' if {c}' if c else '') for s, c in self.selected_by.get(name, [])
				  if _TRI.get(values.get(s, 'n'), 0) and (not c or evaluate(c, values))]
			if active:
				return 'selected by ' + ', '.join(active)
			return 'turned on by a default or another symbol'
		need = 1 if want == 'm' else 2
		best: Optional[str] = None
		for d in defs:
			deps = [' '.join(x.split()) for x in d.all_depends()]
			text = ' && '.join(f'({x})' if '||' in x else x for x in deps)
			unmet = unmet_terms(text, values, need) if deps else []
			if not d.prompt and not unmet:
				unmet_prompt = 'it has no prompt: only select or default sets it'
				sel = self.selected_by.get(name, [])
				if sel:
					unmet_prompt += '; selected by ' + ', '.join(s for s, _ in sel[:6])
				best = best or unmet_prompt
				continue
			if d.prompt_if and not unmet:
				pu = unmet_terms(' && '.join(d.prompt_if), values, 2)
				if pu:
					best = best or f'its prompt needs {" && ".join(d.prompt_if)}; unmet: {", ".join(pu)}'
					continue
			if not unmet:
				continue
			detail = []
			for term in unmet:
				leaf = term.split('=')[0]
				extra = ''
				if depth > 0 and re.fullmatch(r'\w+', leaf) and leaf in self.symbols and not term.endswith('(must be n)'):
					extra = ' [' + self.explain(leaf, 'y', values, depth - 1, False) + ']'
				detail.append(term + extra)
			parts.append(f'depends on {text} ({d.origin}); unmet: ' + ', '.join(detail))
		if parts:
			return '; or '.join(parts)
		if best:
			return best
		if not requested and values.get(name, 'n') == 'n' and any(d.prompt for d in defs):
			return f'its dependencies are met but it is off: request CONFIG_{name}=y too'
		return 'dependencies are met; a choice or a select of something else may have won'


def _strip_comment(line: str) -> str:
	"""Drop a trailing '# comment' that is outside quotes."""
	quote = ''
	for i, ch in enumerate(line):
		if quote:
			if ch == quote:
				quote = ''
		elif ch in '"\'':
			quote = ch
		elif ch == '#':
			return line[:i].rstrip()
	return line


def _prompt_and_cond(rest: str) -> Tuple[str, str]:
	m = re.match(r'("(?:[^"\\]|\\.)*"|\'[^\']*\')\s*(?:if\s+(.*))?$', rest)
	if not m:
		return '', ''
	return m.group(1), (m.group(2) or '').strip()


@dataclass
class ConfigCheck:
	"""The result of checking a generated .config against the request."""
	missing: List[Tuple[KconfigEntry, Optional[str], str]]

	@property
	def ok(self) -> bool:
		"""True when every requested value is in the .config."""
		return not self.missing

	def message(self) -> str:
		"""One line per missing symbol, after a kunit-like headline.

		Example:
		  Not all requested Kconfig options are in the generated .config:
		    CONFIG_PROVE_LOCKING=y (configs/lockdep.config:9): got n; depends on ...
		"""
		lines = ['Not all requested Kconfig options are in the generated .config '
			 '(probably unmet dependencies). Missing:']
		for entry, got, why in self.missing:
			where = f' ({entry.origin})' if entry.origin else ''
			lines.append(f'  {entry}{where}: got {got or "n"}; {why}')
		return '\n'.join(lines)

	def summary(self) -> str:
		"""The missing symbols on one line."""
		return 'missing ' + ', '.join(str(e) for e, _, _ in self.missing)


def check_config(requested: Kconfig, generated: Kconfig,
		 tree: Optional[KconfigTree] = None,
		 tree_factory=None) -> ConfigCheck:
	"""Check generated against requested; explain what is missing.

	tree (or tree_factory(), called only when something is missing) gives
	the Kconfig entries used for the explanations.
	"""
	missing = requested.missing_from(generated)
	if not missing:
		return ConfigCheck([])
	if tree is None and tree_factory is not None:
		try:
			tree = tree_factory()
		except OSError:
			tree = None
	values = generated.values()
	out = []
	for entry, got in missing:
		if tree is None:
			why = 'could not read the Kconfig files to say why'
		elif entry.value in ('y', 'm', 'n'):
			why = tree.explain(entry.name, entry.value, values)
		else:
			why = 'the value differs (a range, or another fragment set it)'
		out.append((entry, got, why))
	return ConfigCheck(out)


def fragment_names(paths: Iterable[str]) -> str:
	"""A short label for a list of fragments: 'base+debug'."""
	names = []
	for p in paths:
		b = os.path.basename(p)
		names.append(b[:-len('.config')] if b.endswith('.config') else b)
	return '+'.join(names) or 'none'


# ---------------------------------------------------------------------------
# Resolving the symbols a patched file needs

def _leaves(t: tuple) -> List[str]:
	"""The symbols an expression needs on; '!' for a part no symbol can meet."""
	if t[0] == 'and':
		return _leaves(t[1]) + _leaves(t[2])
	if t[0] == 'or':
		return ['!']	# nested choices: not followed
	if t[0] == 'not':
		return ['!']
	if t[0] == 'cmp':
		return [t[2]] if (t[1] == '!=' and t[3] == 'n') or (t[1] == '=' and t[3] == 'y') else ['!']
	return [t[1]]


def feasible(tree: 'KconfigTree', name: str, values: Dict[str, str], depth: int = 3) -> bool:
	"""Whether name could be turned on here, looking depth levels down:
	it exists on this architecture, and its dependencies (or, without a
	prompt, one of its selectors) could be met."""
	if values.get(name) == 'y':
		return True
	defs = tree.symbols.get(name)
	if not defs:
		return False
	if depth <= 0:
		return True
	prompted = [d for d in defs if d.prompt]
	if not prompted:
		return any(feasible(tree, s, values, depth - 1) for s, _ in tree.selected_by.get(name, []))
	for d in prompted:
		terms = d.all_depends() + d.prompt_if
		if not terms:
			return True
		t = _Expr(' && '.join(f'({x})' for x in terms)).tree
		if _eval(t, values) >= 2 or _feasible_expr(tree, t, values, depth - 1):
			return True
	return False


def _feasible_expr(tree: 'KconfigTree', t: tuple, values: Dict[str, str], depth: int) -> bool:
	if _eval(t, values) >= 2:
		return True
	if t[0] == 'and':
		return _feasible_expr(tree, t[1], values, depth) and _feasible_expr(tree, t[2], values, depth)
	if t[0] == 'or':
		return _feasible_expr(tree, t[1], values, depth) or _feasible_expr(tree, t[2], values, depth)
	return all(x != '!' and feasible(tree, x, values, depth) for x in _leaves(t))


def _choose_alternative(tree: 'KconfigTree', alts: List[tuple], values: Dict[str, str]) -> Optional[tuple]:
	"""Of the branches of an 'a || b' that is not met, the one to turn on:
	the first whose symbols could be turned on on this architecture,
	COMPILE_TEST last (it builds more than it boots)."""
	good = [a for a in alts if _feasible_expr(tree, a, values, 3)]
	good.sort(key=lambda a: 'COMPILE_TEST' in _leaves(a))
	return good[0] if good else None


def _flatten_or(t: tuple) -> List[tuple]:
	return _flatten_or(t[1]) + _flatten_or(t[2]) if t[0] == 'or' else [t]


def _needs(tree: 'KconfigTree', t: tuple, values: Dict[str, str], out: List[str], why: List[str]) -> None:
	"""Add to out the symbols that would make expression t y."""
	if _eval(t, values) >= 2:
		return
	kind = t[0]
	if kind == 'and':
		_needs(tree, t[1], values, out, why)
		_needs(tree, t[2], values, out, why)
	elif kind == 'or':
		alt = _choose_alternative(tree, _flatten_or(t), values)
		if alt is None:
			why.append(f'none of ({_render(t)}) exists on {tree.srcarch}')
		else:
			_needs(tree, alt, values, out, why)
	elif kind == 'cmp' and ((t[1] == '!=' and t[3] == 'n') or (t[1] == '=' and t[3] == 'y')):
		_needs(tree, ('sym', t[2]), values, out, why)
	elif kind == 'sym' and t[1] in tree.symbols:
		out.append(t[1])
	else:
		why.append(f'{_render(t)} cannot be met by turning a symbol on')


def resolve_step(tree: 'KconfigTree', wanted: Sequence[str], values: Dict[str, str]) -> Tuple[List[str], List[str]]:
	"""One round of dependency resolution against a generated .config.

	For each wanted symbol that is not y in values: its unmet 'depends on'
	(and prompt 'if') terms, or, for a symbol without a prompt, a symbol
	that selects it.  Returns (symbols to add, reasons nothing can be
	added).  Run it again on the next .config until nothing is added:
	Kconfig itself decides, this only proposes.
	"""
	add: List[str] = []
	why: List[str] = []
	for name in wanted:
		if values.get(name) == 'y':
			continue
		defs = tree.symbols.get(name)
		if not defs:
			why.append(f'{name}: no such symbol in {tree.srcarch} Kconfig')
			continue
		prompted = [d for d in defs if d.prompt]
		extra: List[str] = []	# a promptless symbol's default expression
		if not prompted:
			sels = [(s, c) for s, c in tree.selected_by.get(name, [])
				if s in tree.symbols and any(d.prompt for d in tree.symbols[s])]
			if not sels:
				# a promptless bool with 'default EXPR' (SPI_MASTER is
				# 'default SPI'): what makes its depends and EXPR true
				dflt = [(d, v, c) for d in defs if d.type in ('bool', 'tristate')
					for v, c in d.defaults if v not in ('n', '"n"')]
				if not dflt:
					why.append(f'{name}: no prompt and nothing selects it')
					continue
				d, v, c = dflt[0]
				extra = ([v] if v not in ('y', 'm') else []) + ([c] if c else [])
			elif any(values.get(s) == 'y' for s, _ in sels):
				d = defs[0]
			else:
				# the selector that is cheapest to turn on here: no
				# symbol of another architecture, no COMPILE_TEST, few
				# dependencies, then the name closest to the symbol's
				def cost(sc: Tuple[str, str]) -> Tuple[int, int, int, str]:
					d0 = [d for d in tree.symbols[sc[0]] if d.prompt][0]
					deps = [x for x in d0.all_depends() + d0.prompt_if]
					need: List[str] = []
					bad: List[str] = []
					if deps:
						_needs(tree, _Expr(' && '.join(f'({x})' for x in deps)).tree, values, need, bad)
					common = len(os.path.commonprefix([sc[0][::-1], name[::-1]]))
					return (100 * len(bad) + 10 * ('COMPILE_TEST' in need) + len(need)
						+ tree.dir_size(d0.origin) // 20, -common, len(sc[0]), sc[0])
				add.append(sorted(sels, key=cost)[0][0])
				continue
		else:
			d = prompted[0]
		terms = d.all_depends() + d.prompt_if + extra
		if not terms:
			continue
		expr = _Expr(' && '.join(f'({x})' for x in terms)).tree
		mine: List[str] = []
		sub: List[str] = []
		_needs(tree, expr, values, mine, sub)
		add.extend(mine)
		why.extend(f'{name}: {w}' for w in sub)
	seen = set()
	uniq = [s for s in add if not (s in seen or seen.add(s))]
	return [s for s in uniq if s not in wanted], why
