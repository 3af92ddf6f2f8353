# SPDX-License-Identifier: GPL-2.0-only
"""The on-disk cache under NESTSLEEP_CACHE: derived data, keyed by content.

Losing the cache costs time; trusting a damaged one would cost findings.
So each file is written whole or not at all (a temporary file, then
rename(2)), and carries a digest of its payload: a file cut short by a
crash, garbled on disk or edited by hand fails the check on load, is
removed, and its data is computed again.  Two runs may share one cache:
they write the same content under the same key, and a rename never
exposes a half-written file."""

import hashlib
import marshal
import os

MAGIC = b"nestsleep-cache-1\n"
DIGEST = 20	# sha1


class Cache:
	def __init__(self, root):
		self.root = root
		self.dropped = 0	# damaged files found (and removed) by load()
		os.makedirs(root, exist_ok=True)

	def path(self, *parts):
		p = os.path.join(self.root, *parts)
		os.makedirs(os.path.dirname(p), exist_ok=True)
		return p

	def load(self, *parts):
		"""The value stored under parts, or None if there is none or the
		file is damaged (then it is removed)."""
		p = os.path.join(self.root, *parts)
		try:
			with open(p, "rb") as f:
				data = f.read()
		except OSError:
			return None
		head, digest, payload = data[:len(MAGIC)], data[len(MAGIC):len(MAGIC) + DIGEST], data[len(MAGIC) + DIGEST:]
		if head == MAGIC and hashlib.sha1(payload).digest() == digest:
			try:
				return marshal.loads(payload)
			except (EOFError, ValueError, TypeError):
				pass
		self.dropped += 1
		try:
			os.unlink(p)
		except OSError:
			pass
		return None

	def store(self, value, *parts):
		p = self.path(*parts)
		payload = marshal.dumps(value)
		tmp = p + ".%d.tmp" % os.getpid()
		try:
			with open(tmp, "wb") as f:
				f.write(MAGIC + hashlib.sha1(payload).digest() + payload)
			os.replace(tmp, p)
		except BaseException:
			try:
				os.unlink(tmp)
			except OSError:
				pass
			raise
