// SPDX-License-Identifier: GPL-2.0-only
/// Rewrite a prepare_to_wait() loop whose window may sleep into the
/// wait_woken() form.
///
/// prepare_to_wait() queues the entry and sets the task state; a call
/// between it and schedule() that sleeps (mutex_lock(), kmalloc(GFP_KERNEL),
/// copy_to_user()...) returns in TASK_RUNNING, so the schedule() that
/// follows returns at once and the loop makes an extra pass: a busy poll
/// while the inner call keeps sleeping, and with CONFIG_DEBUG_ATOMIC_SLEEP
/// a warning.  In the wait_woken() form (commit 61ada528dea0, "sched/wait:
/// Provide infrastructure to deal with nested blocking") the entry stays
/// queued for the whole loop, the loop body runs in TASK_RUNNING, and a
/// wakeup that comes while it runs is kept in WQ_FLAG_WOKEN:
///
///	DEFINE_WAIT_FUNC(wait, woken_wake_function);
///
///	add_wait_queue(&wq, &wait);
///	for (;;) {
///		if (cond)
///			break;
///		wait_woken(&wait, TASK_INTERRUPTIBLE, MAX_SCHEDULE_TIMEOUT);
///	}
///	remove_wait_queue(&wq, &wait);
///
/// schedule() becomes wait_woken(&wait, state, MAX_SCHEDULE_TIMEOUT) and
/// schedule_timeout(t) becomes wait_woken(&wait, state, t), which returns
/// the time left as schedule_timeout() does.  Every finish_wait() of the
/// entry becomes remove_wait_queue().  A prepare_to_wait() before the loop
/// (the md/raid5 shape) becomes the add_wait_queue(), and its re-arms
/// after schedule() go.
///
//# nestsleep's driver (scripts/nestsleep/fix/fixer.py) picks the loops and
//# passes them in NESTSLEEP_SITES (JSON): the function, the wait entry, the
//# queue, the task state, the add_wait_queue*() to use, whether the
//# prepare_to_wait*() is in the loop ("top") or before it ("before"), and
//# the "line:column" of each schedule() in the loop.  It refuses, with its
//# reason, a loop it cannot keep: a conditional or mid-loop
//# prepare_to_wait(), a break after a finish_wait() in the loop, an entry
//# not made by DEFINE_WAIT(), a sleep in a scheduler with no wait_woken()
//# form, a loop whose wakers it cannot convert, and a goto out of the loop
//# unless every path from it reaches the finish_wait() after the loop and
//# only the loop reaches that call (scripts/nestsleep/fix/gotos.py).  The
//# gotos stay as they are: the rules below match the loop body with "...",
//# which follows the paths that leave by goto too, and the finish_wait()
//# at their label becomes remove_wait_queue() like any other.
//# spatch 1.1.1 gives wrong positions to the rules that follow a change,
//# so the schedule() calls, picked by position, are rewritten first, and
//# the later rules find their code by the function and the entry.  A
//# do ... while statement is not matched ("not supported" in spatch 1.1.1,
//# which edits the statements in its body but not the loop as a whole).
//# An entry that is a parameter of the function ("param": true, the
//# vsock_connectible_wait_data() shape; scripts/nestsleep/fix/entries.py
//# checks its callers) is named without '&' in the function, and the
//# DEFINE_WAIT() of each caller (NESTSLEEP_SITES "callers": function ->
//# the name of its entry) becomes the DEFINE_WAIT_FUNC().
//# Run alone, the rule changes nothing.
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
NS_SCHED = set(NS.get("sched", []))


def ns_sched(p):
	return "%s:%s" % (p[0].line, p[0].column) in NS_SCHED


def ns_param():
	return bool(NS.get("param"))


def ns_caller(p, x):
	return bool(NS) and NS.get("callers", {}).get(p[0].current_element) == str(x)


def ns_here(p, form=None):
	return bool(NS) and p[0].current_element == NS["func"] and \
		(form is None or NS["form"] == form)

@script:python args@
entry;
ref;
q;
st;
add;
@@

coccinelle.entry = cocci.make_ident(NS.get("entry", "wait"))
coccinelle.ref = cocci.make_expr(("%s" if NS.get("param") else "&%s") % NS.get("entry", "wait"))
coccinelle.q = cocci.make_expr(NS.get("queue", "wq"))
coccinelle.st = cocci.make_expr(NS.get("state", "TASK_UNINTERRUPTIBLE"))
coccinelle.add = cocci.make_ident(NS.get("add", "add_wait_queue"))

// The sleeps first, by position: positions are exact only before the
// first change.

@depends on patch@
expression args.ref;
expression args.st;
expression T;
position p : script:python() { ns_sched(p) };
@@

(
- schedule@p()
+ wait_woken(ref, st, MAX_SCHEDULE_TIMEOUT)
|
- schedule_timeout@p(T)
+ wait_woken(ref, st, T)
)

// The entry.

@depends on patch@
identifier args.entry;
position p : script:python() { ns_here(p) };
@@

- DEFINE_WAIT@p(entry);
+ DEFINE_WAIT_FUNC(entry, woken_wake_function);

// prepare_to_wait*() in the loop: the entry is queued once, before it.

@depends on patch@
identifier ptw = {prepare_to_wait, prepare_to_wait_exclusive};
identifier args.entry, args.add;
expression args.q;
expression E;
position p : script:python() { ns_here(p, "top") };
@@

(
+ add(q, &entry);
  for (...;...;...) {
  ... when != ptw(E, &entry, ...);
- ptw@p(E, &entry, ...);
  ...
  }
|
+ add(q, &entry);
  while (...) {
  ... when != ptw(E, &entry, ...);
- ptw@p(E, &entry, ...);
  ...
  }
)

// prepare_to_wait*() right before the loop (md/raid5): it becomes the
// add_wait_queue*().

@depends on patch@
identifier ptw = {prepare_to_wait, prepare_to_wait_exclusive};
identifier args.entry, args.add;
expression args.q;
expression E;
statement S;
position p : script:python() { ns_here(p, "before") };
@@

- ptw@p(E, &entry, ...);
+ add(q, &entry);
(
  for (...;...;...) S
|
  while (...) S
)

// The re-arms after schedule(), in either form.

@depends on patch@
identifier ptw = {prepare_to_wait, prepare_to_wait_exclusive};
identifier args.entry;
expression E;
position p : script:python() { ns_here(p) };
@@

- ptw@p(E, &entry, ...);

// Every finish_wait() of the entry.

@depends on patch@
identifier args.entry;
expression E;
position p : script:python() { ns_here(p) };
@@

- finish_wait@p(E, &entry)
+ remove_wait_queue(E, &entry)

// An entry passed in by the callers ("param"): the same, on the pointer.

@depends on patch@
identifier ptw = {prepare_to_wait, prepare_to_wait_exclusive};
identifier args.entry, args.add;
expression args.q;
expression E;
position p : script:python() { ns_here(p, "top") and ns_param() };
@@

(
+ add(q, entry);
  for (...;...;...) {
  ... when != ptw(E, entry, ...);
- ptw@p(E, entry, ...);
  ...
  }
|
+ add(q, entry);
  while (...) {
  ... when != ptw(E, entry, ...);
- ptw@p(E, entry, ...);
  ...
  }
)

@depends on patch@
identifier ptw = {prepare_to_wait, prepare_to_wait_exclusive};
identifier args.entry;
expression E;
position p : script:python() { ns_here(p) and ns_param() };
@@

- ptw@p(E, entry, ...);

@depends on patch@
identifier args.entry;
expression E;
position p : script:python() { ns_here(p) and ns_param() };
@@

- finish_wait@p(E, entry)
+ remove_wait_queue(E, entry)

// ... and each caller's entry, which the driver checked is used only as
// the argument of the function.

@depends on patch@
identifier x;
position p : script:python(x) { ns_caller(p, x) };
@@

- DEFINE_WAIT@p(x);
+ DEFINE_WAIT_FUNC(x, woken_wake_function);
