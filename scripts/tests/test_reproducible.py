# SPDX-License-Identifier: GPL-2.0-only
"""Reproducible outputs: with SOURCE_DATE_EPOCH set, two runs of make fixes
(and of make triage, with NESTSLEEP_VERSION=) write the same bytes, however
much the clock moved between them; the series stay threaded as git
format-patch --thread threads them, with Message-Ids made from their text."""

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

from nestsleep import TOP

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_reports import triage_tree  # noqa: E402
from test_series_git import clean_env, fixture_tree  # noqa: E402

EPOCH = "1700000000"
EPOCH_DATE = "Tue, 14 Nov 2023 22:13:20 +0000"
MSGID = r"<[0-9a-f]{40}\.%d\.nestsleep@example\.invalid>"


def read(path):
	with open(path, errors="surrogateescape") as f:
		return f.read()


def tree_bytes(top):
	"""{relative path: bytes} of every file under top."""
	out = {}
	for d, _, files in os.walk(top):
		for n in files:
			p = os.path.join(d, n)
			with open(p, "rb") as f:
				out[os.path.relpath(p, top)] = f.read()
	return out


def headers(text):
	"""The mail headers of a format-patch file, in order: [(name, value)]."""
	head = text.split("\n\n", 1)[0].split("\n")[1:]
	return [tuple(x.split(": ", 1)) for x in head if not x.startswith((" ", "\t"))]


class SeriesReproducible(unittest.TestCase):
	"""make fixes on the set_current_state fixture: one series of four
	patches and a cover letter (each function's chain made its own), and
	one series of a lone patch (the functions share their sleeping call)."""

	@classmethod
	def setUpClass(cls):
		cls.tmp = tempfile.mkdtemp(prefix="nestsleep-repro-")
		cls.kdir = fixture_tree(cls.tmp)
		cls.env = clean_env(cls.tmp)
		jp = os.path.join(cls.tmp, "findings.json")
		r = subprocess.run(["/usr/bin/python3", "-m", "nestsleep", "coccicheck", "--kdir", cls.kdir, "--mode",
				    "patch", "-j", "2", "--json", jp], capture_output=True, text=True, env=cls.env,
				   cwd=cls.tmp, timeout=300)
		assert r.returncode in (0, 1), r.stderr
		with open(jp) as f:
			data = json.load(f)
		cls.one = os.path.join(cls.tmp, "one.json")
		with open(cls.one, "w") as f:
			json.dump(data, f)
		for x in data["findings"]:
			x["chain"] = x["chain"][:-1] + ["sleeper_of_" + x["function"]]
		cls.four = os.path.join(cls.tmp, "four.json")
		with open(cls.four, "w") as f:
			json.dump(data, f)

	@classmethod
	def tearDownClass(cls):
		shutil.rmtree(cls.tmp, ignore_errors=True)

	def run_fixes(self, out, jp, epoch=EPOCH):
		env = dict(self.env, SOURCE_DATE_EPOCH=epoch)
		r = subprocess.run(["/usr/bin/python3", "-m", "nestsleep", "fixes", "--kdir", self.kdir, "--out", out,
				    "--confidence", "low", "--json", jp], capture_output=True, text=True, env=env,
				   cwd=self.tmp, timeout=300)
		self.assertEqual(r.returncode, 0, r.stderr)
		with open(os.path.join(out, "series.json")) as f:
			return json.load(f)

	def twice(self, jp, name):
		"""Two runs into the same OUT, a second and more apart: the bytes
		of each."""
		out = os.path.join(self.tmp, name)
		self.run_fixes(out, jp)
		first = tree_bytes(out)
		time.sleep(1.5)
		self.run_fixes(out, jp)
		return first, tree_bytes(out)

	def test_two_runs_byte_identical(self):
		for jp, name in ((self.four, "out-four"), (self.one, "out-one")):
			first, second = self.twice(jp, name)
			self.assertEqual(sorted(first), sorted(second))
			for rel in first:
				self.assertEqual(first[rel].decode(errors="replace"), second[rel].decode(errors="replace"),
						 "%s differs between two runs with SOURCE_DATE_EPOCH=%s" % (rel, EPOCH))

	def test_dates_from_epoch(self):
		out = os.path.join(self.tmp, "out-dates")
		man = self.run_fixes(out, self.four)
		self.assertEqual(man["generated"], EPOCH_DATE)
		for s in man["series"]:
			for p in [s["cover"]] + [e["patch"] for e in s["patches"]]:
				self.assertEqual(dict(headers(read(os.path.join(out, p))))["Date"], EPOCH_DATE, p)

	def test_threaded_with_cover(self):
		out = os.path.join(self.tmp, "out-thread")
		man = self.run_fixes(out, self.four)
		self.assertEqual(len(man["series"]), 1)
		s = man["series"][0]
		self.assertEqual(len(s["patches"]), 4)
		cover = headers(read(os.path.join(out, s["cover"])))
		# Message-Id first, as format-patch --thread writes it
		self.assertEqual(cover[0][0], "Message-Id")
		self.assertRegex(cover[0][1], "^%s$" % (MSGID % 0))
		self.assertNotIn("In-Reply-To", dict(cover))
		ids = [cover[0][1]]
		for i, e in enumerate(s["patches"], 1):
			h = headers(read(os.path.join(out, e["patch"])))
			self.assertEqual([k for k, v in h[:3]], ["Message-Id", "In-Reply-To", "References"])
			self.assertRegex(h[0][1], "^%s$" % (MSGID % i))
			self.assertEqual(h[1][1], cover[0][1])
			self.assertEqual(h[2][1], cover[0][1])
			ids.append(h[0][1])
		self.assertEqual(len(set(ids)), 5)
		# one series, one hash
		self.assertEqual(len(set(x.split(".")[0] for x in ids)), 1)

	def test_lone_patch_threaded(self):
		out = os.path.join(self.tmp, "out-lone")
		man = self.run_fixes(out, self.one)
		s = man["series"][0]
		self.assertFalse(s["cover_letter"])
		h = headers(read(os.path.join(out, s["patches"][0]["patch"])))
		self.assertEqual(h[0][0], "Message-Id")
		self.assertRegex(h[0][1], "^%s$" % (MSGID % 1))
		self.assertNotIn("In-Reply-To", dict(h))
		self.assertNotIn("References", dict(h))

	def test_other_epoch_other_date(self):
		out = os.path.join(self.tmp, "out-other")
		man = self.run_fixes(out, self.one, epoch="1600000000")
		self.assertEqual(man["generated"], "Sun, 13 Sep 2020 12:26:40 +0000")

	def test_bad_epoch(self):
		env = dict(self.env, SOURCE_DATE_EPOCH="yesterday")
		r = subprocess.run(["/usr/bin/python3", "-m", "nestsleep", "fixes", "--kdir", self.kdir, "--out",
				    os.path.join(self.tmp, "out-bad"), "--json", self.one], capture_output=True, text=True,
				   env=env, cwd=self.tmp, timeout=300)
		self.assertEqual(r.returncode, 2, r.stderr)
		self.assertIn("SOURCE_DATE_EPOCH=yesterday", r.stderr)
		self.assertNotIn("Traceback", r.stderr)


class TriageReproducible(unittest.TestCase):
	"""make triage on a fixture tree, twice: the version from the knob
	(NESTSLEEP_VERSION in the environment, then --nestsleep-version as the
	Makefile passes it) and the date from SOURCE_DATE_EPOCH."""

	@classmethod
	def setUpClass(cls):
		cls.tmp, cls.kdir, cls.env = triage_tree("nestsleep-repro-triage-")
		cls.env.pop("NESTSLEEP_VERSION", None)
		cls.jp = os.path.join(cls.tmp, "findings.json")
		r = subprocess.run(["/usr/bin/python3", "-m", "nestsleep", "coccicheck", "--kdir", cls.kdir, "--mode",
				    "patch", "-j", "2", "--json", cls.jp], capture_output=True, text=True, env=cls.env,
				   timeout=600)
		assert r.returncode in (0, 1), r.stderr

	@classmethod
	def tearDownClass(cls):
		shutil.rmtree(cls.tmp, ignore_errors=True)

	def triage(self, out, extra=(), env=None):
		r = subprocess.run(["/usr/bin/python3", "-m", "nestsleep", "triage", "--kdir", self.kdir, "-j", "2",
				    "--out", out, "--json", self.jp, "--labels", os.path.join(self.tmp, "none.json")]
				   + list(extra), capture_output=True, text=True, env=env or self.env, timeout=600)
		self.assertEqual(r.returncode, 0, r.stderr)
		return tree_bytes(out)

	def test_index_byte_identical(self):
		out = os.path.join(self.tmp, "out")
		first = self.triage(out, env=dict(self.env, SOURCE_DATE_EPOCH=EPOCH, NESTSLEEP_VERSION="9.9-test"))
		idx = first["index.md"].decode()
		self.assertIn("| nestsleep | 9.9-test |", idx)
		self.assertIn("| date | 2023-11-14 22:13 UTC |", idx)
		self.assertEqual(json.loads(first["findings.json"])["version"], "9.9-test")
		time.sleep(61 - time.time() % 60)	# into the next minute, the resolution of index.md's date
		second = self.triage(out, ["--nestsleep-version", "9.9-test"], dict(self.env, SOURCE_DATE_EPOCH=EPOCH))
		self.assertEqual(sorted(first), sorted(second))
		for rel in first:
			self.assertEqual(first[rel].decode(errors="replace"), second[rel].decode(errors="replace"), rel)

	def test_version_default(self):
		out = os.path.join(self.tmp, "out-default")
		idx = self.triage(out)["index.md"].decode()
		rev = subprocess.run(["git", "-C", TOP, "rev-parse", "--short", "HEAD"], capture_output=True,
				     text=True).stdout.strip()
		self.assertIn("| nestsleep | 0.1%s |" % ("+" + rev if rev else ""), idx)
		self.assertTrue(re.search(r"\| date \| \d{4}-\d\d-\d\d \d\d:\d\d UTC \|", idx), idx)


if __name__ == "__main__":
	unittest.main()
