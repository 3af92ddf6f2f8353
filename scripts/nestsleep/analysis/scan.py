# SPDX-License-Identifier: GPL-2.0-only
"""Scan: every .c/.h file once, cached by content hash (which names it may
define, which structs and initializers it holds, whether it holds a wait
site), and the per-file facts of cfacts.py, extracted on demand."""

import gc
import marshal
import multiprocessing
import os
import re
import time
from collections.abc import Mapping

from nestsleep.analysis import cfacts
from nestsleep.common import sha1
from nestsleep.knowledge import Knowledge
from nestsleep.model import FileFlag
from nestsleep.progress import Progress

SCAN_VERSION = 3
# The line patterns begin with the newline before the line, not with '^':
# the regex engine then looks for a newline and tries the pattern only
# there, where '^' made it try every byte (the scan took 40 % less time).
# They are run on the file's bytes after a newline.
DEF_LINE = re.compile(
	rb"\n(?:(?:[A-Za-z_][^\n;(]*?)?\b([A-Za-z_]\w*)[ \t]*\([^\n;]*$"
	rb"|#[ \t]*define[ \t]+([A-Za-z_]\w*)\("
	rb"|(?:typedef[ \t]+)?struct[ \t]+(\w+)[ \t]*\{)", re.M)
INIT_STRUCT = re.compile(rb"struct\s+(\w+)\s[^=;{}()\n]*=\s*\{")
INIT_MEMBER = re.compile(rb"\n[ \t]*\.(\w+)[ \t]*=[ \t]*&?[A-Za-z_]\w*[ \t]*,?[ \t]*$", re.M)
WAIT_WORDS = (b"wait_event", b"prepare_to_wait", b"set_current_state", b"set_special_state", b"wait_var_event")
STATE_WORDS = (b"set_current_state", b"set_special_state", b"prepare_to_wait")
# Top-level directories of a kernel tree that hold no kernel code.  Their
# definitions would only muddle the callee index (tools/ has its own copies
# of kernel headers).  samples/ holds modules and is scanned.
SKIP_DIRS = {
	"tools/": "user-space programs, with their own copies of kernel headers",
	"scripts/": "programs that run on the build host",
	"Documentation/": "documentation",
	"usr/": "the initramfs build's host programs",
}


def list_sources(root):
	"""The .c and .h files under root, sorted.  Hidden directories are
	skipped and symbolic links to directories are not followed (as git does
	not), so a link loop cannot trap the walk."""
	out = []
	for dp, dn, fn in os.walk(root):
		dn[:] = [d for d in dn if not d.startswith(".")]
		for f in fn:
			if f.endswith((".c", ".h")):
				out.append(os.path.join(dp, f))
	out.sort()
	return out


def holds_sources(root):
	"""Whether there is any .c or .h file under root (stops at the first)."""
	for dp, dn, fn in os.walk(root):
		dn[:] = [d for d in dn if not d.startswith(".")]
		if any(f.endswith((".c", ".h")) for f in fn):
			return True
	return False


def bad_name(path):
	"""Whether path's name is not UTF-8: spatch's records and the reports
	could not name the file, so it is not scanned."""
	try:
		path.encode("utf-8")
	except UnicodeEncodeError:
		return True
	return False


def shown_name(rel):
	"""rel as it can be printed: bytes that are not UTF-8 as \\xNN."""
	return rel.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def _scan_one(path):
	try:
		with open(path, "rb") as f:
			data = f.read()
	except OSError:
		return path, None
	names, structs = set(), set()
	lines = b"\n" + data
	for m in DEF_LINE.finditer(lines):
		if m.group(3):
			structs.add(m.group(3).decode())
		else:
			names.add((m.group(1) or m.group(2)).decode())
	inits = sorted(set(s.decode() for s in INIT_STRUCT.findall(data)))
	members = sorted(set(s.decode() for s in INIT_MEMBER.findall(lines))) if inits else []
	flags = FileFlag(0)
	if any(w in data for w in WAIT_WORDS):
		flags |= FileFlag.WAIT
	if any(w in data for w in STATE_WORDS):
		flags |= FileFlag.STATE
	if b"#define" in data or b"# define" in data:
		flags |= FileFlag.DEFINES
	# the cache (marshal) keeps plain ints
	return path, (sha1(data), sorted(names), sorted(structs), inits, members, int(flags))


def _size(path):
	try:
		return os.path.getsize(path)
	except OSError:
		return 0


class Tree:
	"""The scanned source tree: definition, struct and initializer indexes."""

	def __init__(self, kdir, cache, jobs, extra_roots=()):
		self.kdir = os.path.realpath(kdir)
		self.cache = cache
		self.jobs = jobs
		self.files = {}      # rel -> (sha, names, structs, inits, members, flags)
		self.abs = {}        # rel -> absolute path
		self.unreadable = {}  # shown name -> why it cannot be scanned
		roots = [(self.kdir, "")] + [(r, r) for r in extra_roots]
		t0 = time.time()
		statkey = "scan-v%d-%s" % (SCAN_VERSION, sha1(self.kdir.encode())[:12])
		stat_cache = cache.load("index", statkey + ".stat") or {}
		content = cache.load("index", "scan-v%d.content" % SCAN_VERSION) or {}
		todo = []
		new_stat = {}
		head = os.path.join(self.kdir, "")
		for root, prefix in roots:
			for p in list_sources(root):
				if prefix:
					rel = p
				elif p.startswith(head):
					rel = p[len(head):]	# os.walk() joined it to kdir
				else:
					rel = os.path.relpath(p, self.kdir)
				if not prefix and rel.startswith(tuple(SKIP_DIRS)):
					continue
				if bad_name(p):
					self.unreadable[shown_name(rel)] = "the name is not UTF-8"
					continue
				try:
					# follows a symbolic link: a loop or a dangling link fails here
					st = os.stat(p)
				except OSError as e:
					self.unreadable[rel] = e.strerror or str(e)
					continue
				self.abs[rel] = p
				key = (st.st_size, st.st_mtime_ns, st.st_ino)
				old = stat_cache.get(rel)
				if old and tuple(old[0]) == key and old[1] in content:
					self.files[rel] = (old[1],) + tuple(content[old[1]])
					new_stat[rel] = old
				else:
					todo.append((rel, p, key))
		if todo:
			paths = [p for _, p, _ in todo]
			bypath = {}
			shown = Progress("scanning", len(paths))
			with multiprocessing.Pool(self.jobs, _pool_gc) as pool:
				for p, res in pool.imap_unordered(_scan_one, paths, chunksize=64):
					bypath[p] = res
					shown.update(len(bypath))
			shown.close()
			for rel, p, key in todo:
				res = bypath.get(p)
				if res is None:
					self.unreadable[rel] = "read failed"
					continue
				self.files[rel] = res
				content[res[0]] = res[1:]
				new_stat[rel] = (key, res[0])
			cache.store(content, "index", "scan-v%d.content" % SCAN_VERSION)
			cache.store(new_stat, "index", statkey + ".stat")
		self.scanned = len(todo)
		self.defs, self.struct_defs, self.inits = {}, {}, {}
		for rel, (sha, names, structs, inits, members, flags) in self.files.items():
			for n in names:
				self.defs.setdefault(n, []).append(rel)
			for s in structs:
				self.struct_defs.setdefault(s, []).append(rel)
			for s in inits:
				self.inits.setdefault(s, []).append(rel)
		self.elapsed = time.time() - t0

	def flags(self, rel):
		"""The FileFlag bits of file rel."""
		return FileFlag(self.files[rel][5])

	def sha(self, rel):
		return self.files[rel][0]

	def members(self, rel):
		return self.files[rel][4]


# ---------------------------------------------------------------------------
# Facts (cfacts.py), extracted on demand and cached by content


_KN = None


def _facts_worker_init(kpath):
	global _KN
	_KN = Knowledge(kpath)


def _pool_gc():
	"""A pool worker's collector.  The run turns it off (pipeline.check());
	a worker forked then inherits that, but extraction leaves cycles
	behind, and a worker without it grew past 2 GiB on a whole tree.  So a
	worker turns it on, after freezing what it inherited, which the
	collector then never walks."""
	gc.freeze()
	gc.enable()


def _facts_pool_init(kpath):
	_pool_gc()
	_facts_worker_init(kpath)


def _extract_here(work, kpath):
	"""Extract work [(path, sha)] in this process: each file's cycles are
	collected after it, also when the run has the collector off (only
	what the file made is walked: all else is frozen first)."""
	_facts_worker_init(kpath)
	results = {}
	for w in work:
		gc.freeze()
		sha, f = _facts_one(w)
		results[sha] = f
		gc.collect(0)
	gc.unfreeze()
	return results


def _facts_one(args):
	path, sha = args
	try:
		with open(path, "rb") as f:
			text = f.read().decode("utf-8", "replace")
	except OSError:
		return sha, None
	try:
		return sha, pack(cfacts.extract(text, _KN.want_args, _KN.restore, _KN.words))
	except RecursionError:
		return sha, None


def pack(facts):
	"""facts with each function's record as its own marshal bytes, the
	form the cache keeps and Functions reads (the input is changed)."""
	facts["functions"] = {n: marshal.dumps(v) for n, v in facts["functions"].items()}
	return facts


def each_function(fns):
	"""(name, record) of every function of a file's functions, in their
	order; a packed record is decoded for the caller but not kept
	(Functions.peek()): for a pass over every function of many files."""
	peek = getattr(fns, "peek", None)
	for name in fns:
		yield name, (peek(name) if peek else fns[name])


def _unpacked(f):
	"""Packed facts f (pack()) as the analysis reads them."""
	return dict(f, functions=Functions(f["functions"]))


class Functions(Mapping):
	"""A file's functions (cfacts.extract()'s "functions"), each record
	decoded when it is first asked for.  A whole-tree run reads the facts
	of some 9,500 files to follow a few functions in most of them: decoded
	whole, they took 1.1 GiB for 144 MiB of marshal data."""

	__slots__ = ("_packed", "_done")

	def __init__(self, packed):
		self._packed = packed
		self._done = {}

	def __getitem__(self, name):
		v = self._done.get(name)
		if v is None:
			v = self._done[name] = marshal.loads(self._packed[name])
		return v

	def peek(self, name):
		"""The record of name, not kept: for a pass over every function
		that keeps a few (pipeline.tree_knowledge())."""
		v = self._done.get(name)
		return marshal.loads(self._packed[name]) if v is None else v

	def __contains__(self, name):
		return name in self._packed

	def __iter__(self):
		return iter(self._packed)

	def __len__(self):
		return len(self._packed)


class Facts:
	def __init__(self, tree, kn, cache, jobs):
		self.tree, self.kn, self.cache, self.jobs = tree, kn, cache, jobs
		# 'p': functions packed one by one (pack())
		self.key = "facts-v%dp-%s-%s" % (cfacts.FACTS_VERSION, kn.digest, cfacts.CODE_DIGEST)
		self.by_file = {}
		self.extracted = 0
		self._pool = None

	def ensure(self, rels):
		need = []
		for rel in set(rels):
			if rel in self.by_file or rel not in self.tree.files:
				continue
			sha = self.tree.sha(rel)
			f = self.cache.load(self.key, sha[:2], sha)
			if f is not None:
				self.by_file[rel] = _unpacked(f)
			else:
				need.append((rel, sha))
		if not need:
			return
		work = [(self.tree.abs[rel], sha) for rel, sha in need]
		results = {}
		if len(work) > 1 and self.jobs > 1:
			shown = Progress("extracting facts", len(work)) if len(work) > 8 else None
			chunk = max(1, min(4, len(work) // (2 * self.jobs)))
			for n, (sha, f) in enumerate(self.pool().imap_unordered(_facts_one, work, chunksize=chunk), 1):
				results[sha] = f
				if shown:
					shown.update(n)
			if shown:
				shown.close()
		else:
			results = _extract_here(work, self.kn.path)
		for rel, sha in need:
			f = results.get(sha) or {"functions": {}, "macros": {}, "structs": {}, "ops": []}
			self.cache.store(f, self.key, sha[:2], sha)
			self.by_file[rel] = _unpacked(f)
			self.extracted += 1

	def pool(self):
		"""The extraction workers, started once: the graph asks for a few
		files at a time, thousands of times, and a pool per batch cost
		more than the extraction."""
		if self._pool is None:
			self._pool = multiprocessing.Pool(self.jobs, _facts_pool_init, (self.kn.path,))
		return self._pool

	def close(self):
		if self._pool is not None:
			self._pool.terminate()
			self._pool.join()
			self._pool = None

	def get(self, rel):
		self.ensure([rel])
		return self.by_file.get(rel, {"functions": {}, "macros": {}, "structs": {}, "ops": []})
