#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-only
"""The C tokenizer against the Python one on every file of a tree: the
tokens, and the facts (cfacts.extract) of each .c/.h file that the scan
reads (SKIP_DIRS left out), must be equal.  Minutes per tree (the facts
are extracted twice), on J processes.

  PYTHONPATH=scripts scripts/dev/check_ctok.py KDIR [-j J] [--tokens-only]

Prints the files that differ and a closing line "N files, N refused by
the tool (tokenized in Python), N differ"; exit 1 if any differ."""

import argparse
import multiprocessing
import os
import sys

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


def main():
	p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
	p.add_argument("kdir")
	p.add_argument("-j", type=int, default=os.cpu_count() or 1)
	p.add_argument("--tokens-only", action="store_true")
	a = p.parse_args()
	kdir = os.path.realpath(a.kdir)
	ctok.ensure()
	paths = [x for x in list_sources(kdir) if not os.path.relpath(x, kdir).startswith(tuple(SKIP_DIRS))]
	n = refused = differ = 0
	with multiprocessing.Pool(a.j, _init, (a.tokens_only,)) as pool:
		for path, ref, same in pool.imap_unordered(one, paths, chunksize=16):
			n += 1
			refused += ref
			if not same:
				differ += 1
				print("differs: %s" % os.path.relpath(path, kdir), flush=True)
	print("%s: %d files, %d refused by the tool (tokenized in Python), %d differ" % (
		kdir, n, refused, differ))
	return 1 if differ else 0


if __name__ == "__main__":
	sys.exit(main())
