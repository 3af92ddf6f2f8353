# SPDX-License-Identifier: GPL-2.0-only
"""The README's examples are real output, and its links lead somewhere.

An example is a fenced block right after a line '<!-- example: NAME -->'.
Its first line is '$ COMMAND', run with bash in the repository's top
directory; the other lines are what the command prints on stdout.  A line
'...' stands for any number of lines left out, so a block can show an
excerpt: the lines between two '...' must appear together and in order,
and a block with no '...' at its start (end) must match the output's start
(end).  The commands run on fixtures, not on a kernel tree, so the check
is quick and the output does not change with the tree.

The links: every relative link (outside code) of the top-level README and of the folder
READMEs names a file that exists and, after '#', a heading of that file
(as GitHub makes its anchor).
"""

import difflib
import glob
import os
import re
import subprocess
import unittest

from nestsleep import TOP, cache_dir

EXAMPLE = re.compile(r"^<!-- example: ([\w-]+) -->\n```[^\n]*\n(.*?)^```$", re.M | re.S)
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
ELIDED = "..."


def examples(text):
	"""{name: (command, expected lines)} for each marked block of text."""
	out = {}
	for m in EXAMPLE.finditer(text):
		lines = m.group(2).split("\n")[:-1]
		if not lines or not lines[0].startswith("$ "):
			raise ValueError("example %s: the first line is not '$ COMMAND'" % m.group(1))
		out[m.group(1)] = (lines[0][2:], lines[1:])
	return out


def mismatch(want, got):
	"""Why the lines got do not show the block want ('...' elides), or ''."""
	segs, cur = [], []
	for l in want:
		if l == ELIDED:
			segs.append(cur)
			cur = []
		else:
			cur.append(l)
	segs.append(cur)
	if len(segs) == 1:
		if want == got:
			return ""
		return "the output is not the block:\n" + "\n".join(
			difflib.unified_diff(want, got, "README", "output", lineterm=""))
	pos = 0
	for i, seg in enumerate(segs):
		if not seg:
			continue
		last = i == len(segs) - 1
		found = -1
		for at in range(pos, len(got) - len(seg) + 1):
			if got[at:at + len(seg)] == seg:
				found = at
				if not last:
					break
		if found < 0 or (i == 0 and found != 0) or (last and found + len(seg) != len(got)):
			return "these lines are not in the output %s:\n%s\n--- output:\n%s" % (
				"at its start" if i == 0 else "at its end" if last else "in order",
				"\n".join(seg), "\n".join(got))
		pos = found + len(seg)
	return ""


def slug(heading):
	"""GitHub's anchor for a heading's text."""
	s = heading.strip().lower()
	s = re.sub(r"[^\w\- ]", "", s)
	return s.replace(" ", "-")


def anchors(path):
	with open(path) as f:
		text = f.read()
	text = re.sub(r"^```.*?^```", "", text, flags=re.M | re.S)
	return {slug(m.group(1)) for m in re.finditer(r"^#+\s+(.*)$", text, re.M)}


def readmes():
	return [os.path.join(TOP, "README.md")] + sorted(glob.glob(os.path.join(TOP, "*", "README.md")))


class MatchTest(unittest.TestCase):
	def test_whole_block(self):
		self.assertEqual(mismatch(["a", "b"], ["a", "b"]), "")
		self.assertIn("not the block", mismatch(["a", "b"], ["a", "c"]))
		self.assertIn("not the block", mismatch(["a"], ["a", "b"]))

	def test_excerpt(self):
		got = ["h", "a", "b", "x", "c", "t"]
		self.assertEqual(mismatch(["...", "a", "b", "...", "c", "..."], got), "")
		self.assertEqual(mismatch(["h", "...", "t"], got), "")
		self.assertIn("in order", mismatch(["...", "b", "a", "..."], got))
		self.assertIn("at its start", mismatch(["a", "..."], got))
		self.assertIn("at its end", mismatch(["...", "c"], got))

	def test_examples_parse(self):
		text = "x\n<!-- example: one -->\n```\n$ echo hi\nhi\n```\n"
		self.assertEqual(examples(text), {"one": ("echo hi", ["hi"])})
		with self.assertRaises(ValueError):
			examples("<!-- example: two -->\n```\nhi\n```\n")


class ReadmeExamplesTest(unittest.TestCase):
	@classmethod
	def setUpClass(cls):
		with open(os.path.join(TOP, "README.md")) as f:
			cls.examples = examples(f.read())

	def run_example(self, name):
		self.assertIn(name, self.examples, "README.md has no '<!-- example: %s -->' block" % name)
		cmd, want = self.examples[name]
		env = dict(os.environ, NESTSLEEP_CACHE=os.path.join(cache_dir(), "test-cache"))
		proc = subprocess.run(["bash", "-c", cmd], cwd=TOP, capture_output=True, text=True, timeout=600, env=env)
		self.assertEqual(proc.returncode, 0, proc.stderr[-2000:])
		why = mismatch(want, proc.stdout.split("\n")[:-1] if proc.stdout.endswith("\n") else proc.stdout.split("\n"))
		self.assertEqual(why, "", "README.md example '%s' (%s):\n%s" % (name, cmd, why))

	def test_report(self):
		self.run_example("report")

	def test_patch(self):
		self.run_example("patch")


class LinksTest(unittest.TestCase):
	def test_links(self):
		bad = []
		for readme in readmes():
			with open(readme) as f:
				text = f.read()
			# code is not a link: fenced blocks and `spans` out
			text = re.sub(r"`[^`\n]*`", "", re.sub(r"^```.*?^```", "", text, flags=re.M | re.S))
			for target in LINK.findall(text):
				if re.match(r"[a-z]+:", target):
					continue
				path, _, anchor = target.partition("#")
				dest = os.path.normpath(os.path.join(os.path.dirname(readme), path)) if path else readme
				where = os.path.relpath(readme, TOP)
				if not os.path.exists(dest):
					bad.append("%s: %s: no such file" % (where, target))
				elif anchor and (os.path.isdir(dest) or anchor not in anchors(dest)):
					bad.append("%s: %s: no such heading" % (where, target))
		self.assertEqual(bad, [])


if __name__ == "__main__":
	unittest.main()
