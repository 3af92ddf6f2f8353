# SPDX-License-Identifier: GPL-2.0-only
"""Tests for nestsleep.analysis.pipeline: the library call that the stages
share (check()), and findings.json against fixtures/findings.schema.json."""

import copy
import json
import os
import shutil
import tempfile
import unittest

from nestsleep import TOP, cache_dir
from nestsleep.analysis import pipeline

SCHEMA = os.path.join(TOP, "fixtures", "findings.schema.json")
# fixtures with every shape: a wait_event condition and cmd, a
# prepare_to_wait window, a set_current_state loop, a carried state
SHAPES = ("shapes.c", "wait_event_variants.c", "macro_hop.c")


class CheckTest(unittest.TestCase):
	@classmethod
	def setUpClass(cls):
		"""One MODE=patch run of the shape fixtures, shared by the tests."""
		cls.tree = tempfile.mkdtemp(prefix="nestsleep-pipeline-")
		for name in SHAPES:
			shutil.copy(os.path.join(TOP, "fixtures", "report", name), cls.tree)
		cls.opts = pipeline.Options(kdir=cls.tree, mode="patch", jobs=2, confidence="low",
					    cache=os.path.join(cache_dir(), "test-cache"))
		cls.res = pipeline.check(cls.opts)

	@classmethod
	def tearDownClass(cls):
		shutil.rmtree(cls.tree, ignore_errors=True)

	def validator(self):
		try:
			import jsonschema
		except ImportError:
			self.skipTest("python3-jsonschema is not installed (make setup installs it)")
		with open(SCHEMA) as f:
			schema = json.load(f)
		jsonschema.Draft7Validator.check_schema(schema)
		return jsonschema.Draft7Validator(schema), jsonschema.ValidationError

	def test_findings_json_matches_schema(self):
		v, _ = self.validator()
		doc = json.loads(json.dumps(self.res.as_json(self.opts)))
		self.assertGreater(len(doc["findings"]), 3)
		shapes = set(f["shape"] for f in doc["findings"])
		self.assertTrue({"wait_event", "prepare_to_wait", "set_current_state"} <= shapes, shapes)
		errors = ["%s: %s" % ("/".join(map(str, e.path)), e.message) for e in v.iter_errors(doc)]
		self.assertEqual(errors, [])

	def test_schema_rejects_near_misses(self):
		"""The schema is not vacuous: a missing field, a wrong type, an
		unknown fix status and an unknown field are each rejected."""
		v, _ = self.validator()
		doc = json.loads(json.dumps(self.res.as_json(self.opts)))
		bad = []
		d = copy.deepcopy(doc)
		del d["findings"][0]["chain"]
		bad.append(d)
		d = copy.deepcopy(doc)
		d["findings"][0]["line"] = "12"
		bad.append(d)
		d = copy.deepcopy(doc)
		d["findings"][0]["fix"]["status"] = "maybe"
		bad.append(d)
		d = copy.deepcopy(doc)
		d["findings"][0]["extra"] = 1
		bad.append(d)
		for d in bad:
			self.assertFalse(v.is_valid(d))

	def test_patch_mode_output_is_the_diff(self):
		"""check() returns what MODE=patch prints: the diff of the fixed
		findings, and each finding's fix."""
		self.assertTrue(self.res.output.startswith("--- a/"), self.res.output[:200])
		patched = [f for f in self.res.findings if f["fix"]["status"] == "patch"]
		self.assertTrue(patched)
		for f in patched:
			self.assertIn("+++ b/" + f["file"], self.res.output)

	def test_bad_input_raises_user_error(self):
		with tempfile.TemporaryDirectory() as d:
			with self.assertRaises(pipeline.UserError):
				pipeline.check(pipeline.Options(kdir=d, mode="bogus"))


if __name__ == "__main__":
	unittest.main()


class SearchFilesTest(unittest.TestCase):
	"""pipeline.search_files(): the thread creators' and the wait wrappers'
	searches over the whole tree read only the files that name them, and
	find what a search of every file finds."""

	TEXTS = {
		"a.c": "static int t(void *d)\n{\n\treturn 0;\n}\nvoid s(void) { kthread_run(t, NULL, \"t\"); }\n",
		"comment.c": "/* kthread_run(in_comment, x) */\n",
		"prefix.c": "void s(void) { my_kthread_run(not_this, NULL); xkthread_run(nor_this); }\n",
		"spaced.c": "void s(void) { kthread_create (\n\t&spaced , NULL, \"s\"); }\n",
		"string.c": "const char *s = \"kthread_run(in_string)\";\n",
		"odd.c": b"char c = '\xe9'; void s(void) { \xe9kthread_run(after_odd, 0); }\n",
		"none.c": "int x;\n",
		"later.h": "#define START(f) kthread_run(f, NULL, #f)\n",
	}

	def test_same_as_reading_every_file(self):
		import builtins
		import re
		from nestsleep.analysis.scan import Tree
		from nestsleep.cache import Cache
		tmp = tempfile.mkdtemp(prefix="nestsleep-search-")
		self.addCleanup(shutil.rmtree, tmp, True)
		src = os.path.join(tmp, "src")
		os.makedirs(src)
		for name, text in self.TEXTS.items():
			with open(os.path.join(src, name), "wb") as f:
				f.write(text if isinstance(text, bytes) else text.encode())
		cache = Cache(os.path.join(tmp, "cache"))
		tree = Tree(src, cache, 1)
		names = ["kthread_create", "kthread_run"]
		pat = re.compile(r"\b(?:%s)\s*\(\s*&?\s*([A-Za-z_]\w*)\s*[,)]" % "|".join(names))
		want = {}
		for rel in tree.files:
			with open(tree.abs[rel], errors="replace") as f:
				want[rel] = sorted(set(pat.findall(f.read())))
		opened = []
		real_open = builtins.open

		def spy(path, *a, **k):
			if str(path).startswith(src):
				opened.append(os.path.relpath(path, src))
			return real_open(path, *a, **k)
		builtins.open = spy
		try:
			got = pipeline.search_files(tree, cache, "test-threads", names,
						    lambda text: sorted(set(pat.findall(text))), [], sorted(tree.files))
		finally:
			builtins.open = real_open
		self.assertEqual(got, want)
		self.assertEqual(got["spaced.c"], ["spaced"])
		self.assertEqual(got["odd.c"], ["after_odd"])
		self.assertNotIn("none.c", opened)
		# a second search reads no file: the cache has each content's result
		opened.clear()
		builtins.open = spy
		try:
			again = pipeline.search_files(tree, cache, "test-threads", names, None, [], sorted(tree.files))
		finally:
			builtins.open = real_open
		self.assertEqual(again, want)
		self.assertEqual(opened, [])
