# SPDX-License-Identifier: GPL-2.0-only
"""The C tokenizer (scripts/nstok.c, driven by analysis/ctok.py) gives the
token stream of the Python reference tokenizer (cfacts.tokenize_py), and
so the same facts, on tricky texts and on real files of both trees: strings
with escapes and line continuations, char literals, unterminated comments
and literals, raw #defines over continuation lines, digraphs, CRLF,
non-UTF-8 bytes, non-ASCII letters in code (refused: the Python path).
scripts/dev/check_ctok.py runs the same comparison on every file of a tree."""

import os
import unittest

from nestsleep import cache_dir
from nestsleep.analysis import cfacts, ctok
from nestsleep.knowledge import Knowledge

TREES = [os.path.join(cache_dir(), "linux-source-" + v) for v in ("6.1", "6.12")]

CASES = [
	"",
	"\n",
	"int a;",
	"int a;\n",
	'x = "a\\"b" + \'c\' + \'\\\'\' + "\\\\";\n',
	'p = "one \\\n two"; q = 1;\n',
	'bad = "unterminated\nnext = 1;\n',
	"c = '\"'; d = '\\n';\n",
	"/* a\n b */ x = 1; // tail \\\n y = 2;\n",
	"x = 1; /* never closed\n y = 2;\n",
	"#define M(a, b) \\\n\tdo { f(a); \\\n\t g(b); } while (0)\n",
	"  #  define X 1 /* c\n d */ + 2\n",
	"\r#define CR 1\r\n\f\v#if 1\nint z;\n#endif\\",
	"x <<= 1; y >>= 2; a->b++; --c; d -= e; f... g .5 1.e5 0x1fUL .x ..y\n",
	"%: define D <: :> <% %> a ## b # c\n",
	"a && b || !c; d != e; f == g; h <= i >= j; k &= l |= m ^= n %= o /= p *= q;\n",
	"@ $ ` \\ \x01 ~x ? y : z;\n",
	"int caf\u00e9 = 1;\n",
	"/* caf\u00e9 */ int a = '\u00e9'; char *s = \"\u00e9\";\n#define E \"\u00e9\"\n",
	"#define NUL \x00 x\nint a;\n",
	"int \ufffd;\n",
	"x\n\n\n#\n#define A(x) \\\n\n y\n",
	"s = \"a\\",
	"s = '",
	"/*/ x */ y /**/ z /*",
	"int a;\r\nint b; /* \r\n */ c\r\n",
]

# files with the shapes above, in either tree (those absent are skipped)
FILES = [
	"drivers/net/wireless/broadcom/b43/radio_2057.c",	# non-ASCII in code lines
	"net/bluetooth/bnep/core.c",
	"fs/jffs2/readinode.c",
	"drivers/net/hamradio/6pack.c",				# non-ASCII in comments
	"drivers/net/pcs/pcs-rzn1-miic.c",
	"include/linux/wait.h",					# long #defines over continuation lines
	"include/linux/sched.h",
	"include/linux/compiler_types.h",
	"drivers/md/raid10.c",
	"drivers/md/dm-cache-policy-smq.c",
	"lib/vsprintf.c",					# strings with escapes
	"lib/string_helpers.c",
	"drivers/tty/vt/vt.c",
	"arch/x86/include/asm/alternative.h",			# asm strings
	"drivers/gpu/drm/radeon/r100.c",
	"drivers/scsi/aic7xxx/aic79xx_core.c",
	"fs/nls/nls_cp437.c",					# char tables
	"drivers/staging/rtl8723bs/core/rtw_mlme_ext.c",
]


def tricky_files(tree):
	"""FILES, and the files of the tree's drivers/net/wireless/broadcom,
	fs/nls and drivers/isdn whose bytes are not UTF-8 or hold a CR (none
	in 6.1 and 6.12: test_variants makes such files)."""
	out = [f for f in FILES if os.path.isfile(os.path.join(tree, f))]
	for sub in ("drivers/net/wireless/broadcom", "fs/nls", "drivers/isdn"):
		for dp, dn, fn in os.walk(os.path.join(tree, sub)):
			for f in sorted(fn):
				if not f.endswith((".c", ".h")):
					continue
				p = os.path.join(dp, f)
				with open(p, "rb") as fp:
					data = fp.read()
				try:
					data.decode("utf-8")
					odd = b"\r" in data
				except UnicodeDecodeError:
					odd = True
				if odd:
					out.append(os.path.relpath(p, tree))
	return out


def read_text(path):
	with open(path, "rb") as f:
		return f.read().decode("utf-8", "replace")


class CTokTest(unittest.TestCase):
	def test_cases(self):
		for text in CASES:
			with self.subTest(text=text):
				self.assertEqual(cfacts.tokenize(text), cfacts.tokenize_py(text))

	def test_refused(self):
		"""Non-ASCII in a code line, or a NUL in a preprocessor line: the
		tool says so, and tokenize() takes the Python path."""
		self.assertIsNone(ctok.tokenize_c("int caf\u00e9 = 1;\n"))
		self.assertIsNone(ctok.tokenize_c("#define NUL \x00 x\n"))
		self.assertIsNotNone(ctok.tokenize_c("/* caf\u00e9 */ int a;\n#define E \"\u00e9\"\n"))

	def test_real_files(self):
		kn = Knowledge()
		n = 0
		for tree in TREES:
			if not os.path.isdir(tree):
				continue
			for rel in tricky_files(tree):
				text = read_text(os.path.join(tree, rel))
				with self.subTest(file=rel, tree=tree):
					self.assertEqual(cfacts.tokenize(text), cfacts.tokenize_py(text))
					self.assertEqual(cfacts.extract(text, kn.want_args, kn.restore, kn.words),
							 cfacts.extract(text, kn.want_args, kn.restore, kn.words, cfacts.tokenize_py))
				n += 1
		if not n:
			self.skipTest("no kernel tree (make setup)")

	def test_variants(self):
		"""Real files made odd, as neither tree has them: CRLF line ends,
		bytes that are not UTF-8 (in comments, strings and code)."""
		kn = Knowledge()
		for tree in TREES:
			for rel in ("include/linux/wait.h", "drivers/md/raid10.c"):
				path = os.path.join(tree, rel)
				if not os.path.isfile(path):
					continue
				with open(path, "rb") as f:
					data = f.read()
				for odd in (data.replace(b"\n", b"\r\n"), data.replace(b"wait", b"w\xffait"),
					    data.replace(b"e", b"\xc3e", 50)):
					text = odd.decode("utf-8", "replace")
					with self.subTest(file=rel, tree=tree):
						self.assertEqual(cfacts.tokenize(text), cfacts.tokenize_py(text))
						self.assertEqual(cfacts.extract(text, kn.want_args, kn.restore, kn.words),
								 cfacts.extract(text, kn.want_args, kn.restore, kn.words,
										cfacts.tokenize_py))

	def test_shared_objects(self):
		"""A file view keeps a whole file's tokens (wake coverage held 316
		of them, 413 MiB, on 6.12): equal values and the line numbers of a
		line are one object each, not one per token."""
		text = "".join("static int f%d(struct dev *dev)\n{\n\treturn dev->count + dev->count;\n}\n" % k
			       for k in range(200))
		toks = ctok.tokenize_c(text)
		self.assertEqual(toks, cfacts.tokenize_py(text))
		by_val, by_line = {}, {}
		for k, v, ln in toks:
			self.assertIs(by_val.setdefault(v, v), v)
			self.assertIs(by_line.setdefault(ln, ln), ln)
		self.assertGreater(max(by_line), 256)	# past CPython's small ints

	def test_key_has_tool_source(self):
		"""Facts made by another version of the tool are never trusted."""
		self.assertIn(ctok.SOURCE_DIGEST, ctok.binary_path())
		self.assertNotEqual(cfacts.CODE_DIGEST, cfacts._code_digest(b""))
		with open(ctok.SOURCE, "rb") as f:
			src = f.read()
		self.assertEqual(cfacts.CODE_DIGEST, cfacts._code_digest(src))


class MentionsTest(unittest.TestCase):
	"""ctok.mentions() ('nstok --ids', wake coverage's index of the files
	that name a queue or an input) against re.findall(rb"[A-Za-z_]\\w*"),
	the reading it replaces, which stays the reference (mentions_py())."""

	reference = staticmethod(ctok.mentions_py)

	def test_tricky_texts(self):
		import tempfile
		texts = [b"", b"x", b"0x1fUL x1fUL", b"9abc a9bc _9 ab12cd 12cd", b"caf\xc3\xa9 wait \xffwait\xff",
			 b"wake_up_all wake_up(q) /* wake_up */", b"a\0b wait\0", b"w\nait", b"wai", b"waits"]
		names = ["x1fUL", "abc", "a9bc", "_9", "cd", "ab12cd", "wait", "wake_up", "b", "a", "caf", "cafe", "ait"]
		with tempfile.TemporaryDirectory() as d:
			paths = []
			for i, t in enumerate(texts):
				paths.append(os.path.join(d, "t%d.c" % i))
				with open(paths[-1], "wb") as f:
					f.write(t)
			paths.append(os.path.join(d, "missing.c"))
			paths.append(os.path.join(d, "new\nline.c"))
			with open(paths[-1], "wb") as f:
				f.write(b"wait x")
			got = ctok.mentions(names, paths)
			for p, g in zip(paths, got):
				with self.subTest(path=p):
					self.assertEqual(g, self.reference(names, p))

	def test_real_files(self):
		names = ["wait_event", "mutex_lock", "resync_wait", "sb_wait", "j_wait_updates", "wake_up",
			 "wait_queue_head", "sk_sleep", "MD_RECOVERY_INTR", "nonexistent_name_xyz"]
		n = 0
		for tree in TREES:
			if not os.path.isdir(tree):
				continue
			paths = [os.path.join(tree, r) for r in tricky_files(tree)]
			paths += [os.path.join(tree, "drivers/md", r) for r in sorted(os.listdir(os.path.join(tree, "drivers/md")))
				  if r.endswith((".c", ".h"))]
			for p, g in zip(paths, ctok.mentions(names, paths)):
				with self.subTest(path=p):
					self.assertEqual(g, self.reference(names, p))
				n += 1
		if not n:
			self.skipTest("no kernel tree (make setup)")

	def test_parts(self):
		"""With jobs, the paths are split between as many runs of the tool
		(1,000 paths or more each), in order; an unreadable path in any
		part is None."""
		paths = []
		for tree in TREES:
			if os.path.isdir(os.path.join(tree, "drivers")):
				for d, _, fs in os.walk(os.path.join(tree, "drivers")):
					paths += [os.path.join(d, f) for f in sorted(fs) if f.endswith((".c", ".h"))]
					if len(paths) > 2600:
						break
				break
		if len(paths) < 2600:
			self.skipTest("no kernel tree (make setup)")
		paths.insert(1800, "/nonexistent/x.c")
		names = ["mutex_lock", "wake_up", "spin_lock", "kfree", "probe", "nonexistent_name_xyz"]
		one = ctok.mentions(names, paths, 1)
		self.assertEqual(ctok.mentions(names, paths, 2), one)
		self.assertEqual(ctok.mentions(names, paths, 3), one)
		self.assertIsNone(one[1800])
		for i in (0, 1799, 1801, len(paths) - 1):
			self.assertEqual(one[i], self.reference(names, paths[i]))


if __name__ == "__main__":
	unittest.main()
