#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-only
"""nestsleep: find sleeping calls made while a task is not TASK_RUNNING.

Whole-tree driver for cocci/nested_sleep.cocci.  It works on demand:

  scan      every .c/.h file once (cached by content hash): which names it
            may define, which structs, which initializers, and whether it
            holds a wait site;
  waiters   derive the wait primitives by expanding the tree's macro
            definitions from the roots in cocci/sleep_info.json, so subsystem
            wrappers (raid10's wait_event_barrier()) are found;
  match     run spatch with cocci/nested_sleep.cocci on the files that hold
            wait sites (cached per file content), collecting every call made
            in a non-running window;
  resolve   follow those calls through the definitions of their callees,
            file by file (scripts/cfacts.py, cached per file content), through
            macros, static inlines and ops-table function pointers;
  summarize a fixpoint over the call graph gives each function a shortest
            chain down to a sleeping primitive (cocci/sleep_info.json);
  report    one finding per wait site, in the kernel's coccicheck formats.

Run it through 'make coccicheck' (see README.md).  Findings go to stdout;
banners, progress and the coverage line go to stderr.
"""

import argparse
import hashlib
import json
import marshal
import multiprocessing
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(TOP, "scripts"))

import cfacts  # noqa: E402
import gen_builtin  # noqa: E402
import fixer  # noqa: E402

VERSION = "0.1"
SCAN_VERSION = 3
MAX_DEPTH = 8          # hops from a wait site to a primitive
MAX_ROUNDS = 4 * MAX_DEPTH  # summarize() stops improving witnesses after this
MAX_CANDIDATES = 12    # definitions of one name we are willing to consider
MAX_FANOUT = 8         # targets of one function pointer
DEFAULT_COCCI = os.path.join(TOP, "cocci", "nested_sleep.cocci")

DEF_LINE = re.compile(
	rb"^(?:[A-Za-z_][^\n;(]*?)?\b([A-Za-z_]\w*)[ \t]*\([^\n;]*$"
	rb"|^#[ \t]*define[ \t]+([A-Za-z_]\w*)\("
	rb"|^(?:typedef[ \t]+)?struct[ \t]+(\w+)[ \t]*\{", re.M)
INIT_STRUCT = re.compile(rb"struct\s+(\w+)\s[^=;{}()\n]*=\s*\{")
INIT_MEMBER = re.compile(rb"^[ \t]*\.(\w+)[ \t]*=[ \t]*&?[A-Za-z_]\w*[ \t]*,?[ \t]*$", re.M)
WAIT_WORDS = (b"wait_event", b"prepare_to_wait", b"set_current_state", b"set_special_state", b"wait_var_event")
STATE_WORDS = (b"set_current_state", b"set_special_state", b"prepare_to_wait")
SKIP_DIRS = ("tools/", "scripts/", "samples/", "Documentation/", "usr/")


class UserError(Exception):
	"""Bad input: reported as one line, exit status 2."""


def log(msg):
	print("nestsleep: " + msg, file=sys.stderr, flush=True)


def sha1(data):
	return hashlib.sha1(data).hexdigest()


# ---------------------------------------------------------------------------
# Knowledge


class Knowledge:
	"""cocci/sleep_info.json, in the shapes the analysis needs."""

	def __init__(self, path=None):
		self.path = path or os.path.join(TOP, "cocci", "sleep_info.json")
		with open(self.path, "rb") as f:
			raw = f.read()
		self.digest = sha1(raw)[:12]
		self.info = json.loads(raw)
		t = gen_builtin.tables(self.info)
		self.sleepers = t["NS_SLEEPERS"]
		self.gfp_arg = t["NS_GFP_ARG"]
		self.blocking_gfp = set(t["NS_BLOCKING_GFP"])
		self.not_sleeping = set(t["NS_NOT_SLEEPING"])
		self.restore = frozenset(t["NS_RESTORE"])
		self.waiters = self.info["waiters"]["table"]
		self.roots = self.info["waiters"]["roots"]
		self.annotations = set(self.info["annotations"]["functions"])
		self.guards = {}
		for g in self.info["groups"]:
			self.guards.update(g.get("guard_classes", {}))
		self.reasons = {g["name"]: g["reason"] for g in self.info["groups"]}

	def want_args(self, name):
		return name in self.gfp_arg

	def primitive(self, call):
		"""(group, effect) if the call is a sleeping primitive, 'no' if it is
		known not to sleep, None if it must be resolved."""
		name = call["name"]
		if name in ("guard", "scoped_guard"):
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
			return "no"
		if name in self.not_sleeping or name in self.restore or name in self.annotations:
			return "no"
		return None


# ---------------------------------------------------------------------------
# Cache


class Cache:
	def __init__(self, root):
		self.root = root
		os.makedirs(root, exist_ok=True)

	def path(self, *parts):
		p = os.path.join(self.root, *parts)
		os.makedirs(os.path.dirname(p), exist_ok=True)
		return p

	def load(self, *parts):
		p = os.path.join(self.root, *parts)
		try:
			with open(p, "rb") as f:
				return marshal.load(f)
		except (OSError, EOFError, ValueError, TypeError):
			return None

	def store(self, value, *parts):
		p = self.path(*parts)
		tmp = p + ".%d.tmp" % os.getpid()
		with open(tmp, "wb") as f:
			marshal.dump(value, f)
		os.replace(tmp, p)


# ---------------------------------------------------------------------------
# Scan


def list_sources(root):
	out = []
	for dp, dn, fn in os.walk(root):
		dn[:] = [d for d in dn if not d.startswith(".")]
		for f in fn:
			if f.endswith((".c", ".h")):
				out.append(os.path.join(dp, f))
	out.sort()
	return out


def _scan_one(path):
	try:
		with open(path, "rb") as f:
			data = f.read()
	except OSError:
		return path, None
	names, structs = set(), set()
	for m in DEF_LINE.finditer(data):
		if m.group(3):
			structs.add(m.group(3).decode())
		else:
			names.add((m.group(1) or m.group(2)).decode())
	inits = sorted(set(s.decode() for s in INIT_STRUCT.findall(data)))
	members = sorted(set(s.decode() for s in INIT_MEMBER.findall(data))) if inits else []
	flags = 0
	if any(w in data for w in WAIT_WORDS):
		flags |= 1
	if any(w in data for w in STATE_WORDS):
		flags |= 2
	if b"#define" in data or b"# define" in data:
		flags |= 4
	return path, (sha1(data), sorted(names), sorted(structs), inits, members, flags)


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
		roots = [(self.kdir, "")] + [(r, r) for r in extra_roots]
		t0 = time.time()
		statkey = "scan-v%d-%s" % (SCAN_VERSION, sha1(self.kdir.encode())[:12])
		stat_cache = cache.load("index", statkey + ".stat") or {}
		content = cache.load("index", "scan-v%d.content" % SCAN_VERSION) or {}
		todo = []
		new_stat = {}
		for root, prefix in roots:
			for p in list_sources(root):
				rel = os.path.relpath(p, self.kdir) if not prefix else p
				if not prefix and rel.startswith(SKIP_DIRS):
					continue
				self.abs[rel] = p
				try:
					st = os.stat(p)
				except OSError:
					continue
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
			with multiprocessing.Pool(self.jobs) as pool:
				for p, res in pool.imap_unordered(_scan_one, paths, chunksize=64):
					bypath[p] = res
			for rel, p, key in todo:
				res = bypath.get(p)
				if res is None:
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
		return self.files[rel][5]

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


def _facts_one(args):
	path, sha = args
	try:
		with open(path, "rb") as f:
			text = f.read().decode("utf-8", "replace")
	except OSError:
		return sha, None
	try:
		return sha, cfacts.extract(text, _KN.want_args, _KN.restore)
	except RecursionError:
		return sha, None


class Facts:
	def __init__(self, tree, kn, cache, jobs):
		self.tree, self.kn, self.cache, self.jobs = tree, kn, cache, jobs
		self.key = "facts-v%d-%s" % (cfacts.FACTS_VERSION, kn.digest)
		self.by_file = {}
		self.extracted = 0

	def ensure(self, rels):
		need = []
		for rel in set(rels):
			if rel in self.by_file or rel not in self.tree.files:
				continue
			sha = self.tree.sha(rel)
			f = self.cache.load(self.key, sha[:2], sha)
			if f is not None:
				self.by_file[rel] = f
			else:
				need.append((rel, sha))
		if not need:
			return
		work = [(self.tree.abs[rel], sha) for rel, sha in need]
		results = {}
		if len(work) > 8 and self.jobs > 1:
			with multiprocessing.Pool(self.jobs, _facts_worker_init, (self.kn.path,)) as pool:
				for sha, f in pool.imap_unordered(_facts_one, work, chunksize=4):
					results[sha] = f
		else:
			_facts_worker_init(self.kn.path)
			for w in work:
				sha, f = _facts_one(w)
				results[sha] = f
		for rel, sha in need:
			f = results.get(sha) or {"functions": {}, "macros": {}, "structs": {}, "ops": []}
			self.by_file[rel] = f
			self.cache.store(f, self.key, sha[:2], sha)
			self.extracted += 1

	def get(self, rel):
		self.ensure([rel])
		return self.by_file.get(rel, {"functions": {}, "macros": {}, "structs": {}, "ops": []})


# ---------------------------------------------------------------------------
# Wait primitives: the public table plus wrappers found by macro expansion


def derive_waiters(kn, facts, files):
	"""Wait primitives by macro expansion.

	Start from the roots and the public table of cocci/sleep_info.json.  A
	macro whose body calls a known waiter, passing one of its own parameters
	in (or inside) the condition argument, is a waiter too.  Its 'cmd'
	parameters are those that appear in the waiter's command arguments before
	the first call that restores TASK_RUNNING (cmd2 of wait_event_cmd() runs
	after schedule()).  When that command starts by dropping a spinlock, the
	condition runs under it ('locked').  Returns {name: {cond, cmd, locked,
	via, file}}."""
	known = {}
	for name, w in kn.waiters.items():
		known[name] = {"cond": w["cond"], "cmd_arg": None, "cmd": list(w["cmd"]),
			       "locked": w["locked"], "via": "table", "file": ""}
	for name, r in kn.roots.items():
		known[name] = {"cond": r["cond"], "cmd_arg": r.get("cmd_arg"), "cmd": [],
			       "locked": r.get("locked", ""), "via": "root", "file": ""}
	macros = {}
	for rel in files:
		for name, m in facts.get(rel)["macros"].items():
			macros.setdefault(name, (rel, m))
	restore_re = re.compile(r"\b(?:%s)\s*\(" % "|".join(sorted(kn.restore)))
	unlock_re = re.compile(r"\s*(?:raw_)?spin_unlock\w*\s*\(\s*&?\s*(.*?)\)\s*;")

	def words(text):
		return set(re.findall(r"\w+", text))

	changed = True
	while changed:
		changed = False
		for name, (rel, m) in sorted(macros.items()):
			old = known.get(name)
			if old is not None and old["via"] != "table":
				continue
			params = m["params"]
			for c in m["calls"]:
				w = known.get(c["name"])
				if not w or "args" not in c or c["name"] == name:
					continue
				args = c["args"]
				if w["cond"] >= len(args):
					continue
				ctoks = words(args[w["cond"]])
				cond = [i for i, p in enumerate(params) if p in ctoks]
				if not cond:
					continue
				cmd_texts = []
				if w.get("cmd_arg") is not None and w["cmd_arg"] < len(args):
					cmd_texts.append(restore_re.split(args[w["cmd_arg"]])[0])
				for ci in w["cmd"]:
					if ci < len(args):
						cmd_texts.append(args[ci])
				locked = ""
				if w["locked"] == "wq.lock":
					locked = "wq.lock"
				elif w["locked"]:
					# the inner waiter's lock parameter, seen through our arguments
					inner = macros.get(c["name"], (None, {"params": []}))[1]["params"]
					if w["locked"] in inner and inner.index(w["locked"]) < len(args):
						locked = args[inner.index(w["locked"])].strip()
					else:
						locked = w["locked"]
				cmd = []
				for text in cmd_texts:
					lk = unlock_re.match(text)
					if lk:
						locked = locked or lk.group(1).strip()
						text = text[lk.end():]
					t = words(text)
					cmd += [i for i, p in enumerate(params) if p in t and i not in cond]
				lw = words(locked)
				cmd = [i for i in cmd if params[i] not in lw]
				locked = re.sub(r"[()\s]", "", locked)
				known[name] = {"cond": cond[0], "cmd_arg": None, "cmd": sorted(set(cmd)),
					       "locked": locked, "via": c["name"], "file": rel}
				changed = True
				break
	out = {}
	for name, w in known.items():
		out[name] = {"cond": w["cond"], "cmd": w["cmd"], "locked": w["locked"],
			     "via": w["via"], "file": w["file"]}
	return out


# ---------------------------------------------------------------------------
# spatch


def specialize_rule(src, dst, waiters, carriers, window):
	"""Write a copy of the rule with this tree's knowledge as regex constraints.

	Alone, the rule asks Python whether an identifier is a waiter, a carrier
	or a name that may sleep; spatch calls that script for every call in
	every file.  A regex constraint is checked inside spatch and is several
	times cheaper, so the driver bakes the sets into the copy it runs."""
	def rx(names):
		names = sorted(set(names))
		return "^(%s)$" % "|".join(names) if names else "^$"
	with open(src) as f:
		text = f.read()
	subs = {"ns_is_waiter": rx(waiters), "ns_is_carrier": rx(carriers), "ns_window": rx(window)}
	text = re.sub(r"identifier (\w+) : script:python\(\) \{ (ns_\w+)\(\w+\) \};",
		      lambda m: 'identifier %s =~ "%s";' % (m.group(1), subs[m.group(2)]), text)
	with open(dst, "w") as f:
		f.write(text)
	return dst


def spatch_version():
	try:
		out = subprocess.run(["spatch", "--version"], capture_output=True, text=True).stdout
	except OSError:
		return None
	m = re.search(r"spatch version (\S+)", out)
	return m.group(1) if m else "unknown"


def cocci_options(cocci):
	opts = []
	with open(cocci) as f:
		for line in f:
			m = re.match(r"//\s*Options:\s*(.*)", line)
			if m:
				opts += m.group(1).split()
	return opts


class Matcher:
	"""Runs the rule over the wait-site files; results cached per file."""

	def __init__(self, tree, cache, args, cocci, paths, rulekey):
		self.tree, self.cache, self.args, self.cocci = tree, cache, args, cocci
		self.paths = paths
		self.rulekey = rulekey
		self.failed, self.timedout, self.parsed = [], [], 0
		self.dropped = {}

	def run(self, rels):
		results, todo = {}, []
		for rel in rels:
			r = self.cache.load("match", self.rulekey(rel), self.tree.sha(rel)[:2], self.tree.sha(rel))
			if r is not None and r["status"] == "timeout" and self.args.timeout > r.get("timeout_s", 0):
				r = None	# timed out before: retry with the longer TIMEOUT=
			if r is None:
				todo.append(rel)
			else:
				# the cache is keyed by content: the same file may have
				# been matched under another name
				for rec in r["recs"]:
					rec["file"] = rel
				results[rel] = r
		if todo:
			log("matching %d files with spatch (%d cached)" % (len(todo), len(results)))
			fresh = self._spatch(todo)
			for rel in todo:
				r = fresh.get(rel, {"status": "failed", "recs": [], "funcs": []})
				results[rel] = r
				# a timeout is kept with its TIMEOUT=: a longer one retries
				if r["status"] == "timeout":
					r["timeout_s"] = self.args.timeout
				self.cache.store(r, "match", self.rulekey(rel), self.tree.sha(rel)[:2], self.tree.sha(rel))
		for rel, r in results.items():
			if r["status"] == "timeout":
				self.timedout.append(rel)
			elif r["status"] == "failed":
				self.failed.append(rel)
			else:
				self.parsed += 1
		return results

	def _spatch(self, rels):
		args = self.args
		tmp = tempfile.mkdtemp(prefix="nestsleep-")
		try:
			groups = os.path.join(tmp, "groups")
			with open(groups, "w") as f:
				# largest first: with --chunksize 1 the jobs take files as
				# they go, so a big file last would leave one job alone
				for rel in sorted(rels, key=lambda r: -_size(self.tree.abs[r])):
					f.write(self.tree.abs[rel] + "\n\n")
			cmd = ["spatch", "--sp-file", self.cocci, "--no-show-diff", "--quiet"]
			cmd += cocci_options(self.cocci)
			cmd += ["--timeout", str(args.timeout), "--file-groups", groups,
				"--tmp-dir", os.path.join(tmp, "par")]
			if args.jobs > 1:
				cmd += ["--jobs", str(args.jobs), "--chunksize", "1"]
			cmd += args.spflags
			env = dict(os.environ, NESTSLEEP_RAW="1", NESTSLEEP_WAITERS=self.paths["waiters"],
				   NESTSLEEP_CARRIERS=self.paths["carriers"], NESTSLEEP_WINDOW=self.paths["window"])
			if args.verbose:
				log("$ " + " ".join(cmd))
			err_path = os.path.join(tmp, "stderr")
			with open(err_path, "w") as err:
				proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=err, env=env, cwd=tmp)
			with open(err_path, errors="replace") as f:
				err_text = f.read()
			if args.debug_file:
				with open(args.debug_file, "a") as f:
					f.write(err_text)
			out = proc.stdout.decode("utf-8", "replace")
			byabs = {self.tree.abs[r]: r for r in rels}
			res = {r: {"status": "ok", "recs": [], "funcs": []} for r in rels}
			seen = set()
			for line in out.splitlines():
				if not line.startswith("NESTSLEEP "):
					continue
				rec = json.loads(line[10:])
				rel = byabs.get(rec["file"])
				if rel is None:
					continue
				seen.add(rel)
				rec["file"] = rel
				if rec["shape"] == "function":
					res[rel]["funcs"].append(rec["func"])
				else:
					res[rel]["recs"].append(rec)
			for m in re.finditer(r"^EXN: (.*) in (\S+)\s*$", err_text, re.M):
				rel = byabs.get(m.group(2))
				if rel is None:
					continue
				res[rel]["status"] = "timeout" if "Timeout" in m.group(1) else "failed"
				res[rel]["error"] = m.group(1)[:200]
			if proc.returncode != 0 and not seen:
				tail = "\n".join(err_text.strip().splitlines()[-5:])
				raise UserError("spatch failed (exit %d): %s" % (proc.returncode, tail or "no message"))
			for rel in rels:
				if res[rel]["status"] == "ok" and not res[rel]["funcs"]:
					names = self.tree.files[rel][1]
					if names and rel.endswith(".c"):
						res[rel]["status"] = "failed"
						res[rel]["error"] = "no function parsed"
			return res
		finally:
			shutil.rmtree(tmp, ignore_errors=True)


# ---------------------------------------------------------------------------
# Resolution and summaries


class Analysis:
	def __init__(self, tree, facts, kn):
		self.tree, self.facts, self.kn = tree, facts, kn
		self.nodes = {}       # (file, name) -> {"calls": [(call, targets)], "annotate": line}
		self.summary = {}     # node -> (chain, effect, group, conf_penalty)
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
					tg = self.call_targets(c, rel, name)
					edges.append((c, tg))
					for t in tg[1]:
						if t not in self.nodes:
							nxt.append(t)
				self.nodes[node] = {"calls": edges, "annotate": ann}
			frontier = nxt
			depth += 1

	def call_targets(self, call, rel, func):
		"""('prim', (group, effect)) | ('no', []) | ('direct'|'pointer', [nodes], info)."""
		if call.get("kind") in ("arrow", "dot") or call.get("kind") == "member":
			t = self.base_type(rel, func, call.get("base", ""))
			if t is None:
				return ("no", [])
			targets = []
			for trel, fn in self.pointer_targets(t, call["name"]):
				targets += self.resolve(fn, trel)
			if not targets or len(targets) > MAX_FANOUT:
				return ("no", [])
			return ("pointer", targets, "%s->%s" % (re.sub(r"\s+", "", call.get("base", "")), call["name"]))
		p = self.kn.primitive(call)
		if p == "no":
			return ("no", [])
		if p is not None:
			return ("prim", [], p)
		defs = self.resolve(call["name"], rel)
		return ("direct", defs)

	def summarize(self):
		"""Best witness chain from each node to a sleeping primitive: fewest
		doubts, then shortest, then by name (_better).  Rounds read only the
		previous round's summaries, so the result does not depend on the
		order in which the graph was built; a node's witness is replaced
		whenever a better one appears, until nothing changes."""
		summ = {}
		for _ in range(MAX_ROUNDS):
			nxt = dict(summ)
			for node, d in self.nodes.items():
				best = summ.get(node)
				for c, tg in d["calls"]:
					w = self.witness(c, tg, summ, node[0])
					if w is not None and (best is None or _better(w, best)):
						best = w
				if best is not None:
					nxt[node] = best
			if nxt == summ:
				break
			summ = nxt
		self.summary = summ

	def witness(self, c, tg, summ, at):
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


# ---------------------------------------------------------------------------
# Main


def parse_args(argv):
	ap = argparse.ArgumentParser(prog="nestsleep", description=__doc__.split("\n")[0])
	ap.add_argument("--kdir", required=True)
	ap.add_argument("--m", default="", help="directory (relative to KDIR) or external module dir")
	ap.add_argument("--mode", default="report")
	ap.add_argument("--cocci", default="")
	ap.add_argument("--spflags", default="")
	ap.add_argument("--debug-file", default="")
	ap.add_argument("-j", "--jobs", type=int, default=0)
	ap.add_argument("-v", "--verbose", type=int, default=0)
	ap.add_argument("--timeout", type=int, default=200)
	ap.add_argument("--cache", default=os.environ.get("NESTSLEEP_CACHE", os.path.expanduser("~/.cache/nestsleep")))
	ap.add_argument("--only", nargs="*", default=None, help="match only these files (relative to KDIR)")
	ap.add_argument("--json", default="", help="also write the findings as JSON to this file")
	a = ap.parse_args(argv)
	a.spflags = a.spflags.split()
	if a.jobs <= 0:
		a.jobs = os.cpu_count() or 1
	return a


def check_inputs(a):
	if shutil.which("spatch") is None:
		raise UserError("spatch not found on PATH; install it with: sudo apt-get install -y coccinelle")
	if a.mode not in ("report", "context", "org", "patch"):
		raise UserError("unknown MODE=%s (report, patch, context, org)" % a.mode)
	if not os.path.isfile(os.path.join(a.kdir, "Makefile")) and not os.path.isdir(a.kdir):
		raise UserError("no kernel tree at KDIR=%s" % a.kdir)
	if not os.path.isdir(a.kdir):
		raise UserError("no kernel tree at KDIR=%s" % a.kdir)
	cocci = a.cocci or DEFAULT_COCCI
	if not os.path.isfile(cocci):
		raise UserError("COCCI=%s: no such rule file" % a.cocci)
	a.cocci = os.path.abspath(cocci)
	# parsing hints that live beside the rule (scoped_guard and friends):
	# without them spatch 1.1.1 drops every function that uses a guard
	hints = os.path.join(os.path.dirname(a.cocci), "nestsleep.macros.h")
	if _is_nestsleep_rule(a.cocci) and os.path.isfile(hints) and "--macro-file" not in a.spflags:
		a.spflags = ["--macro-file", hints] + a.spflags
	ext = []
	if a.m:
		if os.path.isabs(a.m):
			if not os.path.isdir(a.m):
				raise UserError("M=%s: no such directory" % a.m)
			real = os.path.realpath(a.m)
			k = os.path.realpath(a.kdir)
			if real.startswith(k + os.sep):
				a.m = os.path.relpath(real, k)
			else:
				ext.append(real)
				a.m_abs = real
		elif not os.path.isdir(os.path.join(a.kdir, a.m)):
			raise UserError("M=%s: no such directory under KDIR=%s" % (a.m, a.kdir))
		a.m = a.m.rstrip("/")
	return ext


def in_scope(rel, a, ext):
	if not a.m:
		return True
	if ext:
		return rel.startswith(ext[0] + os.sep)
	return rel == a.m or rel.startswith(a.m + "/")


def tree_knowledge(tree, facts, ana, kn, cache, times):
	"""Wait primitives, state-carrying helpers and window names of the tree."""
	t = time.time()
	wait_files = [r for r in tree.files if tree.flags(r) & 1]
	state_files = [r for r in tree.files if tree.flags(r) & 2]
	facts.ensure(wait_files + state_files)
	times["facts"] = time.time() - t
	t = time.time()
	waiters = derive_waiters(kn, facts, [r for r in wait_files if tree.flags(r) & 4])
	carriers = set()
	for rel in state_files:
		for name, fn in facts.get(rel)["functions"].items():
			if fn.get("carry"):
				carriers.add(name)
	carriers -= set(kn.sleepers) | set(waiters) | set(kn.restore)
	extra = sorted(n for n in waiters if not any(w in n.encode() for w in WAIT_WORDS))
	if extra:
		# wrappers whose names the scan's tokens miss: search for their
		# users once per file content and wrapper set
		pat = re.compile(r"\b(?:%s)\s*\(" % "|".join(map(re.escape, extra)))
		ckey = "extra-" + sha1(" ".join(extra).encode())[:12]
		seen = cache.load("index", ckey) or {}
		more, dirty = [], False
		for rel in tree.files:
			if tree.flags(rel) & 1:
				continue
			sha = tree.sha(rel)
			hit = seen.get(sha)
			if hit is None:
				try:
					with open(tree.abs[rel], errors="replace") as f:
						hit = bool(pat.search(f.read()))
				except OSError:
					hit = False
				seen[sha] = hit
				dirty = True
			if hit:
				more.append(rel)
		if dirty:
			cache.store(seen, "index", ckey)
		facts.ensure(more)
		wait_files += more
	log("%d wait primitives (%d found by macro expansion), %d state-carrying helpers" % (
		len(waiters), sum(1 for w in waiters.values() if w["via"] not in ("table", "root")), len(carriers)))

	# What may sleep inside a non-running window: summarize the calls of the
	# functions that set the task state (or call a state-carrying helper), so
	# that the rule's window search only considers those names.
	roots = []
	window_calls = []
	anchors = []
	for rel in sorted(set(wait_files) | set(state_files)):
		for fname, fn in sorted(facts.get(rel)["functions"].items()):
			if fn.get("setter") or any(c["name"] in carriers for c in fn["calls"]):
				anchors.append((rel, fname, fn))
	ana.prefetch(set((c["name"], rel) for rel, fname, fn in anchors for c in fn["calls"] if not c.get("kind")))
	for rel, fname, fn in anchors:
		for c in fn["calls"]:
			tg = ana.call_targets(c, rel, fname)
			window_calls.append((c, tg))
			roots += tg[1]
	ana.expand(roots)
	ana.summarize()
	window = sorted(set(c["name"] for c, tg in window_calls if ana.witness(c, tg, ana.summary, "")))
	times["window"] = time.time() - t
	log("%d names may sleep inside set_current_state()/prepare_to_wait() windows" % len(window))

	return waiters, carriers, window, wait_files


def analyse(a, ext):
	t_start = time.time()
	kn = Knowledge()
	cache = Cache(a.cache)
	times = {}
	log("scanning %s" % a.kdir)
	t = time.time()
	tree = Tree(a.kdir, cache, a.jobs, ext)
	times["scan"] = time.time() - t
	log("scanned %d files (%d re-read) in %.1fs" % (len(tree.files), tree.scanned, times["scan"]))

	facts = Facts(tree, kn, cache, a.jobs)
	ana = Analysis(tree, facts, kn)
	# The tree-wide knowledge (wait primitives, state-carrying helpers, names
	# that may sleep in a window) depends on every file's content: keep it
	# under a digest of the whole tree, so that a warm run skips it.
	tdig = sha1((kn.digest + str(cfacts.FACTS_VERSION) + "".join(
		"%s %s\n" % (rel, tree.files[rel][0]) for rel in sorted(tree.files))).encode())[:16]
	know = cache.load("index", "tree-" + tdig)
	if know is not None:
		waiters, carriers, window, wait_files = know
		carriers = set(carriers)
		times["facts"] = times["window"] = 0.0
		log("tree knowledge cached: %d wait primitives, %d state-carrying helpers, %d window names" % (
			len(waiters), len(carriers), len(window)))
	else:
		waiters, carriers, window, wait_files = tree_knowledge(tree, facts, ana, kn, cache, times)
		cache.store((waiters, sorted(carriers), window, wait_files), "index", "tree-" + tdig)

	if a.only is not None:
		targets = [r for r in a.only if r in tree.files]
		missing = [r for r in a.only if r not in tree.files]
		if missing:
			raise UserError("not a source file under KDIR: %s" % ", ".join(missing))
		facts.ensure(targets)
	else:
		targets = sorted(r for r in set(wait_files) if in_scope(r, a, ext))
		facts.ensure(targets)

	tmp = tempfile.mkdtemp(prefix="nestsleep-")
	try:
		paths = {}
		for nm, val in (("waiters", waiters), ("carriers", sorted(carriers)), ("window", window)):
			paths[nm] = os.path.join(tmp, nm + ".json")
			with open(paths[nm], "w") as f:
				json.dump(val, f, sort_keys=True)
		with open(a.cocci, "rb") as f:
			base = sha1(f.read() + json.dumps(waiters, sort_keys=True).encode() + json.dumps(sorted(carriers)).encode()
				    + _flags_key(a.spflags))[:16]
		wset = set(window)

		def rulekey(rel):
			# a file's result depends only on the window names it calls
			names = set(c["name"] for fn in facts.get(rel)["functions"].values() for c in fn["calls"])
			return base + sha1(" ".join(sorted(names & wset)).encode())[:8]
		t = time.time()
		rule = specialize_rule(a.cocci, os.path.join(tmp, os.path.basename(a.cocci)),
				       waiters, carriers, window)
		matcher = Matcher(tree, cache, a, rule, paths, rulekey)
		results = matcher.run(targets)
		times["match"] = time.time() - t
	finally:
		shutil.rmtree(tmp, ignore_errors=True)

	# resolve the calls found at the wait sites, in a graph of their own: the
	# tree-knowledge pass above (skipped on a warm run) built one from every
	# window anchor, and reusing it would let chains run deeper than
	# MAX_DEPTH from a site on a cold run only
	t = time.time()
	ana.nodes, ana.summary = {}, {}
	recs = [r for rel in targets for r in results[rel]["recs"]]
	recs += stmt_expr_records(tree, facts, kn, waiters, targets, recs)
	roots = []
	site_targets = []
	for r in recs:
		c = {"name": r["call"], "line": r["cline"]}
		if r["kind"] == "member":
			c["kind"] = "member"
			c["base"] = r["base"]
		elif r["call"] in kn.gfp_arg:
			c["args"] = [x.strip() for x in _split_args(r["args"])]
		if r["call"] in ("guard", "scoped_guard"):
			c["guard"] = _split_args(r["args"])[0] if r["args"] else ""
		tg = ana.call_targets(c, r["file"], r["func"])
		site_targets.append((r, c, tg))
		roots += tg[1]
	ana.expand(roots)
	ana.summarize()
	times["resolve"] = time.time() - t

	findings = {}
	for r, c, tg in site_targets:
		w = ana.witness(c, tg, ana.summary, r["file"])
		if w is None:
			continue
		key = (r["file"], r["line"], r["col"], r["colend"])
		chain, effect, group, pen, locs = w
		shape = r["shape"]
		if shape == "carried_state":
			pen = max(pen, 1)
		if shape in ("set_current_state", "prepare_to_wait", "carried_state") and group == "schedule":
			pen = max(pen, 3)
		locs = [(r["file"], r["cline"])] + list(locs[1:])
		findings.setdefault(key, []).append({"rec": r, "chain": chain, "effect": effect,
						     "group": group, "penalty": pen, "locs": locs})
	out = []
	for key in sorted(findings):
		paths = sorted(findings[key], key=lambda p: (p["penalty"], p["rec"]["cline"], p["rec"]["ccol"]))
		out.append(make_finding(key, paths, kn))
	cov = {"files": len(targets), "parsed": matcher.parsed, "failed": sorted(matcher.failed),
	       "timeout": sorted(matcher.timedout)}
	cov.update(function_coverage(targets, results, facts))
	times["total"] = time.time() - t_start
	return out, cov, times, tree, facts


def stmt_expr_records(tree, facts, kn, waiters, targets, recs):
	"""Candidate calls in '({ ... })' conditions, which spatch skips.

	The fact extractor keeps the arguments of calls that take a statement
	expression; the calls inside a waiter's condition (or cmd) argument are
	added as if the rule had matched them."""
	seen = set((r["file"], r["line"], r["call"]) for r in recs)
	out = []
	for rel in targets:
		lines = None
		for fname, fn in facts.get(rel)["functions"].items():
			for c in fn["calls"]:
				w = waiters.get(c["name"])
				if not w or not c.get("stmt_expr") or c.get("kind"):
					continue
				roles = [(w["cond"], "cond")] + [(i, "cmd") for i in w["cmd"]]
				for idx, role in roles:
					if idx >= len(c["args"]) or "({" not in c["args"][idx]:
						continue
					atoks = cfacts.tokenize(c["args"][idx])
					inner = cfacts.calls_in(atoks, 0, len(atoks), kn.want_args)
					if any(x["name"] in kn.annotations for x in inner):
						continue
					if lines is None:
						with open(tree.abs[rel], errors="replace") as f:
							lines = f.read().split("\n")
					text = lines[c["line"] - 1] if c["line"] - 1 < len(lines) else ""
					m = re.search(r"\b%s\s*\(" % re.escape(c["name"]), text)
					col = m.start() if m else 0
					for x in inner:
						key = (rel, c["line"], x["name"])
						if key in seen or x["name"] == c["name"]:
							continue
						seen.add(key)
						cline, ccol = c["line"], 0
						for ln in range(c["line"] - 1, min(len(lines), c["line"] + 30)):
							mm = re.search(r"\b%s\s*\(" % re.escape(x["name"]), lines[ln])
							if mm:
								cline, ccol = ln + 1, mm.start()
								break
						rec = {"shape": "wait_event", "site": c["name"], "file": rel, "line": c["line"],
						       "col": col, "colend": col + len(c["name"]), "func": fname,
						       "call": x["name"], "kind": "member" if x.get("kind") else "call",
						       "base": x.get("base", ""), "cline": cline, "ccol": ccol,
						       "args": ", ".join(x.get("args", [])), "role": role,
						       "locked": w["locked"] if role == "cond" else "", "argn": idx,
						       "stmt_expr": True}
						out.append(rec)
	return out


def _split_args(s):
	out, cur, depth = [], "", 0
	for ch in s:
		if ch in "([{":
			depth += 1
		elif ch in ")]}":
			depth -= 1
		if ch == "," and depth == 0:
			out.append(cur.strip())
			cur = ""
		else:
			cur += ch
	if cur.strip():
		out.append(cur.strip())
	return out


def describe_site(r):
	if r["shape"] == "wait_event":
		if r.get("role") == "cmd":
			return "in the cmd of %s(), which runs before schedule()" % r["site"]
		return "in the condition of %s()" % r["site"]
	if r["shape"] == "prepare_to_wait":
		return "between %s() and schedule()" % r["site"]
	if r["shape"] == "set_current_state":
		return "between %s(%s) and schedule()" % (r["site"], r.get("state", "").replace(" ", ""))
	return "while the task state set in %s() is still non-running" % r["site"]


EFFECT_TEXT = {"warns": "warns", "silent": "resets the task state silently"}


def fingerprint(rel, func, primitive, chain):
	"""Stable across line shifts: file, function, wait primitive, chain."""
	return sha1("\0".join([rel, func, primitive] + list(chain)).encode())[:16]


def make_finding(key, paths, kn):
	first = paths[0]
	r = first["rec"]
	pen = first["penalty"]
	conf = confidence(pen)
	seen = []
	for p in paths:
		txt = "%s (%s)" % (" -> ".join(p["chain"]), EFFECT_TEXT[p["effect"]])
		if txt not in seen:
			seen.append(txt)
	where = describe_site(r)
	if r.get("locked"):
		kind = "sleep_in_atomic"
		msg = "ERROR: sleep in atomic context: %s() may sleep %s, which runs under spinlock %s" % (
			r["call"], where, r["locked"])
	else:
		kind = "nested_sleep"
		msg = "WARNING: nested sleep: %s() may sleep %s" % (r["call"], where)
		if r["shape"] != "wait_event" or r["cline"] != r["line"]:
			msg += " on line %d" % r["cline"]
	msg += " (%s)" % "; ".join(seen)
	msg += " [confidence: %s]" % conf
	return {
		"fingerprint": fingerprint(key[0], r["func"], r["site"], first["chain"]),
		"file": key[0], "line": key[1], "col": key[2], "colend": key[3],
		"function": r["func"], "shape": r["shape"], "primitive": r["site"],
		"role": r.get("role", ""), "locked": r.get("locked", ""), "kind": kind,
		"call": r["call"], "call_line": r["cline"], "effect": first["effect"],
		"group": first["group"], "chain": first["chain"], "confidence": conf,
		"chain_locs": ["%s:%d" % l for l in first["locs"]],
		"paths": [{"call": p["rec"]["call"], "line": p["rec"]["cline"], "col": p["rec"]["ccol"], "chain": p["chain"],
			   "chain_locs": ["%s:%d" % l for l in p["locs"]],
			   "effect": p["effect"], "confidence": confidence(p["penalty"])} for p in paths],
		"message": msg,
	}


def context_output(a, findings, tree):
	"""Context mode: spatch marks the sleeping calls with '*'."""
	if not findings:
		return
	tmp = tempfile.mkdtemp(prefix="nestsleep-")
	try:
		pos = os.path.join(tmp, "positions")
		files = sorted(set(f["file"] for f in findings))
		with open(pos, "w") as f:
			for fd in findings:
				for p in fd["paths"]:
					f.write("%s:%d:%d\n" % (tree.abs[fd["file"]], p["line"], p["col"]))
		cmd = ["spatch", "--sp-file", a.cocci, "-D", "context", "--very-quiet"] + cocci_options(a.cocci)
		cmd += ["--timeout", str(a.timeout)] + a.spflags + [tree.abs[f] for f in files]
		env = dict(os.environ, NESTSLEEP_POSITIONS=pos)
		if a.verbose:
			log("$ " + " ".join(cmd))
		proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
		out = proc.stdout.decode("utf-8", "replace")
		k = os.path.realpath(a.kdir) + "/"
		sys.stdout.write(out.replace(k, ""))
	finally:
		shutil.rmtree(tmp, ignore_errors=True)


def patch_output(a, findings, tree, facts):
	"""Patch mode: one unified diff for every finding with a safe rewrite.
	The findings without one are listed on stderr with the reason."""
	fx = fixer.Fixer(a.kdir, Knowledge(), tree, facts, m_abs=getattr(a, "m_abs", None))
	units = fx.run(findings)
	sys.stdout.write(fixer.combined_diff(fx, units))
	counts = {}
	for f in findings:
		fix = f["fix"]
		counts[fix["status"]] = counts.get(fix["status"], 0) + 1
		if fix["status"] != "patch":
			log("%s:%d: %s: %s" % (f["file"], f["line"], "report only" if fix["status"] == "report-only"
					       else "manual fix needed", fix["reason"]))
	log("patch: %d functions rewritten; findings: %s" % (len(units), ", ".join(
		"%d %s" % (n, k) for k, n in sorted(counts.items())) or "none"))


def main(argv):
	a = parse_args(argv)
	try:
		ext = check_inputs(a)
		if not _is_nestsleep_rule(a.cocci):
			return run_plain(a)
		print("\nPlease check for false positives in the output before submitting a patch.\n"
		      "Each finding names its chain and a confidence; see README.md.\n", file=sys.stderr)
		findings, cov, times, tree, facts = analyse(a, ext)
	except UserError as e:
		log("error: %s" % e)
		return 2
	except KeyboardInterrupt:
		log("interrupted")
		return 130
	if a.mode == "report":
		for f in findings:
			print("%s:%d:%d-%d: %s" % (f["file"], f["line"], f["col"], f["colend"], f["message"]))
	elif a.mode == "org":
		for f in findings:
			print("* TODO [[view:%s::face=ovl-face1::linb=%d::colb=%d::cole=%d][%s]]" % (
				f["file"], f["line"], f["col"], f["colend"],
				f["message"].replace("[", "@(").replace("]", ")")))
	elif a.mode == "context":
		context_output(a, findings, tree)
	elif a.mode == "patch":
		try:
			patch_output(a, findings, tree, facts)
		except UserError as e:
			log("error: %s" % e)
			return 2
	sys.stdout.flush()
	if a.json:
		with open(a.json, "w") as fp:
			json.dump({"tool": "nestsleep", "version": VERSION, "kdir": os.path.realpath(a.kdir),
				   "m": a.m, "coverage": cov, "times": times, "findings": findings}, fp, indent=1)
	for rel in cov["failed"]:
		log("could not parse: %s" % rel)
	for rel in cov["timeout"]:
		log("timed out: %s" % rel)
	log("%d findings; coverage: %d files matched, %d parsed, %d failed, %d timed out; %.1fs (%s)" % (
		len(findings), cov["files"], cov["parsed"], len(cov["failed"]), len(cov["timeout"]), times["total"],
		", ".join("%s %.1fs" % (k, v) for k, v in times.items() if k != "total")))
	return 0


GUARD_CALLS = ("scoped_guard", "scoped_cond_guard")


def function_coverage(targets, results, facts):
	"""Function-level parse coverage of the matched files: the functions
	nestsleep's own scanner found, against those spatch reported parsing
	(spatch drops a function it cannot parse and goes on, so a file can
	count as parsed with functions missing).  Functions that use a scoped
	guard are counted apart: spatch 1.1.1 drops them without the hints."""
	total = parsed = gtotal = gparsed = 0
	dropped = []
	for rel in targets:
		r = results.get(rel) or {}
		if r.get("status") != "ok":
			continue
		seen = set(r.get("funcs", []))
		for name, fn in facts.get(rel)["functions"].items():
			total += 1
			guard = any(c["name"] in GUARD_CALLS for c in fn.get("calls", []))
			gtotal += guard
			if name in seen:
				parsed += 1
				gparsed += guard
			elif len(dropped) < 200:
				dropped.append("%s:%s" % (rel, name))
	return {"functions": total, "functions_parsed": parsed, "guard_functions": gtotal,
		"guard_functions_parsed": gparsed, "functions_dropped": dropped}


def _flags_key(spflags):
	"""The spatch flags as the match cache sees them: a --macro-file by its
	content, not by its path, so that two checkouts share the cache."""
	out, skip = [], False
	for i, v in enumerate(spflags):
		if skip:
			skip = False
			continue
		if v == "--macro-file" and i + 1 < len(spflags) and os.path.isfile(spflags[i + 1]):
			with open(spflags[i + 1], "rb") as f:
				out.append("--macro-file=" + sha1(f.read()))
			skip = True
		else:
			out.append(v)
	return " ".join(out).encode()


def _is_nestsleep_rule(path):
	with open(path, errors="replace") as f:
		return "NESTSLEEP_RAW" in f.read()


def run_plain(a):
	"""COCCI= names a rule that is not nestsleep's: run it as coccicheck would."""
	cmd = ["spatch", "--sp-file", a.cocci, "-D", a.mode, "--very-quiet"]
	if a.mode in ("report", "org"):
		cmd.append("--no-show-diff")
	cmd += cocci_options(a.cocci)
	target = os.path.join(a.kdir, a.m) if a.m and not os.path.isabs(a.m) else (a.m or a.kdir)
	cmd += ["--dir", target, "--timeout", str(a.timeout)]
	if a.jobs > 1:
		cmd += ["--jobs", str(a.jobs), "--chunksize", "1"]
	cmd += a.spflags
	if a.verbose:
		log("$ " + " ".join(cmd))
	return subprocess.run(cmd).returncode


if __name__ == "__main__":
	sys.exit(main(sys.argv[1:]))
