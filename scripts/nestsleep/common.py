# SPDX-License-Identifier: GPL-2.0-only
"""Small helpers every stage shares: the user-error type, logging to stderr,
content hashes."""

import hashlib
import sys


class UserError(Exception):
	"""Bad input: reported as one line, exit status 2."""


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


def sha1(data):
	return hashlib.sha1(data).hexdigest()
