# SPDX-License-Identifier: GPL-2.0-only
"""Who a series goes to, and through which tree: the MAINTAINERS section
of each touched file (the tree's scripts/get_maintainer.pl), To: and Cc:,
the tree tag in the subject ("[PATCH net]", tree_tags.json), and the
CONFIG_ symbols that put a file into the build."""

import fnmatch
import json
import os
import re
import subprocess


# ---------------------------------------------------------------------------
# MAINTAINERS sections

def _f_matches(pat, rel):
	if pat.endswith("/"):
		return rel.startswith(pat)
	if any(c in pat for c in "*?["):
		return fnmatch.fnmatch(rel, pat) or fnmatch.fnmatch(rel, pat.rstrip("/") + "/*")
	return rel == pat or rel.startswith(pat.rstrip("/") + "/")


def parse_sections(text):
	"""get_maintainer.pl --sections output -> [{name, M, R, L, F}]."""
	out = []
	for block in re.split(r"\n\s*\n", text.strip()):
		lines = block.strip().splitlines()
		if not lines or ":" in lines[0][:3]:
			continue
		sec = {"name": lines[0].strip(), "M": [], "R": [], "L": [], "F": [], "N": [], "T": []}
		for ln in lines[1:]:
			m = re.match(r"^([A-Z]):\s*(.*)$", ln)
			if m and m.group(1) in sec:
				sec[m.group(1)].append(m.group(2).strip())
		out.append(sec)
	return out


def most_specific(sections, rel):
	"""The section whose F: pattern that matches rel is longest (not THE REST)."""
	best, blen = None, -1
	for s in sections:
		if s["name"] == "THE REST":
			continue
		for f in s["F"]:
			if _f_matches(f, rel) and len(f) > blen:
				best, blen = s, len(f)
		if best is not s and s["N"]:
			for n in s["N"]:
				if re.search(n, rel) and blen < 0:
					best, blen = s, 0
	if best is None:
		for s in sections:
			if s["name"] == "THE REST":
				return s
	return best


def get_maintainer(kdir, args):
	"""scripts/get_maintainer.pl's output for args, or None without it."""
	gm = os.path.join(kdir, "scripts", "get_maintainer.pl")
	if not (os.path.isfile(gm) and os.path.isfile(os.path.join(kdir, "MAINTAINERS"))):
		return None
	r = subprocess.run(["perl", gm] + args, cwd=kdir, capture_output=True, text=True, timeout=300)
	return r.stdout if r.returncode == 0 else None


def file_sections(kdir, rel):
	"""Every section that covers rel, in get_maintainer.pl's order (the
	deepest F: pattern first), THE REST included; [] without MAINTAINERS."""
	out = get_maintainer(kdir, ["--nogit", "--nogit-fallback", "--sections", "-f", rel])
	return parse_sections(out) if out else []


def parent_section(kdir, rel):
	"""(directory, section): the nearest directory above rel that a section
	other than THE REST covers (get_maintainer.pl -f DIR matches a pattern
	such as drivers/cdx/* against DIR/, as for a file in it), or (None,
	None)."""
	d = os.path.dirname(rel)
	while d:
		if os.path.isdir(os.path.join(kdir, d)):
			sec = most_specific(file_sections(kdir, d), d + "/")
			if sec and sec["name"] != "THE REST":
				return d, sec
		d = os.path.dirname(d)
	return None, None


def section_of(kdir, rel, cache):
	"""The most specific section that covers rel; when only THE REST does
	(drivers/cdx/* covers the files of drivers/cdx/, not those of
	drivers/cdx/controller/), the section of the nearest parent directory,
	with "via": that directory."""
	if rel in cache:
		return cache[rel]
	secs = file_sections(kdir, rel)
	sec = most_specific(secs, rel) if secs else None
	if secs and (sec is None or sec["name"] == "THE REST"):
		d, up = parent_section(kdir, rel)
		if up:
			sec = dict(up, via=d)
	if sec is None:
		sec = {"name": "UNKNOWN (no MAINTAINERS entry found)", "M": [], "R": [], "L": [], "F": [], "T": []}
	cache[rel] = sec
	return sec


# ---------------------------------------------------------------------------
# The tree in the subject

with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "tree_tags.json")) as _f:
	TREE_TAGS = json.load(_f)["trees"]


def tree_match(sections):
	"""(row of tree_tags.json, section name, its T: line) of the first
	section, in get_maintainer.pl's order, whose T: lines name a tree of a
	row; None when none does.  A T: line of another tree (tty, media) makes
	no tag: those maintainers do not ask for one."""
	for sec in sections:
		for t in sec.get("T", []):
			url = t.split()[-1].rstrip("/")
			for row in TREE_TAGS:
				if any(url.endswith("/" + x) for x in row["t"]):
					return row, sec["name"], url
	return None


def tree_row(sections):
	m = tree_match(sections)
	return m[0] if m else None


def tree_of(kdir, files, why=None):
	"""The row of the tree the patched files go through: the same for
	every file, else None (and why, a list, says so)."""
	ms = [tree_match(file_sections(kdir, rel)) for rel in files]
	names = {m[0]["name"] if m else None for m in ms}
	if len(names) != 1 or None in names:
		if why is not None and len(names) > 1:
			why.append("the touched files go through different trees (%s)" % ", ".join(
				sorted(n or "none" for n in names)))
		return None
	if why is not None:
		why.append(ms[0])
	return ms[0][0]


def subject_prefix(row):
	"""[PATCH net], [PATCH wireless]: the fixes tree of the row, since every
	patch fixes a bug (tree_tags.json "why_fixes"); [PATCH] without a row."""
	return "PATCH %s" % row["fixes"] if row else "PATCH"


# ---------------------------------------------------------------------------
# Kconfig

def kconfig_symbols(kdir, rel):
	"""The CONFIG_ symbols that put rel's object into the build: its own
	obj-$(CONFIG_X) line (through a composite object if needed) and those of
	the directories above it."""
	syms = []
	d, name = os.path.dirname(rel), os.path.splitext(os.path.basename(rel))[0]
	target = name + ".o"
	while True:
		mk = None
		for cand in ("Makefile", "Kbuild"):
			p = os.path.join(kdir, d, cand)
			if os.path.isfile(p):
				mk = p
				break
		if mk is None:
			if not d:
				break
			# built from the parent's Makefile: 'nfp-objs += nfpcore/x.o'
			target = os.path.basename(d) + "/" + target
			d = os.path.dirname(d)
			continue
		with open(mk, errors="replace") as f:
			text = re.sub(r"\\\n", " ", f.read())
		found = _obj_symbol(text, target, set())
		if found:
			syms += found.split()
		if not d:
			break
		target = os.path.basename(d) + "/"
		d = os.path.dirname(d)
	# the top-level Makefile and arch Makefiles list the first directories
	out = []
	for s in syms:
		if s not in out:
			out.append(s)
	return out


def _obj_symbol(text, target, seen):
	"""CONFIG_X for 'obj-$(CONFIG_X) += target', following composite
	objects ('foo-y += target', 'foo-objs := target').  '' when the object
	is always built (obj-y), None when it is not found."""
	if target in seen:
		return None
	seen.add(target)
	tre = re.escape(target)
	for m in re.finditer(r"^\s*obj-(\$\((CONFIG_\w+)\)|y)\s*[:+]?=([^\n]*)$", text, re.M):
		if re.search(r"(^|\s)%s(\s|$)" % tre, m.group(3)):
			return m.group(2) or ""
	for m in re.finditer(r"^\s*([\w-]+?)-(?:y|objs|\$\((CONFIG_\w+)\))\s*[:+]?=([^\n]*)$", text, re.M):
		if re.search(r"(^|\s)%s(\s|$)" % tre, m.group(3)) and m.group(1) not in ("obj", "lib", "ccflags",
											"subdir", "always"):
			outer = _obj_symbol(text, m.group(1) + ".o", seen)
			if outer is not None:
				return " ".join(x for x in (m.group(2), outer) if x)
	return None


# ---------------------------------------------------------------------------
# To: and Cc:

ROLE_TO = ("maintainer", "supporter", "odd fixer", "chief penguin")
GIT_ROLES = ("commit_signer", "authored", "added_lines", "removed_lines")


def parse_people(out):
	"""[(who, role, section)] of get_maintainer.pl's output."""
	people = []
	for ln in (out or "").splitlines():
		m = re.match(r"^(.*?>|\S+@\S+)\s+\(([^:()]+)(?::(.*))?\)\s*$", ln.strip())
		if m:
			people.append((m.group(1).strip(), m.group(2).strip(), (m.group(3) or "").strip()))
	return people


def find_recipients(kdir, files):
	"""{to, cc, how} for the touched files: every maintainer and supporter
	get_maintainer.pl names goes to To, every reviewer and list to Cc.
	A file no section but THE REST covers (no one is addressed for it):
	with a git KDIR, the people of its git log, as get_maintainer.pl's
	--git-fallback does by default; without git, or when that finds no
	one, the people of the nearest section that covers a parent directory.
	how says which."""
	git = os.path.isdir(os.path.join(kdir, ".git"))
	out = get_maintainer(kdir, ["--no-git"] + ([] if git else ["--no-git-fallback"]) +
			     [x for rel in files for x in ("-f", rel)])
	if out is None:
		return {"to": [], "cc": [], "how": "Recipients: none found: KDIR has no MAINTAINERS or "
			"scripts/get_maintainer.pl."}
	people = parse_people(out)
	to, cc = [], []
	has_m = any(r in ROLE_TO for w, r, s in people)
	for who, role, sec in people:
		dest = to if role in ROLE_TO or (role in GIT_ROLES and not has_m) else cc
		if who not in to and who not in cc:
			dest.append(who)
	secs = list(dict.fromkeys(s for w, r, s in people if r in ROLE_TO + ("reviewer",) and s))
	how = ["Recipients: scripts/get_maintainer.pl %s -f on the touched files: the maintainers %s are To, the "
	       "reviewers and lists Cc." % ("(its default --git-fallback: KDIR is a git tree)" if git else
					    "--no-git-fallback (KDIR is not a git tree)",
					    "of " + ", ".join(secs) if secs else "it names")]
	orphans = [rel for rel in files if section_of(kdir, rel, seccache_of(kdir)).get("via") or
		   not any(s["name"] != "THE REST" for s in file_sections(kdir, rel))]
	gitp = [w for w, r, s in people if r in GIT_ROLES]
	for rel in orphans:
		how.append("No MAINTAINERS pattern covers %s (only THE REST, which addresses no one for it)." % rel)
	if orphans and gitp:
		how.append("As get_maintainer.pl does then, the people of the file's git log of the last year are "
			   "addressed: %s." % ", ".join(gitp))
	elif orphans and not any(r in ROLE_TO for w, r, s in people):
		for rel in orphans:
			d, sec = parent_section(kdir, rel)
			if not d:
				continue
			up = parse_people(get_maintainer(kdir, ["--no-git", "--no-git-fallback", "-f", d]))
			for who, role, s in up:
				dest = to if role in ROLE_TO else cc
				if who not in to and who not in cc:
					dest.append(who)
			how.append("%s, so the people of %s, the nearest section that covers a parent directory "
				   "(get_maintainer.pl -f %s), are addressed instead." % (
					   "KDIR's git log names no one for it" if git else "KDIR is not a git tree",
					   sec["name"], d))
	return {"to": to, "cc": cc, "how": " ".join(how)}


def recipients(kdir, files):
	"""(To, Cc) of find_recipients()."""
	r = find_recipients(kdir, files)
	return r["to"], r["cc"]


_SECCACHE = {}


def seccache_of(kdir):
	return _SECCACHE.setdefault(kdir, {})
