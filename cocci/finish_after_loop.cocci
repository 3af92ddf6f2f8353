// SPDX-License-Identifier: GPL-2.0-only
/// Finish the wait right after a prepare_to_wait() loop that leaves its
/// wait entry queued.
///
/// A loop calls prepare_to_wait*(Q, E, state), leaves by 'break' (or its
/// own test) with E still on Q and the task state still set, and nothing
/// after the loop removes E: a call after the loop may sleep in that state
/// (pkt_make_request_write()'s mempool_alloc()), and E, a local, stays on
/// Q after its scope ends.  finish_wait(Q, E) right after the loop
/// restores TASK_RUNNING and takes E off Q (kernel/sched/wait.c
/// finish_wait()); upstream's ___wait_var_event() ends its loop the same
/// way (include/linux/wait_bit.h).
///
//# nestsleep's driver (scripts/nestsleep/fix/finish_wait.py) picks the
//# sites, one a run (the rule binds the queue and entry of one call, and a
//# second call's would be added after the first loop too):
//# NESTSLEEP_PTW holds the line of the prepare_to_wait*() call, whose
//# queue and entry the finish_wait() takes, and NESTSLEEP_LOOPS the line
//# of its loop's for/while keyword.  spatch 1.1.1 does not match a
//# do ... while loop ("not supported"), so for those NESTSLEEP_NEXT holds
//# the line of the statement after the loop, and the call goes just before
//# it.  The driver picks a loop only when no statement after it in the
//# entry's scope names the entry, and every return or goto out of the
//# loop finishes the wait first.  Run alone, the rule changes nothing.
// Confidence: High
// Copyright: (C) 2026 The nestsleep developers.
// URL: https://coccinelle.gitlabpages.inria.fr/website
// Comments: Requires Python scripting.
// Options: --no-includes --include-headers

virtual patch

@initialize:python@
@@
import os

NS_PTW = set(os.environ.get("NESTSLEEP_PTW", "").split())
NS_LOOPS = set(os.environ.get("NESTSLEEP_LOOPS", "").split())
NS_NEXT = set(os.environ.get("NESTSLEEP_NEXT", "").split())


def ns_at(p, lines):
    return p[0].line in lines

// the queue and the entry of the prepare_to_wait*() call

@ptw depends on patch@
position q : script:python() { ns_at(q, NS_PTW) };
expression Q, E, St;
@@

(
  prepare_to_wait@q(Q, E, St)
|
  prepare_to_wait_event@q(Q, E, St)
|
  prepare_to_wait_exclusive@q(Q, E, St)
)

// for and while loops: right after the loop

@depends on patch@
position p : script:python() { ns_at(p, NS_LOOPS) };
expression ptw.Q, ptw.E;
statement S;
expression E1, E2, E3;
@@

(
  for@p (E1; E2; E3) S
+ finish_wait(Q, E);
|
  for@p (; E2; E3) S
+ finish_wait(Q, E);
|
  for@p (E1; ; E3) S
+ finish_wait(Q, E);
|
  for@p (E1; E2; ) S
+ finish_wait(Q, E);
|
  for@p (; ; E3) S
+ finish_wait(Q, E);
|
  for@p (; E2; ) S
+ finish_wait(Q, E);
|
  for@p (E1; ; ) S
+ finish_wait(Q, E);
|
  for@p (;;) S
+ finish_wait(Q, E);
|
  while@p (E1) S
+ finish_wait(Q, E);
)

// do ... while loops: before the statement after the loop

@depends on patch@
position p : script:python() { ns_at(p, NS_NEXT) };
expression ptw.Q, ptw.E;
statement S1, S2;
expression X, X1, X2;
@@

(
+ finish_wait(Q, E);
  X@p;
|
+ finish_wait(Q, E);
  if@p (X) S1 else S2
|
+ finish_wait(Q, E);
  if@p (X) S1
|
+ finish_wait(Q, E);
  return@p X;
|
+ finish_wait(Q, E);
  return@p;
|
+ finish_wait(Q, E);
  while@p (X) S1
|
+ finish_wait(Q, E);
  for@p (X; X1; X2) S1
)
