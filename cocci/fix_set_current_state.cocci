// SPDX-License-Identifier: GPL-2.0-only
/// Rewrite a set_current_state() loop of a thread that waits on no wait
/// queue into the wait_woken() form on a queue of its own.
///
/// A call between set_current_state(TASK_*) and schedule() that sleeps
/// (mutex_lock(), kmalloc(GFP_KERNEL), ...) returns in TASK_RUNNING, so
/// the schedule() that follows returns at once and the loop makes an
/// extra pass: a busy poll while the inner call keeps sleeping, and with
/// CONFIG_DEBUG_ATOMIC_SLEEP a warning.  A thread that waits
/// on no queue (woken by wake_up_process()) is given one, as the Bluetooth
/// hidp fix (commit 5da8e47d849d) did:
///
///	static DECLARE_WAIT_QUEUE_HEAD(thread_wq);
///	...
///	DEFINE_WAIT_FUNC(wait, woken_wake_function);
///
///	add_wait_queue(&thread_wq, &wait);
///	for (;;) {
///		if (cond)
///			break;
///		...
///		wait_woken(&wait, TASK_INTERRUPTIBLE, MAX_SCHEDULE_TIMEOUT);
///	}
///	remove_wait_queue(&thread_wq, &wait);
///
/// and every wake_up_process() of the thread becomes
/// wake_up_interruptible(&thread_wq).
///
/// A loop whose thread is already on a wait queue (add_wait_queue() with a
/// DECLARE_WAITQUEUE(wait, current) or init_waitqueue_entry(&wait, current)
/// entry: the Bluetooth cmtp and bnep fixes, commits f06d977309d0 and
/// 25717382c1dd) keeps its queue: the entry becomes
/// DEFINE_WAIT_FUNC(wait, woken_wake_function), schedule() becomes
/// wait_woken(), and the setters and the restore of TASK_RUNNING right
/// after the loop go.
///
//# nestsleep's driver (scripts/nestsleep/fix/fixer.py, plan_own_queue())
//# picks the loop, the names and the wakers, and passes them in
//# NESTSLEEP_SITES (JSON): the function, the entry, the queue, the state,
//# the "line:column" of each schedule() in the loop, the pass ("body",
//# "wrap" or "decl"), the line of the loop keyword and the line of the
//# function's last leading declaration (none: 0).  spatch 1.1.1 gives
//# wrong positions to the rules that follow a change, so the rule runs
//# two or three times, each on the file the last one wrote: "body"
//# rewrites the schedule() calls (by position, in its first rule) and
//# drops the setters (by function); "wrap" puts add_wait_queue() and
//# remove_wait_queue() around the loop (by position, in its first rule)
//# and declares the entry when the function has no declarations; "decl"
//# declares it after the last declaration (by position).  A loop already
//# on a queue ("onqueue": true) needs only the "body" pass, which then
//# also turns the entry into DEFINE_WAIT_FUNC() ("entry_decl": "declare"
//# or "init") and drops the restore of TASK_RUNNING right after the loop
//# that holds the new wait_woken().  The static
//# queue head, the wakers in other functions and the forwarded entries
//# are text edits of the driver (see plan_own_queue()).  A do ... while
//# statement is not matched as a whole ("not supported" in spatch 1.1.1,
//# which edits the statements in its body): the driver
//# refuses it.  Run alone, the rule changes nothing.
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
	return bool(NS) and NS.get("pass") == "body" and p[0].current_element == NS["func"] and \
		"%s:%s" % (p[0].line, p[0].column) in NS_SCHED


def ns_here(p, what):
	return bool(NS) and NS.get("pass") == what and p[0].current_element == NS["func"]


def ns_decl(p):
	return bool(NS) and NS.get("pass") == "decl" and p[0].current_element == NS["func"] and \
		p[0].line == str(NS.get("decl"))


def ns_loop(p):
	return bool(NS) and NS.get("pass") == "wrap" and p[0].current_element == NS["func"] and \
		p[0].line == str(NS["loop"])

@script:python args@
fn;
entry;
q;
st;
@@

coccinelle.fn = cocci.make_ident(NS.get("func", "nestsleep_no_function")
				  if NS.get("pass") == "decl" or (NS.get("pass") == "wrap" and not NS.get("decl"))
				  else "nestsleep_no_function")
coccinelle.entry = cocci.make_ident(NS.get("entry", "wait"))
coccinelle.q = cocci.make_expr(NS.get("queue", "wq"))
coccinelle.st = cocci.make_expr(NS.get("state", "TASK_UNINTERRUPTIBLE"))

// "body": the sleeps first, by position.

@depends on patch@
identifier args.entry;
expression args.st;
expression T;
position p : script:python() { ns_sched(p) };
@@

(
- schedule@p()
+ wait_woken(&entry, st, MAX_SCHEDULE_TIMEOUT)
|
- schedule_timeout@p(T)
+ wait_woken(&entry, st, T)
)

// "body": the setters of the state go (the driver checked that every
// one of the function is in the loop, or right before it), and so do
// the restores of TASK_RUNNING: once the loop sets no state, the
// function runs in TASK_RUNNING throughout (wait_woken() returns in it),
// unless something else in it sets a state ("restores": false).

@depends on patch@
expression args.st;
position p : script:python() { ns_here(p, "body") };
@@

(
- set_current_state@p(st);
|
- __set_current_state@p(st);
)

@depends on patch@
position p : script:python() { ns_here(p, "body") and bool(NS.get("restores")) };
@@

(
- set_current_state@p(TASK_RUNNING);
|
- __set_current_state@p(TASK_RUNNING);
)

// "body" of a loop already on a queue: its entry, made for a task woken
// by default_wake_function(), becomes one for wait_woken().

@depends on patch@
declarer name DECLARE_WAITQUEUE;
identifier args.entry;
symbol current;
position p : script:python() { ns_here(p, "body") and NS.get("entry_decl") == "declare" };
@@

- DECLARE_WAITQUEUE@p(entry, current);
+ DEFINE_WAIT_FUNC(entry, woken_wake_function);

@depends on patch@
identifier args.entry;
typedef wait_queue_entry_t;
symbol current;
position p : script:python() { ns_here(p, "body") and NS.get("entry_decl") == "init" };
@@

(
- wait_queue_entry_t entry@p;
+ DEFINE_WAIT_FUNC(entry, woken_wake_function);
|
- struct wait_queue_entry entry@p;
+ DEFINE_WAIT_FUNC(entry, woken_wake_function);
)

@depends on patch@
identifier args.entry;
symbol current;
position p : script:python() { ns_here(p, "body") and NS.get("entry_decl") == "init" };
@@

- init_waitqueue_entry@p(&entry, current);

// ... and the restore of TASK_RUNNING right after the loop goes: the loop
// that now holds wait_woken(&entry, ...) sets no state.  Other restores
// stay (a goto exit, an error path).

@depends on patch@
identifier args.entry;
expression E1;
position p : script:python() { ns_here(p, "body") and bool(NS.get("onqueue")) };
@@

(
  while@p (E1) { <+... wait_woken(&entry, ...) ...+> }
- __set_current_state(TASK_RUNNING);
|
  while@p (E1) { <+... wait_woken(&entry, ...) ...+> }
- set_current_state(TASK_RUNNING);
|
  for@p (...;...;...) { <+... wait_woken(&entry, ...) ...+> }
- __set_current_state(TASK_RUNNING);
|
  for@p (...;...;...) { <+... wait_woken(&entry, ...) ...+> }
- set_current_state(TASK_RUNNING);
)

// "wrap": the queue around the loop, by the loop's line.  A restore of
// TASK_RUNNING right after the loop goes: wait_woken() returns in
// TASK_RUNNING and the loop no longer sets a state.

@wrapped depends on patch@
identifier args.entry;
expression args.q;
statement S;
expression E1;
position p : script:python() { ns_loop(p) };
@@

(
+ add_wait_queue(q, &entry);
  while@p (E1) S
- __set_current_state(TASK_RUNNING);
+ remove_wait_queue(q, &entry);
|
+ add_wait_queue(q, &entry);
  while@p (E1) S
- set_current_state(TASK_RUNNING);
+ remove_wait_queue(q, &entry);
|
+ add_wait_queue(q, &entry);
  while@p (E1) S
+ remove_wait_queue(q, &entry);
|
+ add_wait_queue(q, &entry);
  for@p (...;...;...) S
- __set_current_state(TASK_RUNNING);
+ remove_wait_queue(q, &entry);
|
+ add_wait_queue(q, &entry);
  for@p (...;...;...) S
- set_current_state(TASK_RUNNING);
+ remove_wait_queue(q, &entry);
|
+ add_wait_queue(q, &entry);
  for@p (...;...;...) S
+ remove_wait_queue(q, &entry);
)

// "wrap": the entry, with a blank line of its own, when the function has
// no declarations (else the "decl" pass places it).

@depends on patch && wrapped@
identifier args.entry, args.fn;
statement S;
@@

fn(...) {
+ DEFINE_WAIT_FUNC(entry, woken_wake_function);
+
  S
  ...
}

// "decl", a third pass when the function has declarations: the entry
// after the last of them.  The driver gives its line: a rule cannot tell
// the function's leading declarations from those of an inner block
// without "when != S", which does not skip a declaration with an
// initializer; and a rule that follows a change gets wrong positions, so
// this cannot share a pass with "wrap".

@decl depends on patch@
identifier args.entry, args.fn;
declaration d;
statement S;
position p : script:python() { ns_decl(p) };
@@

fn(...) {
  ... when any
  d@p
+ DEFINE_WAIT_FUNC(entry, woken_wake_function);
  S
  ...
}
