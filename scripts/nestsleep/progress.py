# SPDX-License-Identifier: GPL-2.0-only
"""Progress of a long phase on stderr: files done of the total, and the
time left.  On a terminal one line is rewritten in place (and cleared at
the end); otherwise, as in a CI log, a plain line is printed at most every
EVERY seconds, counted across phases (a run of short batches, such as the
fact extraction while callees are resolved, still shows), and a short run
adds nothing.

The time left is estimated from the work done, in bytes when the caller
gives the files' sizes: the match takes the largest files first, so a
count of files would run slow early and fast late."""

import sys
import time

EVERY = 30.0		# seconds between plain lines when stderr is not a terminal
TTY_EVERY = 0.25	# seconds between redraws on a terminal
QUIET_START = 2.0	# a phase shorter than this shows nothing


def _duration(s):
	s = int(round(s))
	return "%dm%02ds" % (s // 60, s % 60) if s >= 60 else "%ds" % s


class Progress:
	# when the last plain line was printed, for all phases of the run
	last_line = None

	def __init__(self, what, total, stream=None, every=EVERY, clock=time.monotonic, work=0):
		self.what, self.total, self.work = what, total, work
		self.stream = stream or sys.stderr
		self.clock = clock
		try:
			self.tty = self.stream.isatty()
		except (AttributeError, ValueError):
			self.tty = False
		self.every = every
		self.start = clock()
		self.last = self.start
		if Progress.last_line is None:
			Progress.last_line = self.start
		self.shown = 0	# width of the line on the terminal, 0 if none
		self.done = self.work_done = 0

	def text(self, now):
		s = "%s: %d/%d files" % (self.what, self.done, self.total)
		elapsed = now - self.start
		done, total = (self.work_done, self.work) if self.work else (self.done, self.total)
		if 0 < done < total and elapsed > QUIET_START:
			s += ", about %s left" % _duration(elapsed / done * (total - done))
		return s

	def update(self, done, work_done=0):
		"""done files of total are finished (work_done bytes of work)."""
		self.done, self.work_done = min(done, self.total), work_done
		now = self.clock()
		if self.tty:
			if now - self.start < QUIET_START or now - self.last < TTY_EVERY:
				return
			self.last = now
			line = self.text(now)
			self.stream.write("\r" + line.ljust(self.shown))
			self.shown = max(self.shown, len(line))
		else:
			if now - Progress.last_line < self.every:
				return
			Progress.last_line = now
			self.stream.write("nestsleep: %s\n" % self.text(now))
		self.stream.flush()

	def close(self):
		"""The phase is over: clear the terminal line."""
		if self.tty and self.shown:
			self.stream.write("\r" + " " * self.shown + "\r")
			self.stream.flush()
			self.shown = 0


def appended(path, state):
	"""The lines appended to path since the last call (state: a dict kept
	by the caller), for a progress file that another process appends to."""
	try:
		with open(path, "rb") as f:
			f.seek(state.get("pos", 0))
			data = f.read()
	except OSError:
		return []
	end = data.rfind(b"\n") + 1	# a line still being written waits
	state["pos"] = state.get("pos", 0) + end
	return data[:end].decode("utf-8", "surrogateescape").splitlines()
