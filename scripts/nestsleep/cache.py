# SPDX-License-Identifier: GPL-2.0-only
"""The on-disk cache under NESTSLEEP_CACHE: derived data, keyed by content."""

import marshal
import os


class Cache:
	def __init__(self, root):
		self.root = root
		os.makedirs(root, exist_ok=True)

	def path(self, *parts):
		p = os.path.join(self.root, *parts)
		os.makedirs(os.path.dirname(p), exist_ok=True)
		return p

	def load(self, *parts):
		p = os.path.join(self.root, *parts)
		try:
			with open(p, "rb") as f:
				return marshal.load(f)
		except (OSError, EOFError, ValueError, TypeError):
			return None

	def store(self, value, *parts):
		p = self.path(*parts)
		tmp = p + ".%d.tmp" % os.getpid()
		with open(tmp, "wb") as f:
			marshal.dump(value, f)
		os.replace(tmp, p)
