# SPDX-License-Identifier: GPL-2.0-only
"""Carry hand labels and fix results to new fingerprints in the same tree.

  nestsleep rekey --old OLD/findings.json --new NEW/findings.json
	   [--labels reports/labels/<tree-id>.json] [--fixes reports/fixes/<tree-id>]

A fingerprint hashes the first sleeping chain.  When nestsleep's knowledge
or its choice between equally good chains changes, a finding at the same
wait site can get another first chain and so another fingerprint.  In the
same tree the wait site itself (file, line, columns, wait primitive and
function) has not moved, so that is what ties an old record to a new one.

The labels file keeps its verdicts under the new fingerprint, with a
"rekeyed_from" note; series.json and boottest.json in --fixes get the new
fingerprints too.  Labels whose finding is no longer reported stay in the
file (triage ignores them) and are listed.  Files are written through a
temporary file and a rename.
"""

import json
import os
import sys


class UserError(Exception):
	pass


def site(r):
	return (r["file"], r["line"], r["col"], r.get("colend"), r.get("primitive"), r["function"])


def load(path):
	try:
		with open(path) as f:
			return json.load(f)
	except (OSError, ValueError) as e:
		raise UserError("%s: %s" % (path, e))


def mapping(old, new):
	"""old fingerprint -> new fingerprint, for findings at the same wait site."""
	now = {}
	for r in new["findings"]:
		now.setdefault(site(r), r["fingerprint"])
	m = {}
	for r in old["findings"]:
		fp = now.get(site(r))
		if fp and fp != r["fingerprint"]:
			m[r["fingerprint"]] = fp
	return m


def rekey_labels(labels, m, current):
	"""Returns (moved, orphaned): labels moved to new keys, and labelled
	fingerprints that are reported no more."""
	lab = labels["labels"]
	moved = []
	for old, new in sorted(m.items()):
		if old in lab and new not in lab:
			v = lab.pop(old)
			v["rekeyed_from"] = old
			lab[new] = v
			moved.append((old, new))
	orphaned = sorted(fp for fp in lab if fp not in current)
	return moved, orphaned


def rekey_fixes(series, boot, m):
	n = 0
	for s in series.get("series", []):
		for p in s["patches"]:
			fps = [m.get(fp, fp) for fp in p["fingerprints"]]
			n += sum(1 for a, b in zip(p["fingerprints"], fps) if a != b)
			p["fingerprints"] = fps
	for r in series.get("report_only", []):
		if r["fingerprint"] in m:
			r["fingerprint"] = m[r["fingerprint"]]
			n += 1
	if boot is not None:
		res = boot.get("results", boot)
		for old, new in m.items():
			if old in res and new not in res:
				res[new] = res.pop(old)
				n += 1
	return n


def write(path, data, sort=False):
	tmp = path + ".tmp"
	with open(tmp, "w") as f:
		json.dump(data, f, indent=1, sort_keys=sort)
		f.write("\n")
	os.replace(tmp, path)


def main(a):
	"""'nestsleep rekey': a, the parsed command line (cli.py)."""
	try:
		return rekey(a)
	except UserError as e:
		sys.stderr.write("rekey: %s\n" % e)
		return 2


def rekey(a):
	old, new = load(a.old), load(a.new)
	if old.get("tree") and new.get("tree") and old["tree"] != new["tree"]:
		raise UserError("%s is %s and %s is %s: rekey works within one tree (use BASELINE= across trees)"
				% (a.old, old["tree"], a.new, new["tree"]))
	m = mapping(old, new)
	print("%d findings moved to a new fingerprint at the same wait site" % len(m))
	current = set(r["fingerprint"] for r in new["findings"])
	if a.labels:
		labels = load(a.labels)
		moved, orphaned = rekey_labels(labels, m, current)
		write(a.labels, labels, sort=True)
		print("%s: %d labels re-keyed; %d labelled fingerprints are no longer reported: %s"
		      % (a.labels, len(moved), len(orphaned), " ".join(orphaned) or "-"))
	if a.fixes:
		sp = os.path.join(a.fixes, "series.json")
		bp = os.path.join(a.fixes, "boottest.json")
		series = load(sp)
		boot = load(bp) if os.path.isfile(bp) else None
		n = rekey_fixes(series, boot, m)
		write(sp, series)
		if boot is not None:
			write(bp, boot)
		print("%s: %d fingerprints re-keyed" % (a.fixes, n))
	return 0

