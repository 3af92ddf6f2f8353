# SPDX-License-Identifier: GPL-2.0-only
"""Progress of a long phase on stderr: files done of the total, and the
time left.  On a terminal one line is rewritten in place (and cleared at
the end); otherwise, as in a CI log, a plain line is printed every EVERY
seconds, so a long phase is never silent and a short one adds nothing."""

import sys
import time

EVERY = 30.0		# seconds between plain lines when stderr is not a terminal
TTY_EVERY = 0.25	# seconds between redraws on a terminal
QUIET_START = 2.0	# a phase shorter than this shows nothing


def _duration(s):
	s = int(round(s))
	return "%dm%02ds" % (s // 60, s % 60) if s >= 60 else "%ds" % s


class Progress:
	def __init__(self, what, total, stream=None, every=EVERY, clock=time.monotonic):
		self.what, self.total = what, total
		self.stream = stream or sys.stderr
		self.clock = clock
		try:
			self.tty = self.stream.isatty()
		except (AttributeError, ValueError):
			self.tty = False
		self.every = TTY_EVERY if self.tty else every
		self.start = clock()
		self.last = self.start
		self.shown = 0	# width of the line on the terminal, 0 if none
		self.done = 0

	def text(self, now):
		s = "%s: %d/%d files" % (self.what, self.done, self.total)
		elapsed = now - self.start
		if 0 < self.done < self.total and elapsed > QUIET_START:
			s += ", about %s left" % _duration(elapsed / self.done * (self.total - self.done))
		return s

	def update(self, done):
		"""done files of total are finished."""
		self.done = min(done, self.total)
		now = self.clock()
		if now - self.start < QUIET_START or now - self.last < self.every:
			return
		self.last = now
		line = self.text(now)
		if self.tty:
			self.stream.write("\r" + line.ljust(self.shown))
			self.shown = max(self.shown, len(line))
		else:
			self.stream.write("nestsleep: %s\n" % line)
		self.stream.flush()

	def close(self):
		"""The phase is over: clear the terminal line."""
		if self.tty and self.shown:
			self.stream.write("\r" + " " * self.shown + "\r")
			self.stream.flush()
			self.shown = 0


def line_count(path, state):
	"""Lines appended to path since the last call (state: a dict kept by
	the caller), for a progress file that another process appends to."""
	try:
		with open(path, "rb") as f:
			f.seek(state.get("pos", 0))
			data = f.read()
	except OSError:
		return state.get("lines", 0)
	state["pos"] = state.get("pos", 0) + len(data)
	state["lines"] = state.get("lines", 0) + data.count(b"\n")
	return state["lines"]

