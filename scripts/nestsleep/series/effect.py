# SPDX-License-Identifier: GPL-2.0-only
"""What a nested sleep does, said once for the changelogs (changelog.py) and
the triage reports (triage/reports.py): only what the code shape implies,
and a warning quoted only when a boot printed it.

- wait_event*(): the condition is tested again after every
  prepare_to_wait_event(), so no wakeup is lost; an inner sleep that
  returns in TASK_RUNNING makes the next schedule() return at once: an
  extra pass, or busy polling while the inner call keeps sleeping.
- an open-coded set_current_state()/prepare_to_wait() loop: the same.
  The schedule() after the inner sleep returns at once and the loop tests
  its condition again, so a wakeup that came during the inner sleep is
  not lost.  On a pass that ends the wait there is no extra pass either,
  only the warning.  The text is conditional because the finding does not
  say on which passes the call runs, except where the code shape says it
  (series/passes.py): a call on the pass that ends the wait whose failure
  value does not leave a loop that sets the state only before its first
  pass spins after a failure that slept.

A wakeup cannot be lost unless code sets the state and sleeps without
testing the condition again; no shape here shows that, so no text here
claims it (scripts/tests/test_claims.py).

The state= value is printed as __might_sleep() prints it (kernel/sched/
core.c, "state=%x"): TASK_KILLABLE is 0x102, so "state=102".
"""

import os
import re

# include/linux/sched.h, the same in 6.1 and 6.12; used when KDIR has none
BUILTIN = {"TASK_RUNNING": 0x0, "TASK_INTERRUPTIBLE": 0x1, "TASK_UNINTERRUPTIBLE": 0x2,
	   "TASK_WAKEKILL": 0x100, "TASK_NOLOAD": 0x400, "TASK_FREEZABLE": 0x2000,
	   "TASK_KILLABLE": 0x102, "TASK_IDLE": 0x402, "TASK_NORMAL": 0x3}

_defs = {}


def task_defines(kdir):
	"""TASK_* name -> value from KDIR/include/linux/sched.h."""
	if kdir in _defs:
		return _defs[kdir]
	raw = {}
	try:
		with open(os.path.join(kdir or "", "include", "linux", "sched.h"), errors="replace") as f:
			for m in re.finditer(r"^#define\s+(TASK_\w+)\s+(.+?)\s*$", f.read(), re.M):
				raw.setdefault(m.group(1), m.group(2))
	except OSError:
		pass
	vals = dict(BUILTIN) if not raw else {}

	def ev(name, depth=0):
		if name in vals:
			return vals[name]
		if name not in raw or depth > 8:
			return None
		total = 0
		for part in re.sub(r"[()]", " ", raw[name]).split("|"):
			part = part.strip()
			v = int(part, 0) if re.match(r"^(0x[0-9a-fA-F]+|\d+)$", part) else ev(part, depth + 1)
			if v is None:
				return None
			total |= v
		vals[name] = total
		return total
	for n in raw:
		ev(n)
	_defs[kdir] = vals
	return vals


def state_hex(kdir, expr):
	"""'TASK_INTERRUPTIBLE | TASK_FREEZABLE' -> '2001'; None when unknown."""
	vals = task_defines(kdir)
	total = 0
	for part in (expr or "").split("|"):
		part = part.strip()
		if part not in vals:
			return None
		total |= vals[part]
	return "%x" % total


def warning(state):
	"""The kernel's message, without the address and symbol it appends;
	without its state= part when the state is not known (never a
	placeholder the kernel would not print)."""
	if not state:
		return "do not call blocking ops when !TASK_RUNNING"
	return "do not call blocking ops when !TASK_RUNNING; state=%s set at ..." % state


def fault_spin_text(p):
	"""The effect for the shape of series/passes.py's fault_spin()."""
	return ("When the inner call sleeps, it returns with the task in TASK_RUNNING. %(call)s() runs on the "
		"pass that ends the wait: when it succeeds, %(var)s stays above 0 and the loop's exit test "
		"(%(exit)s) ends the loop, so if it sleeps there the wait is over anyway. When it fails, it sets "
		"%(var)s to %(fail)s, and %(fail)s does not end the loop, while %(set)s() sets the task state only "
		"before the loop, not on each pass: after a failure that slept, the task stays in TASK_RUNNING, "
		"every later schedule() in the loop returns at once, and the loop spins until it ends another "
		"way. The loop tests its condition on each pass, so no wakeup is lost." % p)


def effect_text(shape, how, state, observed=None, blocks=True, passes=None):
	"""The effect of the nested sleep for a wait of this shape; how is the
	finding's effect ('warns' when the inner sleep goes through
	might_sleep(), else 'silent'); observed is a warning a boot printed;
	blocks is False when the chain only reaches might_sleep() itself;
	passes is series/passes.py's fault_spin() of an open-coded loop."""
	if passes and blocks and shape in ("set_current_state", "prepare_to_wait"):
		text = fault_spin_text(passes)
	elif not blocks:
		text = ("Nothing on the chain is known to block: it ends in might_sleep(), which checks the task "
			"state and warns, and at most lets the task be preempted with its state kept. No wakeup is "
			"lost and nothing polls; the effect is the warning.")
	elif shape == "wait_event":
		text = ("When the inner call sleeps, it returns with the task in TASK_RUNNING; if the condition is "
			"still false, the schedule() of that pass does not block: the wait makes an extra pass, and "
			"polls while the condition stays false and the inner call keeps sleeping. The condition is "
			"tested again after every prepare_to_wait_event(), so no wakeup is lost.")
	elif shape == "after_loop":
		text = ("The call runs after the wait loop has ended but before the task state is set back to "
			"TASK_RUNNING, so it runs in the state the loop set. The wait is over by then: no wakeup is "
			"lost and nothing polls, and if the call sleeps it returns in TASK_RUNNING.")
	elif shape == "rearmed":
		text = ("The call runs at the top of a pass, before the prepare_to_wait*() that sets the task state "
			"again, so it runs in the state the last pass set. If it sleeps it returns in TASK_RUNNING, "
			"and the state is set again and the condition tested before the task sleeps: nothing polls "
			"and no wakeup is lost.")
	elif shape == "thread_exit":
		text = ("The thread function returns with the task state still set, and the exit path calls "
			"functions that may sleep in that state.")
	else:
		text = ("When the inner call sleeps, it returns with the task in TASK_RUNNING. On a pass that does "
			"not end the wait, the schedule() that follows then does not block: the loop makes an extra "
			"pass, and busy-polls while the inner call keeps sleeping on each pass. The loop tests its "
			"condition again on the next pass, so a wakeup that came during the inner sleep is not lost.")
	if isinstance(observed, dict) and observed.get("splat"):
		# the exerciser that drove the wait is named below the changelog's
		# '---' (series.notes()): its path is not in the kernel tree
		text += (" In QEMU (x86_64, CONFIG_DEBUG_ATOMIC_SLEEP=y), with a test driving the wait, "
			 "the unpatched kernel printed this warning (trimmed%s):" % (
				 "; its first line wrapped" if splat_lines(observed)[1] else ""))
	elif how == "warns":
		if observed:
			text += (" A boot of the unpatched kernel with CONFIG_DEBUG_ATOMIC_SLEEP=y printed the warning "
				 "\"%s\"." % observed)
		else:
			text += (" With CONFIG_DEBUG_ATOMIC_SLEEP=y this path warns (\"%s\" from __might_sleep()); "
				 "no boot has printed it here." % warning(state))
	else:
		text += (" The inner sleep does not go through might_sleep(), so no warning reports it at run "
			 "time.")
	return text


SPLAT_COLS = 75	# checkpatch's commit-log width


def splat_lines(observed):
	"""(the splat's lines, whether one was wrapped).  checkpatch lets a
	commit log run past 75 columns only from a WARNING:/BUG: line on (a
	stack dump); the message line before it, '... state=1 set at
	[<(____ptrval____)>] hpet_read+0x77/0x14a', is broken before '['."""
	out, wrapped = [], False
	for line in observed["splat"]:
		line = "  " + line.rstrip()
		if len(line) > SPLAT_COLS and " set at [<" in line and not out:
			a, b = line.split(" set at [<", 1)
			out += [a + " set at", "  [<" + b]
			wrapped = True
		else:
			out.append(line)
	return out, wrapped


def splat_block(observed):
	"""The splat a boot printed, indented for a changelog or a report; None
	when observed holds no splat (only a title, or nothing)."""
	if isinstance(observed, dict) and observed.get("splat"):
		return "\n".join(splat_lines(observed)[0])
	return None
