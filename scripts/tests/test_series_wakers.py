# SPDX-License-Identifier: GPL-2.0-only
"""The wakers a changelog lists (series.changelog_wakers.waker_items):
every listed file:line must hold a wake_up*() on the queue of the patch's
wait."""

import glob
import os
import re
import shutil
import tempfile
import unittest

from nestsleep import TOP, cache_dir
from nestsleep.series import changelog, changelog_missed, changelog_wakers, subjects

WAKE_CALL = re.compile(r"\b(?:__)?wake_up\w*\s*\(")
IDENT = r"[A-Za-z_]\w*"
# the calls that name the queue of a wait in a diff
WAIT_CALL = re.compile(r"^[-+ ].*?\b(?:add_wait_queue\w*|prepare_to_wait\w*|wait_event\w*)\s*\(\s*([^,]+),", re.M)
# the wakeups a missed wakeup's fix changes name its queue too
DIFF_WAKE = re.compile(r"^[-+].*?\b(?:__)?wake_up\w*\s*\(\s*([^,)]+)[,)]", re.M)


def member(expr):
	"""The last member name of a queue expression: '&rdev->dev_wait' ->
	'dev_wait', '&g_wq' -> 'g_wq', '&d->wq[i]' -> 'wq'."""
	names = re.findall(IDENT, re.sub(r"\[[^\]]*\]", "", expr or ""))
	return names[-1] if names else ""


def first_arg(text, open_paren):
	depth, i = 0, open_paren
	while i < len(text):
		c = text[i]
		if c == "(":
			depth += 1
		elif c == ")":
			depth -= 1
			if depth == 0:
				return text[open_paren + 1:i]
		elif c == "," and depth == 1:
			return text[open_paren + 1:i]
		i += 1
	return None


def check_listed_wakers(patch_text, kdir):
	"""(listed, problems): each waker the changelog of patch_text lists as
	'(file:line)', and what is wrong with it.  The line must hold a
	wake_up*()/__wake_up*() call whose first argument names a queue member
	of the patch's waits (the queues its diff adds, or removes, a wait on)."""
	body, _, diff = patch_text.partition("\n---\n")
	queues = set(member(q) for q in WAIT_CALL.findall(diff) + DIFF_WAKE.findall(diff))
	listed, problems = [], []
	for rel, ln in re.findall(r"\(([\w./+-]+\.[ch]):(\d+)\)", re.sub(r"\s+", " ", body)):
		listed.append("%s:%s" % (rel, ln))
		try:
			with open(os.path.join(kdir, rel), errors="replace") as f:
				lines = f.read().split("\n")
		except OSError as e:
			problems.append("%s:%s: %s" % (rel, ln, e))
			continue
		n = int(ln)
		text = "\n".join(lines[n - 1:n + 3])
		mm = WAKE_CALL.search(lines[n - 1]) if 0 < n <= len(lines) else None
		if not mm:
			problems.append("%s:%s: no wake_up*() call on the line" % (rel, ln))
			continue
		arg = first_arg(text, mm.end() - 1)
		if member(arg) not in queues:
			problems.append("%s:%s: %s wakes %s, not the patch's queue (%s)" % (
				rel, ln, mm.group(0).rstrip("( "), arg, ", ".join(sorted(queues)) or "none found"))
	return listed, problems


SOURCE = """// SPDX-License-Identifier: GPL-2.0
#include <linux/wait.h>

struct foo_dev {
	wait_queue_head_t wq;
	wait_queue_head_t other_wq;
	int users;
	struct mutex lock;
};

static int foo_users(struct foo_dev *dev)
{
	int n;

	mutex_lock(&dev->lock);
	n = dev->users;
	mutex_unlock(&dev->lock);
	return n;
}

void foo_remove(struct foo_dev *dev)
{
	wait_event(dev->wq, foo_users(dev) == 0);
}

void foo_release(struct foo_dev *dev)
{
	dev->users--;
	wake_up(&dev->wq);
}

void foo_irq(struct foo_dev *dev)
{
	wake_up_interruptible(&dev->wq);
}

void foo_other(struct foo_dev *dev)
{
	wake_up(&dev->other_wq);
}

void foo_kick(struct foo_dev *dev)
{
	wake_up_all(
		&dev->wq);
}

void foo_many(struct foo_dev *dev)
{
	wake_up_nr(&dev->wq, 2);
	wake_up_locked(&dev->wq);
	wake_up_sync(&dev->wq);
}
"""

REL = "drivers/foo/core.c"
OLD = ("wakers: no waker to convert was found: neither foo_remove() nor its callers up to 3 levels store current "
       "or a kthread_run()/kthread_create() value or hand it to a call that runs it as a thread (a thread that "
       "reaches it through a function pointer is not followed; a wake_up_process() of such a thread makes the "
       "loop test its condition again, as before). The wake_up*() calls on dev->wq wake wait_woken() too; "
       "whether one runs for every change of the condition while it waits is not checked")
DIFF = """diff --git a/drivers/foo/core.c b/drivers/foo/core.c
--- a/drivers/foo/core.c
+++ b/drivers/foo/core.c
@@ -22,3 +22,9 @@
 void foo_remove(struct foo_dev *dev)
 {
-	wait_event(dev->wq, foo_users(dev) == 0);
+	DEFINE_WAIT_FUNC(wait, woken_wake_function);
+
+	add_wait_queue(&dev->wq, &wait);
+	while (!(foo_users(dev) == 0))
+		wait_woken(&wait, TASK_UNINTERRUPTIBLE, MAX_SCHEDULE_TIMEOUT);
+	remove_wait_queue(&dev->wq, &wait);
 }
"""


def line_of(text):
	return SOURCE.split("\n").index(text) + 1


def at(text):
	return "%s:%d" % (REL, line_of(text))


class WakerChangelogTest(unittest.TestCase):
	@classmethod
	def setUpClass(cls):
		cls.kdir = tempfile.mkdtemp(prefix="nestsleep-wakelog-test-")
		os.makedirs(os.path.join(cls.kdir, "drivers", "foo"))
		with open(os.path.join(cls.kdir, REL), "w") as f:
			f.write(SOURCE)
		with open(os.path.join(cls.kdir, "Makefile"), "w") as f:
			f.write("obj-y += drivers/foo/\n")

	@classmethod
	def tearDownClass(cls):
		shutil.rmtree(cls.kdir)

	def finding(self, wakers, writers=(), polls=None, reason=None):
		return {
			"file": REL, "line": line_of("\twait_event(dev->wq, foo_users(dev) == 0);"), "function": "foo_remove",
			"primitive": "wait_event", "shape": "wait_event", "role": "cond", "call": "mutex_lock",
			"chain": ["foo_users", "mutex_lock"], "effect": "silent", "fingerprint": "fp-foo",
			"confidence": "high",
			"fix": {"status": "patch", "kind": "wait_event", "confidence": "high", "caveats": [OLD],
				"reason": reason or ("wait_event() becomes an add_wait_queue()/wait_woken()/remove_wait_queue() "
						     "loop: the condition now runs in TASK_RUNNING"),
				"unit": REL + ":foo_remove", "files": [REL], "wakers": [], "diff": DIFF},
			"wakers": {"queue": "dev->wq", "key": "member:foo_dev.wq", "state": "TASK_UNINTERRUPTIBLE",
				   "wakers": list(wakers), "inputs": ["member:foo_dev.users"], "writers": list(writers),
				   "polls": polls},
		}

	def waker(self, line, function, call, wakes):
		return {"at": at(line), "function": function, "call": call, "wakes": wakes, "guard": ""}

	def all_wakers(self):
		return [self.waker("\twake_up(&dev->wq);", "foo_release", "wake_up", True),
			self.waker("\twake_up_interruptible(&dev->wq);", "foo_irq", "wake_up_interruptible", False),
			# made up: the record says it wakes dev->wq, its line wakes another queue
			self.waker("\twake_up(&dev->other_wq);", "foo_other", "wake_up", True),
			self.waker("\twake_up_all(", "foo_kick", "wake_up_all", True)]

	def writer(self):
		return {"at": at("\tdev->users--;"), "function": "foo_release", "write": "dev->users--;",
			"input": "member:foo_dev.users", "makes_true": True, "woken_by": [at("\twake_up(&dev->wq);")],
			"right_mode": True}

	def changelog(self, f):
		body = changelog.changelog(self.kdir, [("foo_remove", [f])], changelog.waiters(), {}, "", [])
		return body, "Subject: [PATCH] foo\n\n" + body + "\n---\n" + f["fix"]["diff"]

	def flat(self, text):
		return re.sub(r"\s+", " ", text)

	def test_wakers_listed_with_call_function_line_and_input(self):
		body, patch = self.changelog(self.finding(self.all_wakers(), [self.writer()]))
		# 'include': the search may miss a waker (a queue reached through
		# another struct: drbd's wake_up_all_devices()), so the list is
		# not said to be all of them
		self.assertIn("Wakers: the wakeups of the wait include wake_up(&dev->wq) in foo_release() (%s) when users "
			      "drops, and wake_up_all(&dev->wq) in foo_kick() (%s); these wake wait_woken() too." % (
				      at("\twake_up(&dev->wq);"), at("\twake_up_all(")), self.flat(body))
		# the made-up waker is not listed, the old sentence is gone
		self.assertNotIn("foo_other", body)
		self.assertNotIn("is not checked", self.flat(body))
		# the direct-waker part of the fixer's caveat stays
		# the tool's own search result goes below '---', not in the message
		self.assertNotIn("no waker to convert was found", self.flat(body))
		self.assertIn("Wakers: no waker to convert was found", " ".join(
			changelog.tool_notes(self.kdir, [("foo_remove", [self.finding(self.all_wakers())])])))
		listed, problems = check_listed_wakers(patch, self.kdir)
		self.assertEqual(problems, [])
		self.assertEqual(listed, [at("\twake_up(&dev->wq);"), at("\twake_up_all(")])

	def test_wakers_at_most_three_then_more(self):
		ws = self.all_wakers() + [self.waker("\t%s(&dev->wq%s);" % (c, a), "foo_many", c, True)
					  for c, a in (("wake_up_nr", ", 2"), ("wake_up_locked", ""), ("wake_up_sync", ""))]
		body, patch = self.changelog(self.finding(ws))
		# the search may not find every waker: no count is claimed
		self.assertIn("Wakers: the wakeups of the wait include", self.flat(body))
		self.assertIn("wake_up_nr(&dev->wq, 2) in foo_many() (%s), among others; these wake wait_woken() too." %
			      at("\twake_up_nr(&dev->wq, 2);"), self.flat(body))
		self.assertNotIn("more", self.flat(body))
		self.assertEqual(check_listed_wakers(patch, self.kdir)[1], [])

	def test_when_only_for_writes_that_end_the_wait(self):
		"""'when users rises' was false (acpi_dbg: the wakeup that follows
		usages++ is for another change): a writer is named only when its
		write can make the condition true."""
		rises = dict(self.writer(), write="dev->users++;", makes_true=False)
		body, _ = self.changelog(self.finding(self.all_wakers()[:1], [self.writer(), rises]))
		self.assertIn("in foo_release() (%s) when users drops;" % at("\twake_up(&dev->wq);"), self.flat(body))
		self.assertNotIn("rises", body)

	def test_two_waits_of_one_function_one_item(self):
		"""acpi_aml_release() has two waits on one queue: one waker item
		for both, not one each (a round-2 reviewer's nit)."""
		first = self.finding(self.all_wakers()[:1])
		second = dict(self.finding(self.all_wakers(), [self.writer()]), line=first["line"] + 1)
		body = self.flat(changelog.changelog(self.kdir, [("foo_remove", [first, second])], changelog.waiters(), {}, "", []))
		self.assertEqual(body.count("Wakers:"), 1, body)
		self.assertIn("Wakers: the wakeups of its two waits include wake_up(&dev->wq) in foo_release() (%s) when "
			      "users drops, and wake_up_all(&dev->wq) in foo_kick() (%s); these wake wait_woken() too." % (
				      at("\twake_up(&dev->wq);"), at("\twake_up_all(")), body)

	def test_no_waker_wakes_the_state(self):
		ws = [self.waker("\twake_up_interruptible(&dev->wq);", "foo_irq", "wake_up_interruptible", False)]
		body, patch = self.changelog(self.finding(ws, polls={"via": ["foo_users"], "reason": "x"}))
		# the search's result, not a claim that nothing wakes the queue (a
		# round-4 reviewer read the vsock sentence so: its socket callbacks
		# wake sk_sleep(sk) under another name)
		self.assertIn("Wakers: no wake_up*() naming dev->wq that wakes TASK_UNINTERRUPTIBLE was found (1 on it "
			      "wakes other states only); the queue may be woken under another name, and each wakeup of "
			      "it that woke the old wait wakes wait_woken() too. The wait polls today (x).",
			      self.flat(body))
		self.assertEqual(check_listed_wakers(patch, self.kdir), ([], []))

	def test_poll_rule_result(self):
		rel = at("\twake_up(&dev->wq);")
		reason = ("wait_event() becomes a loop; the wait polls today (foo_users() takes a mutex on every pass); "
			  "its waker foo_release() (%s) wakes dev->wq for the whole wait" % rel)
		body, patch = self.changelog(self.finding(self.all_wakers()[:1], polls={"via": ["foo_users"], "reason":
			"foo_users() takes a mutex on every pass"}, reason=reason))
		flat = self.flat(body)
		self.assertIn("The wait polls today (foo_users() takes a mutex on every pass); the rewrite keeps its "
			      "waker foo_release() (%s), which wakes dev->wq for the whole wait." % rel, flat)
		# said once, in the wakers item
		self.assertEqual(flat.count("polls today"), 1, flat)
		self.assertEqual(check_listed_wakers(patch, self.kdir)[1], [])

	def test_old_sentence_goes_callers_not_followed_stay(self):
		c = OLD + "; callers of foo_probe() not followed (more than 40)"
		self.assertEqual(changelog_wakers.without_old_waker_sentence(c), OLD.split(" The wake_up*()")[0] +
				 " Callers of foo_probe() not followed (more than 40)")
		# without a wakers record the fixer's sentence stays, below '---'
		f = self.finding([])
		del f["wakers"]
		body, _ = self.changelog(f)
		self.assertNotIn("is not checked", self.flat(body))
		self.assertIn("is not checked", " ".join(changelog.tool_notes(self.kdir, [("foo_remove", [f])])))

	def test_check_listed_wakers_catches_another_queue(self):
		patch = "Wakers: wake_up(&dev->other_wq) in foo_other() (%s).\n---\n%s" % (
			at("\twake_up(&dev->other_wq);"), DIFF)
		listed, problems = check_listed_wakers(patch, self.kdir)
		self.assertEqual(len(problems), 1, problems)
		self.assertIn("other_wq", problems[0])

	def test_committed_series_list_real_wakers(self):
		trees = {"linux-6.1.192": "linux-source-6.1", "linux-6.12.118": "linux-source-6.12"}
		for out, tree in trees.items():
			kdir = os.path.join(cache_dir(), tree)
			for p in sorted(glob.glob(os.path.join(TOP, "reports", "fixes", out, "*", "*.patch"))):
				if os.path.basename(p).startswith("0000-"):
					continue
				with open(p) as f:
					text = f.read()
				listed, problems = check_listed_wakers(text, kdir)
				self.assertEqual(problems, [], p)
				# a rewritten wait names at least one wake_up*() of its
				# queue, each checked above against the tree's line
				# (or its waker is converted in the patch itself: an own
				# queue's wake_up*() added by the diff)
				diff = text.partition("\n---\n")[2]
				if re.search(r"^\+.*\bwait_woken\(", diff, re.M) and not re.search(
						r"^\+.*\bwake_up\w*\(", diff, re.M):
					self.assertTrue(listed, "%s: rewritten wait, no waker listed" % p)


MISSED_SOURCE = """// SPDX-License-Identifier: GPL-2.0
#include <linux/wait.h>

static struct bar_io {
	wait_queue_head_t wait;
	unsigned long flags;
} bar_io;

static bool bar_busy(void)
{
	return bar_io.flags != 0;
}

void bar_release(void)
{
	wait_event(bar_io.wait, !bar_busy());
}

static void bar_unlock(unsigned long flag, bool wakeup)
{
	bar_io.flags &= ~flag;
	if (wakeup)
		wake_up_interruptible(&bar_io.wait);
}

void bar_exit(void)
{
	bar_io.flags = 0;
	wake_up(&bar_io.wait);
}
"""
MREL = "drivers/bar/bar.c"
MDIFF = """diff --git a/drivers/bar/bar.c b/drivers/bar/bar.c
--- a/drivers/bar/bar.c
+++ b/drivers/bar/bar.c
@@ -21,6 +21,5 @@ static void bar_unlock(unsigned long flag, bool wakeup)
 {
 	bar_io.flags &= ~flag;
-	if (wakeup)
-		wake_up_interruptible(&bar_io.wait);
+	wake_up(&bar_io.wait);
 }
"""


def mat(text):
	return "%s:%d" % (MREL, MISSED_SOURCE.split("\n").index(text) + 1)


class MissedChangelogTest(unittest.TestCase):
	"""A missed wakeup's patch says what the code shows: the wait and its
	state, the write that ends it, the lines of the wakeup that does not
	wake it, and the other wakeups of the queue, with file:line."""

	@classmethod
	def setUpClass(cls):
		cls.kdir = tempfile.mkdtemp(prefix="nestsleep-missedlog-test-")
		os.makedirs(os.path.join(cls.kdir, "drivers", "bar"))
		with open(os.path.join(cls.kdir, MREL), "w") as f:
			f.write(MISSED_SOURCE)

	@classmethod
	def tearDownClass(cls):
		shutil.rmtree(cls.kdir)

	def finding(self, others):
		w = mat("\tbar_io.flags &= ~flag;")
		return {
			"file": MREL, "line": int(w.split(":")[1]), "function": "bar_unlock", "kind": "missed_wakeup",
			"missed": "wrong_mode", "primitive": "wait_event", "shape": "wait_event", "role": "",
			"call": "wake_up_interruptible", "chain": ["bar_unlock", "wake_up_interruptible"],
			"fingerprint": "fp-bar", "confidence": "medium", "blocks": False,
			"wait_at": mat("\twait_event(bar_io.wait, !bar_busy());"),
			"message": "WARNING: missed wakeup: bar_unlock() clears bar_io.flags, which ends the wait_event() in "
				   "bar_release() on line 16, but wakes it only with wake_up_interruptible(), which does not "
				   "wake TASK_UNINTERRUPTIBLE [confidence: medium]",
			"wait": {"function": "bar_release", "primitive": "wait_event", "state": "TASK_UNINTERRUPTIBLE",
				 "queue": "bar_io.wait", "waker_at": mat("\t\twake_up_interruptible(&bar_io.wait);"),
				 "others": others},
			"fix": {"status": "patch", "kind": "missed_wakeup", "confidence": "medium",
				"reason": "wake_up_interruptible(&bar_io.wait) -> wake_up(&bar_io.wait), on every path: it ran only if "
					  "wakeup: a caller passes it false",
				"caveats": ["every waiter of bar_io.wait tests its condition again when woken, so a wakeup "
					    "that finds the condition still false costs one more test"],
				"unit": MREL + ":bar_unlock", "files": [MREL], "wakers": [], "diff": MDIFF},
		}

	def body(self, f):
		return changelog.changelog(self.kdir, [("bar_unlock", [f])], changelog.waiters(), {}, "", [])

	def test_wrong_mode_changelog(self):
		exit_at = mat("\twake_up(&bar_io.wait);")
		body = self.body(self.finding([{"at": exit_at, "function": "bar_exit", "call": "wake_up"}]))
		flat = re.sub(r"\s+", " ", body)
		# the wait's condition, not its code: an earlier patch may rewrite it
		self.assertIn("bar_release() waits in TASK_UNINTERRUPTIBLE on bar_io.wait until !bar_busy() holds.",
			      flat)
		self.assertNotIn("wait_event(bar_io.wait", body)
		self.assertIn("bar_unlock() clears bar_io.flags, which ends that wait, but wakes it only with "
			      "wake_up_interruptible(), which does not wake TASK_UNINTERRUPTIBLE:\n\n"
			      "\tbar_io.flags &= ~flag;\n\tif (wakeup)\n\t\twake_up_interruptible(&bar_io.wait);\n",
			      re.sub(r"(?<=\S)\n(?=\S)", " ", body))
		self.assertIn("The waiter is not woken when bar_unlock() clears it: it sleeps on until another wakeup "
			      "of bar_io.wait that wakes TASK_UNINTERRUPTIBLE, such as wake_up(&bar_io.wait) in "
			      "bar_exit() (%s)." % exit_at, flat)
		self.assertIn("wake_up_interruptible(&bar_io.wait) -> wake_up(&bar_io.wait)", flat)
		# no nested-sleep text
		self.assertNotIn("nested", flat)
		self.assertNotIn("wait_woken", flat)
		self.assertNotIn("extra pass", flat)
		# the listed waker is a wakeup of the patch's queue
		self.assertEqual(check_listed_wakers(body + "\n---\n" + MDIFF, self.kdir), ([exit_at], []))

	def test_wait_names_the_later_missed_wakeup_patch(self):
		"""The patch of a wait whose missed wakeup a later patch of the
		series fixes says so, naming the wait by its condition and the
		later patch by its subject; the later patch and a patch after
		it get nothing."""
		m = self.finding([])
		wait = {"file": MREL, "line": int(m["wait_at"].split(":")[1]), "function": "bar_release"}
		subjects = ["bar: fix nested sleep in bar_release()", "bar: fix missed wakeup in bar_unlock()", "bar: x"]
		later = changelog_missed.missed_later(self.kdir, [[("bar_release", [wait])], [("bar_unlock", [m])], []], subjects)
		what = ("bar_unlock() clears bar_io.flags, which ends the !bar_busy() wait, but wakes it only with "
			"wake_up_interruptible(), which does not wake TASK_UNINTERRUPTIBLE")
		self.assertEqual(later, [{m["wait_at"]: (what, subjects[1])}, {}, {}])
		wait["fix"] = {"kind": "wait_event"}
		self.assertEqual(changelog_wakers.waker_items(self.kdir, [wait], later[0]),
				 ["%s; \"%s\", later in this series, fixes that." % (what, subjects[1])])
		self.assertEqual(changelog_wakers.waker_items(self.kdir, [wait], later[1]), [])

	def test_no_other_waker(self):
		flat = re.sub(r"\s+", " ", self.body(self.finding([])))
		self.assertIn("no other wakeup of bar_io.wait that wakes TASK_UNINTERRUPTIBLE was found", flat)

	def test_subject(self):
		self.assertEqual(subjects.subject_core("bar:", [("bar_unlock", [self.finding([])])]),
				 "bar: fix missed wakeup in bar_unlock()")


if __name__ == "__main__":
	unittest.main()
