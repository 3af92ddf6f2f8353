# SPDX-License-Identifier: GPL-2.0-only
"""Match: spatch with cocci/nested_sleep.cocci on the files that hold wait
sites, cached per file content; every call made in a non-running window."""

import json
import os
import re
import shutil
import subprocess
import tempfile

from nestsleep.analysis import blank, cfacts
from nestsleep.analysis.scan import _size, each_function
from nestsleep.common import UserError, log, sha1
from nestsleep.progress import Progress, appended


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

	def __init__(self, tree, cache, args, rules, paths, rulekey, form=None, keep=None):
		"""rules: {form: the rule file}; form(rel): which one matches
		file rel (the only one when form is None).  keep: the names whose
		presence keeps a function body in the copy of a file that spatch
		reads (analysis/blank.py); None: spatch reads the files."""
		self.tree, self.cache, self.args, self.rules = tree, cache, args, rules
		self.form = form or (lambda rel: next(iter(rules)))
		self.keep = keep
		self.left = {}	# rel -> bodies that may be a function's left in its copy
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
			fresh = self._spatch([([rel for rel in todo if self.form(rel) == k], self.rules[k])
					      for k in sorted(set(map(self.form, todo)))])
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

	@staticmethod
	def _watch(procs, progress, sizes):
		"""Wait for the spatch processes procs, showing the files they
		have finished (the rule appends each one's name to its progress
		file, one per process).  sizes: path -> bytes, for the time left."""
		shown = Progress("matching", len(sizes), work=sum(sizes.values()) or 1)
		states = [{} for _ in progress]
		done, work = set(), 0
		try:
			while True:
				try:
					for proc in procs:
						proc.wait(timeout=0.5 / len(procs))
					break
				except subprocess.TimeoutExpired:
					for path, state in zip(progress, states):
						for p in appended(path, state):
							if p in sizes and p not in done:
								done.add(p)
								work += sizes[p]
					shown.update(len(done), work)
		except BaseException:
			for proc in procs:
				proc.kill()
				proc.wait()
			raise
		finally:
			shown.close()

	def _copies(self, rels, tmp):
		"""{rel: the path spatch reads}, {rel: the '{' lines of the bodies
		blanked}: the file itself, or its copy under tmp with the bodies
		that need no matching blanked (blank.py)."""
		if self.keep is None:
			return dict((rel, self.tree.abs[rel]) for rel in rels), {}
		src, blanked = {}, {}
		for n, rel in enumerate(rels):
			try:
				with open(self.tree.abs[rel], "rb") as f:
					text = f.read().decode("latin-1")
			except OSError:
				src[rel] = self.tree.abs[rel]	# spatch says it cannot read it
				continue
			out, lines, left = blank.blank_lines(text, self.keep)
			if not lines:
				src[rel] = self.tree.abs[rel]
				continue
			# under tmp whatever rel is: the file of an external module
			# (M= an absolute path) is named by its absolute path
			dst = os.path.join(tmp, "src", str(n), os.path.basename(rel))
			os.makedirs(os.path.dirname(dst), exist_ok=True)
			with open(dst, "wb") as f:
				f.write(out.encode("latin-1"))
			src[rel], blanked[rel] = dst, lines
			self.left[rel] = left
		return src, blanked

	def _spatch(self, groups):
		"""{rel: result} of spatch on each of groups [(rels, rule)]: one
		spatch per group, all at the same time, so that a group that ends
		early (a few large files) leaves no core idle while another runs."""
		tmp = tempfile.mkdtemp(prefix="nestsleep-")
		try:
			runs = []
			try:
				for n, (rels, cocci) in enumerate(groups):
					runs.append(self._start(rels, cocci, os.path.join(tmp, str(n))))
				sizes = {}
				for run in runs:
					sizes.update((run["src"][r], _size(self.tree.abs[r])) for r in run["rels"])
				self._watch([run["proc"] for run in runs], [run["progress"] for run in runs], sizes)
			except BaseException:
				for run in runs:
					if run["proc"].poll() is None:
						run["proc"].kill()
						run["proc"].wait()
				raise
			finally:
				for run in runs:
					run["out"].close()
					run["err"].close()
			res = {}
			for run in runs:
				res.update(self._finish(run))
			return res
		finally:
			shutil.rmtree(tmp, ignore_errors=True)

	def _start(self, rels, cocci, tmp):
		"""Start spatch with rule cocci on files rels, its files in tmp."""
		args = self.args
		os.makedirs(tmp)
		src, blanked = self._copies(rels, tmp)
		groups = os.path.join(tmp, "groups")
		with open(groups, "w") as f:
			# largest first: with --chunksize 1 the jobs take files as
			# they go, so a big file last would leave one job alone
			for rel in sorted(rels, key=lambda r: -_size(self.tree.abs[r])):
				f.write(src[rel] + "\n\n")
		cmd = ["spatch", "--sp-file", cocci, "--no-show-diff", "--quiet"]
		cmd += cocci_options(cocci)
		cmd += ["--timeout", str(args.timeout), "--file-groups", groups,
			"--tmp-dir", os.path.join(tmp, "par")]
		if args.jobs > 1 and len(rels) > 1:
			cmd += ["--jobs", str(min(args.jobs, len(rels))), "--chunksize", "1"]
		cmd += args.spflags
		progress = os.path.join(tmp, "progress")
		env = dict(os.environ, NESTSLEEP_RAW="1", NESTSLEEP_WAITERS=self.paths["waiters"],
			   NESTSLEEP_CARRIERS=self.paths["carriers"], NESTSLEEP_WINDOW=self.paths["window"],
			   NESTSLEEP_PROGRESS_FILE=progress)
		if args.verbose:
			log("$ " + " ".join(cmd))
		run = {"rels": rels, "src": src, "blanked": blanked, "progress": progress,
		       "err_path": os.path.join(tmp, "stderr"), "out_path": os.path.join(tmp, "stdout")}
		run["err"], run["out"] = open(run["err_path"], "w"), open(run["out_path"], "wb")
		try:
			run["proc"] = subprocess.Popen(cmd, stdout=run["out"], stderr=run["err"], env=env, cwd=tmp)
		except BaseException:
			run["out"].close()
			run["err"].close()
			raise
		return run

	def _finish(self, run):
		"""{rel: result} of a spatch run _start() started, which has ended."""
		args, rels, src, proc = self.args, run["rels"], run["src"], run["proc"]
		with open(run["err_path"], errors="replace") as f:
			err_text = f.read()
		if args.debug_file:
			with open(args.debug_file, "a") as f:
				f.write(err_text)
		with open(run["out_path"], "rb") as f:
			out = f.read().decode("utf-8", "replace")
		byabs = dict((src[r], r) for r in rels)
		res = dict((r, {"status": "ok", "recs": [], "funcs": [], "later": [], "blanked": run["blanked"].get(r, [])})
			   for r in rels)
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
			elif rec["shape"] == "later":
				res[rel]["later"].append([rec["cline"], rec["ccol"]])
			else:
				res[rel]["recs"].append(rec)
		for m in re.finditer(r"^EXN: (.*) in (\S+)\s*$", err_text, re.M):
			rel = byabs.get(m.group(2))
			if rel is None:
				continue
			res[rel]["status"] = "timeout" if "Timeout" in m.group(1) else "failed"
			res[rel]["error"] = m.group(1)[:200]
		if proc.returncode < 0:
			# killed (the OOM killer, a user): its output may miss
			# files, and none of it may be cached as their result
			raise UserError("spatch was killed by signal %d; run again" % -proc.returncode)
		if proc.returncode != 0 and not seen:
			last = (err_text.strip().splitlines() or ["no message"])[-1].strip()
			raise UserError("spatch failed (exit %d): %s (all of its stderr: DEBUG_FILE=)" % (
				proc.returncode, last))
		for rel in rels:
			if res[rel]["status"] == "ok" and not res[rel]["funcs"]:
				# (no function is left in a copy whose every function
				# body was blanked)
				names = self.tree.files[rel][1]
				if names and rel.endswith(".c") and (rel not in run["blanked"] or self.left.get(rel)):
					res[rel]["status"] = "failed"
					res[rel]["error"] = "no function parsed"
		return res


def stmt_expr_records(tree, facts, kn, waiters, targets, recs):
	"""Candidate calls in '({ ... })' conditions, which spatch skips.

	The fact extractor keeps the arguments of calls that take a statement
	expression; the calls inside a waiter's condition (or cmd) argument are
	added as if the rule had matched them."""
	seen = set((r["file"], r["line"], r["call"]) for r in recs)
	out = []
	for rel in targets:
		lines = None
		for fname, fn in each_function(facts.get(rel)["functions"]):
			for c in fn["calls"]:
				w = waiters.get(c["name"])
				if not w or not c.get("stmt_expr") or c.get("kind"):
					continue
				roles = [(w["cond"], "cond")] + [(i, "cmd") for i in w["cmd"]]
				for idx, role in roles:
					if idx >= len(c["args"]) or "({" not in c["args"][idx]:
						continue
					atoks = cfacts.tokenize(c["args"][idx])
					inner = cfacts.calls_in(atoks, 0, len(atoks), kn.want_args, guards=kn.guard_calls)
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



def function_coverage(targets, results, facts, scoped_calls):
	"""Function-level parse coverage of the matched files: the functions
	nestsleep's own scanner found, against those spatch reported parsing
	(spatch drops a function it cannot parse and goes on, so a file can
	count as parsed with functions missing).  Functions that use a scoped
	guard are counted apart: spatch 1.1.1 drops them without the hints.
	A function whose body spatch was not given (blanked: it holds no
	wait) is counted apart too, as blanked: spatch's verdict on it is
	unknown, and the rule finds nothing in it."""
	total = parsed = gtotal = gparsed = nblank = 0
	dropped = []
	for rel in targets:
		r = results.get(rel) or {}
		if r.get("status") != "ok":
			continue
		seen = set(r.get("funcs", []))
		blanked = set(r.get("blanked", ()))
		for name, fn in each_function(facts.get(rel)["functions"]):
			if fn["line"] in blanked:
				nblank += 1
				continue
			total += 1
			guard = any(c["name"] in scoped_calls for c in fn.get("calls", []))
			gtotal += guard
			if name in seen:
				parsed += 1
				gparsed += guard
			elif len(dropped) < 200:
				dropped.append("%s:%s" % (rel, name))
	return {"functions": total, "functions_parsed": parsed, "guard_functions": gtotal,
		"guard_functions_parsed": gparsed, "functions_dropped": dropped, "functions_blanked": nblank}


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
