# SPDX-License-Identifier: GPL-2.0-only
"""Held-out precision: how often the checker is right on code its rules were
not tuned on.

  python3 -m nestsleep.triage.heldout --findings F --kdir K --base B --labels L [--json OUT]

The rules and the confidence levels were tuned on the hand labels of two
trees (6.1 and 6.12), so their in-sample precision flatters them.  The
held-out findings of tree K are those whose waiting function's text does not
exist in the earlier tree B: code that is new or changed since B.

Selection, per finding (its "function" in its "file" of K, the definition
whose lines hold the finding's line, else the first of that name):

  same       some function of B with the same name, in any .c or .h file
             of B, has the same text: the function is old code, wherever it
             lives now (a moved or renamed file does not make it new)
  renamed    some function of B under another name, in the file of B with
             the same path, has the same text once each function's own name
             is blanked (every use of it, so a recursive call too): a
             renamed function is old code.  A function both renamed and
             moved to another file is counted as held-out (finding it would
             mean comparing every function of B).
  held-out   neither
  not found  K's file holds no function of that name (the tokenizer missed
             it): left out of both counts, and listed

"Text" is the function's tokens from the start of its declaration to its
closing brace, as cfacts.tokenize() sees them: whitespace and comments do
not count, string and character literals are blanked (a change only inside
a string literal does not make a function new), and a preprocessor line
inside the body counts with its whitespace collapsed.  Candidate files of B
come from one `grep -rlwF` for all the function names at once.

Precision is counted as reports.precision() counts the in-sample figure:
a labelled finding is correct when its verdict is `true` or `harmless`,
precision = correct / labelled, and unlabelled findings are left out of it
(shown in their own column).  The interval is the Wilson score interval at
95 % (z = 1.96); below 30 labelled findings the figure is indicative and no
pass/fail threshold applies.

Whether a rule rests on these very labels is checked, not assumed: a
held-out fingerprint cited anywhere in cocci/ or scripts/nestsleep/ (a
"label:<tree>:<fingerprint>" source in sleep_info.json, a comment) is listed
as cited, and the text then does not say that no rule was justified by them.
"""

import argparse
import collections
import json
import math
import os
import re
import subprocess
import sys

from nestsleep import TOP
from nestsleep.analysis import cfacts
from nestsleep.triage import treeid

LEVELS = ("high", "medium", "low")
CORRECT = ("true", "harmless")	# as reports.precision()
Z95 = 1.959964
INDICATIVE_BELOW = 30

Func = collections.namedtuple("Func", "name start end text anon")


def _norm(tok):
	k, v, _ = tok
	return " ".join(v.replace("\\\n", " ").split()) if k == "pp" else v


def functions(text):
	"""The function definitions of a C file: Func(name, first line, last
	line, text, text with the function's own name blanked)."""
	toks = cfacts.tokenize(text)
	out = []
	n = len(toks)
	stmt_start = 0
	i = 0
	while i < n:
		k, v, _ = toks[i]
		if k == "op" and v == "{":
			name, _, lo = cfacts._def_name(toks, i, stmt_start)
			close = cfacts._match_close(toks, i, "{", "}")
			if name:
				# preprocessor lines before the brace are file scope
				# (#ifdef around the definition), not its text
				ft = [t for t in toks[lo:i] if t[0] != "pp"] + toks[i:close + 1]
				words = [_norm(t) for t in ft]
				anon = ["@" if t[0] == "id" and t[1] == name else w for t, w in zip(ft, words)]
				out.append(Func(name, ft[0][2], toks[min(close, n - 1)][2], " ".join(words), " ".join(anon)))
			i = close + 1
			stmt_start = i
			continue
		if k == "op" and v == ";":
			stmt_start = i + 1
		i += 1
	return out


class Tree:
	"""The functions of a tree's files, parsed once each."""

	def __init__(self, root):
		self.root = root
		self.cache = {}

	def funcs(self, rel):
		if rel not in self.cache:
			try:
				with open(os.path.join(self.root, rel), errors="replace") as f:
					self.cache[rel] = functions(f.read())
			except OSError:
				self.cache[rel] = []
		return self.cache[rel]

	def files_naming(self, names):
		"""The .c and .h files that hold any of names as a word."""
		if not names:
			return []
		r = subprocess.run(["grep", "-rlwF", "--include=*.c", "--include=*.h", "-f", "-", "."],
				   cwd=self.root, input="\n".join(sorted(names)) + "\n", capture_output=True, text=True)
		if r.returncode > 1:
			raise OSError("grep in %s: %s" % (self.root, r.stderr.strip()))
		return sorted(os.path.normpath(p) for p in r.stdout.splitlines())


def waiting_function(tree, f):
	"""The definition of the finding's function in its file, or None."""
	same = [fn for fn in tree.funcs(f["file"]) if fn.name == f["function"]]
	for fn in same:
		if fn.start <= f["line"] <= fn.end:
			return fn
	return same[0] if same else None


def select(findings, kdir, base):
	"""fingerprint -> {"status": same|renamed|held-out|not found, "where"}."""
	new, old = Tree(kdir), Tree(base)
	mine = {f["fingerprint"]: waiting_function(new, f) for f in findings}
	names = set(fn.name for fn in mine.values() if fn)
	byname = collections.defaultdict(list)
	for rel in old.files_naming(names):
		for fn in old.funcs(rel):
			if fn.name in names:
				byname[fn.name].append((rel, fn))
	out = {}
	for f in findings:
		fn = mine[f["fingerprint"]]
		if fn is None:
			out[f["fingerprint"]] = {"status": "not found", "where": ""}
			continue
		# the same path first, so that "where" names the obvious match
		cands = sorted(byname.get(fn.name, []), key=lambda x: (x[0] != f["file"], x[0], x[1].start))
		hit = next(((rel, g) for rel, g in cands if g.text == fn.text), None)
		status = "same"
		if hit is None:
			hit = next(((f["file"], g) for g in old.funcs(f["file"]) if g.name != fn.name and g.anon == fn.anon),
				   None)
			status = "renamed"
		if hit is None:
			out[f["fingerprint"]] = {"status": "held-out", "where": ""}
		else:
			out[f["fingerprint"]] = {"status": status, "where": "%s:%d %s()" % (hit[0], hit[1].start, hit[1].name)}
	return out


def wilson(k, n, z=Z95):
	"""The Wilson score interval (lo, hi) of k successes in n, or None."""
	if n == 0:
		return None
	p = k / n
	d = 1 + z * z / n
	c = (p + z * z / (2 * n)) / d
	h = z / d * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
	return (max(0.0, c - h), min(1.0, c + h))


def level_row(fs):
	"""(findings, labelled, correct, harmless, Wilson interval) of fs."""
	lab = [f for f in fs if f.get("verdict")]
	ok = sum(1 for f in lab if f["verdict"] in CORRECT)
	return (len(fs), len(lab), ok, sum(1 for f in lab if f["verdict"] == "harmless"), wilson(ok, len(lab)))


def own_sources():
	"""where -> text of the checker's own files, where a rule could cite a label."""
	out = {}
	for top in ("cocci", os.path.join("scripts", "nestsleep")):
		for d, _, files in os.walk(os.path.join(TOP, top)):
			for n in files:
				if n.endswith((".json", ".cocci", ".py", ".h")) and n != "heldout.py":
					p = os.path.join(d, n)
					with open(p, errors="replace") as f:
						out[os.path.relpath(p, TOP)] = f.read()
	return out


def compute(findings, kdir, base, labels, sources=None):
	"""The held-out figure of findings (of tree kdir) against tree base.
	Counts are of findings, as reports.precision() counts them: two wait
	sites of one function with the same chain share a fingerprint (and a
	label) and count twice."""
	st = select(findings, kdir, base)
	held = []
	for f in findings:
		if st[f["fingerprint"]]["status"] == "held-out":
			held.append({"fingerprint": f["fingerprint"], "file": f["file"], "line": f["line"],
				     "function": f["function"], "confidence": f["confidence"],
				     "verdict": (labels.get(f["fingerprint"]) or {}).get("verdict", "")})
	levels = collections.OrderedDict((c, level_row([h for h in held if h["confidence"] == c])) for c in LEVELS)
	levels["all"] = level_row(held)
	srcs = own_sources() if sources is None else sources
	cited = [(h["fingerprint"], where) for h in held for where, text in sorted(srcs.items())
		 if re.search(r"\b%s\b" % re.escape(h["fingerprint"]), text)]
	return {"tree": treeid.tree_id(kdir), "base": treeid.tree_id(base), "total": len(findings),
		"status": st, "counts": collections.Counter(st[f["fingerprint"]]["status"] for f in findings),
		"n": len(held), "functions": len(set((h["file"], h["function"]) for h in held)),
		"held": held, "levels": levels, "cited": cited}


def _pct(x):
	return "%.0f%%" % (100.0 * x)


def markdown(res):
	"""index.md lines: what held-out means, the table, the findings."""
	cnt, lv = res["counts"], res["levels"]
	L = ["### Held-out precision (code new since %s)" % res["base"], ""]
	why = ("Held-out findings are those in a function whose text (whitespace and comments aside) %s does "
	       "not have, under the same name anywhere in the tree or under another name in the same file: code "
	       "new or changed since %s" % (res["base"], res["base"]))
	if res["cited"]:
		why += (". %d of these labels are cited in the checker's own files, so the figure is not fully held "
			"out: %s." % (len(set(fp for fp, _ in res["cited"])),
				      ", ".join("`%s` (%s)" % c for c in res["cited"])))
	else:
		why += ("; the rules were tuned on both trees' labels, but no rule was justified by these labels (no "
			"file of `cocci/` or `scripts/nestsleep/` cites their fingerprints).")
	L += [why, ""]
	L += ["%d findings in %d functions are held out, of %d: %d in a function whose text %s has (%d of them "
	      "under another name), %d whose function was not found." % (
		      res["n"], res["functions"], res["total"], cnt["same"] + cnt["renamed"], res["base"],
		      cnt["renamed"], cnt["not found"]), ""]
	L += ["| confidence | held-out findings | labelled | correct | of which harmless | precision | "
	      "95% interval (Wilson) |", "|---|---|---|---|---|---|---|"]
	for c, (n, nl, ok, hl, ci) in lv.items():
		L.append("| %s | %d | %d | %d | %d | %s | %s |" % (
			c, n, nl, ok, hl, _pct(ok / nl) if nl else "n/a",
			"%s-%s" % (_pct(ci[0]), _pct(ci[1])) if ci else "n/a"))
	L.append("")
	few = [c for c, row in lv.items() if row[1] < INDICATIVE_BELOW]
	note = ("Counted as above: correct = `true` or `harmless`, precision = correct / labelled, unlabelled "
		"findings left out. ")
	if lv["all"][1] < INDICATIVE_BELOW:
		note += ("With %d labelled held-out findings (fewer than %d) the figure is indicative only: no "
			 "pass/fail threshold applies." % (lv["all"][1], INDICATIVE_BELOW))
	elif few:
		note += ("Levels with fewer than %d labelled held-out findings (%s) are indicative only." % (
			INDICATIVE_BELOW, ", ".join(few)))
	L += [note, ""]
	if res["held"]:
		L += ["Held-out findings: " + ", ".join("`%s` %s:%d %s() %s %s" % (
			h["fingerprint"], h["file"], h["line"], h["function"], h["confidence"], h["verdict"] or "unlabelled")
			for h in res["held"]) + ".", ""]
	miss = [fp for fp, v in res["status"].items() if v["status"] == "not found"]
	if miss:
		L += ["Function not found in the tree (left out): " + ", ".join("`%s`" % fp for fp in sorted(miss)) + ".", ""]
	return L


def main(argv=None):
	ap = argparse.ArgumentParser(prog="heldout", description=__doc__.split("\n")[0])
	ap.add_argument("--findings", required=True, help="a findings.json (coccicheck --json or make triage)")
	ap.add_argument("--kdir", required=True, help="the tree of the findings")
	ap.add_argument("--base", required=True, help="the earlier tree (the one the rules were tuned on)")
	ap.add_argument("--labels", required=True, help="the hand labels of the findings' tree")
	ap.add_argument("--json", default="", help="also write the result as JSON here")
	a = ap.parse_args(argv)
	with open(a.findings) as f:
		data = json.load(f)
	with open(a.labels) as f:
		labels = json.load(f).get("labels", {})
	res = compute(data["findings"] if isinstance(data, dict) else data, a.kdir, a.base, labels)
	print("\n".join(markdown(res)))
	if a.json:
		with open(a.json, "w") as f:
			json.dump(dict(res, levels=list(res["levels"].items())), f, indent=1)
	return 0


if __name__ == "__main__":
	sys.exit(main())
