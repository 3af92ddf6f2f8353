# SPDX-License-Identifier: GPL-2.0-only
"""Tests for scripts/dev/check_fixture_build.py, the compile check of the
patch fixtures: which files each form builds, the Kbuild it is given, how
a compiler error or a sparse warning is reported, and its KTAP lines.
No kernel is built here."""

import io
import os
import shutil
import tempfile
import unittest
from contextlib import redirect_stdout

from dev import check_fixture_build as cfb


def write(path, text=""):
	os.makedirs(os.path.dirname(path), exist_ok=True)
	with open(path, "w") as f:
		f.write(text)


class FixturesTest(unittest.TestCase):
	def setUp(self):
		self.dir = tempfile.mkdtemp(prefix="nestsleep-fb-")

	def tearDown(self):
		shutil.rmtree(self.dir, ignore_errors=True)

	def p(self, *parts):
		return os.path.join(self.dir, *parts)

	def test_file_fixture_builds_the_c_and_the_res_as_the_same_name(self):
		write(self.p("one.c"), "c")
		write(self.p("one.res"), "res")
		write(self.p("one.json"), "{}")
		fxs, errors = cfb.load_fixtures(self.dir)
		self.assertEqual(errors, [])
		self.assertEqual([f.name for f in fxs], ["one"])
		self.assertEqual(cfb.form_files(fxs[0], "c"), {"one.c": self.p("one.c")})
		self.assertEqual(cfb.form_files(fxs[0], "res"), {"one.c": self.p("one.res")})

	def test_dir_fixture_res_overlays_the_source_dir(self):
		# the .res/ tree holds the files MODE=patch changes (and may
		# lack the Kbuild): the rest come from the source dir
		write(self.p("tree", "a.c"), "a")
		write(self.p("tree", "b.c"), "b")
		write(self.p("tree", "h.h"), "h")
		write(self.p("tree", "Kbuild"), "obj-m := t.o\nt-y := a.o b.o\n")
		write(self.p("tree.res", "a.c"), "a patched")
		write(self.p("tree.res", "h.h"), "h")
		fxs, errors = cfb.load_fixtures(self.dir)
		self.assertEqual((errors, [f.name for f in fxs]), ([], ["tree"]))
		self.assertEqual(cfb.form_files(fxs[0], "c"), {
			"a.c": self.p("tree", "a.c"), "b.c": self.p("tree", "b.c"), "h.h": self.p("tree", "h.h"),
			"Kbuild": self.p("tree", "Kbuild")})
		self.assertEqual(cfb.form_files(fxs[0], "res"), {
			"a.c": self.p("tree.res", "a.c"), "b.c": self.p("tree", "b.c"), "h.h": self.p("tree.res", "h.h"),
			"Kbuild": self.p("tree", "Kbuild")})

	def test_res_without_source_is_an_error(self):
		write(self.p("lost.res"), "x")
		write(self.p("ok.c"), "x")
		write(self.p("ok.res"), "x")
		fxs, errors = cfb.load_fixtures(self.dir)
		self.assertEqual([f.name for f in fxs], ["ok"])
		self.assertEqual(len(errors), 1)
		self.assertIn("lost.res", errors[0])

	def test_kbuild_kept_or_one_module_per_c_file(self):
		self.assertEqual(cfb.kbuild_text({"Kbuild": self.p("K")}, lambda p: "obj-m := t.o\n"), "obj-m := t.o\n")
		self.assertEqual(cfb.kbuild_text({"b.c": "x", "a.c": "y", "s.h": "z"}, None), "obj-m += a.o b.o\n")
		self.assertEqual(cfb.objects({"b.c": "", "a.c": "", "s.h": "", "Kbuild": ""}), ["a.o", "b.o"])

	def test_standalone_fixtures_res_is_the_c_with_its_diff(self):
		write(self.p("one.c"), "int one(void)\n{\n\treturn 1;\n}\n")
		write(self.p("one.patch"), "--- a/one.c\n+++ b/one.c\n@@ -1,4 +1,4 @@\n int one(void)\n {\n"
		      "-\treturn 1;\n+\treturn 2;\n }\n")
		write(self.p("two.c"), "x")
		write(self.p("two.report"), "")
		write(self.p("lost.patch"), "x")
		fxs, errors = cfb.load_standalone(self.dir)
		self.assertEqual([(f.name, f.forms()) for f in fxs], [("standalone/one", ("c", "res")),
								       ("standalone/two", ("c",))])
		self.assertEqual(len(errors), 1)
		self.assertIn("lost.patch", errors[0])
		one = fxs[0]
		self.assertEqual(cfb.form_files(one, "res"), {"one.c": self.p("one.c")})
		mod = self.p("mod")
		self.assertEqual(cfb.fill_moddir(one, "c", cfb.form_files(one, "c"), mod), "")
		self.assertEqual(cfb._read(os.path.join(mod, "one.c")), "int one(void)\n{\n\treturn 1;\n}\n")
		self.assertEqual(cfb.fill_moddir(one, "res", cfb.form_files(one, "res"), mod), "")
		self.assertEqual(cfb._read(os.path.join(mod, "one.c")), "int one(void)\n{\n\treturn 2;\n}\n")
		self.assertEqual(sorted(os.listdir(mod)), ["Kbuild", "one.c"])
		self.assertEqual(cfb._read(os.path.join(mod, "Kbuild")), "obj-m += one.o\n")
		# a diff that does not apply is the form's failure
		write(self.p("one.c"), "int one(void)\n{\n\treturn 3;\n}\n")
		self.assertIn("one.patch does not apply", cfb.fill_moddir(one, "res", cfb.form_files(one, "res"), mod))

	def test_a_help_goal_is_refused_with_its_reason(self):
		# 'make helper.o' is the kernel's help% target: no .config is read
		write(self.p("helper.c"), "x")
		write(self.p("other.c"), "x")
		fxs, errors = cfb.load_standalone(self.dir)
		self.assertIn("help%", cfb.goal_clash(fxs[0]))
		self.assertEqual(cfb.goal_clash(fxs[1]), "")

	def test_selection(self):
		self.assertTrue(cfb.selected("", "x"))
		self.assertTrue(cfb.selected("wait_event", "wait_event_rewrite"))
		self.assertTrue(cfb.selected("fixture_build/", "wait_event_rewrite"))
		self.assertTrue(cfb.selected("patch/restore", "restore_after_loop"))
		self.assertFalse(cfb.selected("report/", "restore_after_loop"))
		self.assertFalse(cfb.selected("unit/", "restore_after_loop"))
		self.assertTrue(cfb.selected("standalone/patch_one", "standalone/patch_one", True))
		self.assertTrue(cfb.selected("fixture_build/standalone/", "standalone/patch_one", True))
		self.assertFalse(cfb.selected("patch/", "standalone/patch_one", True))


BUILD_OK = """\
make: Entering directory '/k'
  CC [M]  /m/one.o
  CHECK   /m/one.c
/m/one.c:12:9: warning: context imbalance in 'f' - wrong count at exit
/k/include/linux/x.h:3:1: warning: something in a kernel header
make: Leaving directory '/k'
"""

BUILD_ERR = """\
  CC [M]  /m/one.o
/m/one.c: In function 'f':
/m/one.c:20:2: error: implicit declaration of function 'helper' [-Werror=implicit-function-declaration]
   20 |  helper();
      |  ^~~~~~
cc1: all warnings being treated as errors
make[2]: *** [/k/scripts/Makefile.build:250: /m/one.o] Error 1
"""


class JudgeTest(unittest.TestCase):
	def test_sparse_warnings_in_the_fixture_files_only(self):
		ok, detail, warns = cfb.judge(0, BUILD_OK, "/m", {"one.c": ""})
		self.assertTrue(ok)
		self.assertEqual(warns, ["one.c:12:9: warning: context imbalance in 'f' - wrong count at exit"])

	def test_compile_error_is_reported_with_its_line(self):
		ok, detail, warns = cfb.judge(2, BUILD_ERR, "/m", {"one.c": ""})
		self.assertFalse(ok)
		self.assertIn("one.c:20:2: error: implicit declaration of function 'helper'", detail)
		self.assertIn("Error 1", detail)
		self.assertEqual(warns, [])

	def test_fatal_error_in_a_fixture_header_is_reported(self):
		out = ("In file included from /m/drivers/x/a.c:3:\n"
		       "/m/include/x.h:2:10: fatal error: linux/nope.h: No such file or directory\n"
		       "compilation terminated.\n"
		       "make[2]: *** [/k/scripts/Makefile.build:250: drivers/x/a.o] Error 1\n")
		ok, detail, warns = cfb.judge(2, out, "/m", {"drivers/x/a.c": "", "include/x.h": ""})
		self.assertFalse(ok)
		self.assertIn("include/x.h:2:10: fatal error: linux/nope.h: No such file or directory", detail)


class KtapTest(unittest.TestCase):
	def test_fast_skips_every_build_with_a_result_each(self):
		tmp = tempfile.mkdtemp(prefix="nestsleep-fb-")
		try:
			write(os.path.join(tmp, "one.c"))
			write(os.path.join(tmp, "one.res"))
			out = io.StringIO()
			with redirect_stdout(out):
				rc = cfb.main(["--fast", "--fixtures", tmp, "--standalone", ""])
			lines = [l for l in out.getvalue().splitlines() if l.startswith(("ok", "not ok"))]
			self.assertEqual(rc, 0)
			self.assertEqual(lines, ["ok 1 - one/c # SKIP --fast: no kernel build",
						 "ok 2 - one/c/sparse # SKIP --fast: no kernel build",
						 "ok 3 - one/res # SKIP --fast: no kernel build",
						 "ok 4 - one/res/sparse # SKIP --fast: no kernel build"])
		finally:
			shutil.rmtree(tmp, ignore_errors=True)

	def test_fast_lists_standalone_forms(self):
		tmp = tempfile.mkdtemp(prefix="nestsleep-fb-")
		try:
			os.mkdir(os.path.join(tmp, "patch"))
			write(os.path.join(tmp, "sa", "one.c"))
			write(os.path.join(tmp, "sa", "one.patch"))
			write(os.path.join(tmp, "sa", "two.c"))
			out = io.StringIO()
			with redirect_stdout(out):
				rc = cfb.main(["--fast", "--fixtures", os.path.join(tmp, "patch"),
					       "--standalone", os.path.join(tmp, "sa")])
			lines = [l for l in out.getvalue().splitlines() if l.startswith(("1..", "ok", "not ok"))]
			self.assertEqual(rc, 0)
			self.assertEqual([l.split(" # ")[0] for l in lines], [
				"1..6", "ok 1 - standalone/one/c", "ok 2 - standalone/one/c/sparse",
				"ok 3 - standalone/one/res", "ok 4 - standalone/one/res/sparse",
				"ok 5 - standalone/two/c", "ok 6 - standalone/two/c/sparse"])
		finally:
			shutil.rmtree(tmp, ignore_errors=True)

	def test_bad_fixture_dir_is_a_one_line_error(self):
		err = io.StringIO()
		from contextlib import redirect_stderr
		with redirect_stderr(err), redirect_stdout(io.StringIO()):
			rc = cfb.main(["--fixtures", "/nonexistent/fixtures"])
		self.assertEqual(rc, 2)
		self.assertEqual(len(err.getvalue().strip().splitlines()), 1)


if __name__ == "__main__":
	unittest.main()
