# SPDX-License-Identifier: GPL-2.0-only
"""What every stage does with a kernel tree besides reading it: run its
checkpatch.pl, and make a scratch copy that may be patched while the
user's tree (or the cached one) stays untouched."""

import dataclasses
import os
import shutil
import subprocess
import tempfile
from typing import Optional, Sequence


@dataclasses.dataclass
class Checkpatch:
	"""One checkpatch.pl run: ran is False when the tree has none."""
	ran: bool
	returncode: int = 0
	output: str = ""
	stderr: str = ""

	def blocks(self):
		"""The ERROR and WARNING messages, one block each."""
		return [b.strip() for b in self.output.split("\n\n") if b.strip().startswith(("ERROR", "WARNING"))]


def checkpatch(kdir, text=None, path=None, signoff=False, show_types=False, timeout=300, max_line=None,
	       strict=False):
	"""The tree's scripts/checkpatch.pl --no-tree -q on a patch or mail,
	given as text (on stdin) or as a file path; --no-signoff unless
	signoff; --max-line-length=max_line when given; --strict (the CHECKs
	too) when strict.  Runs in the temp dir: checkpatch.pl leaves a
	.checkpatch-camelcase cache in its cwd."""
	cp = os.path.join(kdir, "scripts", "checkpatch.pl")
	if not os.path.isfile(cp):
		return Checkpatch(False)
	cmd = ["perl", cp, "--no-tree"] + ([] if signoff else ["--no-signoff"])
	cmd += (["--show-types"] if show_types else []) + (["--max-line-length=%d" % max_line] if max_line else [])
	cmd += ["--strict"] if strict else []
	# checkpatch runs in the temp dir: a relative path would name nothing
	cmd += ["-q", os.path.abspath(path) if path else "-"]
	# a git KDIR lets checkpatch look up the commit ids the text cites
	# (Fixes:, 'commit 61ada528dea0'); it looks in $GIT_DIR or ./.git
	gd = os.path.join(kdir, ".git")
	env = dict(os.environ, GIT_DIR=gd) if os.path.exists(gd) else None
	r = subprocess.run(cmd, input=None if path else text, capture_output=True, text=True, timeout=timeout,
			   cwd=tempfile.gettempdir(), env=env)
	return Checkpatch(True, r.returncode, r.stdout.strip(), r.stderr)


def scratch_copy(kdir, dst, own: Sequence[str] = ()) -> Optional[str]:
	"""A hard-link copy of kdir at dst ('cp -al': no space, and quick).
	The files in own (relative) are then copied to new inodes, so that
	writing them in place cannot change kdir; patch(1) and os.replace()
	make a new file anyway.  Returns None, or the error."""
	r = subprocess.run(["cp", "-al", kdir, dst], capture_output=True, text=True)
	if r.returncode != 0:
		return "cannot make a hard-link copy of %s: %s" % (kdir, r.stderr.strip())
	for rel in own:
		p = os.path.join(dst, rel)
		tmp = p + ".nestsleep-copy"
		shutil.copyfile(p, tmp)
		os.replace(tmp, p)
	return None

