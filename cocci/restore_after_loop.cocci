// SPDX-License-Identifier: GPL-2.0-only
/// Restore TASK_RUNNING right after a wait loop whose state outlives it.
///
/// A loop sets TASK_(UN)INTERRUPTIBLE, leaves by 'break' (or its own test)
/// with the state still set, and a call after the loop may sleep before
/// the state is restored (hpet_read()'s put_user(), mailbox-test's
/// simple_read_from_buffer()).  The loop itself is right; the fix is one
/// __set_current_state(TASK_RUNNING) after it.  The restore at the exit
/// label that the loop's gotos reach stays.
///
//# nestsleep's driver (scripts/nestsleep/fix/fixer.py) picks the loops:
//# NESTSLEEP_LOOPS holds the line of each for/while keyword, and the
//# restore goes right after the loop.  spatch 1.1.1 does not match a
//# do ... while loop ("not supported"), so for those NESTSLEEP_NEXT holds
//# the line of the statement after the loop, and the restore goes just
//# before it.  The driver picks a loop only when every
//# sleeping call of the finding runs after it, the statement after it is
//# in the same block, and no label between the loop and those calls can be
//# reached by a goto from inside it.  NESTSLEEP_BEFORE holds the line of a
//# statement inside a wait loop whose entry has a wake function of its own
//# (scripts/nestsleep/fix/entries.py): the restore goes just before it,
//# by the same rule as NESTSLEEP_NEXT (the sleeping call runs at the top
//# of the next pass, before prepare_to_wait*() sets the state again).
//# Run alone, the rule changes nothing.
// Confidence: High
// Copyright: (C) 2026 The nestsleep developers.
// URL: https://coccinelle.gitlabpages.inria.fr/website
// Comments: Requires Python scripting.
// Options: --no-includes --include-headers

virtual patch

@initialize:python@
@@
import os

NS_LOOPS = set(os.environ.get("NESTSLEEP_LOOPS", "").split())
NS_NEXT = set(os.environ.get("NESTSLEEP_NEXT", "").split())
NS_BEFORE = set(os.environ.get("NESTSLEEP_BEFORE", "").split())


def ns_loop(p):
    return p[0].line in NS_LOOPS


def ns_next(p):
    return p[0].line in NS_NEXT or p[0].line in NS_BEFORE

// for and while loops: right after the loop

@depends on patch@
position p : script:python() { ns_loop(p) };
statement S;
expression E1, E2, E3;
@@

(
  for@p (E1; E2; E3) S
+ __set_current_state(TASK_RUNNING);
|
  for@p (; E2; E3) S
+ __set_current_state(TASK_RUNNING);
|
  for@p (E1; ; E3) S
+ __set_current_state(TASK_RUNNING);
|
  for@p (E1; E2; ) S
+ __set_current_state(TASK_RUNNING);
|
  for@p (; ; E3) S
+ __set_current_state(TASK_RUNNING);
|
  for@p (; E2; ) S
+ __set_current_state(TASK_RUNNING);
|
  for@p (E1; ; ) S
+ __set_current_state(TASK_RUNNING);
|
  for@p (;;) S
+ __set_current_state(TASK_RUNNING);
|
  while@p (E1) S
+ __set_current_state(TASK_RUNNING);
)

// do ... while loops: before the statement after the loop; and, for
// NESTSLEEP_BEFORE, before the statement of the sleeping call

@depends on patch@
position p : script:python() { ns_next(p) };
statement S1, S2;
expression E, E1, E2;
@@

(
+ __set_current_state(TASK_RUNNING);
  E@p;
|
+ __set_current_state(TASK_RUNNING);
  if@p (E) S1 else S2
|
+ __set_current_state(TASK_RUNNING);
  if@p (E) S1
|
+ __set_current_state(TASK_RUNNING);
  return@p E;
|
+ __set_current_state(TASK_RUNNING);
  return@p;
|
+ __set_current_state(TASK_RUNNING);
  while@p (E) S1
|
+ __set_current_state(TASK_RUNNING);
  for@p (E; E1; E2) S1
)
