# SPDX-License-Identifier: GPL-2.0-only
"""Generate the built-in knowledge of cocci/*.cocci from cocci/sleep_info.json.

The .cocci files must also work alone, under the kernel's own coccicheck, so
they carry a copy of the sleeping primitives.  This script writes that copy
between the BEGIN/END GENERATED markers and into the lines tagged
'// generated: state_restore', '// generated: state_restore.sleeps' and
'.without_sleep' (the calls that end the window by sleeping, and the others) and
'// generated: state_setters.KEY' and '// generated: tasks.creators', and
copies the rules of cocci/fix_wait_event.cocci after its '// BEGIN SHARED'
comment between nested_sleep.cocci's '// BEGIN COPY' and '// END COPY'
lines, with a table of the waiters they rewrite (NS_FIX_WAITERS), for the
rule's patch mode alone.  With --check it only reports whether the
files agree with the data (exit 1 if not); 'make check' runs that ('python3 -m nestsleep gen-builtin [--check]').
"""

import json
import os
import re
import sys

from nestsleep import COCCI_DIR, SLEEP_INFO


def load(path=None):
	with open(path or SLEEP_INFO) as f:
		return json.load(f)


def tables(info):
	sleepers, gfp, not_sleeping = {}, {}, []
	for g in info["groups"]:
		for fn in g.get("functions", []):
			sleepers[fn] = (g["name"], g["effect"])
		for fn, idx in g.get("gfp_arg", {}).items():
			gfp[fn] = idx
	for g in info["not_sleeping"]:
		not_sleeping.extend(g["functions"])
	waiters = {}
	for name, w in info["waiters"]["table"].items():
		waiters[name] = (w["cond"], w["cmd"], w["locked"])
	return {
		"NS_SLEEPERS": sleepers,
		"NS_GFP_ARG": gfp,
		"NS_BLOCKING_GFP": list(info["blocking_gfp"]),
		"NS_NOT_SLEEPING": sorted(set(not_sleeping)),
		"NS_RESTORE": list(info["state_restore"]["functions"]),
		"NS_WAITERS": waiters,
		"NS_SETTERS": list(info["state_setters"]["set"]) + list(info["state_setters"]["prepare"]),
		"NS_THREAD_EXIT": (info["thread_exit"]["group"], info["thread_exit"]["effect"]),
		"NS_FIX_WAITERS": fix_waiters(info),
	}


def fix_waiters(info):
	"""The wait_event*() macros cocci/fix_wait_event.cocci rewrites, as the
	rule alone needs them: name -> (task state, signal test, jiffies
	timeout, exclusive, cmd, value).  A task state of None is the macro's
	own third argument (wait_event_state()).  Left out, as the driver
	refuses them (fix/wait_event.py variant()): swait, rcuwait and var
	waits, the _locked and _lock_irq forms, the ktime timeouts,
	io_wait_event() (iowait accounting), an _exclusive wait that tests a
	signal, and every _cmd form but wait_event_cmd()."""
	states = info["states"]["table"]
	out = {}
	for name, w in info["waiters"]["table"].items():
		if w["family"] != "wait_event" or w["locked"] or w["timeout"] == "ktime" or name == "io_wait_event":
			continue
		if w["state"] == "state":
			st, sig = None, "signal_pending_state"
		elif w["state"] in states:
			st, sig = states[w["state"]]["task_state"], states[w["state"]]["signal_test"]
		else:
			continue
		if w["exclusive"] and sig:
			continue
		cmd = bool(w["cmd"]) or name.endswith("_cmd")
		if cmd and (sig or w["timeout"] or name != "wait_event_cmd"):
			continue
		out[name] = (st, sig, w["timeout"] == "jiffies", bool(w["exclusive"]), cmd, w["value"])
	return out


def py_literal(v):
	"""A stable, line-wrapped Python literal."""
	if isinstance(v, dict):
		items = ["    %r: %s," % (k, py_literal(v[k])) for k in sorted(v)]
		return "{\n" + "\n".join(items) + "\n}"
	if isinstance(v, list):
		if all(isinstance(x, str) for x in v):
			lines, cur = [], "   "
			for x in v:
				item = " %r," % x
				if len(cur) + len(item) > 76:
					lines.append(cur)
					cur = "   "
				cur += item
			lines.append(cur)
			return "[\n" + "\n".join(lines) + "\n]"
		return repr(v)
	if isinstance(v, tuple):
		return "(" + ", ".join(py_literal(x) for x in v) + ("," if len(v) == 1 else "") + ")"
	return repr(v)


def render(info):
	t = tables(info)
	out = []
	for k in ("NS_SLEEPERS", "NS_GFP_ARG", "NS_BLOCKING_GFP", "NS_NOT_SLEEPING", "NS_RESTORE", "NS_WAITERS",
		  "NS_SETTERS", "NS_THREAD_EXIT", "NS_FIX_WAITERS"):
		out.append("%s = %s" % (k, py_literal(t[k])))
	return "\n".join(out) + "\n"


BEGIN = "# BEGIN GENERATED from cocci/sleep_info.json by python3 -m nestsleep gen-builtin; do not edit\n"
END = "# END GENERATED\n"
RESTORE_LINE = re.compile(r'^(identifier \w+ =~ ")[^"]*(";\s*// generated: state_restore(\.\w+)?)$', re.M)
SETTER_LINE = re.compile(r'^(identifier \w+ = \{)[^}]*(\};\s*// generated: state_setters\.(\w+))$', re.M)
CREATORS_LINE = re.compile(r'^(identifier \w+ = \{)[^}]*(\};\s*// generated: tasks\.creators)$', re.M)


SHARED = "// BEGIN SHARED"
COPY_BEGIN = "// BEGIN COPY of the rules after '// BEGIN SHARED' in cocci/fix_wait_event.cocci, by python3 -m nestsleep gen-builtin; do not edit\n"
COPY_END = "// END COPY\n"


def shared_rules(path=None):
	"""The rules of cocci/fix_wait_event.cocci after its '// BEGIN SHARED'
	comment: what nested_sleep.cocci's patch mode runs alone."""
	with open(path or os.path.join(COCCI_DIR, "fix_wait_event.cocci")) as f:
		text = f.read()
	i = text.index(SHARED)
	i = text.index("\n\n", i) + 2
	return text[i:].rstrip("\n") + "\n"


def regenerate(text, info, shared=None):
	b = text.index(BEGIN) + len(BEGIN)
	e = text.index(END)
	text = text[:b] + render(info) + text[e:]
	if COPY_BEGIN in text:
		b = text.index(COPY_BEGIN) + len(COPY_BEGIN)
		e = text.index(COPY_END, b)
		text = text[:b] + "\n" + (shared if shared is not None else shared_rules()) + "\n" + text[e:]
	names = sorted(set(info["state_restore"]["functions"]))
	quiet = sorted(set(info["state_restore"]["without_sleep"]))
	# state_restore: every call that ends the window; .sleeps: those that
	# end it by sleeping; .without_sleep: the others (finish_wait())
	lists = {None: names, ".sleeps": sorted(set(names) - set(quiet)), ".without_sleep": quiet}

	def regex(m):
		return m.group(1) + "^(" + "|".join(lists[m.group(3)]) + ")$" + m.group(2)
	text = RESTORE_LINE.sub(regex, text)
	text = SETTER_LINE.sub(lambda m: m.group(1) + ", ".join(info["state_setters"][m.group(3)]) + m.group(2), text)
	cr = info["tasks"]["creators"]
	return CREATORS_LINE.sub(lambda m: m.group(1) + ", ".join(cr["started"] + cr["stopped"]) + m.group(2), text)


def main(argv):
	check = "--check" in argv
	info = load()
	bad = 0
	for name in sorted(os.listdir(COCCI_DIR)):
		if not name.endswith(".cocci"):
			continue
		path = os.path.join(COCCI_DIR, name)
		with open(path) as f:
			old = f.read()
		if BEGIN not in old:
			continue
		new = regenerate(old, info)
		if new == old:
			continue
		if check:
			print("cocci/%s: built-in knowledge differs from cocci/sleep_info.json or its copy of "
			      "cocci/fix_wait_event.cocci; run python3 -m nestsleep gen-builtin" % name, file=sys.stderr)
			bad += 1
		else:
			with open(path, "w") as f:
				f.write(new)
			print("regenerated cocci/%s" % name, file=sys.stderr)
	return 1 if bad else 0

