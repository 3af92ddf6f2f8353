# SPDX-License-Identifier: GPL-2.0-only
"""The changelog of a missed wakeup's patch (analysis/wakecov.py): the
wait, the write that ends it and the wakeup that does not wake it, quoted
from the tree, how long the waiter sleeps on, and the fix."""

import os
import re

from nestsleep.series.changelog_wakers import MAX_WAKERS, waker_call
from nestsleep.series.text import wrap


def tree_lines(kdir, rel, first, last):
	"""Lines first..last (1-based) of KDIR/rel, or []."""
	try:
		with open(os.path.join(kdir, rel), errors="replace") as f:
			return f.read().split("\n")[first - 1:last]
	except OSError:
		return []


def quoted(lines):
	"""Code lines as a changelog quotes them: the indentation they share
	becomes one tab."""
	lead = min((len(x) - len(x.lstrip("\t")) for x in lines if x.strip()), default=0)
	return "\n".join("\t" + x[lead:].rstrip() if x.strip() else "" for x in lines)


def wait_condition(text):
	"""The condition argument of the first wait_event*(q, cond, ...) call
	in text, or None."""
	m = re.search(r"\bwait_event\w*\s*\(", text)
	if not m:
		return None
	depth, args, cur = 0, [], m.end()
	for i in range(m.end() - 1, len(text)):
		c = text[i]
		depth += c in "([{"
		depth -= c in ")]}"
		if (c == "," and depth == 1) or depth == 0:
			args.append(text[cur:i].strip())
			cur = i + 1
		if depth == 0:
			break
	return args[1] if len(args) > 1 and args[1] else None


def missed_changelog(kdir, f):
	"""The paragraphs of a missed wakeup's patch (analysis/wakecov.py):
	the wait, the write that ends it and the wakeup that does not wake it
	(both quoted from the tree: they are what shows the missed wakeup),
	the other wakeups of the queue, and the fix."""
	w = f["wait"]
	wrel, _, wln = f["wait_at"].rpartition(":")
	# the wait's condition, not its code: an earlier patch of the series
	# may rewrite that wait (acpi_dbg's nested sleeps)
	cond = wait_condition(" ".join(x.strip() for x in tree_lines(kdir, wrel, int(wln), int(wln) + 5)))
	paras = [wrap("%s() waits in %s on %s%s." % (w["function"], w["state"], w["queue"],
						   " until %s holds" % cond if cond else ""))]
	what = missed_what(f)
	last = int(w["waker_at"].rpartition(":")[2]) if w.get("waker_at") else f["line"]
	if w.get("waker_at", "").rpartition(":")[0] != f["file"] or not 0 <= last - f["line"] <= 8:
		last = f["line"]
	paras.append(wrap(what + ":") + "\n\n" + quoted(tree_lines(kdir, f["file"], f["line"], last)))
	verb = re.match(r"\w+\(\) (\w+) ", what)
	head = "The waiter is not woken when %s() %s it: " % (f["function"], verb.group(1) if verb else "changes")
	paras.append(wrap(head + sleeps_on(kdir, w)))
	paras.append(wrap("Fix the wakeup: %s." % f["fix"]["reason"].rstrip(".")))
	return paras


def missed_what(f, cond=None):
	"""What a missed wakeup's finding says, without line numbers: 'g()
	clears x, which ends that wait (the cond wait), but wakes it only
	with ...'."""
	what = re.sub(r"^WARNING: missed wakeup: |\s*\[confidence: \w+\]$", "", f["message"])
	return re.sub(r", which ends the \w+\(\) in \w+\(\) on line \d+,", ", which ends %s," % (
		"the %s wait" % cond if cond else "that wait"), what)


def missed_later(kdir, groups, subjects):
	"""For each group of a series, the missed wakeups a later patch of the
	series fixes: "file:line" of the wait -> (what the finding says,
	naming the wait by its condition; that patch's subject)."""
	found = []
	for j, (g, core) in enumerate(zip(groups, subjects)):
		for name, fs in g:
			for f in fs:
				if f.get("kind") == "missed_wakeup" and f.get("wait_at"):
					rel, _, ln = f["wait_at"].rpartition(":")
					cond = wait_condition(" ".join(x.strip() for x in tree_lines(kdir, rel, int(ln), int(ln) + 5)))
					found.append((j, f["wait_at"], (missed_what(f, cond), core)))
	return [dict((at, v) for j, at, v in found if j > i) for i in range(len(groups))]


def sleeps_on(kdir, w):
	"""How long the waiter of a missed wakeup's "wait" record sleeps on:
	until one of the other wakeups of its queue that wake its state (each
	read back from KDIR; at most MAX_WAKERS named), or for good."""
	files, others = {}, []
	for o in w.get("others") or []:
		call = waker_call(kdir, o["at"], w["queue"], files)
		if call:
			others.append((call, o["at"], o["function"]))
	if others:
		named = ["%s%s (%s)" % (c, " in %s()" % fn if fn else "", at) for c, at, fn in others[:MAX_WAKERS]]
		return "it sleeps on until another wakeup of %s that wakes %s, such as %s." % (
			w["queue"], w["state"], ", or ".join(named))
	return "no other wakeup of %s that wakes %s was found, so it may sleep on for good." % (
		w["queue"], w["state"])
