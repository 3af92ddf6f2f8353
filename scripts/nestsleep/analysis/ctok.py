# SPDX-License-Identifier: GPL-2.0-only
"""The C tokenizer: scripts/nstok.c, a host program (as the kernel's
scripts/kallsyms.c), run as one coprocess per process that tokenizes.

It gives exactly the tokens of cfacts.tokenize_py(), the reference
(scripts/tests/test_ctok.py; scripts/dev/check_ctok.py on a whole tree),
about ten times faster: the whole tree's fact extraction spent a quarter
of its time in the Python tokenizer.  A text it refuses (a byte >= 0x80
in a code line, where Python's \\w takes non-ASCII letters, or a NUL in
a preprocessor line) is tokenized in Python: few files, same tokens.

The binary is named by the digest of its source, under $NESTSLEEP_BIN
(the Makefile's first-use builds it there) or the cache's bin/.  A run
that finds none builds it with the host compiler ($CC, else cc, -O2); one
that cannot stops with a one-line error (exit 2).  There is no silent slow
path: a missing compiler is a set-up fault (make setup installs gcc), and
a run three times slower without a word would hide it."""

import array
import hashlib
import os
import struct
import subprocess
import sys
import tempfile

from nestsleep import TOP, cache_dir
from nestsleep.common import UserError

SOURCE = os.path.join(TOP, "scripts", "nstok.c")


def _source_bytes():
	with open(SOURCE, "rb") as f:
		return f.read()


SOURCE_DIGEST = hashlib.sha1(_source_bytes()).hexdigest()[:12]
# the kinds of the tool's one-byte codes
_KINDS = [None] * 256
for _c, _k in (("i", "id"), ("n", "num"), ("o", "op"), ("s", "str"), ("p", "pp")):
	_KINDS[ord(_c)] = _k
_KINDS = tuple(_KINDS)
_HEAD = struct.Struct("=III")


def binary_path():
	"""Where the binary of this source is (or is to be built)."""
	d = os.environ.get("NESTSLEEP_BIN") or os.path.join(cache_dir(), "bin")
	return os.path.join(d, "nstok-" + SOURCE_DIGEST)


def build(path):
	"""Compile SOURCE into path (atomically: workers may race)."""
	cc = os.environ.get("CC") or "cc"
	os.makedirs(os.path.dirname(path), exist_ok=True)
	fd, tmp = tempfile.mkstemp(prefix=".nstok-", dir=os.path.dirname(path))
	os.close(fd)
	try:
		r = subprocess.run([cc, "-O2", "-o", tmp, SOURCE], capture_output=True, text=True)
	except OSError as e:
		os.unlink(tmp)
		raise UserError("cannot build scripts/nstok.c: %s: %s (make setup installs gcc)" % (cc, e.strerror))
	if r.returncode != 0:
		os.unlink(tmp)
		first = (r.stderr.strip().splitlines() or ["exit %d" % r.returncode])[0]
		raise UserError("cannot build scripts/nstok.c with %s: %s" % (cc, first))
	os.replace(tmp, path)


def ensure():
	"""The binary's path, built first if it is missing (UserError if it
	cannot be)."""
	path = binary_path()
	if not os.access(path, os.X_OK):
		build(path)
	return path


_proc = None	# (pid of the process that started it, Popen)


def _coprocess():
	global _proc
	if _proc is None or _proc[0] != os.getpid():
		# a forked worker starts its own: the parent's pipes are not its
		p = subprocess.Popen([ensure()], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
		_proc = (os.getpid(), p)
	return _proc[1]


def _read(f, n):
	b = f.read(n)
	if len(b) != n:
		raise RuntimeError("nstok: the tokenizer stopped (%d of %d bytes)" % (len(b), n))
	return b


def tokenize_c(text):
	"""The tool's tokens of text, as tokenize_py() gives them, or None if
	it refuses the text (see the module doc)."""
	try:
		data = text.encode("utf-8")
	except UnicodeEncodeError:	# lone surrogates: no UTF-8 to send
		return None
	p = _coprocess()
	p.stdin.write(struct.pack("=I", len(data)) + data)
	p.stdin.flush()
	status, n, vlen = _HEAD.unpack(_read(p.stdout, _HEAD.size))
	if status:
		return None
	kinds = _read(p.stdout, n)
	lines = array.array("I")
	lines.frombytes(_read(p.stdout, 4 * n))
	vals = _read(p.stdout, vlen).decode("utf-8").split("\0")
	vals.pop()
	# one object per value and per line number, shared by the tokens that
	# have it: a file's tokens take 40 % less memory (md.c: 6.1 -> 3.7 MiB)
	# for 8 % more time here
	nums = list(range(max(lines) + 1)) if n else []
	return list(zip(map(_KINDS.__getitem__, kinds), map(sys.intern, vals), map(nums.__getitem__, lines)))


def mentions(names, paths, jobs=1):
	"""For each of paths, the set of names (str) that it holds as an
	identifier, as re.findall(rb"[A-Za-z_]\\w*") over its bytes finds them
	(wakecov.py's index), or None if it cannot be read: 'nstok --ids', one
	pass over the files, in up to jobs processes at once, each on its part
	of the paths (the whole 6.1 tree: 5.1 s in one, 2.9 s in two).  A path
	holding a newline (the tool reads one path a line) is read here."""
	names = sorted(set(names))
	out = [None] * len(paths)
	# no names to look for, or a path the tool cannot take: Python
	send = [i for i, p in enumerate(paths) if names and "\n" not in p]
	if send:
		np_ = max(1, min(jobs, len(send) // 1000))
		parts = [send[k * len(send) // np_:(k + 1) * len(send) // np_] for k in range(np_)]
		with tempfile.NamedTemporaryFile("w", prefix="nestsleep-names-", suffix=".txt") as nf:
			nf.write("".join(n + "\n" for n in names))
			nf.flush()
			runs = []
			try:
				for part in parts:
					# input and output in files: the runs go on at once
					fi, fo, fe = tempfile.TemporaryFile(), tempfile.TemporaryFile(), tempfile.TemporaryFile()
					fi.write("".join(paths[i] + "\n" for i in part).encode("utf-8", "surrogateescape"))
					fi.seek(0)
					runs.append((part, fi, fo, fe, subprocess.Popen([ensure(), "--ids", nf.name],
											stdin=fi, stdout=fo, stderr=fe)))
				for part, fi, fo, fe, proc in runs:
					proc.wait()
					fo.seek(0)
					fe.seek(0)
					rows = fo.read().decode().split("\n")
					if proc.returncode != 0 or len(rows) != len(part) + 1:
						raise UserError("nstok --ids failed (exit %d): %s" % (
							proc.returncode, (fe.read().decode(errors="replace").strip().splitlines()
									  or ["no message"])[-1]))
					for i, row in zip(part, rows):
						out[i] = None if row == "!" else set(names[int(k)] for k in row.split())
			finally:
				for part, fi, fo, fe, proc in runs:
					if proc.poll() is None:
						proc.kill()
						proc.wait()
					fi.close()
					fo.close()
					fe.close()
	sent = set(send)
	for i, p in enumerate(paths):
		if i not in sent:
			out[i] = mentions_py(names, p)
	return out


def mentions_py(names, path):
	"""mentions() of one path, in Python: the reference the tool follows
	(test_ctok.py MentionsTest) and the way for a path the tool cannot
	take."""
	import re
	try:
		with open(path, "rb") as f:
			ids = set(re.findall(rb"[A-Za-z_]\w*", f.read()))
	except OSError:
		return None
	return set(n for n in names if n.encode() in ids)

