# SPDX-License-Identifier: GPL-2.0-only
"""The scratch git repository a series is made in, and what git makes of
it: the touched files of KDIR at its state (KDIR is only read), one commit
per patch, git format-patch of the series, threaded with Message-Ids made
from its text, and the checks of the mails it wrote (git am on a fresh
copy, checkpatch.pl).  Its identity is the signer's or a placeholder."""

import os
import re
import shutil
import subprocess
import tempfile

from nestsleep import ktree
from nestsleep.fix import includes
from nestsleep.triage import treeid
from nestsleep.common import UserError, sha1


# From: and the commits' identity when nobody has signed the series
PLACEHOLDER = "REPLACE WITH YOUR NAME <replace-with-your-address@example.invalid>"


# ---------------------------------------------------------------------------
# Identity and git

def identity(sign):
	"""(signoff or None, From: identity).  '' : nobody signs; '1': the
	user's git identity, as git commit -s; 'Name <mail>': that one."""
	if not sign:
		return None, PLACEHOLDER
	if sign == "1":
		get = lambda k: subprocess.run(["git", "config", k], capture_output=True, text=True).stdout.strip()
		name, email = get("user.name"), get("user.email")
		if not (name and email):
			raise UserError("SIGNOFF=1 signs with git config user.name/user.email, and they are not set; "
					"give SIGNOFF=\"Name <mail>\" instead")
		sign = "%s <%s>" % (name, email)
	if not re.match(r"^[^<>]+ <[^<>@\s]+@[^<>\s]+>$", sign):
		raise UserError("SIGNOFF must be 1 or \"Name <mail>\", not %r" % sign)
	return sign, sign


def split_ident(ident):
	m = re.match(r"^(.*?)\s*<([^>]*)>$", ident)
	return m.group(1), m.group(2)


class Repo:
	"""A scratch git repository that never reads or writes the user's git
	config: its identity and dates come from the environment."""

	def __init__(self, path, ident, date):
		self.path = path
		name, email = split_ident(ident)
		self.env = dict(os.environ, GIT_CONFIG_NOSYSTEM="1", GIT_CONFIG_GLOBAL=os.devnull,
				GIT_AUTHOR_NAME=name, GIT_AUTHOR_EMAIL=email, GIT_COMMITTER_NAME=name,
				GIT_COMMITTER_EMAIL=email, GIT_AUTHOR_DATE=date, GIT_COMMITTER_DATE=date)
		for k in ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE"):
			self.env.pop(k, None)

	def git(self, *args, check=True, inp=None):
		r = subprocess.run(["git", "-C", self.path, "-c", "core.hooksPath=" + os.devnull,
				    "-c", "core.abbrev=12"] + list(args), env=self.env, capture_output=True,
				   text=True, input=inp)
		if check and r.returncode != 0:
			raise UserError("git %s failed in the scratch repository: %s" % (args[0], r.stderr.strip()[-400:]))
		return r


def make_repo(kdir, files, path, ident, date):
	"""(Repo, base sha, KDIR's own commit or None): the touched files at
	KDIR's state.  A git KDIR is cloned --shared (nothing is written in it)
	with only the touched files checked out; otherwise they are copied."""
	os.makedirs(path)
	real = None
	if os.path.isdir(os.path.join(kdir, ".git")):
		r = subprocess.run(["git", "clone", "-q", "--shared", "--no-checkout", kdir, path],
				   capture_output=True, text=True, env=dict(os.environ, GIT_CONFIG_GLOBAL=os.devnull,
									   GIT_CONFIG_NOSYSTEM="1"))
		if r.returncode != 0:
			raise UserError("cannot clone KDIR: %s" % r.stderr.strip()[-300:])
		repo = Repo(path, ident, date)
		repo.git("sparse-checkout", "set", "--no-cone", *["/" + f for f in files])
		repo.git("checkout", "-q", "HEAD")
		real = repo.git("rev-parse", "HEAD").stdout.strip()
	else:
		repo = Repo(path, ident, date)
		repo.git("init", "-q")
	for rel in files:
		dst = os.path.join(path, rel)
		os.makedirs(os.path.dirname(dst), exist_ok=True)
		shutil.copyfile(os.path.join(kdir, rel), dst + ".tmp")
		os.replace(dst + ".tmp", dst)
	repo.git("add", "-A", "--sparse") if real else repo.git("add", "-A")
	if repo.git("status", "--porcelain").stdout.strip() or not real:
		repo.git("commit", "-q", "--allow-empty", "-m",
			 "base: the touched files of %s as they are in KDIR" % treeid.tree_id(kdir))
		if real:
			real = None     # KDIR has changes of its own: no commit of KDIR is the base
	return repo, repo.git("rev-parse", "HEAD").stdout.strip(), real


def split_diff(diff):
	"""[(file, [hunk lines...])] of a unified diff, the header lines apart."""
	files, cur = [], None
	for ln in diff.splitlines(True):
		m = re.match(r"^\+\+\+ b/(\S+)", ln)
		if m:
			cur = (m.group(1), [])
			files.append(cur)
		elif ln.startswith(("--- ", "diff ")) or cur is None:
			continue
		elif ln.startswith("@@"):
			cur[1].append([ln])
		elif cur[1]:
			cur[1][-1].append(ln)
	return files


INCLUDE_RE = re.compile(r"^\s*#\s*include\s")


def add_includes(path, lines):
	"""Insert the #include lines (without their '+') into the file's
	include block, each where Fixer.include() puts it (fix/includes.py:
	place()), on the file as the series' earlier patches left it; those
	already there are skipped.  Not after the hunk's context line: the
	line before a new include is often a blank one, and the file's last
	blank line may be in its last function."""
	with open(path, errors="surrogateescape") as f:
		text = f.read()
	have = {ln.strip() for ln in text.splitlines()}
	for ln in lines:
		if ln.strip() in have:
			continue
		have.add(ln.strip())
		ln = ln if ln.endswith("\n") else ln + "\n"
		m = re.match(r"^\s*#\s*include\s*<([^>]+)>", ln)
		at = includes.place(text, m.group(1)) if m else None
		if at is None:
			blk = includes.block(text)
			at = blk[-1][1] if blk else 0
		text = text[:at] + ln + text[at:]
	with open(path + ".tmp", "w", errors="surrogateescape") as f:
		f.write(text)
	os.replace(path + ".tmp", path)


def apply_unit(repo, diff):
	"""Apply one unit's diff, made on the pristine tree, to the repository
	with the earlier patches applied.  A hunk that only adds #include
	lines is applied by hand: the lines an earlier patch already added are
	not added again, and the others go where the fixer puts them in the
	file as it is now (its context may have changed).  None, or the error."""
	out = []
	incs = []
	for rel, hunks in split_diff(diff):
		keep = []
		for h in hunks:
			body = h[1:]
			adds = [ln for ln in body if ln.startswith("+")]
			if adds and not any(ln.startswith("-") for ln in body) and \
			   all(INCLUDE_RE.match(ln[1:]) for ln in adds):
				incs.append((rel, [ln[1:] for ln in adds]))
				continue
			keep.append(h)
		if keep:
			out.append("--- a/%s\n+++ b/%s\n" % (rel, rel) + "".join("".join(h) for h in keep))
	text = "".join(out)
	if text:
		r = repo.git("apply", "--recount", "--whitespace=nowarn", "-", check=False, inp=text)
		if r.returncode != 0:
			p = subprocess.run(["patch", "-p1", "-s", "-F3", "--no-backup-if-mismatch", "-r", "-"],
					   cwd=repo.path, input=text.encode("utf-8", "surrogateescape"), capture_output=True)
			if p.returncode != 0:
				return (r.stderr.strip() + " / patch: " + (p.stdout + p.stderr).decode(errors="replace").strip())[-600:]
	for rel, lines in incs:
		add_includes(os.path.join(repo.path, rel), lines)
	return None


def git_am(kdir, files, patches, tmp, ident, date):
	"""git am every patch, in order, on a fresh repository of the pristine
	touched files: {applied, total, failed}."""
	path = tempfile.mkdtemp(dir=tmp, prefix="am-")
	repo = Repo(path, ident, date)
	repo.git("init", "-q")
	for rel in files:
		dst = os.path.join(path, rel)
		os.makedirs(os.path.dirname(dst), exist_ok=True)
		shutil.copyfile(os.path.join(kdir, rel), dst)
	repo.git("add", "-A")
	repo.git("commit", "-q", "-m", "base")
	n = 0
	for p in patches:
		r = repo.git("am", "-q", p, check=False)
		if r.returncode != 0:
			return {"applied": n, "total": len(patches), "failed": os.path.basename(p),
				"output": (r.stdout + r.stderr)[-500:]}
		n += 1
	return {"applied": n, "total": len(patches), "failed": None}


def checkpatch(kdir, path, signoff):
	r = ktree.checkpatch(kdir, path=path, signoff=signoff)
	if not r.ran:
		return {"status": "not run", "output": "no scripts/checkpatch.pl in KDIR"}
	if r.returncode != 0 and not r.output:
		# checkpatch failed without a finding (it could not read the file)
		return {"status": "not run", "output": "checkpatch.pl failed: " + (r.stderr.strip() or "no output")[:300]}
	return checkpatch_status(kdir, path, r.output, signoff)


def checkpatch_status(kdir, path, out, signoff):
	"""checkpatch's counts, CHECKs included (checkpatch turns --strict on
	for drivers/net/ and net/ by itself), and what the CamelCase checks
	are about: names the file used before the patch are not the patch's."""
	errs = len(re.findall(r"^ERROR:", out, re.M))
	warns = len(re.findall(r"^WARNING:", out, re.M))
	checks = re.findall(r"^CHECK: (.*)$", out, re.M)
	camel = sorted(set(m for c in checks for m in re.findall(r"^Avoid CamelCase: <(\w+)>", c)))
	old = ""
	try:
		with open(path, errors="replace") as f:
			files = re.findall(r"^\+\+\+ b/(\S+)", f.read(), re.M)
		for rel in files:
			with open(os.path.join(kdir, rel), errors="replace") as f:
				old += f.read()
	except OSError:
		pass
	existing = [n for n in camel if re.search(r"\b%s\b" % n, old)]
	if not errs and not warns and not checks:
		status = "clean"
	else:
		status = "%d errors, %d warnings, %d checks" % (errs, warns, len(checks))
		if camel and existing == camel and all(c.startswith("Avoid CamelCase") for c in checks):
			status += " (CamelCase on names the file already uses: %s)" % ", ".join(existing)
	return {"status": status, "flags": "--no-tree" + ("" if signoff else " --no-signoff"), "output": out}


def format_patch(repo, outdir, sprefix, one, real, base, to, cc, author):
	"""git format-patch of base..HEAD into outdir, with a cover letter
	unless the series is one patch, and threaded (thread()): the file
	names it wrote, in order."""
	os.makedirs(outdir)
	cmd = ["format-patch", "-q", "--no-thread", "-o", outdir, "--subject-prefix=" + sprefix]
	cmd.append("--no-numbered" if one else "--cover-letter")
	if real:
		cmd.append("--base=" + real)
	cmd += ["--to=" + x for x in to] + ["--cc=" + x for x in cc] + ["%s..HEAD" % base]
	repo.git(*cmd, "--")
	made = sorted(os.listdir(outdir))
	thread([os.path.join(outdir, m) for m in made], author, not one)
	return made


def thread(paths, author, cover):
	"""Thread the mails git format-patch wrote at paths, in order, as
	--thread does (a Message-Id on each; with a cover letter, the first,
	each patch In-Reply-To and References it), with Message-Ids made from
	their text, not the clock: <hash.N.nestsleep@domain>, N the patch's
	number (0 the cover letter), domain the sender's."""
	texts = []
	for p in paths:
		with open(p, errors="surrogateescape") as f:
			texts.append(f.read())
	h = sha1("".join(texts).encode("utf-8", "surrogateescape"))
	domain = split_ident(author)[1].rpartition("@")[2]
	ids = ["<%s.%d.nestsleep@%s>" % (h, i if cover else i + 1, domain) for i in range(len(paths))]
	for i, (p, text) in enumerate(zip(paths, texts)):
		head = "Message-Id: %s\n" % ids[i]
		if cover and i:
			head += "In-Reply-To: %s\nReferences: %s\n" % (ids[0], ids[0])
		first, nl, rest = text.partition("\n")
		with open(p, "w", errors="surrogateescape") as f:
			f.write(first + nl + head + rest)
