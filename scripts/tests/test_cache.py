# SPDX-License-Identifier: GPL-2.0-only
"""The cache survives faults (issue 14, item 6): a run killed part way, a
damaged cache file, two runs at once on one cache.  Each ends with the
findings of a clean run, and never with a traceback.

The tree is every fixtures/report case side by side under drivers/cN/,
in COPIES copies that differ by a comment (the cache is keyed by content):
large enough that a cold run takes several seconds."""

import glob
import os
import shutil
import signal
import subprocess
import tempfile
import time
import unittest

from nestsleep import TOP
from nestsleep.cache import Cache

PY = "/usr/bin/python3"
COPIES = 12


def build_tree(root):
	src = os.path.join(TOP, "fixtures", "report")
	for n in range(COPIES):
		dst = os.path.join(root, "drivers", "c%d" % n)
		for path in sorted(glob.glob(os.path.join(src, "*"))):
			name = os.path.basename(path)
			if os.path.isdir(path):
				shutil.copytree(path, os.path.join(dst, name))
			elif name.endswith(".c"):
				os.makedirs(dst, exist_ok=True)
				shutil.copy(path, os.path.join(dst, name))
		for dp, dn, fn in os.walk(dst):
			for f in fn:
				with open(os.path.join(dp, f), "r+") as fp:
					text = fp.read()
					fp.seek(0)
					fp.write("/* copy %d */\n" % n + text)


class CacheFaultTest(unittest.TestCase):
	@classmethod
	def setUpClass(cls):
		cls.tmp = tempfile.mkdtemp(prefix="nestsleep-cache-")
		cls.kdir = os.path.join(cls.tmp, "tree")
		build_tree(cls.kdir)
		cls.clean = cls.run_tool(os.path.join(cls.tmp, "clean"))
		assert cls.clean.returncode == 0, cls.clean.stderr
		assert cls.clean.stdout.count("WARNING") >= 10, cls.clean.stdout

	@classmethod
	def tearDownClass(cls):
		shutil.rmtree(cls.tmp, ignore_errors=True)

	@classmethod
	def command(cls, cache):
		return [PY, "-m", "nestsleep", "coccicheck", "--kdir", cls.kdir, "--cache", cache, "-j", "2"]

	@classmethod
	def run_tool(cls, cache):
		return subprocess.run(cls.command(cache), capture_output=True, text=True, timeout=600)

	def assertClean(self, r):
		self.assertEqual(r.returncode, 0, r.stderr)
		self.assertNotIn("Traceback", r.stderr)
		self.assertEqual(r.stdout, self.clean.stdout)

	def test_killed_cold_runs(self):
		"""kill -9 (the whole process group, spatch too) part way through a
		cold run, at several points; the next run finds what a clean run
		finds."""
		killed = 0
		for delay in (0.3, 0.8, 1.4, 2.2):
			cache = os.path.join(self.tmp, "killed-%s" % delay)
			p = subprocess.Popen(self.command(cache), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
					     start_new_session=True)
			time.sleep(delay)
			try:
				os.killpg(p.pid, signal.SIGKILL)
			except ProcessLookupError:
				pass
			if p.wait() == -signal.SIGKILL:
				killed += 1
			self.assertClean(self.run_tool(cache))
		self.assertGreaterEqual(killed, 3, "the runs ended before they were killed: use a larger tree")

	def test_damaged_files(self):
		"""Truncated, emptied, garbled and bit-flipped cache files are dropped
		and rebuilt."""
		cache = os.path.join(self.tmp, "damaged")
		self.assertClean(self.run_tool(cache))
		files = sorted(os.path.join(dp, f) for dp, dn, fn in os.walk(cache) for f in fn)
		self.assertGreater(len(files), 20)
		for i, path in enumerate(files):
			with open(path, "rb") as f:
				data = f.read()
			kind = i % 4
			if kind == 0:
				data = data[:len(data) // 2]
			elif kind == 1:
				data = b""
			elif kind == 2:
				data = b"\x00garbage" * 7
			else:
				mid = len(data) // 2
				data = data[:mid] + bytes([data[mid] ^ 0x01]) + data[mid + 1:] if data else data
			with open(path, "wb") as f:
				f.write(data)
		r = self.run_tool(cache)
		self.assertClean(r)
		self.assertIn("damaged cache files dropped", r.stderr)
		# and the rebuilt cache is whole again
		r = self.run_tool(cache)
		self.assertClean(r)
		self.assertNotIn("damaged cache files dropped", r.stderr)

	def test_two_runs_at_once(self):
		cache = os.path.join(self.tmp, "two")
		ps = [subprocess.Popen(self.command(cache), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
		      for _ in range(2)]
		for p in ps:
			out, err = p.communicate(timeout=600)
			self.assertClean(subprocess.CompletedProcess(p.args, p.returncode, out, err))
		self.assertClean(self.run_tool(cache))


class CacheFileTest(unittest.TestCase):
	def test_store_is_atomic_and_load_checks(self):
		with tempfile.TemporaryDirectory() as d:
			c = Cache(d)
			c.store({"a": [1, 2]}, "x", "k")
			self.assertEqual(c.load("x", "k"), {"a": [1, 2]})
			self.assertEqual(os.listdir(os.path.join(d, "x")), ["k"])
			path = os.path.join(d, "x", "k")
			with open(path, "rb") as f:
				data = f.read()
			with open(path, "wb") as f:
				f.write(data[:-1] + bytes([data[-1] ^ 0x20]))
			self.assertIsNone(c.load("x", "k"))
			self.assertFalse(os.path.exists(path))
			self.assertEqual(c.dropped, 1)


class PackedFactsTest(unittest.TestCase):
	"""scan.Facts keeps each function's record packed (marshal bytes) and
	decodes it when asked: what the analysis reads must be what
	cfacts.extract() gave, freshly extracted (in this process and in the
	pool) and loaded from the cache."""

	def test_same_as_extract(self):
		import types
		from nestsleep.analysis import cfacts
		from nestsleep.analysis.scan import Facts
		from nestsleep.common import sha1
		from nestsleep.knowledge import Knowledge
		kn = Knowledge()
		texts = {
			"a.c": "static int f(int x)\n{\n\tmutex_lock(&m);\n\treturn g(x, GFP_KERNEL);\n}\n"
			       "void h(void) { set_current_state(TASK_INTERRUPTIBLE); schedule(); }\n",
			"b.c": "#define W(x) wait_event(q, x)\nint k(void) { return 0; }\n",
			"c.c": "int k(void) { return 0; }\n",
			"d.c": "#define W(x) wait_event(q, x)\nint k(void) { return 0; }\n",	# b.c's content
		}
		with tempfile.TemporaryDirectory() as d:
			tree = types.SimpleNamespace(files={}, abs={})
			for rel, text in texts.items():
				tree.abs[rel] = os.path.join(d, rel)
				with open(tree.abs[rel], "w") as f:
					f.write(text)
				tree.files[rel] = (sha1(text.encode()),)
			tree.sha = lambda rel: tree.files[rel][0]
			want = {rel: cfacts.extract(t, kn.want_args, kn.restore, kn.words) for rel, t in texts.items()}
			for jobs in (1, 2, 1):	# here, the pool, then all from the cache
				facts = Facts(tree, kn, Cache(os.path.join(d, "cache")), jobs)
				facts.ensure(sorted(texts))
				facts.close()
				for rel in texts:
					got = facts.get(rel)
					with self.subTest(rel=rel, jobs=jobs):
						self.assertEqual(dict(got["functions"].items()), want[rel]["functions"])
						self.assertEqual(sorted(got["functions"]), sorted(want[rel]["functions"]))
						for k in ("macros", "structs", "ops"):
							self.assertEqual(got[k], want[rel][k])
						for name in want[rel]["functions"]:
							self.assertIn(name, got["functions"])
							self.assertEqual(got["functions"].get(name), want[rel]["functions"][name])
						self.assertIsNone(got["functions"].get("no_such_function"))


if __name__ == "__main__":
	unittest.main()
