# SPDX-License-Identifier: GPL-2.0-only
"""The commit message of one patch (changelog()): the wait and the chains
of calls that may sleep in it, what the nested sleep does (effect.py),
what the tree says about reaching it (reach.py), the fix and its caveats,
then how it was found and the trailers; the tool's own notes go below
'---' (notes()).  The queue wakers' items, a missed wakeup's paragraphs
and the testing lines are in changelog_wakers.py, changelog_missed.py and
changelog_tested.py."""

import collections
import json
import os
import re
import subprocess

from nestsleep.series import effect, passes, reach
from nestsleep.series.reach import reached_sentences
from nestsleep.knowledge import Knowledge
from nestsleep.series.changelog_wakers import waker_items, without_old_waker_sentence, without_poll_reason
from nestsleep.series.changelog_missed import missed_changelog
from nestsleep.series.changelog_tested import found_line, tested_paragraph
from nestsleep.series.text import LWN, MISSED_RULE, RULE, WOKEN_FORM, WOKEN_FORM_GIT, capital, noline, wrap


# ---------------------------------------------------------------------------
# Changelogs

def waiters():
	return Knowledge().waiters


def task_state(name):
	"""The TASK_* expression of a waiters-table state name."""
	return Knowledge().states.get(name, ("a sleeping state",))[0]


def loop_state(kdir, f):
	"""The TASK_* expression an open-coded loop sets, from the call that
	starts on its source line (or the next one); the call's arguments may
	run over several lines (prepare_to_wait(&q, &w,\n\t\tTASK_...))."""
	try:
		with open(os.path.join(kdir, f["file"]), errors="replace") as fp:
			lines = fp.read().splitlines()
	except OSError:
		return None
	for i in range(max(0, f["line"] - 1), min(len(lines), f["line"] + 1)):
		m = re.search(r"(?:set_current_state|prepare_to_wait\w*)\s*\(", lines[i])
		if not m:
			continue
		text = "\n".join([lines[i][m.end():]] + lines[i + 1:i + 8])
		depth, end = 1, None
		for k, ch in enumerate(text):
			depth += {"(": 1, ")": -1}.get(ch, 0)
			if depth == 0:
				end = k
				break
		if end is None:
			return None
		parts = [" ".join(p.split()) for p in text[:end].split(",")]
		if parts and parts[-1].startswith("TASK_"):
			return parts[-1]
	return None


def finding_state(kdir, f, table):
	"""(the TASK_* expression, its hex as __might_sleep() prints it)."""
	v = table.get(f["primitive"])
	expr = task_state(v["state"]) if v else loop_state(kdir, f)
	return expr, effect.state_hex(kdir, expr) if expr else None


def chain_text(chain):
	out = []
	for hop in chain:
		if "=" in hop:
			ptr, target = hop.split("=", 1)
			out.append("%s() (through %s)" % (target, ptr))
		else:
			out.append(hop + "()")
	return " -> ".join(out)


def chain_lines(c, width=72):
	"""A chain, two spaces in, broken after '->' to stay within width; a
	'(only when ...)' tail goes on as words, broken at spaces."""
	tail = ""
	if " (only when " in c:
		c, tail = c.split(" (only when ", 1)
		tail = "(only when " + tail
	hops = c.split(" -> ")
	lines, cur = [], "  " + hops[0]
	for h in hops[1:]:
		if len(cur) + 4 + len(h) > width:
			lines.append(cur + " ->")
			cur = "    " + h
		else:
			cur += " -> " + h
	for w in tail.split():
		if len(cur) + 1 + len(w) > width:
			lines.append(cur)
			cur = "    " + w
		else:
			cur += " " + w
	lines.append(cur)
	return "\n".join(lines)


def problem_paragraphs(kdir, fs, table):
	"""The wait, its state and the chains of one function."""
	f = fs[0]
	func, prim = f["function"], f["primitive"]
	expr, _ = finding_state(kdir, f, table)
	state = expr or "a sleeping state"
	if f.get("after_loop"):
		head = ("%s() leaves its %s() wait loop with the task state still %s, and then calls %s(), which "
			"may sleep:" % (func, prim, state, f["call"]))
	elif f["shape"] == "wait_event":
		if f.get("role") == "cmd":
			head = ("%s() waits with %s(). Its cmd runs on each pass of the wait loop after the task state "
				"has been set to %s, and it calls %s(), which may sleep:" % (func, prim, state, f["call"]))
		else:
			# (wait.h's macros test it once in TASK_RUNNING before the loop)
			head = ("%s() waits with %s(). On each pass of the wait loop, its condition is tested after the "
				"task state has been set to %s, and it calls %s(), which may sleep:" % (
					func, prim, state, f["call"]))
	elif f["shape"] == "thread_exit":
		# kthread() calls kthread_exit() when the thread function returns
		# (kernel/kthread.c:376-378 in 6.1)
		head = ("%s() sets the task state to %s with %s() and can leave its wait loop before it calls "
			"schedule() or sets the state back. It then returns to kthread(), which calls %s(), which "
			"may sleep:" % (func, state, prim, f["call"]))
	else:
		head = ("%s() sets the task state to %s with %s() and, before it calls schedule(), calls %s(), "
			"which may sleep:" % (func, state, prim, f["call"]))
	chains = unit_chains(fs, kdir)
	if all(c.split(" (only when ")[0] == f["call"] + "()" for c in chains):
		# a chain of the one call named already (hpet's put_user())
		return [wrap(head[:-1] + ".")]
	return [wrap(head), "\n".join(chain_lines(c) for c in chains)]


def effect_shape(f):
	"""The shape effect.effect_text() describes for finding f: a call
	after its loop ('after_loop'), a call the fix restores TASK_RUNNING
	before because it runs ahead of the prepare_to_wait*() that sets the
	state again in its pass ('rearmed', fix/entries.py), or its shape."""
	if f.get("after_loop"):
		return "after_loop"
	if (f.get("fix") or {}).get("kind") == "restore_call":
		return "rearmed"
	return f["shape"]


def effect_inputs(kdir, fs, table):
	"""What the effect paragraph of one function depends on, besides the
	test records: kept in series.json so that retest can rewrite it."""
	_, hexs = finding_state(kdir, fs[0], table)
	out = {"shape": effect_shape(fs[0]),
	       "how": "warns" if any(x["effect"] == "warns" for x in fs) else "silent",
	       "state": hexs, "fingerprints": [x["fingerprint"] for x in fs]}
	if out["shape"] in ("set_current_state", "prepare_to_wait"):
		# only when every nested call of the function has that shape
		ps = [passes.fault_spin(kdir, x) for x in fs]
		if ps and all(ps) and all(p == ps[0] for p in ps):
			out["passes"] = ps[0]
	return out


def observed_warning(fps, records):
	"""A nested-sleep warning a boot printed for one of the findings: the
	trimmed splat with its exerciser ({"title", "splat", "exerciser"}) when
	make boottest recorded one, else its title, else None."""
	for fp in fps:
		b = (records.get(fp) or {}).get("boot") or {}
		if b.get("reproduced") and b.get("splat"):
			return {"title": (b.get("baseline_hits") or [""])[0], "splat": b["splat"],
				"exerciser": b.get("exerciser", "a test script")}
	for fp in fps:
		r = records.get(fp) or {}
		for s in list(r.get("splats") or []) + list((r.get("boot") or {}).get("baseline_hits") or []):
			return s
	return None


def effect_paragraphs(effs, records):
	"""One paragraph per shape of wait; the states of the functions of one
	shape are named together."""
	byshape = collections.OrderedDict()
	for e in effs:
		k = (e["shape"], e["how"], json.dumps(e.get("passes"), sort_keys=True))
		d = byshape.setdefault(k, {"states": [], "fps": [], "passes": e.get("passes")})
		if e["state"] and e["state"] not in d["states"]:
			d["states"].append(e["state"])
		d["fps"] += e["fingerprints"]
	out = []
	for (shape, how, _), d in byshape.items():
		st = " or state=".join(d["states"]) if d["states"] else None
		obs = observed_warning(d["fps"], records)
		t = effect.effect_text(shape, how, st, obs, passes=d["passes"])
		unseen = [fn for fn in dict.fromkeys((records.get(fp) or {}).get("function") for fp in d["fps"])
			  if fn and not observed_warning([fp for fp in d["fps"] if (records.get(fp) or {}).get("function") == fn],
							 records)]
		block = effect.splat_block(obs)
		tail = ""
		if obs and how == "warns" and unseen:
			tail = (" With CONFIG_DEBUG_ATOMIC_SLEEP=y the waits of %s warn the same way%s; no boot "
				"has printed that here." % (", ".join("%s()" % x for x in unseen),
							    " (state=%s)" % st if st else ""))
		if block:
			out.append(wrap(t) + "\n\n" + block + ("\n\n" + wrap(tail.strip()) if tail else ""))
		else:
			out.append(wrap(t + tail))
	return out


def unit_needs(fs):
	"""The parameter tests every sleeping path of a function's findings
	needs (findings.json paths 'needs'): a caller failing one of them
	cannot reach any of its nested sleeps."""
	sets = [set(tuple(x) for x in p.get("needs", ())) for f in fs for p in f.get("paths", [f])]
	return sorted(set.intersection(*sets)) if sets else []


def unit_impls(fs):
	"""[(pointer, implementation, its file)]: where every sleeping path of a
	function's findings goes through a function pointer, the first such
	hop of each (findings.json chain 'p->ops->m=impl', the file from the
	next chain_locs entry, which is in impl).  A caller reaches the sleep
	only with that implementation; [] when some path sleeps without a
	pointer (every caller reaches it) or a file is not known."""
	out = set()
	for f in fs:
		for p in f.get("paths", [f]):
			chain, locs = p.get("chain") or [], p.get("chain_locs") or []
			hop = next((i for i, x in enumerate(chain) if "=" in x), None)
			if hop is None or hop + 1 >= len(locs):
				return []
			ptr, impl = chain[hop].split("=", 1)
			out.add((ptr, impl, re.sub(r"^6\.12:", "", locs[hop + 1]).rsplit(":", 1)[0]))
	return sorted(out)


def first_test_sentence(kdir, fs):
	"""The sentence that the nested sleep needs the condition false when the
	wait starts: every finding is a call in the condition of a wait_event*()
	macro whose body in KDIR's include/linux/wait.h tests the condition
	('if (condition)' or 'if (!(condition))') before it sets the task
	state, so that first test runs in TASK_RUNNING; None otherwise."""
	prims = set(f.get("primitive") for f in fs)
	if len(prims) != 1 or any(f.get("shape") != "wait_event" or f.get("role") != "cond" for f in fs):
		return None
	prim = prims.pop()
	try:
		with open(os.path.join(kdir, "include", "linux", "wait.h"), errors="replace") as fp:
			t = fp.read()
	except OSError:
		return None
	m = re.search(r"^#define %s\(.*?(?<!\\)\n" % re.escape(prim), t, re.M | re.S)
	if not m:
		return None
	body = m.group(0)
	test = re.search(r"\bif\s*\(\s*(?:!\s*\(\s*)?condition\s*\)", body)
	if not test or re.search(r"\b_+wait_event\w*\(", body[:test.start()]):
		return None
	return ("%s() tests the condition once before it sets the task state (include/linux/wait.h), so the "
		"nested sleep runs only when the condition is false as %s() starts the wait." % (
			prim, fs[0]["function"]))


def first_test_sentences(kdir, group):
	"""first_test_sentence() of each unit of a patch, said once: with
	several waits, one sentence naming their macros and functions."""
	got = [(fs[0]["primitive"], fs[0]["function"], first_test_sentence(kdir, fs)) for name, fs in group]
	got = [g for g in got if g[2]]
	if len(got) <= 1:
		return [g[2] for g in got]
	prims = list(dict.fromkeys(p + "()" for p, fn, t in got))
	return ["%s test%s the condition once before %s the task state (include/linux/wait.h), so each nested "
		"sleep runs only when the condition is false as its wait starts (%s)." % (
			" and ".join([", ".join(prims[:-1]), prims[-1]] if len(prims) > 1 else prims),
			"s" if len(prims) == 1 else "", "it sets" if len(prims) == 1 else "they set",
			", ".join(fn + "()" for p, fn, t in got))]


NEED_WORDS = {"bit": "%s has %s", "nobit": "%s lacks %s", "nz": "%s is not 0", "z": "%s is 0",
	      "eq": "%s is %s", "ne": "%s is not %s"}


def needs_text(kdir, f, needs):
	"""' (only when flags has CS_SERIALIZE)': the tests of the waiting
	function's parameters a chain needs, by parameter name; '' if none
	or the names are not known."""
	names = reach.param_names(kdir, f["file"], f["function"]) if needs else None
	if not names:
		return ""
	parts = []
	for j, op, val in needs:
		if j >= len(names) or op not in NEED_WORDS:
			return ""
		parts.append(NEED_WORDS[op] % ((names[j], val) if NEED_WORDS[op].count("%s") == 2 else (names[j],)))
	return " (only when %s)" % " and ".join(parts)


def unit_chains(fs, kdir=None):
	"""The chains of a function's findings, each path's 'also' chain (one
	whose sleep does not hang on allocation flags or a fault) after it;
	with kdir, a chain that holds only for some parameter values says
	which."""
	seen = []
	for x in fs:
		for p in x.get("paths", [x]):
			for ch, needs in ((p["chain"], p.get("needs")), (p.get("also"), p.get("needs"))):
				c = chain_text(ch) + (needs_text(kdir, x, needs) if kdir else "") if ch else None
				if c and c not in seen:
					seen.append(c)
	return seen


def group_problem(kdir, group, table):
	"""The waits and chains of a patch that fixes several functions: one
	sentence per kind of wait, the chains named by function."""
	kinds = collections.OrderedDict()
	for name, fs in group:
		f = fs[0]
		expr, _ = finding_state(kdir, f, table)
		key = ("after_loop" if f.get("after_loop") else f["shape"], f["primitive"], f.get("role"),
		       expr or "a sleeping state")
		kinds.setdefault(key, []).append(fs)
	paras = []
	for (shape, prim, role, state), fss in kinds.items():
		names = [fs[0]["function"] + "()" for fs in fss]
		who = names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]
		if shape == "after_loop":
			head = ("%s leave%s a %s() wait loop with the task state still %s, and then call%s a function "
				"that may sleep:" % (who, "s" if len(names) == 1 else "", prim, state,
						    "s" if len(names) == 1 else ""))
		elif shape == "wait_event":
			part = "cmd" if role == "cmd" else "condition"
			if part == "cmd":
				head = ("%s wait%s with %s(). The cmd runs on each pass of the wait loop after the task "
					"state has been set to %s, and calls a function that may sleep:" % (
						who, "s" if len(names) == 1 else "", prim, state))
			else:
				head = ("%s wait%s with %s(). On each pass of the wait loop, the condition is tested after "
					"the task state has been set to %s, and calls a function that may sleep:" % (
						who, "s" if len(names) == 1 else "", prim, state))
		else:
			head = ("%s set%s the task state to %s with %s() and, before calling schedule(), call%s a "
				"function that may sleep:" % (who, "s" if len(names) == 1 else "", state, prim,
							      "s" if len(names) == 1 else ""))
		lines = []
		for fs in fss:
			for c in unit_chains(fs, kdir):
				lines.append(chain_lines("%s(): %s" % (fs[0]["function"], c)))
		paras += [wrap(head), "\n".join(lines)]
	return paras


def shared(texts_by_func):
	"""[(text, [functions])]: each text with the function's own name made
	generic, and the functions it holds for, in first-seen order."""
	out = collections.OrderedDict()
	for func, texts in texts_by_func:
		for t in texts:
			g = re.sub(r"\b%s\(\)" % re.escape(func), "the function", t)
			out.setdefault(g, [])
			if func not in out[g]:
				out[g].append(func)
	return list(out.items())


def changelog(kdir, group, table, records, signoff, tags, git=False, later=None):
	"""The commit message body of one patch (a group of units); later:
	the missed wakeups that later patches of the series fix
	(missed_later())."""
	paras = []
	if all(f.get("kind") == "missed_wakeup" for name, fs in group for f in fs):
		for name, fs in group:
			paras += missed_changelog(kdir, fs[0])
		cav = list(dict.fromkeys(noline(capital(c)) for name, fs in group for c in fs[0]["fix"]["caveats"]))
		if cav:
			paras.append("\n".join(wrap("- " + c.rstrip(".") + ".").replace("\n", "\n  ") for c in cav))
		return closing(paras, group, records, signoff, tags)
	many = len(group) > 1
	if many:
		paras += group_problem(kdir, group, table)
	else:
		paras += problem_paragraphs(kdir, group[0][1], table)
	paras += effect_paragraphs([effect_inputs(kdir, fs, table) for name, fs in group], records)
	known = [noline(x) for x in group_reached(kdir, group)]
	known = [x for x in known if not is_tool_note(x)] + first_test_sentences(kdir, group)
	paras.append(wrap(" ".join(known)))
	wakers = [(name, waker_items(kdir, fs, later)) for name, fs in group]
	reasons = shared([(fs[0]["function"], [noline(without_poll_reason(fs[0]["fix"]["reason"]) if wk else
							fs[0]["fix"]["reason"])])
			  for (name, fs), (_, wk) in zip(group, wakers)])
	restore = all(fs[0]["fix"]["kind"] == "restore" for name, fs in group)
	finish = all(fs[0]["fix"]["kind"] == "finish_wait" for name, fs in group)
	how = "Set the task state back to TASK_RUNNING as soon as %s ends" % (
		"each wait loop" if many else "the wait loop") if restore else \
		"Call finish_wait() right after %s" % ("each wait loop" if many else "the wait loop") if finish else \
		"Leave %s as it is and fix where its state is set" % ("each wait" if many else "the wait") \
		if all(fs[0]["fix"]["kind"] == "setter" for name, fs in group) else \
		"Rewrite %s in %s" % ("each wait" if many else "the wait", WOKEN_FORM_GIT if git else WOKEN_FORM)
	if all(fs[0]["fix"]["kind"] == "thread_exit" for name, fs in group):
		how = "Set the task state back to TASK_RUNNING before the thread function leaves its wait loop"
	if restore and len(reasons) == 1 and not many:
		# 'the wait loop leaves with the task state still set, and X()
		# runs after it: TASK_RUNNING is now restored as soon as the loop
		# ends; the loop itself ... unchanged': say it once
		tail = reasons[0][0].rstrip(".").rpartition("; ")[2]
		paras.append(wrap("Set the task state back to TASK_RUNNING as soon as the wait loop ends, before %s() "
				  "runs; %s." % (group[0][1][0]["call"], tail)))
	elif all(fs[0]["fix"]["kind"] == "restore_call" for name, fs in group) and len(reasons) == 1:
		# entries.py: the reason says what the restore keeps
		paras.append(wrap("Set the task state back to TASK_RUNNING before %s() runs: %s." % (
			group[0][1][0]["call"], reasons[0][0].rstrip("."))))
	elif len(reasons) == 1:
		paras.append(wrap("%s: %s." % (how, reasons[0][0].rstrip("."))))
	else:
		paras.append(wrap(how + ":") + "\n\n" + "\n".join(
			wrap("- %s: %s." % (", ".join("%s()" % x for x in funcs), r.rstrip("."))).replace("\n", "\n  ")
			for r, funcs in reasons))
	cav = []
	for (name, fs), (_, wk) in zip(group, wakers):
		fx = fs[0]["fix"]
		# a changelog holds no line numbers: file:line in a caveat becomes
		# file; only the queue wakers, read back from the tree, keep theirs
		cs = [noline(capital(without_old_waker_sentence(c) if wk else c)) for c in fx["caveats"]]
		cs = [c for c in cs if not is_tool_note(c)]
		if fx["wakers"]:
			cs.insert(0, "The wakers in %s are converted in the same patch, so that no wakeup goes around "
				  "the wait queue." % ", ".join("%s()" % w.split(":")[-1] for w in fx["wakers"]))
		cav.append((fs[0]["function"], cs + wk))
	if many:
		items = []
		for t, funcs in shared(cav):
			who = "each function" if len(funcs) == len(group) else ", ".join("%s()" % x for x in funcs)
			items.append("%s: %s" % (who, t[0].lower() + t[1:] if capital(t.lower()) != t.lower() else t)
				     if len(funcs) < len(group) else t)
	else:
		items = cav[0][1]
	if items:
		paras.append("\n".join(wrap("- " + c.rstrip(".") + ".").replace("\n", "\n  ") for c in items))
	return closing(paras, group, records, signoff, tags)


def closing(paras, group, records, signoff, tags):
	"""paras with how it was found and tested, and the trailers."""
	# the tool's confidence is in the cover letter, not in the commit; how
	# it was found and tested is one sentence in kernel terms, and the
	# tool's paths, exercisers and build details go below '---' (notes())
	paras.append(wrap(found_line(group_fps(group), records)))
	trailers = ["Fixes: " + t for t in tags]
	if signoff:
		trailers.append("Signed-off-by: " + signoff)
	return "\n\n".join(paras) + ("\n\n" + "\n".join(trailers) if trailers else "") + "\n"


# the tool's own reasoning: said below '---', not in the commit message
# (a reviewer asked for it to be trimmed from the changelogs)
TOOL_NOTE = re.compile(r"^(?:These paths follow the calls only|Wakers: no waker to convert was found)")


def is_tool_note(text):
	return bool(TOOL_NOTE.match(text.strip()))


_REACHED = {}


def group_reached(kdir, group):
	"""reached_sentences() of one patch's units, read once for the
	changelog and the notes below '---' (tool_notes())."""
	items = [(fs[0]["file"], fs[0]["function"], unit_needs(fs), unit_impls(fs)) for name, fs in group]
	key = (kdir, json.dumps(items, sort_keys=True, default=str))
	if key not in _REACHED:
		_REACHED[key] = reached_sentences(kdir, items)
	return list(_REACHED[key])


def tool_notes(kdir, group):
	"""The sentences of one patch's changelog that are about the tool's
	search, not the code (is_tool_note()): they go below '---'."""
	known = group_reached(kdir, group)
	cav = [capital(c) for name, fs in group for c in fs[0]["fix"]["caveats"]]
	return list(dict.fromkeys(noline(x) for x in known + cav if is_tool_note(capital(x))))


def notes(fps, records, kind="", extra=()):
	"""What goes below the '---' line of a patch (git am drops it): the
	tool's rule, what its search did not follow (extra), and the full
	testing paragraph, exercisers and objects named."""
	rule = ("Generated by: %s of nestsleep, which compares the writers of a wait's condition with the wakeups "
		"of its queue." % MISSED_RULE) if kind == "missed_wakeup" else (
		"Generated by: %s of nestsleep, which follows the calls in wait conditions and wait loops across the "
		"tree (background: %s)." % (RULE, LWN))
	return "%s\n\n%s%s\n" % (wrap(rule), "".join(wrap(x) + "\n\n" for x in extra),
				  wrap(tested_paragraph(fps, records)))


def below_dashes(text, note):
	"""A format-patch mail with note put right after its first '---' line,
	before the diffstat."""
	m = re.search(r"^---$\n", text, re.M)
	if not m:
		return text
	return text[:m.end()] + note.rstrip("\n") + "\n\n" + text[m.end():]


def group_fps(group):
	return [f["fingerprint"] for name, fs in group for f in fs]


def fixes_tag(kdir, unit):
	"""The later of the commits that added the wait and the sleeping hops
	of its chain, when KDIR is a git checkout: '<12 chars> ("subject")'."""
	if not os.path.isdir(os.path.join(kdir, ".git")):
		return None
	f = unit["findings"][0]
	cands = []
	locs = [f["file"] + ":" + str(f["line"])] + f.get("chain_locs", [])
	for loc in locs:
		rel, line = loc.rsplit(":", 1)
		try:
			with open(os.path.join(kdir, rel), errors="replace") as fp:
				text = fp.read().splitlines()[int(line) - 1].strip()
		except (OSError, IndexError, ValueError):
			continue
		if len(text) < 6:
			continue
		r = subprocess.run(["git", "-C", kdir, "log", "--format=%H", "-S", text, "--", rel],
				   capture_output=True, text=True)
		lines = r.stdout.split()
		if r.returncode == 0 and lines:
			h = lines[-1]   # the oldest: the one that added it
			n = subprocess.run(["git", "-C", kdir, "rev-list", "--count", h], capture_output=True, text=True)
			cands.append((int(n.stdout.strip() or 0), h))
	if not cands:
		return None
	# the later in history: the one with more ancestors
	n, h = max(cands)
	subj = subprocess.run(["git", "-C", kdir, "log", "-1", "--format=%s", h], capture_output=True,
			      text=True).stdout.strip()
	return '%s ("%s")' % (h[:12], subj)


def fixes_hint(g):
	"""How to find the commit a Fixes: tag of one patch (group) names."""
	out = []
	for name, fs in g:
		f = fs[0]
		call = f.get("call") or (f.get("chain") or ["?"])[0].split("=")[-1]
		out.append("%s(): the later of the commit that added its %s() wait (git log -L :%s:%s) and the one "
			   "that added its call to %s() (git log -S'%s(' -- %s)" % (
				   f["function"], f["primitive"], f["function"], f["file"], call, call, f["file"]))
	return "; ".join(out)
