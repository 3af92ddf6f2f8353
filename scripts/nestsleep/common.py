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


def sha1(data):
	return hashlib.sha1(data).hexdigest()
