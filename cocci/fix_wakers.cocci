// SPDX-License-Identifier: GPL-2.0-only
/// Turn the direct wakers of a thread whose wait became wait_woken() into
/// wakeups of its wait queue.
///
/// wait_woken() is only reliably woken through its wait queue: the
/// queue's woken_wake_function() sets WQ_FLAG_WOKEN, which wait_woken()
/// tests after its set_current_state().  A wake_up_process() or
/// wake_up_state() that comes while the rewritten loop tests its condition
/// in TASK_RUNNING sets no flag, and the thread then sleeps on: a lost
/// wakeup, as wait_woken() sets the state (kernel/sched/wait.c:462) and
/// sleeps (kernel/sched/wait.c:464) testing only WQ_FLAG_WOKEN.  So each
/// direct waker of the task becomes a wakeup of the queue (hidp
/// 5da8e47d849d):
///
///	wake_up_process(session->task);
///	  ->  wake_up_interruptible(&hidp_session_wq);
///
/// and a local copy of the task pointer that only fed such a call,
/// 'struct task_struct *t = c->worker;', is deleted, as it is no longer
/// read.
///
//# nestsleep's driver (scripts/nestsleep/fix/wakers.py) finds the wakers:
//# it follows where the task pointer is stored, across files, and refuses
//# a site whose wakers it cannot all find or convert.  It passes, per file,
//# NESTSLEEP_SITES (JSON): "wakers", the "line:column" of each
//# wake_up_process()/wake_up_state() to convert with the call and the
//# queue written in the waker's terms, and "dead", the [function, name]
//# of each local copy that only fed a converted call.  The driver checks
//# that every waker was converted, and refuses the site otherwise.
//# spatch 1.1.1 gives wrong positions to the rules that follow a change,
//# so a first rule that changes nothing picks the calls by position and
//# the rule that converts them inherits those positions; the dead copies
//# come after it, found by function and name.  A waker spatch cannot
//# parse stays as it is (and the site is refused).  Run alone, the rule
//# changes nothing.
// Confidence: High
// Copyright: (C) 2026 The nestsleep developers.
// URL: https://coccinelle.gitlabpages.inria.fr/website
// Comments: Requires Python scripting.
// Options: --no-includes --include-headers

virtual patch

@initialize:python@
@@
import json
import os

NS = json.loads(os.environ.get("NESTSLEEP_SITES") or "{}")
NS_WAKERS = NS.get("wakers", {})
NS_DEAD = NS.get("dead", [])


def ns_at(p):
	return "%s:%s" % (p[0].line, p[0].column)


def ns_waker(p):
	return ns_at(p) in NS_WAKERS


def ns_dead(p, t):
	return [p[0].current_element, str(t)] in NS_DEAD

// The calls and the declarations, by position, before any change.

@w depends on patch@
expression T, S;
position p : script:python() { ns_waker(p) };
@@

(
  wake_up_process@p(T)
|
  wake_up_state@p(T, S)
)

@script:python call@
p << w.p;
fn;
q;
@@

coccinelle.fn = cocci.make_ident(NS_WAKERS[ns_at(p)]["call"])
coccinelle.q = cocci.make_expr(NS_WAKERS[ns_at(p)]["queue"])

@depends on patch@
position w.p;
identifier call.fn;
expression call.q;
expression T, S;
@@

(
- wake_up_process@p(T)
+ fn(q)
|
- wake_up_state@p(T, S)
+ fn(q)
)

// The copies that fed the converted calls only: found by function and
// name (the positions are stale now), and deleted only when the rest of
// the function no longer reads them.

@depends on patch@
identifier t;
expression E;
position p : script:python(t) { ns_dead(p, t) };
@@

- struct task_struct *t@p = E;
  ... when != t
