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
            file by file (analysis/cfacts.py, cached per file content), through
            macros, static inlines and ops-table function pointers;
  summarize a fixpoint over the call graph gives each function its best
            chains down to a sleeping primitive (cocci/sleep_info.json),
            each with the parameter tests it needs; the constants passed
            along a chain decide them;
  sameguard drop the calls that a second test of the setter's own
            unmodified condition keeps out of the window;
  report    one finding per wait site, in the kernel's coccicheck formats.

Run it through 'make coccicheck' (see README.md).  Findings go to stdout;
banners, progress and the coverage line go to stderr.
"""

import dataclasses
import gc
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from typing import List, Optional

from nestsleep import DEFAULT_COCCI, VERSION, cache_dir
from nestsleep.analysis import blank, cfacts, ctok
from nestsleep.analysis.cfacts import split_args_text
from nestsleep.analysis.match import (Matcher, _flags_key, _is_nestsleep_rule, cocci_options,
				      function_coverage, stmt_expr_records)
from nestsleep.analysis.report import context_text, make_finding, patch_text, report_text
from nestsleep.analysis.resolve import Analysis
from nestsleep.analysis.polls import polls
from nestsleep.analysis.sameguard import SameGuard
from nestsleep.analysis.summarize import GFP_TESTS
from nestsleep.analysis.scan import SKIP_DIRS, WAIT_WORDS, Facts, Tree, each_function, holds_sources
from nestsleep.analysis.waiters import (SPLIT, SPLIT_CALLS, SPLIT_FORM, SPLIT_RULES, derive_waiters,
					 specialize_rule)
from nestsleep.analysis.wakecov import wake_coverage
from nestsleep.cache import Cache
from nestsleep.common import UserError, check_confidence, log, run_apart, sha1
from nestsleep.knowledge import Knowledge
from nestsleep.model import NO_TARGET, FileFlag, Site, SitePath, Witness


def _knowledge_code():
	"""The source of the code that derives the tree knowledge (wait
	primitives, carriers, window names): part of its cache key, so that
	knowledge derived by another version of that code is never reused."""
	import nestsleep.knowledge
	import nestsleep.model
	from nestsleep.analysis import resolve, summarize, waiters
	text = b""
	for mod in (cfacts, resolve, summarize, waiters, nestsleep.knowledge, nestsleep.model):
		with open(mod.__file__, "rb") as f:
			text += f.read()
	return sha1(text)[:12]


KNOWLEDGE_CODE = _knowledge_code()


@dataclasses.dataclass
class Options:
	"""The coccicheck knobs (cli.py parses them) and the library's own:
	cache (NESTSLEEP_CACHE), only (match only these files) and json (also
	write the findings there).  confidence (CONFIDENCE=): the lowest fix
	confidence whose rewrite MODE=patch prints (analysis/report.py
	patch_text); every finding gets its fix record all the same."""
	kdir: str
	mode: str = "report"
	m: str = ""
	cocci: str = ""
	spflags: List[str] = dataclasses.field(default_factory=list)
	debug_file: str = ""
	jobs: int = 0
	verbose: int = 0
	timeout: int = 200
	cache: str = ""
	only: Optional[List[str]] = None
	json: str = ""
	m_abs: Optional[str] = None
	confidence: str = "high"

	def __post_init__(self):
		if isinstance(self.spflags, str):
			self.spflags = self.spflags.split()
		if self.jobs <= 0:
			self.jobs = os.cpu_count() or 1
		self.cache = self.cache or cache_dir()


@dataclasses.dataclass
class CheckResult:
	"""What one run found: the findings (with their fix status in
	MODE=patch), the parse coverage, the phase times, and the text that
	belongs on stdout for the mode."""
	findings: list
	coverage: dict
	times: dict
	output: str = ""
	# the run's tree and facts (main() keeps them for a fast exit)
	data: tuple = dataclasses.field(default=(), repr=False, compare=False)

	def as_json(self, opts):
		"""findings.json (schema: fixtures/findings.schema.json)."""
		return {"tool": "nestsleep", "version": VERSION, "kdir": os.path.realpath(opts.kdir),
			"m": opts.m, "coverage": self.coverage, "times": self.times, "findings": self.findings}


# the top-level files by which a directory is known as a kernel tree
KERNEL_MARKERS = ("Makefile", "Kconfig", os.path.join("include", "linux"))


def check_inputs(a):
	"""Check the knobs; raise UserError with the one-line reason.  Returns
	the extra roots (an external M=) to scan beside KDIR."""
	if shutil.which("spatch") is None:
		raise UserError("spatch not found on PATH; install it with: sudo apt-get install -y coccinelle")
	if a.mode not in ("report", "context", "org", "patch"):
		raise UserError("unknown MODE=%s (report, patch, context, org)" % a.mode)
	a.confidence = check_confidence(a.confidence)
	if not os.path.isdir(a.kdir):
		raise UserError("no kernel tree at KDIR=%s" % a.kdir)
	cocci = a.cocci or DEFAULT_COCCI
	if not os.path.isfile(cocci):
		raise UserError("COCCI=%s: no such rule file" % a.cocci)
	a.cocci = os.path.abspath(cocci)
	check_spflags(a.spflags)
	# parsing hints that live beside the rule (scoped_guard and friends):
	# without them spatch 1.1.1 drops every function that uses a guard
	hints = os.path.join(os.path.dirname(a.cocci), "nestsleep.macros.h")
	if _is_nestsleep_rule(a.cocci) and os.path.isfile(hints) and "--macro-file" not in a.spflags:
		a.spflags = ["--macro-file", hints] + a.spflags
	ext = check_m(a)
	check_outputs(a)
	check_kernel_tree(a.kdir)
	return ext


def check_spflags(spflags):
	"""The user's SPFLAGS, tried on an empty file with a trivial rule
	(a tenth of a second), so that spatch refuses them before the scan,
	not minutes later."""
	if not spflags:
		return
	with tempfile.TemporaryDirectory(prefix="nestsleep-") as d:
		rule, empty = os.path.join(d, "t.cocci"), os.path.join(d, "t.c")
		with open(rule, "w") as f:
			f.write("@@\n@@\n- nestsleep_no_such_call();\n")
		open(empty, "w").close()
		r = subprocess.run(["spatch", "--sp-file", rule, "--very-quiet", empty] + spflags,
				   capture_output=True, text=True)
	if r.returncode != 0:
		lines = [l.strip() for l in r.stderr.splitlines() if l.strip()]
		first = next((l for l in lines if l.startswith("spatch:") or "rror" in l), lines[0] if lines else "")
		raise UserError("SPFLAGS=%s: spatch refused them: %s" % (" ".join(spflags), first or "exit %d" % r.returncode))


def _writable(path):
	"""Why path cannot be written, or None."""
	d = os.path.dirname(os.path.abspath(path))
	if not os.path.isdir(d):
		return "no such directory %s" % d
	if os.path.isdir(path):
		return "it is a directory"
	if not os.access(d, os.W_OK) or (os.path.exists(path) and not os.access(path, os.W_OK)):
		return "permission denied"
	return None


def check_outputs(a):
	"""What the run will write, checked before it starts: a bad path would
	otherwise surface as a traceback after minutes of work."""
	if a.timeout <= 0:
		raise UserError("TIMEOUT=%d: give spatch's per-file timeout as a positive number of seconds" % a.timeout)
	for knob, path in (("DEBUG_FILE", a.debug_file), ("--json", a.json)):
		why = path and _writable(path)
		if why:
			raise UserError("%s=%s: cannot write there (%s)" % (knob, path, why))
	try:
		os.makedirs(a.cache, exist_ok=True)
		if not os.access(a.cache, os.W_OK):
			raise PermissionError("permission denied")
	except OSError as e:
		raise UserError("cannot use %s as the cache (NESTSLEEP_CACHE): %s" % (a.cache, e.strerror or e))


def check_m(a):
	"""M=: a directory under KDIR (made relative), or an external module."""
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
	if a.m and not a.m_abs:
		# never drop an explicit M= silently: say why it is not scanned
		m = os.path.normpath(a.m) + "/"
		for skip, what in SKIP_DIRS.items():
			if m.startswith(skip):
				raise UserError("M=%s is under %s, which nestsleep does not scan: it holds %s, not kernel code"
						% (a.m, skip, what))
	return ext


def check_kernel_tree(kdir):
	"""A kernel tree has the kernel's top-level files.  A directory of C
	sources without them (a test tree, a subsystem copied out) is scanned
	as a tree of its own, with a note; one with no C source at all is
	refused, so that a wrong KDIR does not pass as '0 findings'."""
	if all(os.path.exists(os.path.join(kdir, f)) for f in KERNEL_MARKERS):
		return
	if not holds_sources(kdir):
		raise UserError("KDIR=%s is not a kernel tree: it has no top-level Makefile, Kconfig and "
				"include/linux, and no .c or .h file" % kdir)
	log("note: KDIR=%s is not a kernel tree (no top-level Makefile, Kconfig and include/linux); "
	    "scanning its C files as one" % kdir)


def in_scope(rel, a, ext):
	if not a.m:
		return True
	if ext:
		return rel.startswith(ext[0] + os.sep)
	return rel == a.m or rel.startswith(a.m + "/")


def tree_knowledge(tree, facts, ana, kn, cache, times):
	"""Wait primitives, state-carrying helpers and window names of the tree."""
	t = time.time()
	wait_files = [r for r in tree.files if tree.flags(r) & FileFlag.WAIT]
	state_files = [r for r in tree.files if tree.flags(r) & FileFlag.STATE]
	facts.ensure(wait_files + state_files)
	times["facts"] = time.time() - t
	t = time.time()
	waiters = derive_waiters(kn, facts, [r for r in wait_files if tree.flags(r) & FileFlag.DEFINES])
	carriers, run_true = set(), set()
	for rel in state_files:
		for name, fn in each_function(facts.get(rel)["functions"]):
			if fn.get("carry"):
				carriers.add(name)
			if fn.get("run_true"):
				run_true.add(name)
	carriers -= set(kn.sleepers) | set(waiters) | set(kn.restore)
	more = wrapper_users(tree, cache, waiters)
	if more:
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
		fns = facts.get(rel)["functions"]
		for fname, fn in sorted(each_function(fns), key=lambda x: x[0]):
			if fn.get("setter") or any(c["name"] in carriers for c in fn["calls"]):
				anchors.append((rel, fname, fns[fname]))
	ana.prefetch(set((c["name"], rel) for rel, fname, fn in anchors for c in fn["calls"] if not c.get("kind")))
	for rel, fname, fn in anchors:
		for c in fn["calls"]:
			tg = ana.call_targets(c, rel, fname)
			window_calls.append((c, tg))
			roots += tg.nodes
	ana.expand(roots)
	# which names may sleep at all: the rule's pre-filter, so the chains'
	# argument tests (which only remove chains) are left to the sites
	ana.summarize(exact=False)
	window = sorted(set(c["name"] for c, tg in window_calls if ana.witness(c, tg, ana.summary, "")))
	times["window"] = time.time() - t
	log("%d names may sleep inside set_current_state()/prepare_to_wait() windows" % len(window))

	return waiters, carriers, window, wait_files, sorted(run_true)


def blank_keep(waiters, carriers, kn):
	"""The names that keep a function body in the copy of a file that
	spatch matches (analysis/blank.py): the wait primitives (and any name
	with a word of scan.WAIT_WORDS), the state-carrying helpers and the
	state setters, that is every function where a rule of the match finds
	a site: wc (a waiter's arguments), pw and sc (a setter's window),
	carry (after a carrier), texit (a thread function that sets the
	state), and later, whose marks count only in those windows.  The
	other bodies are blanked; the wakers, the writers and the ops tables
	that MODE=patch and the wake coverage read come from the files
	themselves, not from this copy.  NESTSLEEP_BLANK=0: none blanked."""
	if os.environ.get("NESTSLEEP_BLANK", "1") == "0":
		return None
	return frozenset(waiters) | frozenset(carriers) | kn.words.set | kn.words.prepare


def blank_key(keep):
	"""What the blanking adds to the match cache key: its code and its
	names, so that a result matched on another copy is never reused."""
	if keep is None:
		return ""
	return "blank-%s-%s" % (blank.CODE_DIGEST, sha1(" ".join(sorted(keep)).encode())[:12])


def split_for(fns):
	"""How many ways the window rules are split for a file with functions
	fns (waiters.split_rule()): SPLIT when one of its functions that sets
	the task state makes SPLIT_CALLS calls or more, else 1.  Both forms
	find the same calls; the split one is cheaper only there, where the
	rule's CTL cost grows fastest: on 6.12 spatch took 210.6 s of CPU over
	the wait files with all split and 240.4 s with none (fs/jbd2/commit.c
	8.8 s against 43.9 s), and 185.4 s split this way."""
	for _, fn in each_function(fns):
		if fn.get("setter") and len(fn["calls"]) >= SPLIT_CALLS:
			return SPLIT
	return 1


def wrapper_users(tree, cache, waiters):
	"""The files without a word of WAIT_WORDS that call a wait wrapper
	whose name the scan's words miss; searched once per file content and
	wrapper set."""
	extra = sorted(n for n in waiters if not any(w in n.encode() for w in WAIT_WORDS))
	if not extra:
		return []
	pat = re.compile(r"\b(?:%s)\s*\(" % "|".join(map(re.escape, extra)))
	hits = search_files(tree, cache, "extra-" + sha1(" ".join(extra).encode())[:12], extra,
			    lambda text: bool(pat.search(text)), False,
			    [r for r in tree.files if not tree.flags(r) & FileFlag.WAIT])
	return [rel for rel, hit in hits.items() if hit]


def scan_digest(tree):
	"""A digest of what the scan found in every file (its names, structs,
	initialisers, members and flags), not of the files' content."""
	h = hashlib.sha1()
	for rel in sorted(tree.files):
		_, names, structs, inits, members, flags = tree.files[rel]
		h.update(("%s\0%s\0%s\0%s\0%s\0%d\n" % (rel, " ".join(names), " ".join(structs), " ".join(inits),
							     " ".join(members), flags)).encode("utf-8", "surrogateescape"))
	return h.hexdigest()[:16]


def _last_key(tree):
	return "tree-last-" + sha1(tree.kdir.encode())[:12]


def knowledge_reused(tree, facts, kn, cache, code, sdig):
	"""The tree knowledge of the last run on this tree, when it holds for
	this one, else None.  It holds when the code and the knowledge are the
	same, the scan found the same in every file, every file whose facts
	the pass read has the same facts (a changed file's are extracted
	again and compared with those of its old content: an edit of a
	comment changes none), and the wrappers' users are the same files:
	those are all that tree_knowledge() reads.  For an edited tree, where
	the digest of every file's content has changed."""
	rec = cache.load("index", _last_key(tree))
	if not rec or rec[0] != code or rec[1] != sdig:
		return None
	read, know, more = rec[2], rec[3], rec[4]
	for rel, sha in sorted(read.items()):
		if rel not in tree.files:
			return None
		new = tree.sha(rel)
		if new == sha:
			continue
		old = cache.load(facts.key, sha[:2], sha)
		if old is None:
			return None
		facts.ensure([rel])
		if cache.load(facts.key, new[:2], new) != old:
			return None
	if wrapper_users(tree, cache, know[0]) != more:
		return None
	return know


def knowledge_apart(tree, facts, ana, kn, cache, times):
	"""tree_knowledge() in a child process (common.run_apart()).  It reads
	the facts of every wait and state file and of their callees, some
	9,500 files, and builds the whole tree's call graph, to keep a few
	hundred names: in the run's own process that memory stayed taken
	after it was freed, and the sites' graph and the wake coverage came
	on top of it (a cold 6.12 run: 824 MiB after this pass, 1,298 at the
	end).  The facts it extracted are in the cache for the rest of the
	run; its phase times and the damaged cache files it dropped come
	back with its result."""
	def job():
		t = {}
		know = tree_knowledge(tree, facts, ana, kn, cache, t)
		facts.close()
		read = dict((rel, tree.sha(rel)) for rel in facts.by_file)
		return know, t, cache.dropped, read
	know, t, dropped, read = run_apart(job)
	times.update(t)
	cache.dropped = dropped
	return know, read


def thread_functions(tree, kn, cache):
	"""The functions passed to a thread creator anywhere in the tree
	(sleep_info.json tasks.creators): the rule's thread_exit shape looks
	at these.  The names each file passes are cached by file content."""
	cr = kn.info["tasks"]["creators"]
	names = sorted(set(cr["started"] + cr["stopped"]))
	pat = re.compile(r"\b(?:%s)\s*\(\s*&?\s*([A-Za-z_]\w*)\s*[,)]" % "|".join(map(re.escape, names)))
	hits = search_files(tree, cache, "threads-" + sha1(" ".join(names).encode())[:12], names,
			    lambda text: sorted(set(pat.findall(text))), [], tree.files)
	out = set()
	for hit in hits.values():
		out.update(hit)
	return out


def search_files(tree, cache, ckey, names, found, empty, rels):
	r"""{rel: found(text)} for each of rels, kept per file content in the
	cache index ckey.  found must find nothing in a text that does not
	hold one of names as an identifier (a regular expression that begins
	with r"\b(?:name|...)\s*\(" is such): only the files that do (one
	pass of 'nstok --ids', ctok.mentions()) are read here, and the others
	get empty, as does a file that cannot be read."""
	seen = cache.load("index", ckey) or {}
	todo = [rel for rel in rels if tree.sha(rel) not in seen]
	if todo:
		held = ctok.mentions(names, [tree.abs[rel] for rel in todo], tree.jobs)
		for rel, ids in zip(todo, held):
			hit = empty
			if ids:
				try:
					with open(tree.abs[rel], errors="replace") as f:
						hit = found(f.read())
				except OSError:
					pass
			seen[tree.sha(rel)] = hit
		cache.store(seen, "index", ckey)
	return dict((rel, seen[tree.sha(rel)]) for rel in rels)


# the shapes whose window the rule sees whole, from the state set to its end
WINDOW_SHAPES = ("set_current_state", "prepare_to_wait")


def carrier_may_set(r, ana):
	"""Whether the helper of carried_state Site r can return with the
	state set, given the constants of its call: every state setter of
	bcache's mca_cannibalize_lock() runs under 'if (op)' (cfacts
	carry_cond), so btree_check_reserve(b, NULL) cannot."""
	fc = next((x for x in ana.facts.get(r.file)["functions"].get(r.func, {}).get("calls", ())
		   if x["name"] == r.site and x["line"] == r.line), {})
	consts = {p: v for p, k, v in fc.get("pa", ()) if k == "c"}
	defs = [d for d in ana.resolve(r.site, r.file) if d[2] == "f"]
	if not defs:
		return True
	for rel, name, _ in defs:
		fn = ana.facts.get(rel)["functions"].get(name, {})
		if not any(j in consts and ana.args.test(op, val, consts[j]) is False
			   for j, op, val in fn.get("carry_cond", ())):
			return True
	return False


def site_paths(site_targets, ana, later, same=None):
	"""The SitePaths of each wait site, keyed by (file, line, col, colend).
	later holds the (file, line, col) of window calls that another sleep
	can follow before the window ends (the rule's 'later' matches); same,
	a SameGuard, drops the calls no run reaches with the state set."""
	findings = {}
	for r, c, tg in site_targets:
		if same is not None and same.excluded(r):
			continue
		if r.shape == "carried_state" and not carrier_may_set(r, ana):
			continue
		if r.shape == "thread_exit":
			# the way out of kthread(), from the knowledge; the path to the
			# return is the rule's, which assumes that every loop may
			# end: one doubt
			te = ana.kn.info["thread_exit"]
			w = Witness(tuple(te["chain"]), te["effect"], te["group"], 1, ((r.file, r.cline),))
			key = (r.file, r.line, r.col, r.colend)
			findings.setdefault(key, []).append(SitePath(r, w.chain, w.effect, w.group, w.penalty, w.locs))
			continue
		w = ana.witness(c, tg, ana.summary, r.file)
		if (w is not None and w.group == "schedule" and r.shape in WINDOW_SHAPES + ("carried_state",)
		    and (r.file, r.cline, r.ccol) not in later):
			# no sleep can follow the call in its window: the schedule()
			# it reaches is the sleep the window was opened for.  Only a
			# chain that sleeps another way on the way is nested.  The
			# same holds when a helper set the state (carried_state):
			# the next helper's schedule() is then the wait itself.
			w = ana.witness(c, tg, ana.summary_without("schedule"), r.file, exclude=("schedule",))
		if w is None:
			continue
		key = (r.file, r.line, r.col, r.colend)
		pen = w.penalty + label_doubt(w, ana.kn)
		if any(op in GFP_TESTS for _, op, _ in w.conds):
			# the sleep needs a blocking gfp from the waiter's caller
			pen += 1
		shape = r.shape
		if shape == "carried_state":
			pen = max(pen, 1)
		if shape in WINDOW_SHAPES + ("carried_state",) and w.group == "schedule":
			pen = max(pen, 3)
		locs = ((r.file, r.cline),) + w.locs[1:]
		findings.setdefault(key, []).append(SitePath(r, w.chain, w.effect, w.group, pen, locs,
							     blocks=blocks(w, c, tg, r, ana), also=also(w, c, tg, r, ana),
							     needs=needs_of(w, c)))
	return findings


def label_doubt(w, kn):
	"""One doubt when w's final primitive belongs to a group of
	cocci/sleep_info.json whose only sources are hand labels
	(Knowledge.label_only): no kernel line shows that it sleeps."""
	end = w.chain[-1] if w.chain else None
	return 1 if w.group in kn.label_only_groups or end in kn.label_only else 0


# the annotations that only check: they warn, and at most preempt
BARE_ANNOTATIONS = ("might_sleep", "__might_sleep", "might_sleep_if")


def blocks(w, c, tg, r, ana):
	"""Whether something on the way from call c may really block: False
	when its best chain ends in might_sleep() itself and no chain without
	the annotations reaches a sleeping primitive (drbd_alloc_pages():
	__drbd_free_peer_req() starts with might_sleep(), and then only frees
	memory and wakes waiters).  The check is on the whole group, so a
	path through might_fault() or try_to_freeze() alone also counts as
	not blocking: the findings say which chain they saw."""
	if w.group != "might_sleep" or w.chain[-1] not in BARE_ANNOTATIONS:
		return True
	return ana.witness(c, tg, ana.summary_without("might_sleep"), r.file, exclude=("might_sleep",)) is not None


# the tests of a parameter a caller's constant argument can decide
PARAM_TESTS = ("bit", "nobit", "nz", "z", "eq", "ne")


def needs_of(w, c):
	"""The tests of the waiting function's parameters that w's chain
	needs: w.conds without the waiter's own guards of the call (c's
	cond), which hold wherever the call runs (drbd's BUG_ON(f &
	CS_SERIALIZE) before its wait_event_cmd() is no test of the chain)."""
	own = set(tuple(x) for x in c.get("cond", ()))
	return tuple(sorted(x for x in w.conds if x[1] in PARAM_TESTS and tuple(x) not in own))

# the groups whose sleep depends on run-time conditions the chain does not
# show: the allocation flags and memory pressure, a page fault
CONDITIONAL_GROUPS = ("gfp_alloc", "user_copy", "vmalloc")


def also(w, c, tg, r, ana):
	"""Another chain through call c when w's sleep is conditional (its
	group is in CONDITIONAL_GROUPS): the best one that ends in none of
	those groups and not in might_sleep() itself, or ()."""
	if w.group not in CONDITIONAL_GROUPS:
		return ()
	ex = CONDITIONAL_GROUPS + ("might_sleep",)
	w2 = ana.witness(c, tg, ana.summary_without(ex), r.file, exclude=ex)
	return w2.chain if w2 is not None else ()


def wait_loop(toks, paths):
	"""(keyword line, last line) of the loop around the state setter of a
	set_current_state()/prepare_to_wait() site, when the first path's call
	runs after that loop has ended (hpet_read()'s put_user() after the
	break), else None."""
	r = paths[0].site
	if r.shape not in ("set_current_state", "prepare_to_wait") or not toks:
		return None
	loop = cfacts.loop_around(toks, r.line)
	if loop is None or r.cline <= loop[1]:
		return None
	return loop


def analyse(a, ext):
	t_start = time.time()
	# the C tokenizer of the facts: built now if missing, or a one-line
	# error before any work (analysis/ctok.py)
	ctok.ensure()
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
	code = kn.digest + str(cfacts.FACTS_VERSION) + KNOWLEDGE_CODE + cfacts.CODE_DIGEST
	tdig = sha1((code + "".join("%s %s\n" % (rel, tree.files[rel][0]) for rel in sorted(tree.files))).encode())[:16]
	know = cache.load("index", "tree-" + tdig)
	how = "cached"
	if know is None:
		# an edited tree: the last run's knowledge, if what it read is
		# the same
		t = time.time()
		sdig = scan_digest(tree)
		know = knowledge_reused(tree, facts, kn, cache, code, sdig)
		how = "reused (what it reads is unchanged)"
		if know is not None:
			cache.store(know, "index", "tree-" + tdig)
			times["facts"], times["window"] = 0.0, time.time() - t
	if know is not None:
		waiters, carriers, window, wait_files, run_true = know
		carriers = set(carriers)
		times.setdefault("facts", 0.0)
		times.setdefault("window", 0.0)
		log("tree knowledge %s: %d wait primitives, %d state-carrying helpers, %d window names" % (
			how, len(waiters), len(carriers), len(window)))
	else:
		(waiters, carriers, window, wait_files, run_true), read = knowledge_apart(tree, facts, ana, kn, cache, times)
		know = (waiters, sorted(carriers), window, wait_files, run_true)
		cache.store(know, "index", "tree-" + tdig)
		cache.store((code, sdig, read, know, wrapper_users(tree, cache, waiters)), "index", _last_key(tree))

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
			text = (f.read() + json.dumps(waiters, sort_keys=True).encode() + json.dumps(sorted(carriers)).encode()
				+ json.dumps(run_true).encode() + _flags_key(a.spflags))
		keep = blank_keep(waiters, carriers, kn)
		text += blank_key(keep).encode()
		# one rule per form: window rules split SPLIT ways, or not split
		bases = dict((k, sha1(text + repr((SPLIT_RULES, k, SPLIT_FORM)).encode())[:16]) for k in (1, SPLIT))
		wset = set(window)
		threads = thread_functions(tree, kn, cache)
		forms = {}

		def form(rel):
			if rel not in forms:
				forms[rel] = split_for(facts.get(rel)["functions"])
			return forms[rel]

		def rulekey(rel):
			# a file's result depends only on the window names it calls
			# and on which of its functions run as threads
			fns = facts.get(rel)["functions"]
			names = set(c["name"] for _, fn in each_function(fns) for c in fn["calls"])
			return bases[form(rel)] + sha1((" ".join(sorted(names & wset)) + "\0" +
							" ".join(sorted(set(fns) & threads))).encode())[:8]
		t = time.time()
		stem, ext = os.path.splitext(os.path.basename(a.cocci))
		rules = dict((k, specialize_rule(a.cocci, os.path.join(tmp, "%s-%d%s" % (stem, k, ext)), waiters, carriers,
						 window, threads, run_true, split=k)) for k in (1, SPLIT))
		facts.close()	# spatch has the cores now
		matcher = Matcher(tree, cache, a, rules, paths, rulekey, form, keep)
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
	sites = [Site.from_rec(r) for r in recs]
	roots = []
	site_targets = []
	for r in sites:
		c = {"name": r.call, "line": r.cline}
		if r.kind == "member":
			c["kind"] = "member"
			c["base"] = r.base
		elif r.call in kn.gfp_arg:
			c["args"] = [x.strip() for x in split_args_text(r.args)]
		if r.call in kn.guard_calls:
			c["guard"] = split_args_text(r.args)[0] if r.args else ""
		# the constants passed decide the callee's parameter tests; the
		# waiter's own tests of its parameters at the call (facts) may
		# contradict what the callee's chain needs
		fc = next((x for x in facts.get(r.file)["functions"].get(r.func, {}).get("calls", ())
			   if x["name"] == r.call and x["line"] == r.cline), {})
		pa = [[i, "c", x] for i, x in enumerate(split_args_text(r.args)) if cfacts.is_const(x)]
		pa += [x for x in fc.get("pa", ()) if x[1] == "p"]
		if pa:
			c["pa"] = pa
		if fc.get("cond"):
			c["cond"] = fc["cond"]
		if fc.get("put_last"):
			c["put_last"] = True
		tg = ana.call_targets(c, r.file, r.func) if r.shape != "thread_exit" else NO_TARGET
		site_targets.append((r, c, tg))
		roots += tg.nodes
	ana.expand(roots)
	ana.summarize()
	facts.close()
	times["resolve"] = time.time() - t

	later = set((rel, line, col) for rel in targets for line, col in results[rel].get("later", ()))
	guard = SameGuard(tree, facts, kn)
	findings = site_paths(site_targets, ana, later, guard)
	out = []
	for key in sorted(findings):
		paths = sorted(findings[key], key=lambda p: (p.penalty, p.site.cline, p.site.ccol))
		out.append(make_finding(key, paths, kn, wait_loop(guard.tokens(key[0]), paths)))
	# who wakes the reported waits' queues, and the wakeups that can be
	# missed (analysis/wakecov.py): only the files naming their queues
	# and inputs are read
	t = time.time()
	# whether the condition blocks on every pass (a poll), for the waits
	# wake coverage gives a record: the fixer's poll rule (fix/polls.py)
	# reads it.  It reads the findings' chains alone, so the graph can go
	# first: the memory it frees is reused by the wake coverage's file
	# views, which were the peak of a run on top of it
	poll = [polls(f, ana, kn) for f in out]
	ana.nodes, ana.summary = {}, {}
	out += wake_coverage(out, tree, kn, cache, tdig)
	for f, p in zip(out, poll):
		if f.get("wakers") is not None:
			f["wakers"]["polls"] = p
	times["wakecov"] = time.time() - t
	cov = {"files": len(targets), "parsed": matcher.parsed, "failed": sorted(matcher.failed),
	       "timeout": sorted(matcher.timedout), "unreadable": ["%s (%s)" % kv for kv in sorted(tree.unreadable.items())]}
	cov.update(function_coverage(targets, results, facts, kn.scoped_calls))
	times["total"] = time.time() - t_start
	if cache.dropped:
		log("%d damaged cache files dropped and rebuilt (%s)" % (cache.dropped, a.cache))
	return out, cov, times, tree, facts


def check(a, ext=None):
	"""Run the checker with Options a; the findings and the mode's output.
	Raises UserError on bad input.  MODE=patch also gives each finding
	its fix status (finding["fix"])."""
	if ext is None:
		ext = check_inputs(a)
	# The run builds millions of small dicts (file facts, loaded or
	# extracted) and keeps nearly all of them to the end; the cyclic
	# collector would walk them again and again (about 85 % of the time
	# spent loading cached facts) to free next to nothing.  Off for the
	# run; the pools forked by it inherit that.
	gc_was = gc.isenabled()
	gc.disable()
	try:
		return _check(a, ext)
	finally:
		if gc_was:
			gc.enable()


def _check(a, ext):
	findings, cov, times, tree, facts = analyse(a, ext)
	if a.mode == "context":
		out = context_text(a, findings, tree)
	elif a.mode == "patch":
		out = patch_text(a, findings, tree, facts, Knowledge())
	else:
		out = report_text(a.mode, findings)
	return CheckResult(findings, cov, times, out, (tree, facts))


# What the last main() read: the command exits without freeing it
# (cli.py _coccicheck: freeing a gigabyte of small objects one by one
# takes seconds and gives nothing back to anyone).
KEPT = []


def main(a):
	"""The coccicheck command: Options a in, the mode's output on stdout."""
	try:
		ext = check_inputs(a)
		if not _is_nestsleep_rule(a.cocci):
			return run_plain(a)
		print("\nPlease check for false positives in the output before submitting a patch.\n"
		      "Each finding names its chain and a confidence; see README.md.\n", file=sys.stderr)
		res = check(a, ext)
		KEPT[:] = [res.data]
		res.data = ()
	except UserError as e:
		log("error: %s" % e)
		return 2
	except KeyboardInterrupt:
		log("interrupted")
		return 130
	# a diff carries the file's own bytes (surrogateescape), whatever the locale
	sys.stdout.flush()
	sys.stdout.buffer.write(res.output.encode("utf-8", "surrogateescape"))
	sys.stdout.buffer.flush()
	cov, times = res.coverage, res.times
	if a.json:
		with open(a.json, "w") as fp:
			json.dump(res.as_json(a), fp, indent=1)
	for rel in cov["failed"]:
		log("could not parse: %s" % rel)
	for rel in cov["timeout"]:
		log("timed out: %s" % rel)
	for what in cov["unreadable"]:
		log("could not read: %s" % what)
	log("%d findings; coverage: %d files matched, %d parsed, %d failed, %d timed out, %d unreadable; %.1fs (%s)" % (
		len(res.findings), cov["files"], cov["parsed"], len(cov["failed"]), len(cov["timeout"]),
		len(cov["unreadable"]), times["total"],
		", ".join("%s %.1fs" % (k, v) for k, v in times.items() if k != "total")))
	return 0


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

