# SPDX-License-Identifier: GPL-2.0-only
"""The command line: '/usr/bin/python3 -m nestsleep <command> [options]'.

One sub-command per Makefile target, so that 'make X' is 'nestsleep X':

  coccicheck     find nested sleeps (analysis.pipeline.main)
  fixes          patch series per MAINTAINERS section (series.series.build)
  retest         rewrite the testing paragraphs of a series (series.records.retest)
  triage         maintainer reports and SARIF (triage.reports.build)
  boottest       build and boot each patch of a series (boot.boottest.main)
  runtime-proof  the test module before and after the rewrite (boot.proof.main)
  bench          whole-tree timings against the kernel's call_kern.cocci
  gen-builtin    copy the primitive list of sleep_info.json into cocci/*.cocci
  rekey          carry labels and series to new fingerprints (one tree)
  carry-labels   carry hand labels to a later tree's report

The coccicheck knobs (KDIR= M= MODE= COCCI= SPFLAGS= DEBUG_FILE= J= V=) are
defined once, in knobs(), and shared by every command that runs the checker.
"""

import argparse
import os
import sys

from nestsleep import cache_dir
from nestsleep.common import run_user


class Parser(argparse.ArgumentParser):
	"""A bad option is bad input like any other: one line, exit 2 (not
	argparse's usage block)."""

	def error(self, message):
		sys.stderr.write("%s: error: %s (see --help)\n" % (self.prog, message))
		sys.exit(2)


def knobs(mode=True):
	"""The kernel coccicheck knobs, as a parent parser."""
	p = Parser(add_help=False)
	p.add_argument("--kdir", required=True, help="the kernel tree (KDIR=)")
	p.add_argument("--m", default="", help="directory relative to KDIR, or an external module dir (M=)")
	if mode:
		p.add_argument("--mode", default="report", help="report, patch, context or org (MODE=)")
	p.add_argument("--cocci", default="", help="another rule to run as coccicheck would (COCCI=)")
	p.add_argument("--spflags", default="", help="extra spatch flags (SPFLAGS=)")
	p.add_argument("--debug-file", default="", help="append spatch's stderr here (DEBUG_FILE=)")
	p.add_argument("-j", "--jobs", type=int, default=0, help="parallel jobs (J=; 0: one per core)")
	p.add_argument("-v", "--verbose", type=int, default=0, help="show the spatch commands (V=)")
	p.add_argument("--timeout", type=int, default=200, help="spatch timeout per file, seconds")
	return p


def _coccicheck(a):
	from nestsleep.analysis import pipeline
	opts = pipeline.Options(kdir=a.kdir, mode=a.mode, m=a.m, cocci=a.cocci, spflags=a.spflags,
				debug_file=a.debug_file, jobs=a.jobs, verbose=a.verbose, timeout=a.timeout,
				cache=a.cache, only=a.only, json=a.json, confidence=a.confidence)
	rc = pipeline.main(opts)
	if pipeline.KEPT:
		# the run is over and its output written: leave without taking
		# its data structures apart object by object
		sys.stdout.flush()
		sys.stderr.flush()
		os._exit(rc)
	return rc


def _fixes(a):
	from nestsleep.series import series
	return run_user(series.build, a, "fixes")


def _retest(a):
	from nestsleep.series import records
	return run_user(lambda d: records.retest(d, a.build_kdir or None, a.kdir or None), a.dir, "fixes")


def _triage(a):
	from nestsleep.triage import reports
	return run_user(reports.build, a, "triage", also=(OSError, ValueError, KeyError))


def _bench(a):
	from nestsleep import bench
	return bench.main(a)


def _gen_builtin(a):
	from nestsleep import gen_builtin
	return gen_builtin.main(["--check"] if a.check else [])


def _rekey(a):
	from nestsleep.triage import rekey
	return rekey.main(a)


def _carry_labels(a):
	from nestsleep.triage import carry_labels
	return carry_labels.main(a.files)


def _boottest(argv):
	# kernel-boot/ (nsboot) is on PYTHONPATH beside scripts/ (the Makefile sets both)
	from nestsleep.boot import boottest
	return boottest.main(argv)


def _runtime_proof(argv):
	from nestsleep.boot import proof
	return proof.main(argv)


def parser():
	ap = Parser(prog="nestsleep", description="find and fix nested sleeps in Linux kernel wait loops")
	sub = ap.add_subparsers(dest="command", metavar="COMMAND")
	sub.required = True

	p = sub.add_parser("coccicheck", parents=[knobs()], help="find nested sleeps")
	p.add_argument("--cache", default=cache_dir(), help="the cache root (NESTSLEEP_CACHE)")
	p.add_argument("--only", nargs="*", default=None, help="match only these files (relative to KDIR)")
	p.add_argument("--json", default="", help="also write the findings as JSON to this file")
	p.add_argument("--confidence", default="high", help="MODE=patch: the lowest fix confidence to rewrite, "
		       "high, medium or low (CONFIDENCE=); the others are named on stderr")
	p.set_defaults(run=_coccicheck)

	p = sub.add_parser("fixes", parents=[knobs(mode=False)], help="patch series per MAINTAINERS section")
	p.add_argument("--out", default="", help="the directory to write the series to (OUT=)")
	p.add_argument("--signoff", default="", help="sign the patches: 1 (your git identity) or 'Name <email>' "
		       "(SIGNOFF=); none by default")
	p.add_argument("--confidence", default="high", help="without hand labels: the lowest fix confidence to "
		       "put in a series, high, medium or low (CONFIDENCE=)")
	p.add_argument("--labels", default="", help="hand labels (default reports/labels/<tree-id>.json when it "
		       "exists): only findings labelled true get a patch")
	p.add_argument("--build", action="store_true", help="build the touched objects after each patch, in "
		       "series order (BUILD=1)")
	p.add_argument("--json", default="", help="findings from 'coccicheck --mode patch --json' (else run it)")
	p.add_argument("--compiled", default="", help="results of scripts/dev/compile_patches.py")
	p.set_defaults(run=_fixes)

	p = sub.add_parser("retest", help="rewrite the testing paragraphs of a series from its boottest.json")
	p.add_argument("dir")
	p.add_argument("--build", dest="build_kdir", default="", metavar="KDIR",
		       help="first build the series in order on KDIR (what make fixes BUILD=1 does)")
	p.add_argument("--kdir", default="", help="the tree whose checkpatch.pl checks the rewritten patches")
	p.set_defaults(run=_retest)

	p = sub.add_parser("triage", parents=[knobs(mode=False)], help="maintainer reports and SARIF")
	p.add_argument("--out", default="", help="default reports/<tree-id> (OUT=)")
	p.add_argument("--baseline", default="", help="an earlier report's findings.json (BASELINE=)")
	p.add_argument("--series", default="", help="a 'make fixes' directory")
	p.add_argument("--labels", default="", help="the hand labels (default reports/labels/<tree-id>.json)")
	p.add_argument("--json", default="", help="findings from 'coccicheck --mode patch --json' (else run it)")
	p.add_argument("--kdir-shown", dest="kdir_shown", default="", help="how to write KDIR in the reports")
	p.add_argument("--heldout-base", dest="heldout_base", default="",
		       help="the earlier tree of the held-out precision (HELDOUT_BASE=; default "
		       "linux-source-6.1 in the cache dir)")
	p.add_argument("--nestsleep-version", dest="nestsleep_version", default="",
		       help="the version the reports name (NESTSLEEP_VERSION=; default 0.1+<commit>)")
	p.set_defaults(run=_triage)

	p = sub.add_parser("bench", parents=[knobs(mode=False)], help="time whole-tree runs")
	p.add_argument("--work", default=os.path.join(cache_dir(), "bench"))
	p.add_argument("--out", default="")
	p.add_argument("--skip-k", action="store_true", help="do not run the kernel's rule (K)")
	p.add_argument("--also", action="append", default=[], help="another tree to time after KDIR")
	p.set_defaults(run=_bench)

	for name, what in (("boottest", "build and boot every patch of a series in QEMU"),
			   ("runtime-proof", "boot the test module, before and after forms")):
		# listed for --help; main() hands their options to nestsleep.boot
		sub.add_parser(name, help=what + " (options: python3 -m nestsleep %s --help)" % name)

	p = sub.add_parser("gen-builtin", help="copy sleep_info.json's primitives into cocci/*.cocci")
	p.add_argument("--check", action="store_true", help="only report whether they agree (exit 1 if not)")
	p.set_defaults(run=_gen_builtin)

	p = sub.add_parser("rekey", help="move labels and series to new fingerprints within one tree")
	p.add_argument("--old", required=True)
	p.add_argument("--new", required=True)
	p.add_argument("--labels", default="")
	p.add_argument("--fixes", default="")
	p.set_defaults(run=_rekey)

	p = sub.add_parser("carry-labels", help="carry hand labels to a later tree's report")
	p.add_argument("files", nargs=6, metavar="F",
		       help="OLD_KDIR NEW_KDIR OLD_FINDINGS NEW_FINDINGS OLD_LABELS NEW_LABELS")
	p.set_defaults(run=_carry_labels)
	return ap


# the boot commands hand every option on to nestsleep.boot, which parses them
BOOT = {"boottest": _boottest, "runtime-proof": _runtime_proof}


def main(argv=None):
	argv = sys.argv[1:] if argv is None else argv
	if argv and argv[0] in BOOT:
		# argparse's REMAINDER does not take options ('--rounds') that come
		# first, so these bypass the nestsleep parser
		return BOOT[argv[0]](list(argv[1:]))
	a = parser().parse_args(argv)
	if getattr(a, "jobs", None) is not None and a.jobs <= 0:
		a.jobs = os.cpu_count() or 1
	return a.run(a)
