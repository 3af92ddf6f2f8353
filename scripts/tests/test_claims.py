# SPDX-License-Identifier: GPL-2.0-only
"""A lost wakeup is claimed only where the code lines that show it are
quoted: in the READMEs (the top-level one and its folders'), the rule
headers (the leading comment block of each cocci/*.cocci), the text the changelogs and the triage reports are made of
(series/effect.py, triage/reports.py) and, once they are regenerated, the
committed changelogs (reports/fixes/*/) and reports (reports/linux-*/).

An inner sleep returns in TASK_RUNNING: the schedule() that follows
returns at once and the loop tests its condition again, so a wakeup that
hit the task during the inner sleep is seen by that test.  A wakeup is
lost only where code sets the state and sleeps without testing the
condition again (6.1's wait_woken(): kernel/sched/wait.c:462 sets it,
kernel/sched/wait.c:464 sleeps on WQ_FLAG_WOKEN alone).

A claim is a sentence that says a wakeup is or can be lost; a negated one
("no wakeup is lost", "is not lost", "with no lost wakeup") is not.  It is
quoted when its paragraph, or a code block right after it, holds
- at least two file:LINE references (a writer line and a waker line, a
  state set and a sleep), or
- a code quote (indented or fenced) with a state set
  (set_current_state(), prepare_to_wait*(), set_special_state()) and a
  sleep (schedule*(), wait_woken(), *sleep*()).
"""

import glob
import json
import os
import re
import unittest

from nestsleep import TOP
from nestsleep.series import effect
from nestsleep.series import changelog
from nestsleep.triage import reports

WAKEUP = r"(?:wake-?ups?|wake_up\w*\(\))"
CLAIM = re.compile(
	r"\blos(?:e|es|ing)\s+(?:(?:its|the|a|that|their|this|any)\s+)?" + WAKEUP
	+ r"|\blost\s+" + WAKEUP
	+ r"|" + WAKEUP + r"[^.;:]{0,120}?\b(?:is|are|was|were|be|gets?|got)\s+lost\b"
	+ r"|\bcan\s+(?:then\s+)?lose\b", re.I)
NEGATION = re.compile(r"\b(?:no|not|never|nothing|without|none|rather than)\b[^.;:]{0,12}$", re.I)
FILE_LINE = re.compile(r"\b[\w./-]+\.(?:c|h|S):\d+\b")
STATE_SET = re.compile(r"\b(?:__)?set_(?:current|special)_state\s*\(|\bprepare_to_wait\w*\s*\(")
SLEEP = re.compile(r"\bschedule\w*\s*\(|\bwait_woken\s*\(|\b\w*sleep\w*\s*\(")


LIST_ITEM = re.compile(r"\s*(?:[-*+]|\d+\.)\s")


def paragraphs(text):
	"""Blank-line separated paragraphs, a list item each its own; a fenced
	block is one paragraph."""
	out, cur, fenced = [], [], False
	for line in text.splitlines():
		if line.strip().startswith("```"):
			fenced = not fenced
			cur.append(line)
			continue
		if not fenced and (not line.strip() or LIST_ITEM.match(line)):
			if cur:
				out.append("\n".join(cur))
			cur = [line] if line.strip() else []
			continue
		cur.append(line)
	if cur:
		out.append("\n".join(cur))
	return out


def is_code(par):
	"""A fenced block, or lines all indented that are not a list item."""
	lines = [l for l in par.splitlines() if l.strip()]
	if not lines:
		return False
	if lines[0].strip().startswith("```"):
		return True
	return all(l.startswith(("\t", "  ")) for l in lines) and not LIST_ITEM.match(lines[0])


def quotes(par):
	"""The paragraph quotes lines that show a lost wakeup."""
	if len(set(FILE_LINE.findall(par))) >= 2:
		return True
	return is_code(par) and bool(STATE_SET.search(par) and SLEEP.search(par))


def claims(par):
	"""The claims of lost wakeups in a paragraph (negated ones left out)."""
	flat = " ".join(par.split())
	out = []
	for m in CLAIM.finditer(flat):
		before = flat[max(0, m.start() - 40):m.start()]
		if NEGATION.search(before) or re.search(r"\b(?:not|cannot|never)\b", m.group(0), re.I):
			continue
		s = flat.rfind(". ", 0, m.start())
		e = flat.find(". ", m.end())
		out.append(flat[s + 2 if s >= 0 else 0:e + 1 if e >= 0 else len(flat)])
	return out


def unquoted(text, where):
	"""'where: sentence' for each claim whose paragraph quotes nothing."""
	pars = paragraphs(text)
	bad = []
	for i, par in enumerate(pars):
		if is_code(par):
			continue
		found = claims(par)
		if not found:
			continue
		nxt = pars[i + 1] if i + 1 < len(pars) and is_code(pars[i + 1]) else ""
		if quotes(par) or (nxt and quotes(nxt)):
			continue
		bad += ["%s: %s" % (where, s) for s in found]
	return bad


def cocci_header(path):
	"""The leading // comment block of a rule, its markers stripped."""
	out = []
	with open(path) as f:
		for line in f:
			if not line.startswith("//"):
				break
			out.append(re.sub(r"^//[/#]?\s?", "", line.rstrip("\n")))
	return "\n".join(out)


def patch_message(path):
	"""A patch's commit message: after the mail headers, before '---'."""
	with open(path, errors="replace") as f:
		text = f.read()
	body = text.split("\n\n", 1)[1] if "\n\n" in text else text
	return re.split(r"^---$", body, 1, flags=re.M)[0]


def read(path):
	with open(path, errors="replace") as f:
		return f.read()


class ClaimDetectorTest(unittest.TestCase):
	def test_claims_found(self):
		for s in ("the outer wait can lose its wakeup.",
			  "so the outer wait can lose its wakeup or spin.",
			  "a wakeup that came before the inner sleep is lost.",
			  "The wait can then lose a wakeup or spin, or the kernel warns.",
			  "an open-coded loop polls and can lose its wakeup.",
			  "nothing warns, spins or loses a wakeup: it is a lost wakeup.",
			  "a wake_up_process() that lands while the loop tests its condition is lost."):
			self.assertTrue(claims(s), s)

	def test_negations_not_claims(self):
		for s in ("The condition is tested again, so no wakeup is lost.",
			  "No wakeup is lost and nothing polls; the effect is the warning.",
			  "10,000 stress rounds with no lost wakeup.",
			  "the effect is the debug warning rather than a lost wakeup.",
			  "A wakeup that hit the task during the inner sleep is not lost.",
			  "A wakeup cannot be lost unless code sets the state and sleeps.",
			  "the schedule() that follows does not block: an extra pass."):
			self.assertEqual(claims(s), [], s)

	def test_quote_forms(self):
		self.assertEqual(unquoted("wait_woken() sets the state at kernel/sched/wait.c:462 and sleeps at "
					  "kernel/sched/wait.c:464 without a test: it can lose the wakeup.", "t"), [])
		self.assertEqual(unquoted("It can lose the wakeup:\n\n\tset_current_state(TASK_IDLE);\n"
					  "\tschedule();\n", "t"), [])
		self.assertEqual(len(unquoted("It can lose the wakeup (see core.c:12).", "t")), 1)
		self.assertEqual(len(unquoted("It can lose the wakeup:\n\n\tmutex_lock(&m);\n", "t")), 1)
		self.assertEqual(len(unquoted("  - a loop\n    can lose its wakeup.\n", "t")), 1)


class SourcesTest(unittest.TestCase):
	def test_readme(self):
		# the top-level README and the folder READMEs the details moved to
		bad = []
		paths = [os.path.join(TOP, "README.md")] + sorted(glob.glob(os.path.join(TOP, "*", "README.md")))
		for p in paths:
			bad += unquoted(read(p), os.path.relpath(p, TOP))
		self.assertEqual(bad, [])

	def test_rule_headers(self):
		bad = []
		paths = sorted(glob.glob(os.path.join(TOP, "cocci", "*.cocci")))
		self.assertTrue(paths)
		for p in paths:
			bad += unquoted(cocci_header(p), os.path.relpath(p, TOP))
		self.assertEqual(bad, [])

	def test_effect_docstring(self):
		self.assertEqual(unquoted(effect.__doc__, "effect.py"), [])


SHAPES = ("wait_event", "set_current_state", "prepare_to_wait", "after_loop", "thread_exit")
OBSERVED = (None, "do not call blocking ops in x_read",
	    {"title": "t", "splat": ["do not call blocking ops when !TASK_RUNNING; state=1 set at x"],
	     "exerciser": "a test script"})


class GeneratorsTest(unittest.TestCase):
	def test_effect_text(self):
		bad = []
		for shape in SHAPES:
			for how in ("warns", "silent"):
				for blocks in (True, False):
					for obs in OBSERVED:
						t = effect.effect_text(shape, how, "1", obs, blocks)
						bad += unquoted(t, "effect_text(%s, %s, blocks=%s)" % (shape, how, blocks))
		self.assertEqual(bad, [])

	def test_changelog_paragraphs(self):
		effs = [{"shape": s, "how": h, "state": "1", "fingerprints": ["fp-%s-%s" % (s, h)]}
			for s in SHAPES for h in ("warns", "silent")]
		records = {"fp-set_current_state-warns": {"function": "f", "splats": ["do not call blocking ops"]}}
		bad = []
		for par in changelog.effect_paragraphs(effs, records):
			bad += unquoted(par, "effect_paragraphs")
		self.assertEqual(bad, [])

	def test_report_texts(self):
		bad = unquoted("\n".join(reports.VERDICT_RULES), "VERDICT_RULES")
		for rule in reports.to_sarif([], "linux-x", "x")["runs"][0]["tool"]["driver"]["rules"]:
			bad += unquoted(rule["fullDescription"]["text"], "sarif " + rule["id"])
		for shape in SHAPES:
			f = {"shape": shape, "effect": "warns", "file": "none.c", "line": 1,
			     "primitive": "set_current_state", "kind": "nested_sleep"}
			bad += unquoted(reports.warning_text(f, "", None), "warning_text(%s)" % shape)
		self.assertEqual(bad, [])


class CommittedArtifactsTest(unittest.TestCase):
	def test_changelogs_and_reports(self):
		bad = []
		for p in sorted(glob.glob(os.path.join(TOP, "reports", "fixes", "*", "*", "*.patch"))):
			bad += unquoted(patch_message(p), os.path.relpath(p, TOP))
		for p in sorted(glob.glob(os.path.join(TOP, "reports", "linux-*", "*.md"))):
			bad += unquoted(read(p), os.path.relpath(p, TOP))
		self.assertEqual(bad, [])

	def test_missed_wakeup_records_claim_no_nested_sleep(self):
		"""A missed wakeup's patch has no nested sleep: its series.json
		record carries no effect paragraph of one (the 6.1 ACPI 2/2
		record said "The inner sleep does not go through might_sleep()")."""
		bad = []
		for p in sorted(glob.glob(os.path.join(TOP, "reports", "fixes", "*", "series.json"))):
			with open(p) as f:
				man = json.load(f)
			for s in man["series"]:
				for e in s["patches"]:
					if e.get("kind") == "missed_wakeup" and (e.get("effect_text") or e.get("effects")):
						bad.append("%s: %s" % (os.path.relpath(p, TOP), e["subject"]))
		self.assertEqual(bad, [])


if __name__ == "__main__":
	unittest.main()
