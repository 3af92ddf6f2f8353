# SPDX-License-Identifier: GPL-2.0-only
"""Small helpers every stage shares: the user-error type, logging to stderr,
content hashes, the date written into outputs."""

import datetime
import hashlib
import os
import sys


class UserError(Exception):
	"""Bad input: reported as one line, exit status 2."""


# a fix's confidence, best first: CONFIDENCE= (make fixes, MODE=patch) names
# the lowest one taken
CONFIDENCES = ("high", "medium", "low")


def check_confidence(value):
	"""CONFIDENCE= made lower case; UserError when it is not one of
	CONFIDENCES."""
	conf = (value or "").lower()
	if conf not in CONFIDENCES:
		raise UserError("CONFIDENCE=%s: give %s" % (value, ", ".join(CONFIDENCES[:-1]) + " or " + CONFIDENCES[-1]))
	return conf


def log(msg, prefix="nestsleep"):
	"""Progress and notes go to stderr; stdout carries only the product."""
	print("%s: %s" % (prefix, msg), file=sys.stderr, flush=True)


def run_user(fn, arg, prefix, also=()):
	"""fn(arg) for a command: bad input (UserError, or the exceptions in
	also) is one line on stderr and exit status 2, never a traceback."""
	try:
		return fn(arg)
	except (UserError,) + tuple(also) as e:
		log("error: %s" % e, prefix)
		return 2
	except KeyboardInterrupt:
		return 130


def run_apart(fn):
	"""fn() in a forked child process; its result (pickled) comes back.
	For a step that builds much and keeps little: the memory it took goes
	back to the system when the child exits, where a process that freed
	it would keep most of it.  A UserError in the child is raised again
	here with its message; any other exception as a RuntimeError with the
	child's traceback; a child killed by a signal is a UserError."""
	import pickle
	rfd, wfd = os.pipe()
	sys.stderr.flush()
	pid = os.fork()
	if pid == 0:
		os.close(rfd)
		code = 0
		try:
			data = pickle.dumps(_report(fn, ()), pickle.HIGHEST_PROTOCOL)
			with os.fdopen(wfd, "wb") as f:
				f.write(data)
			sys.stderr.flush()
		except BaseException:
			code = 1
		finally:
			os._exit(code)
	os.close(wfd)
	try:
		with os.fdopen(rfd, "rb") as f:
			data = f.read()
	finally:
		_, status = os.waitpid(pid, 0)
	if os.WIFSIGNALED(status):
		raise UserError("a child process of nestsleep was killed by signal %d; run again" % os.WTERMSIG(status))
	if not data:
		raise RuntimeError("a child process of nestsleep exited (status %d) with no result" % status)
	return _result_of(*pickle.loads(data))


def _result_of(kind, val):
	"""run_apart()'s and run_spawned()'s result from the child's report."""
	if kind == "ok":
		return val
	if kind == "user":
		raise UserError(val)
	if kind == "interrupt":
		raise KeyboardInterrupt()
	raise RuntimeError("in a child process of nestsleep:\n" + val)


def _report(fn, args):
	"""What a child process sends back: its result, or how it failed."""
	import traceback
	try:
		return ("ok", fn(*args))
	except UserError as e:
		return ("user", str(e))
	except KeyboardInterrupt:
		return ("interrupt", "")
	except BaseException:
		return ("error", traceback.format_exc())


def run_spawned(module, name, *args):
	"""module.name(*args) in a new Python process that imports only what
	it needs (pickled arguments on its stdin, the pickled result on its
	stdout, its stderr the run's): for a step whose memory should not be
	added to the run's, which a forked child (run_apart()) would inherit.
	Errors come back as with run_apart()."""
	import pickle
	import subprocess
	top = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
	env = dict(os.environ, PYTHONPATH=os.pathsep.join([top] + [p for p in os.environ.get(
		"PYTHONPATH", "").split(os.pathsep) if p]))
	sys.stderr.flush()
	r = subprocess.run([sys.executable, "-c", "from nestsleep.common import _spawned; _spawned()"],
			   input=pickle.dumps((module, name, args), pickle.HIGHEST_PROTOCOL),
			   stdout=subprocess.PIPE, env=env)
	if r.returncode < 0:
		raise UserError("a child process of nestsleep was killed by signal %d; run again" % -r.returncode)
	if not r.stdout:
		raise RuntimeError("a child process of nestsleep exited (status %d) with no result" % r.returncode)
	return _result_of(*pickle.loads(r.stdout))


def _spawned():
	"""The child of run_spawned()."""
	import importlib
	import pickle
	module, name, args = pickle.loads(sys.stdin.buffer.read())
	out = sys.stdout.buffer
	sys.stdout = sys.stderr	# the result alone goes to stdout
	data = pickle.dumps(_report(getattr(importlib.import_module(module), name), args), pickle.HIGHEST_PROTOCOL)
	out.write(data)
	out.flush()


def sha1(data):
	return hashlib.sha1(data).hexdigest()


def source_date():
	"""The date every output says it was made, in UTC: SOURCE_DATE_EPOCH
	(seconds since 1970, as reproducible-build tools read it) when it is
	set, else now.  UserError when it is set but not a whole number."""
	sde = os.environ.get("SOURCE_DATE_EPOCH", "").strip()
	if not sde:
		return datetime.datetime.now(datetime.timezone.utc)
	if not sde.isdigit():
		raise UserError("SOURCE_DATE_EPOCH=%s: give the seconds since 1970-01-01 00:00 UTC" % sde)
	return datetime.datetime.fromtimestamp(int(sde), datetime.timezone.utc)


def fingerprint(rel, func, primitive, chain):
	"""Stable across line shifts: file, function, wait primitive, chain."""
	return sha1("\0".join([rel, func, primitive] + list(chain)).encode())[:16]
