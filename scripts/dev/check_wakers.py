#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-only
"""An independent check of the waker rule: no half-converted wait.

For every function that MODE=patch rewrites, this lists the direct wakers
that could reach its task, with a search simpler than the fixer's own
(scripts/nestsleep/fix/wakers.py, which it does not import):

  task keys  the lvalues that receive kthread_run()/kthread_create*() of the
             function or of a same-file caller, or 'current' in either
             (one hop through a local 'x = t;')
  files      every tree file that mentions the global or array name, or
             the struct type and the member
  wakers     wake_up_process(), wake_up_state(), wake_q_add(),
             wake_q_add_safe(), and kthread_park() (whose wakeup 6.1's
             wait_woken() can lose) whose task argument ends in the key, or is
             a local assigned from it; a '->member' whose base is declared
             as another struct type is skipped

Each listed waker must be converted (the patch changes its line) or
explained (the finding's reason or caveats name its file:line).

  check_wakers.py [--fast] [--only S]        make check: the patch fixtures
                                             and the real-tree fixtures
  check_wakers.py --kdir K [--m M] [--findings F.json --diff D]
                                             one tree (runs MODE=patch unless
                                             given its output)
  --tool PATH     run this program instead, with nestsleep.py's options
                  (an older version's scripts/nestsleep.py, say)

Prints KTAP lines, 'ok N - NAME' or 'not ok N - NAME', with '# ' details.
"""

import argparse
import glob
import json
import os
import re
import subprocess
import sys
import tempfile

from nestsleep import TOP, cache_dir
from nestsleep.analysis import pipeline

PY = "/usr/bin/python3"
CACHE = cache_dir()
KTREE = os.path.join(CACHE, "linux-source-6.1")
WAKERS = re.compile(r"\b(wake_up_process|wake_up_state|wake_q_add|wake_q_add_safe|kthread_park)\s*\(")
TASK_ARG = {"wake_up_process": 0, "wake_up_state": 0, "wake_q_add": 1, "wake_q_add_safe": 1, "kthread_park": 0}
CREATE = r"kthread_(?:run|create)\w*\s*\(\s*%s\b"
PATH = r"[A-Za-z_][\w]*(?:\s*(?:->|\.)\s*[A-Za-z_]\w*|\s*\[[^\]=;]*\])*"


def strip_comments(t):
	return re.sub(r"/\*.*?\*/|//[^\n]*", lambda m: re.sub(r"[^\n]", " ", m.group(0)), t, flags=re.S)


class Tree:
	def __init__(self, kdir, m_abs=None):
		self.kdir = os.path.realpath(kdir)
		self.m_abs = os.path.realpath(m_abs) if m_abs else None
		self.texts = {}
		self.grep_memo = {}

	def abs(self, rel):
		return rel if os.path.isabs(rel) else os.path.join(self.kdir, rel)

	def rel(self, path):
		path = os.path.realpath(path)
		if self.m_abs and path.startswith(self.m_abs + "/"):
			return path
		return os.path.relpath(path, self.kdir)

	def text(self, rel):
		if rel not in self.texts:
			with open(self.abs(rel), errors="replace") as f:
				self.texts[rel] = strip_comments(f.read())
		return self.texts[rel]

	def files_with(self, word):
		if word not in self.grep_memo:
			roots = [self.kdir] + ([self.m_abs] if self.m_abs else [])
			out = set()
			for root in roots:
				p = subprocess.run(["grep", "-rlw", "--include=*.c", "--include=*.h", "-e", word, root],
						   stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
				out |= set(self.rel(x) for x in p.stdout.splitlines())
			self.grep_memo[word] = out
		return self.grep_memo[word]


def closing(t, i):
	"""Index of the bracket that closes the one at t[i] (len(t) if none)."""
	opener, closer = t[i], {"(": ")", "{": "}", "[": "]"}[t[i]]
	depth = 0
	for j in range(i, len(t)):
		if t[j] == opener:
			depth += 1
		elif t[j] == closer:
			depth -= 1
			if depth == 0:
				return j
	return len(t)


def functions(t):
	"""[(name, body_start, body_end)] of the top-level function bodies."""
	return [(m.group(1), m.start(), closing(t, m.end() - 1))
		for m in re.finditer(r"^[A-Za-z_][^;{}()]*?\b([A-Za-z_]\w*)\s*\([^;{}]*\)\s*\{", t, re.M)]


def func_at(t, pos):
	for name, s, e in functions(t):
		if s <= pos <= e:
			return name, s, e
	return None, 0, 0


def task_keys(tree, rel, func):
	"""[(kind, struct, name)] where the task of func (or of a same-file
	caller) is stored."""
	t = tree.text(rel)
	names = {func}
	for name, s, e in functions(t):
		if re.search(r"\b%s\s*\(" % re.escape(func), t[s:e]) and name != func:
			names.add(name)
	lvals = []
	for name in names:
		for r in tree.files_with(name):
			tt = tree.text(r)
			for m in re.finditer(r"(%s)\s*=\s*%s" % (PATH, CREATE % re.escape(name)), tt):
				lvals.append((r, m.start(), re.sub(r"\s+", "", m.group(1))))
	for name, s, e in functions(t):
		if name in names:
			for m in re.finditer(r"(%s)\s*=\s*current\s*;" % PATH, t[s:e]):
				lvals.append((rel, s + m.start(), re.sub(r"\s+", "", m.group(1))))
			for m in re.finditer(r"WRITE_ONCE\s*\(\s*(%s)\s*,\s*current\s*\)" % PATH, t[s:e]):
				lvals.append((rel, s + m.start(), re.sub(r"\s+", "", m.group(1))))
	keys = set()
	for r, pos, lv in lvals:
		tt = tree.text(r)
		fname, fs, fe = func_at(tt, pos)
		if re.match(r"^[A-Za-z_]\w*$", lv) and re.search(r"\*\s*%s\s*[;=,)]" % re.escape(lv), tt[fs:pos]):
			# a local: one hop
			for m in re.finditer(r"(%s)\s*=\s*%s\s*;" % (PATH, re.escape(lv)), tt[pos:fe]):
				keys.add(key_of(r, tt, fs, re.sub(r"\s+", "", m.group(1))))
			continue
		keys.add(key_of(r, tt, fs, lv))
	return sorted(k for k in keys if k)


def key_of(rel, t, fs, lv):
	m = re.match(r"^(?:(.*?)(?:->|\.))?([A-Za-z_]\w*)(\[.*\])?$", lv)
	if not m:
		return None
	base, name, idx = m.groups()
	kind = "array" if idx else ("member" if base else "global")
	home = None
	if not base and re.search(r"^static\b[^;(]*\b%s\s*(?:\[[^\]]*\])?\s*[;=]" % re.escape(name), t, re.M):
		home = rel
	struct = None
	if base and re.match(r"^[A-Za-z_]\w*$", base):
		decl = r"\bstruct\s+(\w+)\s*\**\s*%s\s*[;=,)\[]" % re.escape(base)
		dm = re.search(decl, t[fs:]) or re.search(decl, t)
		if dm:
			struct = dm.group(1)
	return (kind, struct, name, home)


def wakers_of(tree, key):
	"""[(rel, line, call text)] of the wakers whose task argument is key."""
	kind, struct, name, home = key
	files = tree.files_with(name)
	if struct:
		files = files & tree.files_with(struct)
	if home:
		files = {home}          # a file-scope static: no other file sees it
	out = []
	for r in sorted(files):
		t = tree.text(r)
		for m in WAKERS.finditer(t):
			i = closing(t, m.end() - 1)
			args = split(t[m.end():i])
			k = TASK_ARG[m.group(1)]
			if k >= len(args):
				continue
			arg = re.sub(r"\s+", "", args[k])
			arg = re.sub(r"^(?:READ_ONCE|rcu_dereference)\((.*)\)$", r"\1", arg)
			hit = matches(t, m.start(), arg, key)
			if hit is None and re.match(r"^[A-Za-z_]\w*$", arg):
				fname, fs, fe = func_at(t, m.start())
				for am in re.finditer(r"\b%s\s*=\s*([^;]+);" % re.escape(arg), t[fs:m.start()]):
					src = re.sub(r"\s+", "", am.group(1))
					src = re.sub(r"^(?:READ_ONCE|rcu_dereference)\((.*)\)$", r"\1", src)
					if matches(t, m.start(), src, key):
						hit = True
			if hit:
				out.append((r, t.count("\n", 0, m.start()) + 1, re.sub(r"\s+", " ", t[m.start():i + 1])))
	return out


def split(s):
	parts, depth, cur = [], 0, ""
	for c in s:
		if c in "([{":
			depth += 1
		elif c in ")]}":
			depth -= 1
		if c == "," and depth == 0:
			parts.append(cur)
			cur = ""
		else:
			cur += c
	parts.append(cur)
	return parts


def matches(t, pos, arg, key):
	kind, struct, name, _ = key
	if kind == "global":
		return True if arg == name else None
	if kind == "array":
		return True if re.match(r"^(?:.*(?:->|\.))?%s\[.*\]$" % re.escape(name), arg) else None
	m = re.match(r"^(.*)(?:->|\.)%s$" % re.escape(name), arg)
	if not m:
		return None
	base = m.group(1)
	if struct and re.match(r"^[A-Za-z_]\w*$", base):
		dm = None
		for dm in re.finditer(r"\bstruct\s+(\w+)\s*\*\s*%s\b" % re.escape(base), t[:pos]):
			pass
		if dm and dm.group(1) != struct:
			return None
	return True


def changed_lines(diff, tree):
	"""{rel: set of old line numbers the diff removes or replaces}."""
	out = {}
	cur = None
	old = 0
	for line in diff.splitlines():
		if line.startswith("--- a/"):
			p = line[6:]
			cur = os.path.join(tree.m_abs, p) if tree.m_abs and not os.path.exists(
				os.path.join(tree.kdir, p)) else p
			out.setdefault(cur, set())
		elif line.startswith("@@"):
			old = int(re.match(r"@@ -(\d+)", line).group(1))
		elif cur is None or line.startswith("+++"):
			continue
		elif line.startswith("-"):
			out[cur].add(old)
			old += 1
		elif line.startswith(" "):
			old += 1
	return out


def check(tree, findings, diff):
	"""[(unit, ok, lines)]."""
	changed = changed_lines(diff, tree)
	units = {}
	for f in findings:
		fx = f.get("fix") or {}
		if fx.get("status") == "patch":
			units.setdefault((f["file"], f["function"]), []).append(f)
	out = []
	for (rel, func), fs in sorted(units.items()):
		said = " ".join(x["fix"]["reason"] + " " + " ".join(x["fix"]["caveats"]) for x in fs)
		keys = task_keys(tree, rel, func)
		lines = []
		ok = True
		for key in keys:
			for r, ln, call in wakers_of(tree, key):
				where = "%s:%d" % (r, ln)
				if ln in changed.get(r, set()):
					lines.append("converted  %s %s" % (where, call))
				elif where in said:
					lines.append("explained  %s %s" % (where, call))
				else:
					ok = False
					lines.append("LEFT       %s %s (neither converted nor named in the finding)" % (where, call))
		out.append(("%s:%s" % (rel, func), ok, ["keys: %s" % (keys or "none")] + lines))
	return out


def run_patch(tool, kdir, m, only, cache):
	"""MODE=patch: (findings, diff).  In this process, or with tool, that
	program (another version's nestsleep.py) as a command."""
	if not tool:
		opts = pipeline.Options(kdir=kdir, m=m or "", mode="patch", jobs=2, only=only, cache=cache,
					confidence="low")
		try:
			res = pipeline.check(opts)
		except pipeline.UserError as e:
			raise RuntimeError("MODE=patch failed: %s" % e)
		return res.findings, res.output
	fd, jpath = tempfile.mkstemp(suffix=".json", prefix="check-wakers-")
	os.close(fd)
	try:
		cmd = [PY, tool, "--kdir", kdir, "--mode", "patch", "--json", jpath, "-j", "2"]
		if m:
			cmd += ["--m", m]
		if only:
			cmd += ["--only"] + only
		env = dict(os.environ, NESTSLEEP_CACHE=cache)
		p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
		if p.returncode != 0:
			raise RuntimeError("MODE=patch failed (exit %d): %s" % (p.returncode, p.stderr[-500:]))
		with open(jpath) as f:
			return json.load(f)["findings"], p.stdout
	finally:
		os.unlink(jpath)


def emit(n, name, ok, lines):
	for line in lines:
		print("# " + line)
	print("%s %d - %s" % ("ok" if ok else "not ok", n, name), flush=True)


def cases(fast):
	"""(name, kdir, m, only, cache) for make check."""
	out = []
	for res in sorted(glob.glob(os.path.join(TOP, "fixtures", "patch", "*.res"))):
		base = res[:-len(".res")]
		name = os.path.basename(base)
		spec = {}
		if os.path.isfile(base + ".json"):
			with open(base + ".json") as f:
				spec = json.load(f)
		if spec.get("external"):
			out.append(("patch/" + name, KTREE, base, None, CACHE, True))
		elif os.path.isdir(base):
			out.append(("patch/" + name, base, None, None, os.path.join(CACHE, "test-cache"), True))
		else:
			out.append(("patch/" + name, base + ".c", None, None, os.path.join(CACHE, "test-cache"), True))
	if not fast:
		for spec_path in sorted(glob.glob(os.path.join(TOP, "fixtures", "realtree", "*.json"))):
			with open(spec_path) as f:
				spec = json.load(f)
			if spec.get("apply"):
				continue        # a patched copy of the tree: the real-tree check covers it
			out.append(("realtree/" + os.path.basename(spec_path)[:-5], KTREE, None, spec["files"], CACHE, False))
	return out


def main(argv):
	ap = argparse.ArgumentParser()
	ap.add_argument("--fast", action="store_true")
	ap.add_argument("--only", default="")
	ap.add_argument("--kdir", default="")
	ap.add_argument("--m", default="")
	ap.add_argument("--findings", default="")
	ap.add_argument("--diff", default="")
	ap.add_argument("--tool", default="")
	a = ap.parse_args(argv)
	if a.kdir:
		if not os.path.isdir(a.kdir):
			print("check_wakers: KDIR=%s: no such directory" % a.kdir, file=sys.stderr)
			return 2
		tree = Tree(a.kdir, a.m if a.m and os.path.isabs(a.m) else None)
		if a.findings:
			with open(a.findings) as f:
				findings = json.load(f)["findings"]
			with open(a.diff) as f:
				diff = f.read()
		else:
			findings, diff = run_patch(a.tool, a.kdir, a.m, None, CACHE)
		res = check(tree, findings, diff)
		bad = 0
		for n, (unit, ok, lines) in enumerate(res, 1):
			emit(n, unit, ok, lines)
			bad += not ok
		print("# %d rewritten functions, %d with a waker left" % (len(res), bad))
		return 0
	n = 0
	for name, kdir, m, only, cache, copy in cases(a.fast):
		if a.only and a.only not in "wakers/" + name:
			continue
		n += 1
		if not os.path.isfile(os.path.join(KTREE, "Makefile")) and (kdir == KTREE):
			emit(n, name, False, ["no kernel tree at %s (run make setup)" % KTREE])
			continue
		tmp = tempfile.mkdtemp(prefix="check-wakers-")
		try:
			if copy:
				src = m or kdir
				dst = os.path.join(tmp, "tree")
				if os.path.isdir(src):
					subprocess.run(["cp", "-r", src, dst], check=True)
				else:
					os.mkdir(dst)
					subprocess.run(["cp", src, dst], check=True)
				if m:
					m = dst
				else:
					kdir = dst
			findings, diff = run_patch(a.tool, kdir, m, only, cache)
			tree = Tree(kdir, m)
			res = check(tree, findings, diff)
			lines = []
			for unit, ok, ls in res:
				if not ok or any(x.startswith(("converted", "explained", "LEFT")) for x in ls):
					lines += ["%s %s" % ("ok" if ok else "LEFT", unit)] + ["  " + x for x in ls]
			lines.append("%d rewritten functions, %d with a waker left" % (len(res), sum(not x[1] for x in res)))
			emit(n, name, all(x[1] for x in res), lines)
		except (RuntimeError, OSError, subprocess.CalledProcessError) as e:
			emit(n, name, False, [str(e)])
		finally:
			subprocess.run(["rm", "-rf", tmp])
	return 0


if __name__ == "__main__":
	sys.exit(main(sys.argv[1:]))
