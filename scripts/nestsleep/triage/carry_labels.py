# SPDX-License-Identifier: GPL-2.0-only
"""Carry hand labels from one tree's report to a later tree's.

  nestsleep carry-labels OLD_KDIR NEW_KDIR OLD_FINDINGS NEW_FINDINGS OLD_LABELS NEW_LABELS

A verdict is carried only when the fingerprint matches AND the source of
the wait-site function and of the function around every hop of the chain is
the same text (whitespace aside) in both trees: the verdict then reads the
same code.  Labels already in NEW_LABELS are kept.  Prints what was carried
and what needs a fresh review.
"""

import json
import os
import sys

from nestsleep.fix.ctext import function_body
from nestsleep.fix.edits import FileText


def func_text(cache, kdir, rel, line):
	key = (kdir, rel)
	if key not in cache:
		try:
			cache[key] = FileText(os.path.join(kdir, rel))
		except OSError:
			cache[key] = None
	ft = cache[key]
	if ft is None:
		return None
	try:
		pos = ft.offset(line, 0)
	except ValueError:
		return None
	o, c = function_body(ft.m, pos)
	if o < 0:
		return None
	s = max(ft.t.rfind("\n\n", 0, o), 0)
	return " ".join(ft.t[s:c + 1].split())


def same_code(cache, k1, a, k2, b):
	la = ["%s:%d" % (a["file"], a["line"])] + a.get("chain_locs", [])
	lb = ["%s:%d" % (b["file"], b["line"])] + b.get("chain_locs", [])
	if len(la) != len(lb):
		return False
	for x, y in zip(la, lb):
		ra, na = x.rsplit(":", 1)
		rb, nb = y.rsplit(":", 1)
		ta = func_text(cache, k1, ra, int(na))
		if ta is None or ta != func_text(cache, k2, rb, int(nb)):
			return False
	return True


def main(argv):
	if len(argv) != 6:
		print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
		return 2
	k1, k2, f1, f2, l1, l2 = argv
	try:
		with open(f1) as f:
			old = {x["fingerprint"]: x for x in json.load(f)["findings"]}
		with open(f2) as f:
			new = json.load(f)
		with open(l1) as f:
			labels = json.load(f)["labels"]
		out = {"tree": new.get("tree", ""), "labels": {}}
		if os.path.isfile(l2):
			with open(l2) as f:
				out = json.load(f)
	except (OSError, ValueError, KeyError) as e:
		print("carry_labels: %s" % e, file=sys.stderr)
		return 2
	out.setdefault("note", "verdicts carried from %s where the fingerprint matches and the wait-site "
		       "function and every hop function are the same text" % os.path.basename(l1))
	cache = {}
	carried, review = 0, []
	for b in new["findings"]:
		fp = b["fingerprint"]
		if fp in out["labels"] and out["labels"][fp].get("verdict"):
			continue
		lab = labels.get(fp, {})
		if fp in old and lab.get("verdict") and same_code(cache, k1, old[fp], k2, b):
			v = {k: lab[k] for k in ("verdict", "reason") if k in lab}
			v["site"] = "%s:%d %s()" % (b["file"], b["line"], b["function"])
			v["by"] = "carried from the %s label: same fingerprint, and the wait-site function and every " \
				  "hop's function are the same text" % os.path.basename(l1)[:-5]
			out["labels"][fp] = v
			carried += 1
		elif fp not in [r[0] for r in review]:
			review.append((fp, b["confidence"], b["file"], b["function"],
				       "changed" if fp in old else "new"))
	with open(l2 + ".tmp", "w") as f:
		json.dump(out, f, indent=1, sort_keys=True)
	os.replace(l2 + ".tmp", l2)
	print("carried %d labels; %d fingerprints need a review" % (carried, len(review)))
	for r in review:
		print("review %s %s %s %s() (%s)" % r)
	return 0

