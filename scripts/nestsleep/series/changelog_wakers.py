# SPDX-License-Identifier: GPL-2.0-only
"""The changelog's items on a rewritten wait's queue wakers: what
finding["wakers"] (analysis/wakecov.py) showed of the wake_up*() calls on
the queue, each read back from KDIR, and a missed wakeup of the wait that
a later patch of the series fixes."""

import os
import re

from nestsleep.series.text import capital


# ---------------------------------------------------------------------------
# Queue wakers: what finding["wakers"] (analysis/wakecov.py) showed of the
# wake_up*() calls on a rewritten wait's queue, each read back from KDIR.

MAX_WAKERS = 3
WAKE_CALL = re.compile(r"\b(?:__)?wake_up\w*\s*\(")
# the fixer's sentence (fix/wakers.py check()) that the record's item
# replaces; kept for a wait without a record (wakecov names no queue for
# an add_wait_queue() + set_current_state() loop)
OLD_QUEUE_SENTENCE = re.compile(r" The wake_up\*\(\) calls on \S+ wake wait_woken\(\) too; whether one runs for "
				r"every change of the condition while it waits is not checked(?:; c(allers)|$)")
# the poll rule's reason (fix/polls.py check())
POLL_REASON = re.compile(r"the wait polls today \((.*)\); (its waker \w+\(\) \([^)]*\)) wakes (.*?) for the "
			 r"whole wait")


def queue_member(expr):
	"""The last member name of a queue expression: '&rdev->dev_wait' ->
	'dev_wait', '&g_wq' -> 'g_wq', '&d->wq[i]' -> 'wq'."""
	names = re.findall(r"[A-Za-z_]\w*", re.sub(r"\[[^\]]*\]", "", expr or ""))
	return names[-1] if names else ""


def waker_call(kdir, at, queue, files):
	"""The text of the wake_up*()/__wake_up*() call at 'file:line' in KDIR
	whose first argument names queue's last member, or None."""
	rel, _, ln = at.rpartition(":")
	if rel not in files:
		try:
			with open(os.path.join(kdir, rel), errors="replace") as f:
				files[rel] = f.read().split("\n")
		except OSError:
			files[rel] = []
	lines, n = files[rel], int(ln)
	if not 0 < n <= len(lines):
		return None
	text = "\n".join(lines[n - 1:n + 5])
	for mm in WAKE_CALL.finditer(lines[n - 1]):
		depth, args, cur = 0, [], mm.end() - 1
		for i in range(mm.end() - 1, len(text)):
			c = text[i]
			depth += c == "("
			depth -= c == ")"
			if (c == "," and depth == 1) or depth == 0:
				args.append(text[cur + 1:i])
				cur = i
			if depth == 0:
				call = re.sub(r"\s+", " ", text[mm.start():i + 1])
				if queue_member(args[0]) == queue_member(queue):
					return re.sub(r"\s+\)", ")", re.sub(r"\(\s+", "(", call))
				break
	return None


def input_change(w):
	"""'users drops' for a writer of the wakers record."""
	name = w["input"].partition(":")[2].split(".")[-1]
	wr = w.get("write") or ""
	if re.search(r"--|-=|\b(?:atomic\w*_(?:dec|sub)\w*|refcount_dec\w*)\s*\(", wr):
		return name + " drops"
	if re.search(r"\+\+|\+=|\batomic\w*_(?:inc|add)\w*\s*\(", wr):
		return name + " rises"
	if re.search(r"\bclear_bit\w*\s*\(", wr):
		return name + " is cleared"
	if re.search(r"\bset_bit\w*\s*\(", wr):
		return name + " is set"
	return name + " changes"


def waker_shown(kdir, f, files):
	"""The queue wakers of f["wakers"] that wake the wait's state, each
	(call read back from KDIR, function, file:line, [when...])."""
	rec = f["wakers"]
	shown, seen = [], set()
	for w in rec["wakers"]:
		if w.get("wakes") is not True or (w["at"], w["call"]) in seen:
			continue
		seen.add((w["at"], w["call"]))
		call = waker_call(kdir, w["at"], rec["queue"], files)
		if not call:
			continue
		# only the writes that can end the wait (acpi_dbg: the wakeup
		# after 'usages--' also follows 'usages++', which does not)
		whens = list(dict.fromkeys(input_change(x) for x in rec.get("writers") or []
					   if w["at"] in (x.get("woken_by") or []) and x.get("makes_true") is True))
		shown.append((call, w["function"], w["at"], whens))
	return shown


def woken_sentence(shown, waits=1):
	"""'Wakers: the wakeups of the wait include X in f() (file:line) when
	n drops; it wakes wait_woken() too.' for the shown wakers of one
	wait, or of the waits of one function (waits > 1).  'include': the
	search may miss a waker (a queue reached through another struct, as
	drbd's wake_up_all_devices()), so no list is said to be complete and
	no count is claimed."""
	named = ["%s in %s() (%s)%s" % (call, fn, at, " when " + " or ".join(whens[:2]) if whens else "")
		 for call, fn, at, whens in shown[:MAX_WAKERS]]
	head = named[0]
	for i, x in enumerate(named[1:]):
		head += (", and " if i == len(named) - 2 else ", ") + x
	return "Wakers: the wakeups of %s include %s%s; %s wake%s wait_woken() too." % (
		"the wait" if waits == 1 else "its %s waits" % NUMBERS.get(waits, str(waits)), head,
		", among others" if len(shown) > len(named) else "",
		"these" if len(shown) > 1 else "it", "" if len(shown) > 1 else "s")


NUMBERS = {2: "two", 3: "three", 4: "four"}


def waker_text(kdir, f, files, shown=None, waits=1):
	"""The changelog item of one rewritten wait's queue wakers, from
	f["wakers"] and the poll rule's reason in f["fix"]; None without a
	record (no queue, or findings from before wakecov).  shown and waits:
	the wakers of all the function's waits, said once for them."""
	rec = f.get("wakers")
	if not rec or not rec.get("queue"):
		return None
	shown = waker_shown(kdir, f, files) if shown is None else shown
	if shown:
		text = woken_sentence(shown, waits)
	else:
		other = sum(1 for w in rec["wakers"] if w.get("wakes") is False)
		unknown = sum(1 for w in rec["wakers"] if w.get("wakes") is None)
		notes = (["%d on it wake%s other states only" % (other, "s" if other == 1 else "")] if other else []) + \
			(["%d on it of a mode not known" % unknown] if unknown else [])
		# what the search found, not that nothing wakes the queue: a
		# socket's sk_sleep(sk) is woken through its callbacks, under
		# another name
		text = "Wakers: no wake_up*() naming %s that wakes %s was found%s; the queue may be woken under " \
			"another name, and each wakeup of it that woke the old wait wakes wait_woken() too." % (
				rec["queue"], rec["state"], " (%s)" % "; ".join(notes) if notes else "")
	p = rec.get("polls")
	if p:
		mm = POLL_REASON.search(f["fix"].get("reason") or "")
		text += " The wait polls today (%s)%s." % (p["reason"], "; the rewrite keeps %s, which wakes %s for the "
							    "whole wait" % (mm.group(2), mm.group(3)) if mm else "")
	return text


def waker_items(kdir, fs, later=None):
	"""The queue-waker items of one function's rewritten waits: one for
	all its waits when each has wakers that wake it (acpi_aml_release()'s
	two waits on one queue), and for a wait whose missed wakeup a later
	patch of the series fixes (later: "file:line" of the wait -> (what
	that finding says, the later patch's subject)), that patch."""
	if fs[0]["fix"].get("kind") in ("restore", "finish_wait", "restore_call", "setter"):
		# the patch leaves the wait and its wakeups as they are
		return []
	files = {}
	recs = [f for f in fs if (f.get("wakers") or {}).get("queue")]
	shown = [waker_shown(kdir, f, files) for f in recs]
	if len(recs) > 1 and all(shown) and not any(f["wakers"].get("polls") for f in recs):
		merged = {}
		for sh in shown:
			for call, fn, at, whens in sh:
				m = merged.setdefault((call, fn, at), [])
				m += [x for x in whens if x not in m]
		items = [waker_text(kdir, recs[0], files, [k + (v,) for k, v in merged.items()], len(recs))]
	else:
		# the wakers already read of each wait with a record
		known = dict((id(f), sh) for f, sh in zip(recs, shown))
		items = list(dict.fromkeys(t for t in (waker_text(kdir, f, files, known.get(id(f))) for f in fs) if t))
	for f in fs:
		what, subject = (later or {}).get("%s:%d" % (f["file"], f["line"]), (None, None))
		if what:
			items.append("%s; \"%s\", later in this series, fixes that." % (capital(what), subject))
	return list(dict.fromkeys(items))


def without_old_waker_sentence(caveat):
	return OLD_QUEUE_SENTENCE.sub(lambda m: " C" + m.group(1) if m.group(1) else "", caveat)


def without_poll_reason(reason):
	"""The fix's reason without the poll rule's clause, which the wakers
	item says with its file:line."""
	return re.sub(r";\s*" + POLL_REASON.pattern, "", reason)
