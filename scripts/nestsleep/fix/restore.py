# SPDX-License-Identifier: GPL-2.0-only
"""The restores of TASK_RUNNING a wait needs after it, not in it (a
thread that exits with its state set: thread_exit.py).

  after the loop  a sleeping call that runs after its wait loop has ended,
                  with the state the loop set not yet restored: one
                  __set_current_state(TASK_RUNNING) right after the loop,
                  made by cocci/restore_after_loop.cocci
                  (plan_restore_after_loop())
  helper          the state set inside a helper that returns with it
                  still set, so the wait loop spans two functions: no
                  rule either (plan_state_helper())
"""

import os

from nestsleep import COCCI_DIR
from nestsleep.analysis import cfacts
from nestsleep.fix.edits import Refuse
from nestsleep.fix.spatch import add_rule_edits

RESTORE_RULE = os.path.join(COCCI_DIR, "restore_after_loop.cocci")


def after_loop_site(fx, f):
	"""(file, its FileText, its tokens, the wait loop) of finding f whose
	state outlives its loop (f["after_loop"]), or Refuse."""
	rel = f["file"]
	ft = fx.text(rel)
	toks = cfacts.tokenize(ft.t)
	loop = cfacts.loop_around(toks, f["line"])
	if loop is None or loop[0] != f["after_loop"]:
		raise Refuse("manual", "cannot find the wait loop on line %s" % f["after_loop"])
	return rel, ft, toks, loop


def plan_restore_after_loop(fx, f, u):
	"""Every sleeping call of f runs after the wait loop has ended,
	with the state it set not yet restored (hpet_read()'s put_user()
	after the break): the loop is right as it is, and one
	__set_current_state(TASK_RUNNING) after it is the fix
	(cocci/restore_after_loop.cocci).  The restore at the label the
	loop's gotos reach stays."""
	rel, ft, toks, loop = after_loop_site(fx, f)
	last = max(p["line"] for p in f["paths"])
	nxt = next((t for t in toks if t[2] > loop[1]), None)
	if nxt is None or nxt[1] == "}" or nxt[2] > last:
		raise Refuse("manual", "the wait loop on line %d ends its block: put "
			     "__set_current_state(TASK_RUNNING) on every way out of it by hand" % loop[0])
	if cfacts.labels_between(toks, loop[1] + 1, last):
		raise Refuse("manual", "a goto label between the wait loop on line %d and the sleeping call "
			     "may be reached from inside the loop: restore TASK_RUNNING before the call by hand"
			     % loop[0])
	kw = next(t[1] for t in toks if t[2] == loop[0] and t[1] in ("for", "while", "do"))
	if kw == "do":
		env = {"NESTSLEEP_NEXT": str(nxt[2])}
	else:
		env = {"NESTSLEEP_LOOPS": str(loop[0])}
	add_rule_edits(u, ft, rel, RESTORE_RULE, env, lambda e: ("restore", rel, loop[0]),
		       "place the restore after the wait loop on line %d" % loop[0])
	u.reasons.append("the wait loop on line %d leaves with the task state still set, and %s() runs "
			 "after it: TASK_RUNNING is now restored as soon as the loop ends; the loop itself, "
			 "its wakeups and its exits by goto are unchanged" % (loop[0], f["call"]))



def plan_state_helper(fx, f, u):
	"""The task state set inside a helper that returns with it still set:
	no rule yet; refused, with what to do by hand."""
	raise Refuse("manual", "the task state is set inside %s(), a helper that returns with it "
		     "still set: the wait loop spans two functions; restore TASK_RUNNING before the "
		     "sleeping call or restructure by hand" % f["primitive"])
