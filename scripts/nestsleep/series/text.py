# SPDX-License-Identifier: GPL-2.0-only
"""The words and layout every mail of make fixes shares: the rule's name
and background, the wait_woken() form a rewrite names, the 72-column wrap,
and the progress line on stderr."""

import re
import sys


RULE = "cocci/nested_sleep.cocci"
MISSED_RULE = "cocci/fix_missed_wakeup.cocci"


LWN = "https://lwn.net/Articles/628628/"
WOKEN_FORM = 'the wait_woken() form that "sched/wait: Provide infrastructure to deal with nested blocking" added'
# with a git KDIR the commit is cited by id, as submitting-patches.rst asks;
# checkpatch checks the id against the tree's history, and without one it
# reports every id as unknown
WOKEN_FORM_GIT = ('the wait_woken() form that commit 61ada528dea0 ("sched/wait: Provide infrastructure to deal '
		  'with nested blocking") added')


def log(msg):
	print("fixes: " + msg, file=sys.stderr, flush=True)


def wrap(text, width=72):
	words = text.split()
	lines, cur = [], ""
	for w in words:
		if cur and len(cur) + 1 + len(w) > width:
			lines.append(cur)
			cur = w
		else:
			cur = (cur + " " + w) if cur else w
	if cur:
		lines.append(cur)
	return "\n".join(lines)


def noline(text):
	"""A changelog holds no line numbers: file.c:123 becomes file.c, and
	'on line 123' goes."""
	text = re.sub(r"(\.[ch]):\d+\b", r"\1", text)
	return re.sub(r"\s+(?:on|at) line \d+\b|\s+line \d+\b", "", text)


def capital(c):
	"""'wakers: ...' -> 'Wakers: ...'; an identifier stays as it is."""
	m = re.match(r"^[a-z]+\b(?![_(])", c)
	return c[0].upper() + c[1:] if m else c
