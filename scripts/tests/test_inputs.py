# SPDX-License-Identifier: GPL-2.0-only
"""First use and bad input: set-up output on stderr only, KDIR that is not
a kernel tree, M= under a skipped directory, samples/ scanned, and source
files that spatch or Python may choke on (issue 14, items 1, 2, 3 and 7).

Exit statuses are checked on the command itself; through make only the
one-line reason and the absence of a traceback are checked."""

import os
import shutil
import subprocess
import tempfile
import unittest

from nestsleep import TOP

PY = "/usr/bin/python3"
# a wait site whose condition sleeps: one finding
SLEEPY = ("static int ready(struct s *x)\n{\n\tmutex_lock(&x->m);\n\treturn 1;\n}\n"
	  "int h(struct s *x)\n{\n\twait_event(x->wq, ready(x));\n\treturn 0;\n}\n")


def write(path, text, mode="w"):
	os.makedirs(os.path.dirname(path), exist_ok=True)
	with open(path, mode) as f:
		f.write(text)


def kernel_like(root):
	"""The files by which nestsleep knows a kernel tree."""
	write(os.path.join(root, "Makefile"), "VERSION = 6\nPATCHLEVEL = 1\n")
	write(os.path.join(root, "Kconfig"), "mainmenu \"Linux\"\n")
	os.makedirs(os.path.join(root, "include", "linux"), exist_ok=True)


class Base(unittest.TestCase):
	def setUp(self):
		self.tmp = tempfile.mkdtemp(prefix="nestsleep-inputs-")
		self.cache = os.path.join(self.tmp, "cache")

	def tearDown(self):
		shutil.rmtree(self.tmp, ignore_errors=True)

	def cli(self, *args, env=None, timeout=300):
		env = dict(os.environ if env is None else env, NESTSLEEP_CACHE=self.cache)
		r = subprocess.run([PY, "-m", "nestsleep", "coccicheck", "--cache", self.cache] + list(args),
				   capture_output=True, env=env, timeout=timeout)
		# a diff holds the file's own bytes, which need not be UTF-8, and
		# its own line endings (no universal newlines here)
		r.stdout = r.stdout.decode("utf-8", "surrogateescape")
		r.stderr = r.stderr.decode("utf-8", "replace")
		return r

	def assertOneLineError(self, r, text):
		"""Exit 2, one line on stderr that holds text, no traceback."""
		self.assertEqual(r.returncode, 2, r.stderr)
		self.assertNotIn("Traceback", r.stderr)
		lines = [l for l in r.stderr.splitlines() if l.strip()]
		self.assertEqual(len(lines), 1, r.stderr)
		self.assertIn(text, lines[0])
		self.assertEqual(r.stdout, "")


class SetupOutputTest(Base):
	"""Item 1: every line of set-up goes to stderr; stdout holds findings only."""

	def stubs(self):
		"""apt-get that prints to stdout as the real one does, dpkg-query that
		reports one package missing, id that says root."""
		bin_ = os.path.join(self.tmp, "bin")
		os.makedirs(bin_)
		scripts = {
			"apt-get": "#!/bin/sh\necho 'Get:1 http://deb.debian.org/debian bookworm InRelease [151 kB]'\n"
				   "echo 'Setting up busybox-static ...'\nexit 0\n",
			"dpkg-query": "#!/bin/sh\nfor a; do p=$a; done\n"
				      "if [ \"$p\" = busybox-static ]; then printf 'deinstall ok config-files'; "
				      "else printf 'install ok installed'; fi\n",
			"id": "#!/bin/sh\necho 0\n",
		}
		for name, text in scripts.items():
			p = os.path.join(bin_, name)
			write(p, text)
			os.chmod(p, 0o755)
		return dict(os.environ, PATH=bin_ + os.pathsep + os.environ["PATH"], NESTSLEEP_CACHE=self.cache)

	def test_setup_bad_option(self):
		r = subprocess.run(["bash", os.path.join(TOP, "scripts", "setup.sh"), "--bogus"],
				   capture_output=True, text=True, timeout=60)
		self.assertOneLineError(r, "unknown option: --bogus")

	def test_setup_script_writes_nothing_to_stdout(self):
		env = self.stubs()
		r = subprocess.run(["bash", os.path.join(TOP, "scripts", "setup.sh"), "--no-tree"],
				   capture_output=True, text=True, env=env, timeout=120)
		self.assertEqual(r.returncode, 0, r.stderr)
		self.assertEqual(r.stdout, "")
		self.assertIn("Get:1", r.stderr)

	def test_make_coccicheck_stdout_is_the_findings(self):
		kdir = os.path.join(self.tmp, "tree")
		write(os.path.join(kdir, "drivers", "a.c"), SLEEPY)
		kernel_like(kdir)
		direct = self.cli("--kdir", kdir)
		self.assertEqual(direct.returncode, 0, direct.stderr)
		self.assertIn("WARNING", direct.stdout)
		env = self.stubs()
		r = subprocess.run(["make", "-s", "-C", TOP, "coccicheck", "KDIR=" + kdir],
				   capture_output=True, text=True, env=env, timeout=300)
		self.assertEqual(r.returncode, 0, r.stderr)
		self.assertIn("Get:1", r.stderr)
		self.assertEqual(r.stdout, direct.stdout)


class KdirTest(Base):
	"""Item 2: a KDIR that is neither a kernel tree nor a tree of C sources."""

	def test_directory_without_sources_is_refused(self):
		d = os.path.join(self.tmp, "etc")
		write(os.path.join(d, "passwd"), "root:x:0:0::/root:/bin/sh\n")
		write(os.path.join(d, "sub", "conf"), "x = 1\n")
		self.assertOneLineError(self.cli("--kdir", d), "KDIR=%s is not a kernel tree" % d)

	def test_etc_through_make(self):
		r = subprocess.run(["make", "-s", "-C", TOP, "coccicheck", "KDIR=/etc"],
				   capture_output=True, text=True, timeout=300)
		self.assertNotEqual(r.returncode, 0)
		self.assertNotIn("Traceback", r.stderr)
		self.assertIn("KDIR=/etc is not a kernel tree", r.stderr)
		self.assertEqual(r.stdout, "")

	def test_file_as_kdir(self):
		f = os.path.join(self.tmp, "a.c")
		write(f, SLEEPY)
		self.assertOneLineError(self.cli("--kdir", f), "no kernel tree at KDIR=%s" % f)

	def test_tree_of_sources_is_scanned_with_a_note(self):
		"""A directory of C sources without the kernel's top-level files (the
		fixtures are such trees) is scanned, and stderr says so."""
		d = os.path.join(self.tmp, "src")
		write(os.path.join(d, "a.c"), SLEEPY)
		r = self.cli("--kdir", d)
		self.assertEqual(r.returncode, 0, r.stderr)
		self.assertIn("a.c:8:", r.stdout)
		self.assertIn("not a kernel tree", r.stderr)
		kernel_like(d)
		r = self.cli("--kdir", d)
		self.assertEqual(r.returncode, 0, r.stderr)
		self.assertNotIn("not a kernel tree", r.stderr)


class SkippedDirsTest(Base):
	"""Item 3: samples/ holds modules and is scanned; an explicit M= under a
	directory the scan skips is refused with the reason, never dropped."""

	def setUp(self):
		super().setUp()
		self.kdir = os.path.join(self.tmp, "tree")
		kernel_like(self.kdir)
		write(os.path.join(self.kdir, "samples", "waiter", "waiter.c"), SLEEPY)
		write(os.path.join(self.kdir, "tools", "lib", "t.c"), SLEEPY)

	def test_samples_scanned_whole_tree_and_with_m(self):
		for m in ([], ["--m", "samples/waiter"], ["--m", "samples"]):
			r = self.cli("--kdir", self.kdir, *m)
			self.assertEqual(r.returncode, 0, r.stderr)
			self.assertEqual(len(r.stdout.splitlines()), 1, r.stdout)
			self.assertTrue(r.stdout.startswith("samples/waiter/waiter.c:8:"), r.stdout)

	def test_m_under_skipped_dir_is_refused(self):
		self.assertOneLineError(self.cli("--kdir", self.kdir, "--m", "tools/lib"), "M=tools/lib is under tools/")
		self.assertOneLineError(self.cli("--kdir", self.kdir, "--m", os.path.join(self.kdir, "tools", "lib")),
					"M=tools/lib is under tools/")


def fixable(comment=""):
	"""A file with one rewritable wait_event() (the patch fixture's head)."""
	with open(os.path.join(TOP, "fixtures", "patch", "wait_event_rewrite.c")) as f:
		src = f.read()
	# up to plain()'s definition (the fixture declares it above, too)
	head = src[:src.index("void plain(struct dev *d)\n{")]
	return head + "void plain(struct dev *d)\n{\n\t/* %s */\n\twait_event(d->wq, dev_ready(d));\n}\n" % comment


def wait_line():
	"""The line of fixable()'s wait_event()."""
	return fixable().split("\n").index("\twait_event(d->wq, dev_ready(d));") + 1


class OddFilesTest(Base):
	"""Item 7: files that are not UTF-8, CRLF line endings, a 100,000-line
	generated file, symbolic link loops, a file name that is not UTF-8.
	Each is scanned, or named and counted; the run goes on, and a patch
	for such a file applies to it as it is."""

	def tree(self, name, data):
		kdir = os.path.join(self.tmp, "tree")
		write(os.path.join(kdir, "drivers", name), data, "wb")
		return kdir

	def patch_applies(self, kdir, rel, **env):
		r = self.cli("--kdir", kdir, "--mode", "patch", "--confidence", "low", env=dict(os.environ, **env))
		self.assertEqual(r.returncode, 0, r.stderr)
		self.assertNotIn("Traceback", r.stderr)
		copy = os.path.join(self.tmp, "copy")
		shutil.copytree(kdir, copy)
		p = subprocess.run(["patch", "-p1", "--batch"], cwd=copy, input=r.stdout.encode("utf-8", "surrogateescape"),
				   capture_output=True, timeout=60)
		self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
		with open(os.path.join(copy, rel), "rb") as f:
			return f.read()

	def test_latin1_file(self):
		"""Not UTF-8, with a form feed (a line break to Python's splitlines,
		not to diff) in the hunk."""
		data = fixable("\u00a9 M\u00fcller \f").encode("latin-1")
		kdir = self.tree("l1.c", data)
		r = self.cli("--kdir", kdir)
		self.assertEqual(r.returncode, 0, r.stderr)
		self.assertEqual(len(r.stdout.splitlines()), 1, r.stdout)
		self.assertIn("drivers/l1.c:%d:" % wait_line(), r.stdout)
		# as under a locale whose stdout is strict UTF-8
		new = self.patch_applies(kdir, "drivers/l1.c", PYTHONIOENCODING="utf-8:strict")
		self.assertIn(b"wait_woken(", new)
		self.assertIn(b"/* \xa9 M\xfcller \x0c */", new)

	def test_crlf_file(self):
		data = fixable("crlf").replace("\n", "\r\n").encode()
		kdir = self.tree("crlf.c", data)
		r = self.cli("--kdir", kdir)
		self.assertEqual(r.returncode, 0, r.stderr)
		self.assertIn("drivers/crlf.c:%d:" % wait_line(), r.stdout)
		new = self.patch_applies(kdir, "drivers/crlf.c")
		self.assertIn(b"wait_woken(", new)
		self.assertEqual(new.count(b"\n"), new.count(b"\r\n"))

	def test_generated_100k_lines(self):
		src = fixable()
		at = src.index("void plain(struct dev *d)\n{")
		table = "static const int gen_table[] = {\n" + "".join("\t%d,\n" % i for i in range(100000)) + "};\n"
		kdir = self.tree("gen.c", (src[:at] + table + src[at:]).encode())
		r = self.cli("--kdir", kdir, "--timeout", "120")
		self.assertEqual(r.returncode, 0, r.stderr)
		self.assertNotIn("Traceback", r.stderr)
		named = "timed out: drivers/gen.c" in r.stderr or "could not parse: drivers/gen.c" in r.stderr
		self.assertTrue(named or "drivers/gen.c:%d:" % (100002 + wait_line()) in r.stdout, r.stdout + r.stderr)

	def test_symlink_loops_and_bad_names(self):
		kdir = self.tree("a.c", SLEEPY.encode())
		d = os.path.join(kdir, "drivers")
		os.symlink(".", os.path.join(d, "loop"))
		os.symlink("self.c", os.path.join(d, "self.c"))
		os.symlink("missing.h", os.path.join(d, "dangling.h"))
		with open(os.path.join(os.fsencode(d), b"caf\xe9.c"), "wb") as f:
			f.write(SLEEPY.encode())
		r = self.cli("--kdir", kdir)
		self.assertEqual(r.returncode, 0, r.stderr)
		self.assertNotIn("Traceback", r.stderr)
		self.assertEqual(r.stdout.splitlines(), [l for l in r.stdout.splitlines() if l.startswith("drivers/a.c:8:")])
		self.assertEqual(len(r.stdout.splitlines()), 1, r.stdout)
		self.assertIn("could not read: drivers/self.c", r.stderr)
		self.assertIn("could not read: drivers/dangling.h", r.stderr)
		self.assertIn("could not read: drivers/caf\\xe9.c (the name is not UTF-8)", r.stderr)
		self.assertIn("3 unreadable", r.stderr.splitlines()[-1])


class KnobsTest(Base):
	"""Every knob's bad value: exit 2 and one line, before any work is done
	(a bad --json or DEBUG_FILE used to surface as a traceback at the end)."""

	def setUp(self):
		super().setUp()
		self.kdir = os.path.join(self.tmp, "tree")
		write(os.path.join(self.kdir, "a.c"), SLEEPY)

	def test_bad_numbers(self):
		self.assertOneLineError(self.cli("--kdir", self.kdir, "-j", "abc"), "invalid int value: 'abc'")
		self.assertOneLineError(self.cli("--kdir", self.kdir, "-v", "x"), "invalid int value: 'x'")
		self.assertOneLineError(self.cli("--kdir", self.kdir, "--timeout", "-1"), "TIMEOUT=-1")

	def test_bad_spflags(self):
		"""spatch's refusal, in one line, before the scan (not after it)."""
		r = self.cli("--kdir", self.kdir, "--spflags=--bogus-flag")
		self.assertOneLineError(r, "SPFLAGS=--bogus-flag: spatch refused them: spatch: unknown option '--bogus-flag'")

	def test_unwritable_outputs(self):
		self.assertOneLineError(self.cli("--kdir", self.kdir, "--debug-file", "/nonexistent/dir/f"),
					"DEBUG_FILE=/nonexistent/dir/f")
		self.assertOneLineError(self.cli("--kdir", self.kdir, "--json", "/nonexistent/dir/f.json"),
					"/nonexistent/dir/f.json")
		r = subprocess.run([PY, "-m", "nestsleep", "coccicheck", "--kdir", self.kdir, "--cache", "/proc/nestsleep"],
				   capture_output=True, text=True, timeout=120)
		self.assertOneLineError(r, "/proc/nestsleep")

	def test_boot_commands_bad_options(self):
		for args, text in ((["runtime-proof", "--rounds", "abc"], "invalid int value: 'abc'"),
				   (["boottest", "--patches", "x", "--bogus"], "unrecognized arguments: --bogus")):
			r = subprocess.run([PY, "-m", "nestsleep"] + args, capture_output=True, text=True, timeout=120)
			self.assertOneLineError(r, text)

	def test_spflags_of_one_option_through_make(self):
		"""SPFLAGS=--flag reached argparse as an option of its own."""
		r = subprocess.run(["make", "-s", "-C", TOP, "coccicheck", "KDIR=" + self.kdir, "SPFLAGS=--very-quiet"],
				   capture_output=True, text=True, timeout=300,
				   env=dict(os.environ, NESTSLEEP_CACHE=self.cache))
		self.assertEqual(r.returncode, 0, r.stderr)
		self.assertIn("a.c:8:", r.stdout)


if __name__ == "__main__":
	unittest.main()
