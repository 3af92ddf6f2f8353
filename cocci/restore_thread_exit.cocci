// SPDX-License-Identifier: GPL-2.0-only
/// Restore TASK_RUNNING before a thread function leaves its wait loop with
/// the task state still set.
///
/// A kthread function sets TASK_(UN)INTERRUPTIBLE, tests
/// kthread_should_stop() and breaks out of its loop (or returns) before
/// schedule() or a restore; it returns to kthread(), which calls
/// kthread_exit() -> do_exit(), and do_exit()'s exit_signals() may sleep
/// (kernel/kthread.c:376-378, kernel/exit.c:834, kernel/signal.c:2980) with
/// the state still set.  Upstream's fix of w1_process() (36225a7c72e9) is
/// one __set_current_state(TASK_RUNNING) before the break
/// (drivers/w1/w1.c:1196-1199 in 6.1).  Where the exit also leaves the
/// thread's on-stack wait entry on its queue (added with add_wait_queue()
/// and not removed on any way to that exit), the entry is removed there too.
///
//# nestsleep's driver (scripts/nestsleep/fix/thread_exit.py) picks the
//# sites: NESTSLEEP_SETTER holds the line of the state setter of the
//# finding, NESTSLEEP_EXITS the lines of the exits to look at (the breaks
//# of the wait loop, the returns inside it), NESTSLEEP_RESTORES and
//# NESTSLEEP_SETTERS the names of the calls that end the state window and
//# of the state setters (cocci/sleep_info.json).  The restore goes before
//# each of those exits that a path from the setter reaches with no restore
//# on the way.  With NESTSLEEP_QUEUE=sure, remove_wait_queue(Q, E) goes
//# there too where every path to the exit holds the entry on the queue: a
//# path from add_wait_queue(Q, E) with no remove_wait_queue(Q, E) on the
//# way, and no path from a remove, or from the function's start, without an
//# add.  NESTSLEEP_QUEUE=maybe drops the second condition: the driver runs
//# both and refuses an exit where they differ.  One rule makes both
//# insertions: spatch 1.1.1 matches no second 'exists' rule at a break that
//# an earlier rule added code before.  Run alone, the rule changes nothing.
// Confidence: High
// Copyright: (C) 2026 The nestsleep developers.
// URL: https://coccinelle.gitlabpages.inria.fr/website
// Comments: Requires Python scripting.
// Options: --no-includes --include-headers

virtual patch

@initialize:python@
@@
import os

NS_SETTER = set(os.environ.get("NESTSLEEP_SETTER", "").split())
NS_EXITS = set(os.environ.get("NESTSLEEP_EXITS", "").split())
NS_RESTORES = set(os.environ.get("NESTSLEEP_RESTORES", "").split())
NS_SETTERS = set(os.environ.get("NESTSLEEP_SETTERS", "").split())
NS_QUEUE = os.environ.get("NESTSLEEP_QUEUE", "")
NS_SET = set()   # exits reached with the state set
NS_ON = set()    # exits reached with the entry on the queue (some path)
NS_OFF = set()   # exits reached with the entry off the queue (some path)


def ns_exit(p):
    return p[0].line in NS_EXITS


def ns_queued(p):
    l = p[0].line
    return NS_QUEUE in ("sure", "maybe") and l in NS_SET and l in NS_ON and \
        (l not in NS_OFF or NS_QUEUE == "maybe")


def ns_plain(p):
    return p[0].line in NS_SET and not ns_queued(p)

// the exits a path from the setter reaches with the state set

@stateset exists@
identifier scs : script:python() { scs in NS_SETTERS };
identifier r : script:python() { r in NS_RESTORES };
expression S, E;
position p0 : script:python() { p0[0].line in NS_SETTER };
position p : script:python() { ns_exit(p) };
@@

scs@p0(S);
... when != r(...)
    when != __set_current_state(TASK_RUNNING)
    when != set_current_state(TASK_RUNNING)
(
break@p;
|
return@p E;
|
return@p;
)

@script:python@
p << stateset.p;
@@
NS_SET.add(p[0].line)

// the exits a path reaches with the entry on the queue, and off it

@queued exists@
expression Q, E, E2;
position p : script:python() { ns_exit(p) };
@@

(
add_wait_queue(Q, E);
|
add_wait_queue_exclusive(Q, E);
)
... when != remove_wait_queue(Q, E)
(
break@p;
|
return@p E2;
|
return@p;
)

@script:python@
p << queued.p;
@@
NS_ON.add(p[0].line)

@dequeued exists@
expression Q, E, E2;
position p : script:python() { ns_exit(p) };
@@

remove_wait_queue(Q, E);
... when != add_wait_queue(Q, E)
    when != add_wait_queue_exclusive(Q, E)
(
break@p;
|
return@p E2;
|
return@p;
)

@script:python@
p << dequeued.p;
@@
NS_OFF.add(p[0].line)

@unqueued exists@
identifier fn;
expression E2;
position p : script:python() { ns_exit(p) };
@@

fn(...) {
... when != add_wait_queue(...)
    when != add_wait_queue_exclusive(...)
(
break@p;
|
return@p E2;
|
return@p;
)
... when any
}

@script:python@
p << unqueued.p;
@@
NS_OFF.add(p[0].line)

// the restore and the remove, where the entry is on the queue

@depends on patch exists@
expression Q, E, E2;
position p : script:python() { ns_queued(p) };
@@

(
add_wait_queue(Q, E);
|
add_wait_queue_exclusive(Q, E);
)
... when != remove_wait_queue(Q, E)
(
+ __set_current_state(TASK_RUNNING);
+ remove_wait_queue(Q, E);
  break@p;
|
+ __set_current_state(TASK_RUNNING);
+ remove_wait_queue(Q, E);
  return@p E2;
|
+ __set_current_state(TASK_RUNNING);
+ remove_wait_queue(Q, E);
  return@p;
)

// the restore alone, elsewhere

@depends on patch@
expression E2;
position p : script:python() { ns_plain(p) };
@@

(
+ __set_current_state(TASK_RUNNING);
  break@p;
|
+ __set_current_state(TASK_RUNNING);
  return@p E2;
|
+ __set_current_state(TASK_RUNNING);
  return@p;
)
