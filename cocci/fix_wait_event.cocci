// SPDX-License-Identifier: GPL-2.0-only
/// Rewrite a wait_event*() whose condition may sleep into the wait_woken()
/// form.
///
/// ___wait_event() evaluates the condition after prepare_to_wait_event()
/// has set the task state.  A condition that sleeps (mutex_lock(),
/// kmalloc(GFP_KERNEL), copy_to_user()...) resets the state to
/// TASK_RUNNING: with CONFIG_DEBUG_ATOMIC_SLEEP=y the kernel warns "do not
/// call blocking ops when !TASK_RUNNING", and the wait makes an extra pass
/// or polls.  The wait_woken() form (commit 61ada528dea0, "sched/wait:
/// Provide infrastructure to deal with nested blocking") evaluates the
/// condition in TASK_RUNNING, and a wakeup that comes while it runs is
/// kept in WQ_FLAG_WOKEN:
///
///	DEFINE_WAIT_FUNC(wait, woken_wake_function);
///	add_wait_queue(&wq, &wait);
///	while (!cond)
///		wait_woken(&wait, TASK_UNINTERRUPTIBLE, MAX_SCHEDULE_TIMEOUT);
///	remove_wait_queue(&wq, &wait);
///
/// The signal test and the timeout rules of each variant are kept as
/// ___wait_event() and ___wait_cond_timeout() have them: the condition
/// first, then the time left, then the signal (-ERESTARTSYS); a timeout
/// variant gives 0 when the time ran out with the condition false and at
/// least 1 when the condition is true.
///
//# nestsleep's driver (scripts/nestsleep/fix/fixer.py) picks the sites and
//# passes them in NESTSLEEP_SITES (JSON): for each "line:column" of a
//# wait_event*() call, its form, the queue pointer, the task state and the
//# signal test, and for the function the names of the wait entry and of
//# the value variables, chosen to clash with no name in scope.  The driver
//# refuses, with its reason, the variants with no wait_woken() form (the
//# _locked, _lock_irq, _hrtimeout, swait, var and rcuwait waits, and an
//# _exclusive wait that tests a signal), a wait in a ->poll() method, and
//# the sites whose wakers it cannot convert; it adds the #include lines.
//# A condition that is a statement expression or assigns is left to the
//# driver's text rewrite: spatch 1.1.1 does not match '({ ... })' as a
//# macro argument.  The driver passes one site per run ("nodecls" in the
//# names on all but the last), and the value variables ("decls").  When the
//# wait is an unbraced arm of an if, both arms get braces (-D balance); the driver then joins
//# the braces spatch prints on lines of their own ("} else {").  Run
//# alone, the rule changes nothing.
// Confidence: High
// Copyright: (C) 2026 The nestsleep developers.
// URL: https://coccinelle.gitlabpages.inria.fr/website
// Comments: Requires Python scripting.
// Options: --no-includes --include-headers

virtual patch
// the wait is an unbraced arm of an if: brace the other arm too
virtual balance

@initialize:python@
@@
import json
import os
import re

NS = json.loads(os.environ.get("NESTSLEEP_SITES") or "{}")
NS_SITES = NS.get("sites", {})
NS_NAMES = NS.get("names", {})


def ns_key(p):
    return "%s:%s" % (p[0].line, p[0].column)


def ns_site(p):
    return ns_key(p) in NS_SITES


def ns_same(a, b):
    return re.sub(r"\s+", "", str(a)) == re.sub(r"\s+", "", b)


# p is a site of this form, and the queue, state, add_wait_queue*() and
# signal test that args made, and the wait entry that names made, are the
# site's own: rule instances of other sites leave it alone.  (spatch warns
# of an inherited metavariable that only a constraint reads, so no key of
# the site is inherited for this.)  call, the site's waiter, queue and
# condition, serves nested_sleep.cocci's copy; the driver passes one site
# per run.
def ns_form(p, form, call, q, st, add, wait, test=None):
    s = NS_SITES.get(ns_key(p))
    return s is not None and s["form"] == form and ns_same(q, s["queue"]) and \
        ns_same(st, s["state"]) and ns_same(add, s.get("add", "add_wait_queue")) and \
        ns_same(wait, ns_names(p[0].current_element).get("wait", "wait")) and \
        (test is None or ns_same(test, s.get("test") or "0"))


def ns_names(fn):
    return NS_NAMES


# the declarations go in with the last run only ("nodecls" in the names
# on the others); "decls" lists the value variables the function needs
def ns_decls(fn, k):
    names = ns_names(str(fn))
    return not names.get("nodecls") and len(names.get("decls") or []) == k


# the functions whose declarations went in before a first statement (by
# name: after a change, spatch 1.1.1 gives positions a temporary file)
ns_first_done = set()


def ns_first(p, fn):
    return str(fn) in ns_first_done

// BEGIN SHARED: the rules below are copied into cocci/nested_sleep.cocci
// by python3 -m nestsleep gen-builtin, for its patch mode alone.  They
// call ns_site(), ns_form(), ns_names(), ns_decls() and ns_first(),
// which each file's initializer defines.

// The sites and their function.

@site depends on patch@
identifier fn, we;
expression E, cond;
position p : script:python() { ns_site(p) };
@@

fn(...) { <+... we@p(E, cond, ...) ...+> }

// The names, chosen by the driver.  One set per function.

@script:python names@
fn << site.fn;
wait;
ret;
tmo;
@@

names = ns_names(fn)
coccinelle.wait = cocci.make_ident(names.get("wait", "wait"))
coccinelle.ret = cocci.make_ident(names.get("ret", "ret"))
coccinelle.tmo = cocci.make_ident(names.get("tmo", "timeout"))

// The queue, state and signal test of each site.

@script:python args@
p << site.p;
add;
q;
st;
test;
@@

s = NS_SITES[ns_key(p)]
coccinelle.add = cocci.make_ident(s.get("add", "add_wait_queue"))
coccinelle.q = cocci.make_expr(s["queue"])
coccinelle.st = cocci.make_expr(s["state"])
coccinelle.test = cocci.make_expr(s.get("test") or "0")

// No signal, no timeout, no value: wait_event(), wait_event_idle(), a
// discarded wait_event_freezable().

@depends on patch@
expression site.E, site.cond;
identifier site.we;
identifier names.wait;
expression args.q, args.st;
identifier args.add;
position p : script:python(we, E, cond, q, st, add, wait) {
	ns_form(p, "plain", [we, E, cond], q, st, add, wait) };
@@

- we@p(E, cond);
+ add(q, &wait);
+ while (!cond)
+ 	wait_woken(&wait, st, MAX_SCHEDULE_TIMEOUT);
+ remove_wait_queue(q, &wait);

// wait_event_cmd(): cmd1 before each sleep, cmd2 after it.

@depends on patch@
expression site.E, site.cond;
expression cmd1, cmd2;
identifier site.we;
identifier names.wait;
expression args.q, args.st;
identifier args.add;
position p : script:python(we, E, cond, q, st, add, wait) {
	ns_form(p, "cmd", [we, E, cond], q, st, add, wait) };
@@

- we@p(E, cond, cmd1, cmd2);
+ add(q, &wait);
+ while (!cond) {
+ 	cmd1;
+ 	wait_woken(&wait, st, MAX_SCHEDULE_TIMEOUT);
+ 	cmd2;
+ }
+ remove_wait_queue(q, &wait);

// A signal ends the wait with -ERESTARTSYS: the _interruptible,
// _killable, _freezable and _state waits.

@depends on patch@
expression site.E, site.cond;
expression lv;
expression list[n] rest;
identifier site.we;
statement S1, S2;
identifier names.wait, names.ret;
expression args.q, args.st, args.test;
identifier args.add;
position p : script:python(we, E, cond, q, st, add, wait, test) {
	ns_form(p, "signal", [we, E, cond], q, st, add, wait, test) };
@@

(
- we@p(E, cond, rest);
+ add(q, &wait);
+ while (!cond) {
+ 	if (test)
+ 		break;
+ 	wait_woken(&wait, st, MAX_SCHEDULE_TIMEOUT);
+ }
+ remove_wait_queue(q, &wait);
|
- ret = we@p(E, cond, rest);
+ ret = 0;
+ add(q, &wait);
+ while (!cond) {
+ 	if (test) {
+ 		ret = -ERESTARTSYS;
+ 		break;
+ 	}
+ 	wait_woken(&wait, st, MAX_SCHEDULE_TIMEOUT);
+ }
+ remove_wait_queue(q, &wait);
|
- lv = we@p(E, cond, rest);
+ ret = 0;
+ add(q, &wait);
+ while (!cond) {
+ 	if (test) {
+ 		ret = -ERESTARTSYS;
+ 		break;
+ 	}
+ 	wait_woken(&wait, st, MAX_SCHEDULE_TIMEOUT);
+ }
+ remove_wait_queue(q, &wait);
+ lv = ret;
|
- return we@p(E, cond, rest);
+ ret = 0;
+ add(q, &wait);
+ while (!cond) {
+ 	if (test) {
+ 		ret = -ERESTARTSYS;
+ 		break;
+ 	}
+ 	wait_woken(&wait, st, MAX_SCHEDULE_TIMEOUT);
+ }
+ remove_wait_queue(q, &wait);
+ return ret;
|
+ ret = 0;
+ add(q, &wait);
+ while (!cond) {
+ 	if (test) {
+ 		ret = -ERESTARTSYS;
+ 		break;
+ 	}
+ 	wait_woken(&wait, st, MAX_SCHEDULE_TIMEOUT);
+ }
+ remove_wait_queue(q, &wait);
  if (
(
- we@p(E, cond, rest)
+ ret
|
  !
- we@p(E, cond, rest)
+ ret
|
- we@p(E, cond, rest)
+ ret
  < 0
)
  ) S1 else S2
|
+ ret = 0;
+ add(q, &wait);
+ while (!cond) {
+ 	if (test) {
+ 		ret = -ERESTARTSYS;
+ 		break;
+ 	}
+ 	wait_woken(&wait, st, MAX_SCHEDULE_TIMEOUT);
+ }
+ remove_wait_queue(q, &wait);
  if (
(
- we@p(E, cond, rest)
+ ret
|
  !
- we@p(E, cond, rest)
+ ret
|
- we@p(E, cond, rest)
+ ret
  < 0
)
  ) S1
)

// A timeout, no signal: the _timeout and _idle_timeout waits.  The
// remaining jiffies go through wait_woken(), as ___wait_event() passes
// them through schedule_timeout().

@depends on patch@
expression site.E, site.cond;
expression to, lv;
identifier site.we;
statement S1, S2;
identifier names.wait, names.tmo;
expression args.q, args.st;
identifier args.add;
position p : script:python(we, E, cond, q, st, add, wait) {
	ns_form(p, "timeout", [we, E, cond], q, st, add, wait) };
@@

(
- we@p(E, cond, to);
+ tmo = to;
+ add(q, &wait);
+ while (!cond) {
+ 	if (!tmo)
+ 		break;
+ 	tmo = wait_woken(&wait, st, tmo);
+ }
+ remove_wait_queue(q, &wait);
|
- tmo = we@p(E, cond, to);
+ tmo = to;
+ add(q, &wait);
+ while (1) {
+ 	if (cond) {
+ 		if (!tmo)
+ 			tmo = 1;
+ 		break;
+ 	}
+ 	if (!tmo)
+ 		break;
+ 	tmo = wait_woken(&wait, st, tmo);
+ }
+ remove_wait_queue(q, &wait);
|
- lv = we@p(E, cond, to);
+ tmo = to;
+ add(q, &wait);
+ while (1) {
+ 	if (cond) {
+ 		if (!tmo)
+ 			tmo = 1;
+ 		break;
+ 	}
+ 	if (!tmo)
+ 		break;
+ 	tmo = wait_woken(&wait, st, tmo);
+ }
+ remove_wait_queue(q, &wait);
+ lv = tmo;
|
- return we@p(E, cond, to);
+ tmo = to;
+ add(q, &wait);
+ while (1) {
+ 	if (cond) {
+ 		if (!tmo)
+ 			tmo = 1;
+ 		break;
+ 	}
+ 	if (!tmo)
+ 		break;
+ 	tmo = wait_woken(&wait, st, tmo);
+ }
+ remove_wait_queue(q, &wait);
+ return tmo;
|
+ tmo = to;
+ add(q, &wait);
+ while (1) {
+ 	if (cond) {
+ 		if (!tmo)
+ 			tmo = 1;
+ 		break;
+ 	}
+ 	if (!tmo)
+ 		break;
+ 	tmo = wait_woken(&wait, st, tmo);
+ }
+ remove_wait_queue(q, &wait);
  if (
(
- we@p(E, cond, to)
+ tmo
|
  !
- we@p(E, cond, to)
+ tmo
)
  ) S1 else S2
|
+ tmo = to;
+ add(q, &wait);
+ while (1) {
+ 	if (cond) {
+ 		if (!tmo)
+ 			tmo = 1;
+ 		break;
+ 	}
+ 	if (!tmo)
+ 		break;
+ 	tmo = wait_woken(&wait, st, tmo);
+ }
+ remove_wait_queue(q, &wait);
  if (
(
- we@p(E, cond, to)
+ tmo
|
  !
- we@p(E, cond, to)
+ tmo
)
  ) S1
)

// A timeout and a signal: the _interruptible_timeout, _killable_timeout
// and _freezable_timeout waits.

@depends on patch@
expression site.E, site.cond;
expression to, lv;
identifier site.we;
statement S1, S2;
identifier names.wait, names.tmo;
expression args.q, args.st, args.test;
identifier args.add;
position p : script:python(we, E, cond, q, st, add, wait, test) {
	ns_form(p, "signal_timeout", [we, E, cond], q, st, add, wait, test) };
@@

(
- we@p(E, cond, to);
+ tmo = to;
+ add(q, &wait);
+ while (!cond) {
+ 	if (!tmo)
+ 		break;
+ 	if (test)
+ 		break;
+ 	tmo = wait_woken(&wait, st, tmo);
+ }
+ remove_wait_queue(q, &wait);
|
- tmo = we@p(E, cond, to);
+ tmo = to;
+ add(q, &wait);
+ while (1) {
+ 	if (cond) {
+ 		if (!tmo)
+ 			tmo = 1;
+ 		break;
+ 	}
+ 	if (!tmo)
+ 		break;
+ 	if (test) {
+ 		tmo = -ERESTARTSYS;
+ 		break;
+ 	}
+ 	tmo = wait_woken(&wait, st, tmo);
+ }
+ remove_wait_queue(q, &wait);
|
- lv = we@p(E, cond, to);
+ tmo = to;
+ add(q, &wait);
+ while (1) {
+ 	if (cond) {
+ 		if (!tmo)
+ 			tmo = 1;
+ 		break;
+ 	}
+ 	if (!tmo)
+ 		break;
+ 	if (test) {
+ 		tmo = -ERESTARTSYS;
+ 		break;
+ 	}
+ 	tmo = wait_woken(&wait, st, tmo);
+ }
+ remove_wait_queue(q, &wait);
+ lv = tmo;
|
- return we@p(E, cond, to);
+ tmo = to;
+ add(q, &wait);
+ while (1) {
+ 	if (cond) {
+ 		if (!tmo)
+ 			tmo = 1;
+ 		break;
+ 	}
+ 	if (!tmo)
+ 		break;
+ 	if (test) {
+ 		tmo = -ERESTARTSYS;
+ 		break;
+ 	}
+ 	tmo = wait_woken(&wait, st, tmo);
+ }
+ remove_wait_queue(q, &wait);
+ return tmo;
|
+ tmo = to;
+ add(q, &wait);
+ while (1) {
+ 	if (cond) {
+ 		if (!tmo)
+ 			tmo = 1;
+ 		break;
+ 	}
+ 	if (!tmo)
+ 		break;
+ 	if (test) {
+ 		tmo = -ERESTARTSYS;
+ 		break;
+ 	}
+ 	tmo = wait_woken(&wait, st, tmo);
+ }
+ remove_wait_queue(q, &wait);
  if (
(
- we@p(E, cond, to)
+ tmo
|
  !
- we@p(E, cond, to)
+ tmo
|
- we@p(E, cond, to)
+ tmo
  < 0
)
  ) S1 else S2
|
+ tmo = to;
+ add(q, &wait);
+ while (1) {
+ 	if (cond) {
+ 		if (!tmo)
+ 			tmo = 1;
+ 		break;
+ 	}
+ 	if (!tmo)
+ 		break;
+ 	if (test) {
+ 		tmo = -ERESTARTSYS;
+ 		break;
+ 	}
+ 	tmo = wait_woken(&wait, st, tmo);
+ }
+ remove_wait_queue(q, &wait);
  if (
(
- we@p(E, cond, to)
+ tmo
|
  !
- we@p(E, cond, to)
+ tmo
|
- we@p(E, cond, to)
+ tmo
  < 0
)
  ) S1
)

// Braces on both arms (coding-style.rst: when one arm of an if needs
// braces, both get them).  spatch braces the arm that held the wait; the
// other arm of that if gets them here, unless it is an else if.  The
// driver asks for it (-D balance) only when the wait was an unbraced arm:
// an if that was unbalanced before is not restyled.

@depends on patch && balance disable braces0, braces1, braces2, braces3, braces4@
identifier site.fn;
identifier names.wait;
expression args.q;
expression C;
statement S1;
@@

fn(...) {
<...
(
  if (C) { ... } else { ... }
|
  if (C)
- S1
- else
+ {
+ S1
+ } else
  {
  ...
  remove_wait_queue(q, &wait);
  ...
  }
)
...>
}

@depends on patch && balance disable braces0, braces1, braces2, braces3, braces4@
identifier site.fn;
identifier names.wait;
expression args.q;
expression C, C2;
statement S2, S3, S4;
@@

fn(...) {
<...
(
  if (C) { ... } else { ... }
|
  if (C) { ... } else if (C2) S3 else S4
|
  if (C) { ... } else if (C2) S3
|
  if (C) {
  ...
  remove_wait_queue(q, &wait);
  ...
  } else
- S2
+ {
+ S2
+ }
)
...>
}

// The functions the rules above rewrote: a site whose statement context
// no rule matched gets no declarations either.  The rules below run only
// where rw bound E (decl inherits it), on the site's function.

@rw depends on patch@
identifier site.fn, names.wait;
expression E;
@@

fn(...) { <+... remove_wait_queue(E, &wait); ...+> }

// The declarations, at the top of the function: the wait entry, and the
// variable that carries the wait's value when one is needed.  A blank
// line follows them when the function's first line is not a declaration.

@script:python decl@
fn << site.fn;
E << rw.E;
wait;
t1;
v1;
t2;
v2;
@@

names = ns_names(fn)
ds = (names.get("decls") or []) + [["int", "unused"]] * 2
coccinelle.wait = cocci.make_ident(names.get("wait", "wait"))
coccinelle.t1 = cocci.make_type(ds[0][0])
coccinelle.v1 = cocci.make_ident(ds[0][1])
coccinelle.t2 = cocci.make_type(ds[1][0])
coccinelle.v2 = cocci.make_ident(ds[1][1])

@first0 depends on patch@
identifier site.fn, decl.wait;
statement S;
position pd : script:python(fn) { ns_decls(fn, 0) };
@@

fn@pd(...) {
+ DEFINE_WAIT_FUNC(wait, woken_wake_function);
+
  S
  ...
}

@script:python@
pd << first0.pd;
@@

ns_first_done.add(pd[0].current_element)

@depends on patch@
identifier site.fn, decl.wait;
position pd : script:python(fn) { ns_decls(fn, 0) and not ns_first(pd, fn) };
@@

fn@pd(...) {
++ DEFINE_WAIT_FUNC(wait, woken_wake_function);
  ...
}

@first1 depends on patch@
identifier site.fn, decl.wait, decl.v1;
type decl.t1;
statement S;
position pd : script:python(fn) { ns_decls(fn, 1) };
@@

fn@pd(...) {
+ DEFINE_WAIT_FUNC(wait, woken_wake_function);
+ t1 v1;
+
  S
  ...
}

@script:python@
pd << first1.pd;
@@

ns_first_done.add(pd[0].current_element)

@depends on patch@
identifier site.fn, decl.wait, decl.v1;
type decl.t1;
position pd : script:python(fn) { ns_decls(fn, 1) and not ns_first(pd, fn) };
@@

fn@pd(...) {
++ DEFINE_WAIT_FUNC(wait, woken_wake_function);
++ t1 v1;
  ...
}

@first2 depends on patch@
identifier site.fn, decl.wait, decl.v1, decl.v2;
type decl.t1, decl.t2;
statement S;
position pd : script:python(fn) { ns_decls(fn, 2) };
@@

fn@pd(...) {
+ DEFINE_WAIT_FUNC(wait, woken_wake_function);
+ t1 v1;
+ t2 v2;
+
  S
  ...
}

@script:python@
pd << first2.pd;
@@

ns_first_done.add(pd[0].current_element)

@depends on patch@
identifier site.fn, decl.wait, decl.v1, decl.v2;
type decl.t1, decl.t2;
position pd : script:python(fn) { ns_decls(fn, 2) and not ns_first(pd, fn) };
@@

fn@pd(...) {
++ DEFINE_WAIT_FUNC(wait, woken_wake_function);
++ t1 v1;
++ t2 v2;
  ...
}
