// SPDX-License-Identifier: GPL-2.0-only
/// Fix a missed wakeup found by nestsleep's wake coverage
/// (scripts/nestsleep/analysis/wakecov.py): a write that ends a wait whose
/// queue is then woken in a mode that does not wake the waiter's state, or
/// not at all.
///
/// Wrong mode: wake_up_interruptible*() is __wake_up(x, TASK_INTERRUPTIBLE,
/// ...) (include/linux/wait.h:229-231, 243), which wakes no task sleeping in
/// TASK_UNINTERRUPTIBLE (wait_event(), include/linux/wait.h:341); the
/// waker takes the mode that wakes both, TASK_NORMAL:
///
///	wake_up_interruptible(&q);          ->  wake_up(&q);
///	wake_up_interruptible_all(&q);      ->  wake_up_all(&q);
///	wake_up_interruptible_poll(&q, m);  ->  wake_up_poll(&q, m);
///
/// A wakeup that runs only under a parameter test ('if (wakeup)', which
/// some caller passes as a value that may be false) becomes unconditional
/// (drivers/acpi/acpi_dbg.c acpi_aml_unlock_fifo()).  When that test was
/// the parameter's only use, the parameter goes, with its argument at every
/// call:
///
///	static void f(unsigned long flag, bool wakeup)  ->  ... f(unsigned long flag)
///	f(FLAG, ret >= 0);                              ->  f(FLAG);
///
/// Unwoken writer: 'wake_up(&q);' is added right after the write, with the
/// queue written in the writer's terms (net/wireless/core.c
/// cfg80211_stop_p2p_device(): 'wake_up(&rdev->dev_wait);').
///
//# nestsleep's driver (scripts/nestsleep/fix/missed.py) picks the sites and
//# passes them in NESTSLEEP_SITES (JSON): "mode", the "line:column" of each
//# waker call to convert; "guard", the same for a waker whose 'if (E)' is
//# dropped; "after", the "line:column" of each write
//# statement with the queue to wake after it.  It checks that every site
//# changed, and refuses the finding otherwise.  "unparam" maps a static
//# function to the parameter to drop: the driver asks for it only when
//# the guard was its only use, the parameter is not the first, every
//# mention of the function in the file is its definition or a call, and
//# no argument has a side effect.  spatch 1.1.1 cannot
//# inherit a position over a change, so each kind is its own run on the
//# unchanged file (-D mode, -D guard, -D after, with -D patch) and the
//# driver puts the edits together: the sites never overlap.  A wakeup made
//# unconditional, or of a wider mode, wakes more tasks than before: the
//# driver allows it only when every waiter of the queue is a loop that
//# tests its condition again (wait_event*(): ___wait_event()'s for (;;), include/linux/wait.h:308-311),
//# for which a spurious wakeup costs one more test.  Run alone, the rule
//# changes nothing.
// Confidence: Moderate
// Copyright: (C) 2026 The nestsleep developers.
// URL: https://coccinelle.gitlabpages.inria.fr/website
// Comments: Requires Python scripting.
// Options: --no-includes --include-headers

virtual patch
virtual mode
virtual guard
virtual after
virtual unparam

@initialize:python@
@@
import json
import os

NS = json.loads(os.environ.get("NESTSLEEP_SITES") or "{}")
NS_MODE = NS.get("mode", {})
NS_GUARD = NS.get("guard", {})
NS_AFTER = NS.get("after", {})
NS_UNPARAM = NS.get("unparam", {})


def ns_at(p):
	return "%s:%s" % (p[0].line, p[0].column)

// Wrong mode: the waker at the position takes the mode that wakes
// TASK_NORMAL (include/linux/wait.h:222-224, 239; include/linux/sched.h:122).

@depends on patch && mode@
expression Q, M;
position p : script:python() { ns_at(p) in NS_MODE };
@@

(
- wake_up_interruptible@p(Q)
+ wake_up(Q)
|
- wake_up_interruptible_all@p(Q)
+ wake_up_all(Q)
|
- wake_up_interruptible_poll@p(Q, M)
+ wake_up_poll(Q, M)
)

// A wakeup under a parameter test: unconditional, in the mode that wakes
// TASK_NORMAL.

@depends on patch && guard@
expression E, Q, M;
position p : script:python() { ns_at(p) in NS_GUARD };
@@

(
- if (E) wake_up_interruptible@p(Q);
+ wake_up(Q);
|
- if (E) wake_up@p(Q);
+ wake_up(Q);
|
- if (E) wake_up_interruptible_all@p(Q);
+ wake_up_all(Q);
|
- if (E) wake_up_all@p(Q);
+ wake_up_all(Q);
|
- if (E) wake_up_interruptible_poll@p(Q, M);
+ wake_up_poll(Q, M);
|
- if (E) wake_up_poll@p(Q, M);
+ wake_up_poll(Q, M);
)

// Unwoken writer: the write statements by position (before any change:
// spatch 1.1.1 gives stale positions to the rules after a change), their
// queue in the writer's terms from the driver, then the wakeup after each.

@a depends on patch && after@
expression W;
position p : script:python() { ns_at(p) in NS_AFTER };
@@

W@p;

@script:python aqueue@
p << a.p;
q;
@@

coccinelle.q = cocci.make_expr(NS_AFTER[ns_at(p)])

@depends on patch && after@
position a.p;
expression a.W, aqueue.q;
@@

  W@p;
+ wake_up(q);

// A parameter whose only use was the dropped guard: out of the definition
// and out of every call.  The comma goes with the parameter on its minus
// line: spatch 1.1.1 cannot parse a plus slice that keeps both commas
// around a removed parameter.  Not the first parameter (the driver's
// condition): 'ps' is never empty.  f has no constraint of its own since
// spatch 1.1.1 cannot inherit an identifier that has one.

@ulast depends on patch && unparam@
identifier f;
identifier x : script:python(f) { NS_UNPARAM.get(f) == x };
parameter list[n] ps;
type T;
@@

 f(ps
- , T x
  ) { ... }

@umid depends on patch && unparam && !ulast@
identifier f;
identifier x : script:python(f) { NS_UNPARAM.get(f) == x };
parameter list[n] ps;
type T;
@@

 f(ps,
- T x,
  ...) { ... }

@depends on patch && unparam@
identifier ulast.f;
expression list[ulast.n] es;
expression E;
@@

 f(es
- , E
  )

@depends on patch && unparam@
identifier umid.f;
expression list[umid.n] es;
expression E;
@@

 f(es,
- E,
  ...)
