#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-only
"""The C tokenizer against the Python one on every file of a tree: the
tokens, and the facts (cfacts.extract) of each .c/.h file that the scan
reads (SKIP_DIRS left out), must be equal.  Minutes per tree (the facts
are extracted twice), on J processes.

  PYTHONPATH=scripts scripts/dev/check_ctok.py KDIR [-j J] [--tokens-only]

Prints the files that differ and a closing line "N files, N refused by
the tool (tokenized in Python), N differ"; exit 1 if any differ.

Without KDIR (as make check runs it: scripts/dev/run_tests.py), it
compares the tokens (--tokens-only: extract() reads a file's text only
through them and its #include lines) on every file of the cached 6.1 and
6.12 trees and prints one KTAP line per tree; --fast skips them."""

import argparse
import multiprocessing
import os
import sys

from nestsleep import cache_dir
from nestsleep.analysis import cfacts, ctok
from nestsleep.analysis.scan import SKIP_DIRS, list_sources
from nestsleep.knowledge import Knowledge

_KN = None
_TOKENS_ONLY = False


def _init(tokens_only):
	global _KN, _TOKENS_ONLY
	_KN = Knowledge()
	_TOKENS_ONLY = tokens_only


def one(path):
	"""(path, refused, same) for one file."""
	with open(path, "rb") as f:
		text = f.read().decode("utf-8", "replace")
	c = ctok.tokenize_c(text)
	refused = c is None
	same = (c if c is not None else cfacts.tokenize(text)) == cfacts.tokenize_py(text)
	if same and not _TOKENS_ONLY:
		try:
			a = cfacts.extract(text, _KN.want_args, _KN.restore, _KN.words)
		except RecursionError:
			a = "RecursionError"
		try:
			b = cfacts.extract(text, _KN.want_args, _KN.restore, _KN.words, cfacts.tokenize_py)
		except RecursionError:
			b = "RecursionError"
		same = a == b
	return path, refused, same


def compare(kdir, jobs, tokens_only, out=print):
	"""The number of files of kdir whose tokens (and facts) differ."""
	paths = [x for x in list_sources(kdir) if not os.path.relpath(x, kdir).startswith(tuple(SKIP_DIRS))]
	n = refused = differ = 0
	with multiprocessing.Pool(jobs, _init, (tokens_only,)) as pool:
		for path, ref, same in pool.imap_unordered(one, paths, chunksize=16):
			n += 1
			refused += ref
			if not same:
				differ += 1
				out("differs: %s" % os.path.relpath(path, kdir))
	out("%s: %d files, %d refused by the tool (tokenized in Python), %d differ" % (
		kdir, n, refused, differ))
	return differ


def ktap(a):
	"""make check: one KTAP line per cached tree."""
	trees = [os.path.join(cache_dir(), "linux-source-" + v) for v in ("6.1", "6.12")]
	if a.only and not a.only.startswith("ctok"):
		return 0
	print("KTAP version 1")
	print("1..%d" % len(trees))
	for i, kdir in enumerate(trees, 1):
		name = "tokens-" + os.path.basename(kdir).replace("linux-source-", "")
		if a.fast or not os.path.isdir(kdir):
			print("ok %d - %s # SKIP %s" % (i, name, "--fast" if a.fast else "no tree (make setup)"))
			continue
		differ = compare(kdir, a.j, True, lambda line: print("# " + line, flush=True))
		print("%s %d - %s" % ("not ok" if differ else "ok", i, name), flush=True)
	return 0


def main():
	p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
	p.add_argument("kdir", nargs="?")
	p.add_argument("-j", type=int, default=os.cpu_count() or 1)
	p.add_argument("--tokens-only", action="store_true")
	p.add_argument("--fast", action="store_true", help="(make check) skip the whole-tree comparison")
	p.add_argument("--only", default="", help="(make check) run only the checks named so")
	a = p.parse_args()
	ctok.ensure()
	if a.kdir is None:
		return ktap(a)
	return 1 if compare(os.path.realpath(a.kdir), a.j, a.tokens_only, lambda line: print(line, flush=True)) else 0


if __name__ == "__main__":
	sys.exit(main())
