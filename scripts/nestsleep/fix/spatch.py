# SPDX-License-Identifier: GPL-2.0-only
"""The spatch driver: run one of cocci/'s patch rules on a copy of a file's
text (the tree is read-only), with the sites and names passed in the
environment, and take its output as text or as Edits."""

import os
import shutil
import subprocess
import tempfile

from nestsleep import COCCI_DIR
from nestsleep.analysis.match import cocci_options
from nestsleep.fix.edits import Refuse, text_edits

MACRO_HINTS = os.path.join(COCCI_DIR, "nestsleep.macros.h")


def spatch_text(text, name, rule, env, extra=()):
	"""The patch rule's output on text (a file called name), or None
	when spatch fails."""
	tmp = tempfile.mkdtemp(prefix="nestsleep-fix-")
	try:
		src = os.path.join(tmp, name)
		out = src + ".out"
		with open(src, "w", errors="surrogateescape", newline="") as fp:
			fp.write(text)
		cmd = ["spatch", "--sp-file", rule, "-D", "patch", "--very-quiet", src, "-o", out]
		cmd += cocci_options(rule) + list(extra)
		# the cleanup.h guards (6.5+): without the hints spatch drops a
		# function that uses scoped_guard() (tty_port_block_til_ready())
		if os.path.isfile(MACRO_HINTS):
			cmd += ["--macro-file", MACRO_HINTS]
		proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
				      env=dict(os.environ, **env))
		if proc.returncode != 0 or not os.path.exists(out):
			return None
		with open(out, errors="surrogateescape", newline="") as fp:
			return fp.read()
	finally:
		shutil.rmtree(tmp, ignore_errors=True)


def spatch_edits(ft, rel, rule, env, extra=()):
	"""Run the patch rule on file rel, whose FileText is ft, with env; its
	changes as Edits on the file's text."""
	new = spatch_text(ft.t, os.path.basename(rel), rule, env, extra)
	return [] if new is None else text_edits(ft.t, new)


def add_rule_edits(u, ft, rel, rule, env, key, what, count=None):
	"""Run the patch rule (spatch_edits()) and add its edits to unit u,
	each keyed key(edit); refuse when it changes nothing, or not count
	places when count is given: "<rule> could not <what>"."""
	edits = spatch_edits(ft, rel, rule, env)
	if not edits or (count is not None and len(edits) != count):
		raise Refuse("manual", "%s could not %s" % (os.path.basename(rule), what))
	for e in edits:
		e.key = key(e)
		u.add(rel, e)
