# SPDX-License-Identifier: GPL-2.0-only
"""Waiters: the wait primitives of the tree, the public table of
cocci/sleep_info.json plus the wrappers found by macro expansion, and the
rule specialised to them."""

import re


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


def specialize_rule(src, dst, waiters, carriers, window, threads=(), run_true=(), split=None):
	"""Write a copy of the rule with this tree's knowledge as regex constraints.

	Alone, the rule asks Python whether an identifier is a waiter, a carrier,
	a thread function or a name that may sleep; spatch calls that script for every call in
	every file.  A regex constraint is checked inside spatch and is several
	times cheaper, so the driver bakes the sets into the copy it runs."""
	def rx(names):
		names = sorted(set(names))
		return "^(%s)$" % "|".join(names) if names else "^$"
	with open(src) as f:
		text = f.read()
	subs = {"ns_is_waiter": rx(waiters), "ns_is_carrier": rx(carriers), "ns_window": rx(window),
		"ns_is_thread": rx(threads), "ns_runs_on_true": rx(run_true),
		# the rule's same-file helper search (nshelp) serves it alone;
		# the driver's whole-tree chains replace it
		"ns_alone_prim": rx(())}
	text = re.sub(r"identifier (\w+) : script:python\(\) \{ (ns_\w+)\(\w+\) \};",
		      lambda m: 'identifier %s =~ "%s";' % (m.group(1), subs[m.group(2)]), text)
	for name in SPLIT_RULES:
		text = split_rule(text, name, SPLIT if split is None else split)
	with open(dst, "w") as f:
		f.write(text)
	return dst


# The window rules whose copy is split by window name (split_rule()), and
# into how many.  spatch's CTL engine finds "setter ... f@p(...)" backwards
# from every call of a window name in the whole function, and its cost
# grows much faster than the number of those calls: in a huge function
# with a wait (jbd2_journal_commit_transaction(), md_do_sync(),
# qla2x00_do_dpc()) one rule took 13-48 s.  Eight rules of an eighth of the
# names each find the same calls (a window is a path condition that does
# not depend on f) in a third to a half of the time.
SPLIT_RULES = ("pw", "sc")
SPLIT = 8
# a file is matched with the split rules when one of its functions that
# sets the task state makes this many calls (pipeline.split_for())
SPLIT_CALLS = 60
# how the copies are laid out: part of the match cache key (pipeline.py)
SPLIT_FORM = "each copy followed by its inheritors"
_HEADER = re.compile(r"^@(?!@)[^\n]*@[ \t]*$", re.M)


def _chunks(text):
	"""text cut before each rule header ('@name ...@', '@script:...@'):
	the text before the first rule, then one piece per rule."""
	cuts = [m.start() for m in _HEADER.finditer(text)]
	return [text[a:b] for a, b in zip([0] + cuts, cuts + [len(text)])]


def _rule_name(chunk):
	m = re.match(r"@(\w+)\b", chunk)
	return m.group(1) if m and not chunk.startswith(("@script", "@initialize", "@finalize", "@depends")) else None


def split_rule(text, name, k):
	"""Rule name as k rules name_0 .. name_k-1, each with a k-th of the
	names of its window regex ('identifier f =~ "^(a|b|...)$"'), every
	rule that inherits from it (its script, scsched) copied with it, and
	a set of positions that names name.p given every copy's.  The rules
	that inherit must follow it (the text is left as it is otherwise), and
	each copy is followed by its own inheritors: spatch 1.1.1 skips the
	script of a copy that does not directly follow it (the msleep() of
	mvumi_rescan_bus() in 6.1 was lost so).  The calls the k rules find
	are those the one rule found."""
	chunks = _chunks(text)
	idx = next((i for i, c in enumerate(chunks) if _rule_name(c) == name), None)
	if idx is None:
		return text
	m = re.search(r'identifier f =~ "\^\((.*?)\)\$";', chunks[idx])
	names = m.group(1).split("|") if m else []
	if len(names) < 2 or k < 2:
		return text
	k = min(k, len(names))
	# the run of rules that inherit from name, and from those
	family, end = {name}, idx + 1
	while end < len(chunks):
		refs = _refs(chunks[end], family)
		if not refs or _in_position_set(chunks[end], refs):
			break
		if _rule_name(chunks[end]):
			family.add(_rule_name(chunks[end]))
		end += 1
	out = []
	for c in chunks[end:]:
		refs = _refs(c, family)
		if refs and not _in_position_set(c, refs):
			return text	# an inheritor apart from the run: not split
		out.append(re.sub(r"\b(%s)\.p\b" % "|".join(sorted(refs)),
				  lambda x: ", ".join("%s_%d.p" % (x.group(1), g) for g in range(k)), c) if refs else c)
	copies = []
	for g in range(k):
		for i in range(idx, end):
			t = chunks[i]
			for r in sorted(family, key=len, reverse=True):
				t = re.sub(r"(?<![\w.])%s(?=\.|\b)" % r, "%s_%d" % (r, g), t)
			if i == idx:
				t = t.replace(m.group(0), 'identifier f =~ "^(%s)$";' % "|".join(names[g::k]), 1)
			copies.append(t)
	return "".join(chunks[:idx] + copies + out)


def _in_position_set(chunk, refs):
	"""Whether chunk names the rules refs only inside a set of positions
	('position any_p = {wc.p, pw.p, ...};'): it is kept once, and the set
	gets every copy's position."""
	return not _refs(re.sub(r"position\s+\w+\s*=\s*\{[^}]*\}\s*;", "", chunk), refs)


def _refs(chunk, rules):
	"""Which of rules chunk names as 'rule.metavariable'."""
	return set(re.findall(r"\b(\w+)\.\w+", chunk)) & set(rules)
