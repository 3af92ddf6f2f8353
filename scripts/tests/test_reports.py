# SPDX-License-Identifier: GPL-2.0-only
"""Tests for nestsleep.triage.reports (make triage): report generation on a
fixture tree, the SARIF schema check, baseline diffing and labels."""

import json
import os
import shutil
import subprocess
import tempfile
import unittest

from nestsleep import TOP, cache_dir
from nestsleep.triage import reports as triage

SCHEMA = os.path.join(TOP, "fixtures", "triage", "sarif-2.1.0-subset.schema.json")
# the OASIS SARIF 2.1.0 schema (2.1.0-rtm.5, draft-04), see its .NOTICE
OASIS_SCHEMA = os.path.join(TOP, "fixtures", "triage", "sarif-2.1.0-rtm.5.schema.json")

# findings in fixtures/patch/wait_event_rewrite.c, the tree these tests
# triage: one per wait site the fixture's .res rewrites or refuses (37),
# and one missed wakeup: in_loop() increments d->count, which ends the
# wait in interruptible_timeout_assign(), and wakes nothing (wakecov.py)
FIXTURE_FINDINGS = 38


def triage_tree(prefix):
	"""(tmp dir, tree in it, env): a tree whose drivers/dev/dev.c is
	fixtures/patch/wait_event_rewrite.c, and a test cache."""
	tmp = tempfile.mkdtemp(prefix=prefix)
	kdir = os.path.join(tmp, "tree")
	os.makedirs(os.path.join(kdir, "drivers", "dev"))
	shutil.copy(os.path.join(TOP, "fixtures", "patch", "wait_event_rewrite.c"),
		    os.path.join(kdir, "drivers", "dev", "dev.c"))
	with open(os.path.join(kdir, "Makefile"), "w") as f:
		f.write("VERSION = 6\nPATCHLEVEL = 1\nSUBLEVEL = 99\n")
	return tmp, kdir, dict(os.environ, NESTSLEEP_CACHE=os.path.join(cache_dir(), "test-cache"))


def read(p):
	with open(p) as f:
		return f.read()


class BootStatusTest(unittest.TestCase):
	def test_triage_boot_status_and_mainline(self):
		self.assertEqual(triage.boot_status({"status": "ok"}, "x"), "compiled, booted, not exercised")
		self.assertEqual(triage.boot_status({"status": "ok", "exercised": True, "baseline_hits": ["t"],
						     "patched_hits": []}, "x"), "compiled, booted, exercised: warning gone")
		self.assertEqual(triage.boot_status({"status": "config failed"}, "x"), "config failed")
		self.assertTrue(triage.ready_for_mainline({"verdict": "true", "patch_status": "compiled, booted, not exercised"}))
		self.assertFalse(triage.ready_for_mainline({"verdict": "harmless", "patch_status": "compiled, booted, not exercised"}))
		self.assertFalse(triage.ready_for_mainline({"verdict": "true", "patch_status": "config failed"}))


def rec(fp, fn, prim, *paths, file="io_uring/io_uring.c"):
	return {"fingerprint": fp, "file": file, "function": fn, "primitive": prim, "chain": list(paths[0]),
		"paths": [{"chain": list(p)} for p in paths]}


class MatchBaselineTest(unittest.TestCase):
	"""Shapes seen between linux-6.1.192 and linux-6.12.118."""

	def match(self, base, recs):
		gone = triage.match_baseline({b["fingerprint"]: b for b in base}, recs)
		return [r["baseline"] for r in recs], sorted(g["fingerprint"] for g in gone)

	def test_same_fingerprint(self):
		self.assertEqual(self.match([rec("a", "f", "wait_event", ["g", "mutex_lock"])],
					    [rec("a", "f", "wait_event", ["g", "mutex_lock"])]), (["unchanged"], []))

	def test_renamed_function(self):
		# io-wq: io_wqe_worker() became io_wq_worker(), same chain
		new = [rec("b", "io_wq_worker", "set_current_state", ["io_worker_exit", "wait_for_completion"])]
		st, gone = self.match([rec("a", "io_wqe_worker", "set_current_state",
					   ["io_worker_exit", "wait_for_completion"])], new)
		self.assertEqual((st, gone), (["changed"], []))
		self.assertIn("function renamed from io_wqe_worker()", new[0]["baseline_match"]["why"])

	def test_first_chain_changed(self):
		# usbnet: a new first path in front of the old one
		old = rec("a", "usbnet_terminate_urbs", "set_current_state", ["wait_skb_queue_empty", "schedule_timeout"])
		new = rec("b", "usbnet_terminate_urbs", "set_current_state", ["netif_dbg", "wait_for_completion"],
			  ["wait_skb_queue_empty", "schedule_timeout"])
		self.assertEqual(self.match([old], [new]), (["changed"], []))
		self.assertIn("first chain was wait_skb_queue_empty -> schedule_timeout", new["baseline_match"]["why"])

	def test_fixed_is_gone(self):
		# io_cqring_wait: the overflow flush left the window; what remains is another path
		old = rec("a", "io_cqring_wait", "prepare_to_wait_exclusive", ["io_cqring_overflow_flush", "mutex_lock"],
			  ["io_cqring_wait_schedule", "schedule_hrtimeout"])
		new = rec("b", "io_cqring_wait", "prepare_to_wait_exclusive", ["io_cqring_wait_schedule", "schedule"])
		self.assertEqual(self.match([old], [new]), (["new"], ["a"]))

	def test_near_misses(self):
		old = rec("a", "foo_read", "wait_event", ["foo_ready", "mutex_lock"])
		cases = [rec("b", "foo_read", "wait_event_timeout", ["foo_ready", "mutex_lock"]),  # other primitive
			 rec("c", "foo_read", "wait_event", ["foo_ready", "mutex_lock"], file="drivers/x.c"),  # other file
			 rec("d", "bar_write", "wait_event", ["foo_ready", "mutex_lock"]),  # other function
			 rec("e", "foo_read", "wait_event", ["foo_ready", "msleep"])]  # other final primitive
		for c in cases:
			self.assertEqual(self.match([old], [c]), (["new"], ["a"]), c)

	def test_one_to_one(self):
		# two old sites in one function, one left: the same-name pair wins, the other is gone
		old = [rec("a", "f", "wait_event", ["g", "mutex_lock"]), rec("z", "f_old", "wait_event", ["g", "mutex_lock"])]
		new = [rec("b", "f", "wait_event", ["h", "x"], ["g", "mutex_lock"])]
		self.assertEqual(self.match(old, new), (["changed"], ["z"]))
		self.assertEqual(new[0]["baseline_match"]["fingerprint"], "a")


class TriageTest(unittest.TestCase):
	@classmethod
	def setUpClass(cls):
		"""One report set, shared by the tests of this class."""
		cls.tmp, cls.kdir, cls.env = triage_tree("nestsleep-triage-test-")
		cls.out = os.path.join(cls.tmp, "out")
		cls.r = cls.triage(["--out", cls.out, "--labels", os.path.join(cls.tmp, "none.json")])

	@classmethod
	def tearDownClass(cls):
		shutil.rmtree(cls.tmp, ignore_errors=True)

	@classmethod
	def triage(cls, extra):
		return subprocess.run(["/usr/bin/python3", "-m", "nestsleep", "triage", "--kdir", cls.kdir,
				       "-j", "2"] + extra, capture_output=True, text=True, env=cls.env, timeout=600)

	def test_triage_report_set(self):
		self.assertEqual(self.r.returncode, 0, self.r.stderr)
		for n in ("index.md", "findings.json", "findings.sarif"):
			self.assertTrue(os.path.isfile(os.path.join(self.out, n)), n)
		idx = read(os.path.join(self.out, "index.md"))
		self.assertIn("linux-6.1.99", idx)
		self.assertIn("spatch", idx)
		self.assertIn("Parse coverage", idx)
		data = json.loads(read(os.path.join(self.out, "findings.json")))
		self.assertEqual(len(data["findings"]), FIXTURE_FINDINGS)
		self.assertFalse(os.path.exists(self.out + ".tmp"))
		sec = [n for n in os.listdir(self.out) if n.endswith(".md") and n != "index.md"]
		self.assertEqual(len(sec), 1)
		md = read(os.path.join(self.out, sec[0]))
		self.assertIn("Sleeping chain:", md)
		self.assertIn("drivers/dev/dev.c:", md)
		self.assertIn("```diff", md)
		# the tree by its id, not a path on the machine that made the report
		self.assertIn("Reproduce on linux-6.1.99: `make coccicheck MODE=report KDIR=<a linux-6.1.99 tree>", md)
		self.assertNotIn(self.kdir, md.split("Reproduce", 1)[1])
		self.assertNotIn("[<...>]", md)
		self.assertIn("do not call blocking ops when !TASK_RUNNING", md)
		self.assertIn("spinlock", md)

	def test_triage_missed_wakeup_entry(self):
		"""The fixture's missed wakeup (in_loop()) is laid out as one, in
		<section>.md and findings.sarif."""
		sec = [n for n in os.listdir(self.out) if n.endswith(".md") and n != "index.md"][0]
		entries = read(os.path.join(self.out, sec)).split("\n## ")
		mw = [e for e in entries[1:] if "missed wakeup" in e.split("\n")[2]]
		self.assertEqual(len(mw), 1)
		self.assertIn("Writer and wakeup:", mw[0])
		self.assertNotIn("Sleeping chain", mw[0])
		self.assertNotIn("wait_woken", mw[0])
		self.assertRegex(mw[0], r"\n\*\s+\d+  .*d->count\+\+;")
		self.assertRegex(mw[0], r"\n>\s+147  ")
		self.assertTrue(all("Sleeping chain:" in e for e in entries[1:] if e not in mw))
		sarif = json.loads(read(os.path.join(self.out, "findings.sarif")))
		res = [x for x in sarif["runs"][0]["results"] if x["ruleId"] == "missed-wakeup"]
		self.assertEqual(len(res), 1)
		self.assertNotIn("codeFlows", res[0])
		self.assertIn((147, "the wait: wait_event_interruptible_timeout() in interruptible_timeout_assign(), in "
			       "TASK_INTERRUPTIBLE on d->wq"),
			      [(x["physicalLocation"]["region"]["startLine"], x["message"]["text"])
			       for x in res[0]["relatedLocations"]])

	def test_triage_series_status_only_for_the_same_patch(self):
		"""A series tested one patch for a finding; the report credits its
		status to that finding only while the generated patch is the same."""
		data = json.loads(read(os.path.join(self.out, "findings.json")))
		fs = [f for f in data["findings"] if f["fix"]["status"] == "patch"][:2]
		ser = os.path.join(self.tmp, "series")
		os.makedirs(ser, exist_ok=True)
		patches = []
		for i, f in enumerate(fs):
			diff = f["fix"]["diff"]
			if i == 1:	# an older patch: one added line differs
				diff = diff.replace("\n+", "\n+\t/* older */\n+", 1)
			name = "000%d.patch" % i
			with open(os.path.join(ser, name), "w") as fp:
				fp.write("Subject: [PATCH] x\n\n- a changelog bullet\n---\n" + diff + "-- \n2.39.5\n")
			patches.append({"patch": name, "fingerprints": [f["fingerprint"]], "test_status": "compiled, booted",
					"checkpatch": {"status": "clean"}})
		with open(os.path.join(ser, "series.json"), "w") as fp:
			json.dump({"series": [{"patches": patches}]}, fp)
		out = os.path.join(self.tmp, "out-series")
		r = self.triage(["--out", out, "--series", ser, "--labels", os.path.join(self.tmp, "none.json")])
		self.assertEqual(r.returncode, 0, r.stderr)
		got = {f["fingerprint"]: f["patch_status"] for f in json.loads(read(os.path.join(out, "findings.json")))["findings"]}
		self.assertEqual(got[fs[0]["fingerprint"]], "compiled, booted")
		self.assertTrue(got[fs[1]["fingerprint"]].startswith("generated, not tested"), got[fs[1]["fingerprint"]])

	def test_changed_lines(self):
		self.assertEqual(triage.changed_lines("--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n c\n-- \n"), ["-a", "+b"])

	def test_triage_sarif_schema(self):
		try:
			import jsonschema
		except ImportError:
			self.skipTest("python3-jsonschema is not installed (make setup installs it)")
		sarif = json.loads(read(os.path.join(self.out, "findings.sarif")))
		oasis = json.loads(read(OASIS_SCHEMA))
		self.assertEqual(oasis["properties"]["version"]["enum"], ["2.1.0"])
		jsonschema.Draft4Validator.check_schema(oasis)
		full = jsonschema.Draft4Validator(oasis, format_checker=jsonschema.FormatChecker())
		full.validate(sarif)
		schema = json.loads(read(SCHEMA))
		jsonschema.validate(sarif, schema, format_checker=jsonschema.FormatChecker())
		self.assertEqual(len(sarif["runs"][0]["results"]), FIXTURE_FINDINGS)
		bad = dict(sarif, version="2.0.0")
		for v in (full, jsonschema.Draft7Validator(schema)):
			with self.assertRaises(jsonschema.ValidationError):
				v.validate(bad)
		# a property SARIF does not define is refused by the OASIS schema
		run = dict(sarif["runs"][0], nestsleepCoverage=1)
		with self.assertRaises(jsonschema.ValidationError):
			full.validate(dict(sarif, runs=[run]))
		r0 = sarif["runs"][0]["results"][0]
		self.assertIn("nestsleep/v1", r0["partialFingerprints"])
		self.assertGreaterEqual(r0["locations"][0]["physicalLocation"]["region"]["startLine"], 1)

	def test_triage_baseline_and_labels(self):
		data = json.loads(read(os.path.join(self.out, "findings.json")))
		# an older run: one finding fewer, and one that has gone since
		old = dict(data)
		# and one whose function was renamed since (same wait site and sleeping path: "changed")
		f3 = data["findings"][3]
		old["findings"] = data["findings"][1:3] + data["findings"][4:] + [
			dict(data["findings"][0], fingerprint="0000000000000000", function="removed_fn"),
			dict(f3, fingerprint="1111111111111111", function=f3["function"] + "_old")]
		bp = os.path.join(self.tmp, "old.json")
		with open(bp, "w") as f:
			json.dump(old, f)
		labels = {"labels": {data["findings"][1]["fingerprint"]: {"verdict": "true", "reason": "takes a mutex",
									 "later": [{"tree": "linux-6.12.1", "class": "fixed",
										    "evidence": "converted to wait_woken()"}]},
				     data["findings"][2]["fingerprint"]: {"verdict": "false-positive", "reason": "x"},
				     "ffffffffffffffff": {"verdict": "false-positive", "reason": "y", "site": "a.c:1 f()"}}}
		lp = os.path.join(self.tmp, "labels.json")
		with open(lp, "w") as f:
			json.dump(labels, f)
		out2 = os.path.join(self.tmp, "out2")
		r = self.triage(["--out", out2, "--baseline", bp, "--labels", lp])
		self.assertEqual(r.returncode, 0, r.stderr)
		new = json.loads(read(os.path.join(out2, "findings.json")))
		states = [f["baseline"] for f in new["findings"]]
		self.assertEqual(states.count("new"), 1)
		self.assertEqual(states.count("changed"), 1)
		self.assertEqual(states.count("unchanged"), len(new["findings"]) - 2)
		ch = [f for f in new["findings"] if f["baseline"] == "changed"][0]
		self.assertEqual(ch["fingerprint"], f3["fingerprint"])
		self.assertEqual(ch["baseline_match"]["fingerprint"], "1111111111111111")
		self.assertIn("function renamed from %s_old()" % f3["function"], ch["baseline_match"]["why"])
		self.assertEqual([g["function"] for g in new["gone"]], ["removed_fn"])
		idx = read(os.path.join(out2, "index.md"))
		self.assertIn("1 new (marked `>>`), 1 changed, %d unchanged, 1 gone." % (len(new["findings"]) - 2), idx)
		self.assertIn("gone: `drivers/dev/dev.c` removed_fn()", idx)
		self.assertIn("| high | ", idx)
		self.assertRegex(idx, r"\| high \| \d+ \| 2 \| 1 \| 0 \| 50% \|")
		self.assertIn("How a verdict is chosen:", idx)
		self.assertIn("1 labelled findings are no longer reported by this version of nestsleep (false-positive 1)", idx)
		allsec = "".join(read(os.path.join(out2, n)) for n in os.listdir(out2) if n.endswith(".md"))
		self.assertIn("- since the baseline: changed (function renamed from %s_old()" % f3["function"], allsec)
		sec = [n for n in os.listdir(out2) if n.endswith(".md") and n != "index.md"][0]
		self.assertIn("## >> ", read(os.path.join(out2, sec)))
		self.assertIn("hand review: **true** - takes a mutex", read(os.path.join(out2, sec)))
		self.assertIn("- in `linux-6.12.1`: **fixed** - converted to wait_woken()", read(os.path.join(out2, sec)))
		self.assertIn("## In later trees", idx)
		# no boot results here: nothing is ready for mainline
		self.assertNotIn("ready to rebase onto mainline", read(os.path.join(out2, sec)))
		sarif = json.loads(read(os.path.join(out2, "findings.sarif")))
		self.assertEqual(sum(1 for x in sarif["runs"][0]["results"] if x.get("baselineState") == "new"), 1)
		self.assertEqual(sum(1 for x in sarif["runs"][0]["results"] if x.get("baselineState") == "updated"), 1)

	def test_triage_bad_label(self):
		lp = os.path.join(self.tmp, "bad-labels.json")
		with open(lp, "w") as f:
			json.dump({"labels": {"abc": {"verdict": "maybe"}}}, f)
		r = self.triage(["--out", os.path.join(self.tmp, "out3"), "--labels", lp])
		self.assertEqual(r.returncode, 2)
		self.assertIn("verdict must be one of", r.stderr)
		self.assertNotIn("Traceback", r.stderr)

	def test_triage_no_tree(self):
		r = subprocess.run(["/usr/bin/python3", "-m", "nestsleep", "triage", "--kdir",
				    os.path.join(self.tmp, "nope")], capture_output=True, text=True)
		self.assertEqual(r.returncode, 2)
		self.assertIn("no kernel tree", r.stderr)


if __name__ == "__main__":
	unittest.main()


class KnowledgeSourcesTest(unittest.TestCase):
	"""index.md says how many sleep_info.json entries rest on labels alone."""

	def test_counts_line(self):
		from nestsleep.knowledge import Knowledge
		src = os.path.join(TOP, "cocci", "sleep_info.json")
		with open(src) as f:
			info = json.load(f)
		info["groups"][0]["source"] = ["label:linux-6.1.192:0000000000000000"]
		d = tempfile.mkdtemp()
		self.addCleanup(shutil.rmtree, d)
		p = os.path.join(d, "sleep_info.json")
		with open(p, "w") as f:
			json.dump(info, f)
		kn = Knowledge(p)
		total = sum(c["entries"] for c in kn.source_counts().values())
		text = "\n".join(triage.knowledge_lines(kn))
		self.assertIn("%d entries" % total, text)
		self.assertIn("1 rests on hand labels alone (groups: %s)" % info["groups"][0]["name"], text)
		self.assertIn("0 rest on hand labels alone", "\n".join(triage.knowledge_lines(Knowledge())))


class KindPrecisionTest(unittest.TestCase):
	"""index.md gives the missed wakeups' precision per level apart."""

	def test_missed_wakeup_table(self):
		recs = [{"kind": "nested_sleep", "confidence": "high", "verdict": "true"},
			{"kind": "missed_wakeup", "confidence": "medium", "verdict": "true"},
			{"kind": "missed_wakeup", "confidence": "medium", "verdict": "false-positive"},
			{"kind": "missed_wakeup", "confidence": "high"}]
		text = "\n".join(triage.kind_lines(recs))
		self.assertIn("Missed wakeups", text)
		self.assertIn("| medium | 2 | 2 | 1 | 0 | 50% |", text)
		self.assertIn("| high | 1 | 0 | 0 | 0 | n/a |", text)
		self.assertEqual(triage.kind_lines(recs[:1]), [])


MW_SRC = """static DECLARE_WAIT_QUEUE_HEAD(xq);
static unsigned long xflags;

static void x_unlock(unsigned long flag, bool wakeup)
{
	xflags &= ~flag;
	if (wakeup)
		wake_up_interruptible(&xq);
}

static int x_release(void)
{
	wait_event(xq, !xflags);
	return 0;
}

static void x_exit(void)
{
	wake_up(&xq);
}
"""


def mw_finding(how="wrong_mode"):
	"""A missed wakeup as wakecov.WakeCov.finding() writes it, in the
	tree of MissedWakeupReportTest."""
	rel = "drivers/x/x.c"
	waker = how != "unwoken"
	chain = ["x_unlock", "wake_up_interruptible"] if waker else ["x_unlock"]
	locs = [rel + ":6", rel + ":13"]
	msg = {"wrong_mode": "wakes it only with wake_up_interruptible(), which does not wake TASK_UNINTERRUPTIBLE",
	       "unwoken": "neither it nor a caller wakes xq",
	       "guarded": "wakes xq only if wakeup, which x_close() passes as ret >= 0"}[how]
	reason = {"wrong_mode": "wake_up_interruptible(&xq) -> wake_up(&xq), on every path: it ran only under "
				"'if (wakeup)', which some callers make false although the write before it still ends "
				"the wait",
		  "unwoken": "wake_up(&xq) after xflags &= ~flag on line 6: nothing woke xq after it",
		  "guarded": "wake_up_interruptible(&xq) -> wake_up(&xq), on every path: it ran only under 'if (wakeup)', which some callers make false although the write before it still ends the wait"}[how]
	return {
		"fingerprint": "00000000000000%02d" % ["wrong_mode", "unwoken", "guarded"].index(how),
		"file": rel, "line": 6, "col": 1, "colend": 17, "function": "x_unlock", "shape": "wait_event",
		"primitive": "wait_event", "role": "", "locked": "", "kind": "missed_wakeup", "call": chain[-1],
		"call_line": 6, "effect": "silent", "group": "missed_wakeup", "chain": chain, "confidence": "medium",
		"doubts": 1, "chain_locs": locs,
		"paths": [{"call": chain[-1], "line": 6, "col": 1, "chain": chain, "chain_locs": locs, "effect": "silent",
			   "confidence": "medium"}],
		"message": "WARNING: missed wakeup: x_unlock() clears xflags, which ends the wait_event() in x_release() "
			   "on line 13, but %s [confidence: medium]" % msg,
		"after_loop": None, "blocks": False, "missed": how, "wait_at": rel + ":13",
		"wait": {"function": "x_release", "primitive": "wait_event", "state": "TASK_UNINTERRUPTIBLE",
			 "queue": "xq", "waker_at": rel + ":8" if waker else None,
			 "others": [{"at": rel + ":19", "function": "x_exit", "call": "wake_up"}]},
		"fix": {"status": "patch", "reason": reason, "kind": "missed_wakeup", "confidence": "medium",
			"caveats": [], "unit": rel + ":x_unlock", "files": [rel], "wakers": [], "diff": "--- a/x\n+++ b/x\n"},
		"section": "X DRIVER", "maintainers": [], "lists": [], "verdict": "true", "verdict_reason": "r",
		"later": [], "patch_status": "generated, not tested"}


class MissedWakeupReportTest(unittest.TestCase):
	"""A missed wakeup is laid out as one: the write, the wakeup and the
	wait, not as a nested sleep's chain."""

	@classmethod
	def setUpClass(cls):
		cls.kdir = tempfile.mkdtemp(prefix="nestsleep-mw-test-")
		os.makedirs(os.path.join(cls.kdir, "drivers", "x"))
		with open(os.path.join(cls.kdir, "drivers", "x", "x.c"), "w") as f:
			f.write(MW_SRC)

	@classmethod
	def tearDownClass(cls):
		shutil.rmtree(cls.kdir, ignore_errors=True)

	def render(self, how):
		r = mw_finding(how)
		r["confidence_reason"] = triage.confidence_reason(r)
		r["runtime"] = None
		r["runtime_reason"] = triage.runtime_reason(r, [], set())
		return r, triage.section_md("X DRIVER", [r], self.kdir, {}, "", "linux-6.1.99")

	def test_wrong_mode(self):
		r, md = self.render("wrong_mode")
		for bad in ("Sleeping chain", "the call that may sleep", "might_sleep", "wait_woken",
			    "sched_annotate_sleep", triage.SILENT, "inner sleep"):
			self.assertNotIn(bad, md)
		self.assertIn("*    6          xflags &= ~flag;", md)
		self.assertIn("w    8                  wake_up_interruptible(&xq);", md)
		self.assertIn(">   13          wait_event(xq, !xflags);", md)
		self.assertIn("`*` the write that ends the wait, `w` the wakeup after it, `>` the wait.", md)
		self.assertIn("Writer and wakeup:", md)
		self.assertIn("1. the write `xflags &= ~flag;` in x_unlock() at `drivers/x/x.c:6`", md)
		self.assertIn("2. the wakeup `wake_up_interruptible()` at `drivers/x/x.c:8`, which does not wake "
			      "TASK_UNINTERRUPTIBLE", md)
		self.assertIn("3. the wait `wait_event()` in x_release() at `drivers/x/x.c:13`, in TASK_UNINTERRUPTIBLE "
			      "on `xq`", md)
		self.assertIn("4. the other wakeups of `xq` that wake TASK_UNINTERRUPTIBLE: `wake_up()` in x_exit() at "
			      "`drivers/x/x.c:19`", md)
		self.assertIn("Why it matters: The waiter in x_release() sleeps in TASK_UNINTERRUPTIBLE on xq, and this "
			      "write is not followed by a wakeup that wakes it: it sleeps on until another wakeup of xq "
			      "that wakes TASK_UNINTERRUPTIBLE, such as wake_up(&xq) in x_exit() (drivers/x/x.c:19).", md)
		self.assertIn("Confidence: **medium** - missed wakeups are reported at medium until hand labels say "
			      "otherwise", md)
		for what in ("token order", "callers one level", "not along paths"):
			self.assertIn(what, r["confidence_reason"])
		self.assertIn("no exerciser", r["runtime_reason"])
		self.assertIn("Suggested fix: Change the wakeup (the patch below): wake_up_interruptible(&xq) -> "
			      "wake_up(&xq), on every path: it ran only under 'if (wakeup)', which some callers make false although the write before it still ends the wait.", md)

	def test_guarded(self):
		r, md = self.render("guarded")
		self.assertIn("2. the wakeup `wake_up_interruptible()` at `drivers/x/x.c:8`, which runs only under a "
			      "parameter test that a caller passes false", md)

	def test_unwoken(self):
		r, md = self.render("unwoken")
		self.assertNotIn("`w`", md)
		self.assertNotIn("Sleeping chain", md)
		self.assertIn("`*` the write that ends the wait, `>` the wait.", md)
		self.assertIn("2. no wakeup of `xq` after the write, in x_unlock() or a caller", md)
		self.assertIn("Suggested fix: Add the wakeup (the patch below): wake_up(&xq) after xflags &= ~flag on "
			      "line 6: nothing woke xq after it.", md)

	def test_none_other(self):
		r = mw_finding("unwoken")
		r["wait"]["others"] = []
		text = triage.warning_text(r, self.kdir)
		self.assertIn("no other wakeup of xq that wakes TASK_UNINTERRUPTIBLE was found, so it may sleep on "
			      "for good", text)

	def test_sarif(self):
		r = mw_finding("wrong_mode")
		res = triage.to_sarif([r], "linux-6.1.99", "x")["runs"][0]["results"][0]
		self.assertEqual(res["ruleId"], "missed-wakeup")
		self.assertEqual(res["message"]["text"], r["message"])
		rel = [(x["physicalLocation"]["region"]["startLine"], x["message"]["text"]) for x in res["relatedLocations"]]
		self.assertEqual(rel, [(8, "the wakeup: wake_up_interruptible(), which does not wake TASK_UNINTERRUPTIBLE"),
				       (13, "the wait: wait_event() in x_release(), in TASK_UNINTERRUPTIBLE on xq"),
				       (19, "another wakeup of xq: wake_up() in x_exit()")])
		# no "calls wake_up_interruptible" step on the wait's line
		self.assertNotIn("codeFlows", res)

	def test_older_findings_without_wait_record(self):
		"""A findings.json of before the "wait" record: what the message
		says, and no claim of what was not recorded."""
		r = mw_finding("wrong_mode")
		del r["wait"]
		r["confidence_reason"] = triage.confidence_reason(r)
		md = triage.section_md("X DRIVER", [r], self.kdir, {}, "", "linux-6.1.99")
		self.assertIn("2. the wakeup `wake_up_interruptible()` after it, which does not wake TASK_UNINTERRUPTIBLE", md)
		self.assertIn("in TASK_UNINTERRUPTIBLE on `its queue`", md)
		self.assertIn("4. the other wakeups of `its queue`: not recorded in this findings.json", md)
		self.assertNotIn("was found", md)
		r = mw_finding("unwoken")
		del r["wait"]
		self.assertIn("sleeps in its state on xq", triage.warning_text(r, self.kdir))


class MissedContextTest(unittest.TestCase):
	"""MODE=context for a missed wakeup: spatch's context diff, in which a
	matched line is a '-' line (as context_spatch()'s output of the same
	run), the write and the wakeup after it marked."""

	def context(self, how):
		from nestsleep.analysis.report import missed_context
		d = tempfile.mkdtemp(prefix="nestsleep-mwctx-test-")
		self.addCleanup(shutil.rmtree, d)
		p = os.path.join(d, "x.c")
		with open(p, "w") as f:
			f.write(MW_SRC)

		class Tree:
			abs = {"drivers/x/x.c": p}
		return missed_context(None, [mw_finding(how)], Tree())

	def test_wrong_mode(self):
		out = self.context("wrong_mode")
		self.assertEqual(out.split("\n")[:3], ["diff -u -p drivers/x/x.c /tmp/nothing/drivers/x/x.c",
						       "--- drivers/x/x.c", "+++ /tmp/nothing/drivers/x/x.c"])
		body = out.split("\n")[3:-1]
		self.assertEqual(body[0], "@@ -3,9 +3,7 @@")
		self.assertEqual([l for l in body[1:] if not l.startswith(" ")],
				 ["-\txflags &= ~flag;", "-\t\twake_up_interruptible(&xq);"])
		self.assertEqual(len(body) - 1, 9)

	def test_unwoken(self):
		body = self.context("unwoken").split("\n")[3:-1]
		self.assertEqual(body[0], "@@ -3,7 +3,6 @@")
		self.assertEqual([l for l in body[1:] if not l.startswith(" ")], ["-\txflags &= ~flag;"])
