# SPDX-License-Identifier: GPL-2.0-only
"""scan.DEF_LINE and scan.INIT_MEMBER, which begin with the newline before
a line, against the '^' patterns they replace (kept here as the
reference): the same matches on odd texts and on files of both trees."""

import os
import random
import re
import unittest

from nestsleep import cache_dir
from nestsleep.analysis import scan

REF_DEF_LINE = re.compile(
	rb"^(?:[A-Za-z_][^\n;(]*?)?\b([A-Za-z_]\w*)[ \t]*\([^\n;]*$"
	rb"|^#[ \t]*define[ \t]+([A-Za-z_]\w*)\("
	rb"|^(?:typedef[ \t]+)?struct[ \t]+(\w+)[ \t]*\{", re.M)
REF_INIT_MEMBER = re.compile(rb"^[ \t]*\.(\w+)[ \t]*=[ \t]*&?[A-Za-z_]\w*[ \t]*,?[ \t]*$", re.M)
TREES = [os.path.join(cache_dir(), "linux-source-6.1"), os.path.join(cache_dir(), "linux-source-6.12")]

CASES = [
	b"int f(void)\n{\n}\n",				# a definition on the first line
	b"#define M(x) x\nstruct s {\n\t.a = b,\n};",	# first-line macro, no last newline
	b"\r\nint g(int a)\r\n{\r\n}\r\n\t.x = y,\r\n",	# CRLF
	b"static int\nh(struct s *p)\n",		# the name on its own line
	b"int a; int b(void)\n",			# a ';' on the line
	b"\n\n\n.m = n\n  .k=&l ,  \n",			# members, blank lines first
	b"typedef struct t {\n} t_t;\nstruct u\t{\n",
	b"x1 = (y)\n1abc (d)\nfoo bar (\n",
	b"",
	b"\n",
	b"int f(\xff)\n\xe9 g(\n",
]


def same(data):
	new = [m.groups() for m in scan.DEF_LINE.finditer(b"\n" + data)]
	ref = [m.groups() for m in REF_DEF_LINE.finditer(data)]
	return new == ref and scan.INIT_MEMBER.findall(b"\n" + data) == REF_INIT_MEMBER.findall(data)


class ScanLinesTest(unittest.TestCase):
	def test_cases(self):
		for data in CASES:
			with self.subTest(data=data):
				self.assertTrue(same(data))

	def test_tree_files(self):
		n = 0
		for tree in TREES:
			if not os.path.isdir(tree):
				continue
			paths = sorted(scan.list_sources(tree))
			for path in random.Random(7).sample(paths, min(1500, len(paths))):
				with open(path, "rb") as f:
					data = f.read()
				with self.subTest(path=path):
					self.assertTrue(same(data))
				n += 1
		if not n:
			self.skipTest("no kernel tree (make setup)")
