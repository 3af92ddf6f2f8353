# SPDX-License-Identifier: GPL-2.0-only
"""Unit tests for nestsleep.analysis.wakecov: the wake coverage record of a
reported wait (queue key, wakers and their modes, inputs, writers and the
wakers that follow them) on a small tree written here."""

import os
import shutil
import tempfile
import unittest

from nestsleep.analysis import wakecov
from nestsleep.analysis.scan import Tree
from nestsleep.cache import Cache
from nestsleep.knowledge import Knowledge

CORE_H = """struct wc_dev {
	wait_queue_head_t wq;
	int count;
	unsigned long flags;
	struct mutex lock;
};
void wc_stop(struct wc_dev *d);
"""

CORE_C = """#include "core.h"
#define WC_BUSY 0x4
static struct wc_glob { wait_queue_head_t wait; unsigned long flags; } glob;

static int wc_count(struct wc_dev *d)
{
	int n;

	mutex_lock(&d->lock);
	n = d->count;
	mutex_unlock(&d->lock);
	return n;
}

void wc_unregister(struct wc_dev *d)
{
	wait_event_interruptible(d->wq, !wc_count(d));
}

void wc_release(void)
{
	wait_event(glob.wait, !(glob.flags & WC_BUSY));
}

static void wc_unbusy(bool wake)
{
	glob.flags &= ~WC_BUSY;
	if (wake)
		wake_up_interruptible(&glob.wait);
}

void wc_done(void)
{
	wc_unbusy(false);
	wake_up_all(&glob.wait);
}
"""

OTHER_C = """#include "core.h"
void wc_stop(struct wc_dev *d)
{
	d->count--;
}

void wc_close(struct wc_dev *d)
{
	wc_stop(d);
	wake_up_interruptible(&d->wq);
}

void wc_open(struct wc_dev *d)
{
	d->count++;
	__wake_up(&d->wq, TASK_UNINTERRUPTIBLE, 1, NULL);
}

void wc_other(struct other_dev *d)
{
	d->count--;
}
"""


def finding(line, func, prim):
	return {"file": "core.c", "line": line, "function": func, "shape": "wait_event", "primitive": prim}


class WakeCovTest(unittest.TestCase):
	@classmethod
	def setUpClass(cls):
		cls.tmp = tempfile.mkdtemp(prefix="wakecov-")
		src = os.path.join(cls.tmp, "src")
		os.makedirs(src)
		for name, text in (("core.h", CORE_H), ("core.c", CORE_C), ("other.c", OTHER_C)):
			with open(os.path.join(src, name), "w") as f:
				f.write(text)
		cache = Cache(os.path.join(cls.tmp, "cache"))
		cls.tree = Tree(src, cache, 1)
		cls.findings = [finding(17, "wc_unregister", "wait_event_interruptible"),
				finding(22, "wc_release", "wait_event")]
		cls.missed = wakecov.wake_coverage(cls.findings, cls.tree, Knowledge(), cache)

	@classmethod
	def tearDownClass(cls):
		shutil.rmtree(cls.tmp, ignore_errors=True)

	def test_member_queue(self):
		rec = self.findings[0]["wakers"]
		self.assertEqual(rec["queue"], "d->wq")
		self.assertEqual(rec["key"], "member:wc_dev.wq")
		self.assertEqual(rec["state"], "TASK_INTERRUPTIBLE")
		self.assertEqual(rec["inputs"], ["member:wc_dev.count"])
		self.assertIsNone(rec["polls"])
		# wake_up_interruptible() wakes TASK_INTERRUPTIBLE, __wake_up() with
		# TASK_UNINTERRUPTIBLE does not
		self.assertEqual([(w["at"], w["call"], w["wakes"]) for w in rec["wakers"]],
				 [("other.c:10", "wake_up_interruptible", True), ("other.c:16", "__wake_up", False)])

	def test_member_writers(self):
		rec = self.findings[0]["wakers"]
		got = [(w["at"], w["function"], w["makes_true"], w["woken_by"], w["right_mode"]) for w in rec["writers"]]
		# wc_other()'s d is another struct: not a writer; the caller wakes wc_stop()'s write
		self.assertEqual(got, [("other.c:4", "wc_stop", True, ["other.c:10"], True),
				       ("other.c:15", "wc_open", False, ["other.c:16"], False)])

	def test_global_queue_and_guard(self):
		rec = self.findings[1]["wakers"]
		self.assertEqual(rec["key"], "global:glob.wait")
		self.assertEqual(rec["state"], "TASK_UNINTERRUPTIBLE")
		self.assertEqual(rec["inputs"], ["global:glob.flags"])
		self.assertEqual([(w["at"], w["call"], w["wakes"], w["guard"]) for w in rec["wakers"]],
				 [("core.c:29", "wake_up_interruptible", False, "wake"),
				  ("core.c:35", "wake_up_all", True, "")])
		self.assertEqual([(w["at"], w["write"], w["makes_true"], w["woken_by"], w["right_mode"])
				  for w in rec["writers"]],
				 [("core.c:27", "glob.flags &= ~WC_BUSY;", True, ["core.c:29", "core.c:35"], True)])

	def test_no_missed_wakeup_when_a_caller_wakes_right(self):
		self.assertEqual(self.missed, [])


class PolarityTest(unittest.TestCase):
	"""How a helper's value is tested at the call decides which writes end
	the wait (call_negation())."""

	TEXT = """struct pd { int count; };
static int pd_count(struct pd *d)
{
	int n;

	n = d->count;
	return n;
}
void a(struct pd *d) { wait_event(d->q, pd_count(d) == 0); }
void b(struct pd *d) { wait_event(d->q, (n = pd_count(d)) != 0); }
void c(struct pd *d) { wait_event(d->q, pd_count(d) > 2); }
void e(struct pd *d) { wait_event(d->q, !pd_count(d)); }
"""

	def preds(self, func):
		fv = wakecov.FileView("x.c", self.TEXT)
		wc = wakecov.WakeCov.__new__(wakecov.WakeCov)
		fn = fv.funcs[func]
		lp = next(i for i in range(fn["lo"], fn["hi"]) if fv.toks[i][1] == "wait_event") + 1
		comma = next(i for i in range(lp, fn["hi"]) if fv.toks[i][1] == ",")
		rp = wakecov._match_close(fv.toks, lp, "(", ")")
		ins = wc.inputs(fv, fn, comma + 1, rp, "member:pd.q")
		return ins["member:pd.count"]["preds"]

	def test_polarity(self):
		self.assertEqual(self.preds("a"), {("zero", None, 0)})
		self.assertEqual(self.preds("e"), {("zero", None, 0)})
		self.assertEqual(self.preds("b"), {("zero", None, 1)})
		self.assertEqual(self.preds("c"), {None})


def one_file_record(test, name, text, line, func, missed=None):
	"""The wakers record of the wait_event() at line of func, in a tree
	of one file name holding text; the missed wakeup findings are added
	to the list missed when one is given."""
	tmp = tempfile.mkdtemp(prefix="wakecov-one-")
	test.addCleanup(shutil.rmtree, tmp, True)
	src = os.path.join(tmp, "src")
	os.makedirs(src)
	with open(os.path.join(src, name), "w") as f:
		f.write(text)
	cache = Cache(os.path.join(tmp, "cache"))
	fs = [{"file": name, "line": line, "function": func, "shape": "wait_event", "primitive": "wait_event"}]
	got = wakecov.wake_coverage(fs, Tree(src, cache, 1), Knowledge(), cache)
	if missed is not None:
		missed += got
	return fs[0]["wakers"]


class PollsRecordTest(unittest.TestCase):
	"""findings.json: a wait whose condition reads xenstore on every pass
	carries wakers.polls (analysis/polls.py); one whose condition only
	takes a mutex does not."""

	def test_polls_in_the_record(self):
		from nestsleep import cache_dir
		from nestsleep.analysis import pipeline
		d = tempfile.mkdtemp(prefix="nestsleep-polls-")
		self.addCleanup(shutil.rmtree, d, True)
		with open(os.path.join(d, "p.c"), "w") as f:
			f.write("""struct mutex { long owner; };
struct xenbus_device { const char *otherend; };
struct pd { struct xenbus_device *xb; wait_queue_head_t wq; struct mutex lock; int n; };

static struct mutex xs_lock;

/* as xs_talkv(): the request waits for xenstored's reply */
static int xenbus_read_driver_state(const char *path)
{
	int state;

	mutex_lock(&xs_lock);
	state = path[0];
	mutex_unlock(&xs_lock);
	return state;
}

static int pd_count(struct pd *p)
{
	int n;

	mutex_lock(&p->lock);
	n = p->n;
	mutex_unlock(&p->lock);
	return n;
}

void pd_wait_state(struct pd *p)
{
	wait_event(p->wq, xenbus_read_driver_state(p->xb->otherend) == XenbusStateConnected);
}

void pd_wait_count(struct pd *p)
{
	wait_event(p->wq, pd_count(p) == 0);
}
""")
		res = pipeline.check(pipeline.Options(kdir=d, mode="report", jobs=1,
						      cache=os.path.join(cache_dir(), "test-cache")))
		polls = {f["function"]: (f.get("wakers") or {}).get("polls") for f in res.findings
			 if f["kind"] == "nested_sleep"}
		self.assertEqual(set(polls), {"pd_wait_state", "pd_wait_count"})
		self.assertIsNone(polls["pd_wait_count"])
		self.assertEqual(polls["pd_wait_state"]["via"][-1], "xenbus_read_driver_state")
		self.assertIn("xenbus_read_driver_state()", polls["pd_wait_state"]["reason"])


class MacroGlobalQueueTest(unittest.TestCase):
	"""A queue defined at file scope by a macro, 'static
	DECLARE_WAIT_QUEUE_HEAD(q);' (include/linux/wait.h), is a global:
	its wake_up*() calls are its wakers."""

	def test_declare_wait_queue_head(self):
		rec = one_file_record(self, "m.c", """static DECLARE_WAIT_QUEUE_HEAD(mq_wq);
static int mq_state;

void mq_wait(void)
{
	wait_event(mq_wq, mq_state == 4);
}

void mq_changed(int s)
{
	mq_state = s;
	wake_up_all(&mq_wq);
}
""", 6, "mq_wait")
		self.assertEqual(rec["key"], "global:mq_wq")
		self.assertEqual([(w["at"], w["function"], w["call"], w["wakes"]) for w in rec["wakers"]],
				 [("m.c:12", "mq_changed", "wake_up_all", True)])


class PlainGlobalInputTest(unittest.TestCase):
	"""A condition on a plain global ('mg_users == 0') finds its writers."""

	def test_plain_global_writer(self):
		rec = one_file_record(self, "g.c", """static DECLARE_WAIT_QUEUE_HEAD(mg_wq);
static int mg_users;

void mg_wait(void)
{
	wait_event(mg_wq, mg_users == 0);
}

void mg_put(void)
{
	mg_users--;
}
""", 6, "mg_wait")
		self.assertEqual(rec["inputs"], ["global:mg_users"])
		self.assertEqual([(w["at"], w["function"], w["makes_true"]) for w in rec["writers"]],
				 [("g.c:11", "mg_put", True)])


class DirectWakerTest(unittest.TestCase):
	"""A writer followed by a direct wakeup of a task (wake_up_process(),
	wake_up_state(), wake_q_add(): sleep_info.json tasks.wakers) may wake
	the waiter without its queue: no missed wakeup is claimed for it, and
	the record names the call.  A writer with no wakeup at all is still
	an unwoken writer."""

	def test_direct_wakeup_is_not_missed(self):
		missed = []
		rec = one_file_record(self, "d.c", """static DECLARE_WAIT_QUEUE_HEAD(dw_wq);
static int dw_events;
static struct task_struct *dw_task;

void dw_wait(void)
{
	wait_event(dw_wq, dw_events != 0);
}

void dw_kick(void)
{
	dw_events++;
	wake_up_process(dw_task);
}

void dw_kick_silently(void)
{
	dw_events++;
}
""", 7, "dw_wait", missed)
		self.assertEqual([(w["at"], w["function"], w["makes_true"], w["woken_by"], w["direct"])
				  for w in rec["writers"]],
				 [("d.c:12", "dw_kick", True, [], ["d.c:13"]),
				  ("d.c:18", "dw_kick_silently", True, [], [])])
		self.assertEqual([(m["function"], m["line"]) for m in missed], [("dw_kick_silently", 18)])


class SetCurrentStateQueueTest(unittest.TestCase):
	"""An open-coded set_current_state() loop on a queue of its own
	(add_wait_queue() before the state is set: via-pmu's pmu_read()) gets
	the wakers of that queue; its condition is the loop's, not read."""

	def test_queue_from_add_wait_queue(self):
		tmp = tempfile.mkdtemp(prefix="wakecov-scs-")
		self.addCleanup(shutil.rmtree, tmp, True)
		src = os.path.join(tmp, "src")
		os.makedirs(src)
		with open(os.path.join(src, "p.c"), "w") as f:
			f.write("""struct pp { wait_queue_head_t wait; int get, put; };

int pp_read(struct pp *pp)
{
	DECLARE_WAITQUEUE(wait, current);

	add_wait_queue(&pp->wait, &wait);
	set_current_state(TASK_INTERRUPTIBLE);
	for (;;) {
		if (pp->get != pp->put)
			break;
		schedule();
	}
	__set_current_state(TASK_RUNNING);
	remove_wait_queue(&pp->wait, &wait);
	return 0;
}

void pp_intr(struct pp *pp)
{
	pp->put++;
	wake_up_interruptible(&pp->wait);
}
""")
		cache = Cache(os.path.join(tmp, "cache"))
		fs = [{"file": "p.c", "line": 8, "function": "pp_read", "shape": "set_current_state",
		       "primitive": "set_current_state"}]
		wakecov.wake_coverage(fs, Tree(src, cache, 1), Knowledge(), cache)
		rec = fs[0].get("wakers")
		self.assertIsNotNone(rec)
		self.assertEqual((rec["queue"], rec["key"], rec["state"]), ("&pp->wait", "member:pp.wait",
									      "TASK_INTERRUPTIBLE"))
		self.assertEqual([(w["at"], w["call"], w["wakes"]) for w in rec["wakers"]],
				 [("p.c:22", "wake_up_interruptible", True)])
		self.assertEqual(rec["inputs"], [])


if __name__ == "__main__":
	unittest.main()
