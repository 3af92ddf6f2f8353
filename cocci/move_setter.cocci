// SPDX-License-Identifier: GPL-2.0-only
/// Move a set_current_state() out of the window it opens onto a call that
/// may sleep, or drop a setter that a loop makes redundant.
///
/// A loop that sets TASK_(UN)INTERRUPTIBLE in its middle and then calls
/// something that may sleep (6.1 apm_mainloop(): the setter, then
/// apm_event_handler(), then the schedule_timeout() at the loop top)
/// sleeps in that call with its state set.  The setter moves right after
/// the call: the sleep still finds the state set, the call runs in
/// TASK_RUNNING.  A setter before a loop whose own setter comes before
/// every sleep in it (6.1 aac_command_thread()) only puts the work before
/// that setter in a sleeping state: it goes.
///
//# nestsleep's driver (scripts/nestsleep/fix/setter.py) picks the sites:
//# NESTSLEEP_SETTER holds the "line:column" of the setter, and
//# NESTSLEEP_AFTER the "line:column" of the statement it goes right after
//# (empty: the setter is dropped).  The driver moves a setter only past
//# statements of its own block, and only when a condition is tested after
//# its new place or the sleep has a constant timeout, which bounds how
//# late a wakeup can be; it drops one only when the loop sets its own state
//# before each of its sleeps, nothing in between reads the state, and every
//# call of the finding lies between the two setters.  Run alone, the rule
//# changes nothing.
// Confidence: High
// Copyright: (C) 2026 The nestsleep developers.
// URL: https://coccinelle.gitlabpages.inria.fr/website
// Comments: Requires Python scripting.
// Options: --no-includes --include-headers

virtual patch

@initialize:python@
@@
import os

NS_SETTER = os.environ.get("NESTSLEEP_SETTER", "")
NS_AFTER = os.environ.get("NESTSLEEP_AFTER", "")


def ns_at(p, where):
	return bool(where) and "%s:%s" % (p[0].line, p[0].column) == where


def ns_move(p):
	return bool(NS_AFTER) and ns_at(p, NS_SETTER)


def ns_drop(p):
	return not NS_AFTER and ns_at(p, NS_SETTER)


def ns_after(q):
	return ns_at(q, NS_AFTER)

// the move: from the setter to right after the statement at NESTSLEEP_AFTER

@depends on patch@
identifier fn = {set_current_state, __set_current_state};
position p : script:python() { ns_move(p) };
position q : script:python() { ns_after(q) };
expression S;
statement ST;
@@

- fn@p(S);
  ...
  ST@q
+ fn(S);

// the drop

@depends on patch@
identifier fn = {set_current_state, __set_current_state};
position p : script:python() { ns_drop(p) };
expression S;
@@

- fn@p(S);
