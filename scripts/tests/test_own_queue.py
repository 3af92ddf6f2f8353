# SPDX-License-Identifier: GPL-2.0-only
"""The set_current_state() loop rewrites of cocci/fix_set_current_state.cocci.
The own-queue form (issue 15 item 3): a loop of a thread on no wait queue
gets a queue of its own (hidp 5da8e47d849d).  What own_queue.py's
plan_own_queue() chooses (the site, the names, the wakers) and refuses,
run through MODE=patch on small trees written here.  The on-queue form
(cmtp f06d977309d0, bnep 25717382c1dd): a loop already on a queue keeps
it (plan_set_current_state()).  fixtures/patch/own_queue*.c and
set_current_state_wakers test the shapes end to end."""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

from nestsleep.fix import edits, set_current_state

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

HEAD = """#include <linux/delay.h>
#include <linux/kthread.h>
#include <linux/mutex.h>
#include <linux/sched.h>
#include <linux/wait.h>

static DEFINE_MUTEX(lock);
static int work;
"""


def loop(name, body="", kw="for (;;)", after="schedule();"):
	return """
static int %s(void *arg)
{
	%s {
		set_current_state(TASK_INTERRUPTIBLE);
		mutex_lock(&lock);
		if (work) {
			mutex_unlock(&lock);
			break;
		}
		mutex_unlock(&lock);
%s		%s
	}
	__set_current_state(TASK_RUNNING);
	return 0;
}
""" % (name, kw, body, after)


def starter(name, task):
	return """
static struct task_struct *%s;

void start_%s(void)
{
	%s = kthread_run(%s, NULL, "t");
}

void kick_%s(void)
{
	wake_up_process(%s);
}
""" % (task, name, task, name, name, task)


class TreeRun(unittest.TestCase):
	"""One MODE=patch run per tree; each test reads its functions' fix."""

	def run_tree(self, files):
		tmp = tempfile.mkdtemp(prefix="test-own-queue-")
		self.addCleanup(shutil.rmtree, tmp, True)
		tree = os.path.join(tmp, "tree")
		os.makedirs(tree)
		for name, text in files.items():
			with open(os.path.join(tree, name), "w") as f:
				f.write(text)
		out = os.path.join(tmp, "out.json")
		env = dict(os.environ, NESTSLEEP_CACHE=os.path.join(tmp, "cache"),
			   PYTHONPATH=os.path.join(TOP, "scripts") + os.pathsep + os.path.join(TOP, "kernel-boot"))
		p = subprocess.run([sys.executable, "-m", "nestsleep", "coccicheck", "--kdir", tree, "--mode", "patch",
				    "--confidence", "low", "--json", out], capture_output=True, text=True, env=env, timeout=600)
		self.assertEqual(p.returncode, 0, p.stderr[-2000:])
		with open(out) as f:
			return {x["function"]: x["fix"] for x in json.load(f)["findings"]}, p.stdout


class OwnQueue(TreeRun):
	def test_site_names_and_waker(self):
		src = HEAD + "static int t_thread_wq;\n" + loop("t_thread", after="schedule();") + starter("t_thread", "tt")
		fix, diff = self.run_tree({"t.c": src})
		self.assertEqual(fix["t_thread"]["status"], "patch", fix["t_thread"]["reason"])
		# <thread>_wq, made unique against the file's identifiers
		self.assertIn("+static DECLARE_WAIT_QUEUE_HEAD(t_thread_wq2);", diff)
		self.assertIn("+\tadd_wait_queue(&t_thread_wq2, &wait);", diff)
		self.assertIn("+\twake_up_interruptible(&t_thread_wq2);", diff)
		self.assertIn("-\twake_up_process(tt);", diff)
		self.assertIn("+\t\twait_woken(&wait, TASK_INTERRUPTIBLE, MAX_SCHEDULE_TIMEOUT);", diff)
		self.assertIn("-\t__set_current_state(TASK_RUNNING);", diff)

	def test_queue_named_after_the_thread_function(self):
		# the loop is in a helper: the queue is the thread's
		src = HEAD + loop("helper_loop") + """
static int h_thread(void *arg)
{
	return helper_loop(arg);
}
""" + starter("h_thread", "ht")
		fix, diff = self.run_tree({"h.c": src})
		self.assertEqual(fix["helper_loop"]["status"], "patch", fix["helper_loop"]["reason"])
		self.assertIn("DECLARE_WAIT_QUEUE_HEAD(h_thread_wq);", diff)

	def test_entry_after_the_declarations(self):
		# hidp_session_run(): several declarations, with initializers
		src = HEAD + loop("d_thread").replace("{\n\tfor (;;) {", "{\n\tint *w = &work;\n\tint n = *w;\n"
						       "\tint k;\n\n\tk = n;\n\tfor (;;) {") + starter("d_thread", "dt")
		fix, diff = self.run_tree({"d.c": src})
		self.assertEqual(fix["d_thread"]["status"], "patch", fix["d_thread"]["reason"])
		self.assertIn(" \tint k;\n+\tDEFINE_WAIT_FUNC(wait, woken_wake_function);\n \n \tk = n;\n", diff)

	def test_one_queue_per_thread(self):
		# two loops of one thread: each unit is a patch of its own, and
		# both would declare <thread>_wq
		src = HEAD + loop("loop_a") + loop("loop_b") + """
static int two_thread(void *arg)
{
	loop_a(arg);
	return loop_b(arg);
}
""" + starter("two_thread", "tw")
		fix, diff = self.run_tree({"two.c": src})
		st = sorted((fix[f]["status"], fix[f]["reason"]) for f in ("loop_a", "loop_b"))
		self.assertEqual([x[0] for x in st], ["manual", "patch"], st)
		self.assertIn("already gets its queue", st[0][1])
		self.assertEqual(diff.count("DECLARE_WAIT_QUEUE_HEAD(two_thread_wq)"), 1, diff)

	def test_refusals(self):
		src = HEAD
		src += loop("park_thread", body="\t\tkthread_parkme();\n") + starter("park_thread", "pt")
		src += loop("poll_thread", after="msleep(10);") + starter("poll_thread", "lt")
		src += loop("msleep_then_schedule", body="\t\tmsleep(10);\n") + starter("msleep_then_schedule", "mt")
		src += """
static int dw_thread(void *arg)
{
	do {
		set_current_state(TASK_INTERRUPTIBLE);
		mutex_lock(&lock);
		work = 0;
		mutex_unlock(&lock);
		schedule();
	} while (!kthread_should_stop());
	__set_current_state(TASK_RUNNING);
	return 0;
}
""" + starter("dw_thread", "dt")
		src += loop("anon_thread") + "\nvoid start_anon(void)\n{\n\tkthread_run(anon_thread, NULL, \"a\");\n}\n"
		src += loop("goto_thread", body="\t\tif (work < 0)\n\t\t\tgoto out;\n").replace(
			"\t__set_current_state(TASK_RUNNING);\n\treturn 0;\n}\n",
			"out:\n\t__set_current_state(TASK_RUNNING);\n\treturn 0;\n}\n") + starter("goto_thread", "gt")
		src += loop("far_thread") + "\nstruct task_struct *far_task;\n\nvoid start_far(void)\n{\n" \
			"\tfar_task = kthread_run(far_thread, NULL, \"f\");\n}\n"
		other = "#include <linux/sched.h>\nextern struct task_struct *far_task;\n\n" \
			"void kick_far(void)\n{\n\twake_up_process(far_task);\n}\n"
		fix, diff = self.run_tree({"r.c": src, "other.c": other})
		want = {
			"park_thread": "kthread_parkme()",
			"poll_thread": "msleep() with no schedule() after it",
			"dw_thread": "do ... while",
			"anon_thread": "no waker found",
			"far_thread": "in another file",
			"goto_thread": "a goto leaves the wait loop",
		}
		for func, phrase in want.items():
			self.assertEqual(fix[func]["status"], "manual", func)
			self.assertIn(phrase, fix[func]["reason"], func)
		# a msleep() followed by the loop's schedule() is the nested sleep
		self.assertEqual(fix["msleep_then_schedule"]["status"], "patch", fix["msleep_then_schedule"]["reason"])

	def test_forwarded_entries(self):
		src = HEAD + loop("fwd_run") + """
struct s { wait_queue_head_t q; };

static int fwd_thread(void *arg)
{
	struct s *s = arg;
	wait_queue_entry_t a, b;

	init_waitqueue_entry(&a, current);
	init_waitqueue_entry(&b, current);
	add_wait_queue(&s->q, &a);
	add_wait_queue(&s->q, &b);
	fwd_run(arg);
	remove_wait_queue(&s->q, &b);
	remove_wait_queue(&s->q, &a);
	return 0;
}
""" + starter("fwd_thread", "ft")
		fix, diff = self.run_tree({"f.c": src})
		self.assertEqual(fix["fwd_run"]["status"], "patch", fix["fwd_run"]["reason"])
		self.assertIn("+static int fwd_thread_wake_function(struct wait_queue_entry *wait,", diff)
		self.assertIn("+\tDEFINE_WAIT_FUNC(a, fwd_thread_wake_function);", diff)
		self.assertIn("+\tDEFINE_WAIT_FUNC(b, fwd_thread_wake_function);", diff)
		self.assertIn("-\tinit_waitqueue_entry(&a, current);", diff)
		# the wake function comes before the thread function that names it
		self.assertLess(diff.index("fwd_thread_wake_function(struct"), diff.index("DEFINE_WAIT_FUNC(a,"))


ON_QUEUE_HEAD = """
struct q {
	wait_queue_head_t wq;
	struct task_struct *task;
};
"""

ON_QUEUE = """
static int %(name)s(void *arg)
{
	struct q *q = arg;
	%(decl)s

	add_wait_queue(&q->wq, &wait);
	while (1) {
		/* pairs with the barrier in kick_%(name)s() */
		set_current_state(TASK_INTERRUPTIBLE);
		mutex_lock(&lock);
		if (work) {
			mutex_unlock(&lock);
			break;
		}
		mutex_unlock(&lock);
%(sleep)s
	}
	__set_current_state(TASK_RUNNING);
	remove_wait_queue(&q->wq, &wait);
	return 0;
}

void start_%(name)s(struct q *q)
{
	q->task = kthread_run(%(name)s, q, "q");
}

/*
 * Kick the thread.
 * Note: wake_up_process() performs any necessary memory-barriers for us.
 */
void kick_%(name)s(struct q *q)
{
	wake_up_process(q->task);
}
"""


class OnQueue(TreeRun):
	"""A loop already on a wait queue keeps it: fix_set_current_state.cocci's
	"body" pass rewrites the entry, the sleeps, the setters and the
	restore after the loop; the waker rule converts wake_up_process()."""

	def src(self, name, decl="DECLARE_WAITQUEUE(wait, current);", sleep="\t\tschedule();"):
		return ON_QUEUE % {"name": name, "decl": decl, "sleep": sleep}

	def test_shapes(self):
		src = HEAD + ON_QUEUE_HEAD + self.src("plain_q")
		src += self.src("init_q", decl="wait_queue_entry_t wait;\n\n\tinit_waitqueue_entry(&wait, current);")
		# a sleep that is no statement of its own: SmPL rewrites the call
		# where it stands
		src += self.src("cond_q", sleep="\t\tif (!work)\n\t\t\tschedule();")
		src += self.src("timed_q", sleep="\t\tif (!schedule_timeout(HZ))\n\t\t\twork = -1;")
		fix, diff = self.run_tree({"q.c": src})
		for func in ("plain_q", "init_q", "cond_q", "timed_q"):
			self.assertEqual(fix[func]["status"], "patch", (func, fix[func]["reason"]))
			self.assertIn("set_current_state() loop on &q->wq becomes a wait_woken() loop", fix[func]["reason"])
		self.assertEqual(diff.count("-\tDECLARE_WAITQUEUE(wait, current);\n+\tDEFINE_WAIT_FUNC(wait, "
					    "woken_wake_function);\n"), 3, diff)
		self.assertIn("-\twait_queue_entry_t wait;\n-\n-\tinit_waitqueue_entry(&wait, current);\n"
			      "+\tDEFINE_WAIT_FUNC(wait, woken_wake_function);\n \n \tadd_wait_queue(", diff)
		self.assertEqual(diff.count("+\t\twait_woken(&wait, TASK_INTERRUPTIBLE, MAX_SCHEDULE_TIMEOUT);"), 2, diff)
		# 86 columns on one line: spatch breaks it at an argument
		self.assertIn("+\t\t\twait_woken(&wait, TASK_INTERRUPTIBLE,\n+\t\t\t\t   MAX_SCHEDULE_TIMEOUT);", diff)
		self.assertIn("+\t\tif (!wait_woken(&wait, TASK_INTERRUPTIBLE, HZ))", diff)
		self.assertEqual(diff.count("-\t\tset_current_state(TASK_INTERRUPTIBLE);"), 4, diff)
		self.assertEqual(diff.count("-\t__set_current_state(TASK_RUNNING);"), 4, diff)
		self.assertEqual(diff.count("+\twake_up_interruptible(&q->wq);"), 4, diff)
		# the doc comment of the waker names the new call (hidp 5da8e47d849d)
		self.assertEqual(diff.count("- * Note: wake_up_process() performs any necessary memory-barriers for us.\n"
					    "+ * Note: wake_up_interruptible() performs any necessary memory-barriers "
					    "for us.\n"), 4, diff)
		# the comment above the setter stays
		self.assertNotIn("-\t\t/* pairs with", diff)
		self.assertNotIn("wake_up_process", diff.replace("-\twake_up_process(q->task);", "").replace(
			"- * Note: wake_up_process()", ""))

	def test_half_conversion_refused(self):
		"""The "body" pass must do every edit, or the unit is refused."""
		old = "\tDECLARE_WAITQUEUE(wait, current);\n\tfor (;;) {\n\t\tschedule();\n\t}\n" \
		      "\t__set_current_state(TASK_RUNNING);\n"
		spec = {"entry": "wait", "entry_decl": "declare", "sched": ["3:2"], "restored": True}
		good = "\tDEFINE_WAIT_FUNC(wait, woken_wake_function);\n\tfor (;;) {\n" \
		       "\t\twait_woken(&wait, TASK_INTERRUPTIBLE, MAX_SCHEDULE_TIMEOUT);\n\t}\n"
		set_current_state.check_on_queue(old, good, spec)
		for bad, what in ((good + "\t__set_current_state(TASK_RUNNING);\n", "the restore"),
				  (good.replace("DEFINE_WAIT_FUNC(wait, woken_wake_function)",
						"DECLARE_WAITQUEUE(wait, current)"), "the entry wait"),
				  (good.replace("wait_woken(&wait, TASK_INTERRUPTIBLE, MAX_SCHEDULE_TIMEOUT)",
						"schedule()"), "a schedule()")):
			with self.assertRaises(edits.Refuse) as cm:
				set_current_state.check_on_queue(old, bad, spec)
			self.assertIn(what, cm.exception.reason)


class SetterComments(unittest.TestCase):
	"""The comment above a removed setter stays, less what speaks of the
	setter (hidp 5da8e47d849d dropped its "Note: set_current_state()
	performs any necessary memory-barriers for us.")."""

	def kept(self, text):
		p = text.index("set_current_state(TASK_INTERRUPTIBLE)")
		lines = text.split("\n")
		keep = set_current_state.setter_comments(text, [("set_current_state", p, 0, 0, "TASK_INTERRUPTIBLE")])
		return [lines[i].strip() for i in keep]

	def test_paragraph_about_the_setter_goes(self):
		text = "\t\t/*\n\t\t * Woken two ways.\n\t\t *\n\t\t * Note: set_current_state() performs any\n" \
		       "\t\t * necessary memory-barriers for us.\n\t\t */\n\t\tset_current_state(TASK_INTERRUPTIBLE);\n"
		self.assertEqual(self.kept(text), ["/*", "* Woken two ways.", "*/"])

	def test_comment_all_about_the_setter_goes(self):
		text = "\t/* set_current_state() orders the test below */\n\tset_current_state(TASK_INTERRUPTIBLE);\n"
		self.assertEqual(self.kept(text), [])

	def test_other_comments_stay(self):
		text = "\t/* mb paired w/ kick() */\n\tset_current_state(TASK_INTERRUPTIBLE);\n"
		self.assertEqual(self.kept(text), ["/* mb paired w/ kick() */"])
		# the setter named outside the last paragraph: the comment is kept whole
		text = "\t/*\n\t * set_current_state() first.\n\t *\n\t * Then set_current_state() again.\n\t */\n" \
		       "\tset_current_state(TASK_INTERRUPTIBLE);\n"
		self.assertEqual(len(self.kept(text)), 5)


class OwnEdits(unittest.TestCase):
	def test_comment_kept_and_blank_after_brace_dropped(self):
		old = "\tfor (;;) {\n\t\t/* why */\n\t\tset_current_state(TASK_INTERRUPTIBLE);\n\n\t\tx();\n\t}\n" \
		      "\twhile (1) {\n\t\tset_current_state(TASK_INTERRUPTIBLE);\n\n\t\ty();\n\t}\n"
		new = "\tfor (;;) {\n\n\t\tx();\n\t}\n\twhile (1) {\n\n\t\ty();\n\t}\n"
		got = edits.apply_edits(old, set_current_state.own_edits(old, new, [1]))
		self.assertEqual(got, "\tfor (;;) {\n\t\t/* why */\n\n\t\tx();\n\t}\n\twhile (1) {\n\t\ty();\n\t}\n")


if __name__ == "__main__":
	unittest.main()
