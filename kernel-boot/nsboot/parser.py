# SPDX-License-Identifier: GPL-2.0-only
#
# Parses a kernel console log: KTAP results, splats (warnings, BUGs, oopses,
# lockdep reports, hung tasks, panics) with syzbot-style titles, and the
# nsboot init markers; classifies the boot into one Status.
#
# Modelled on the kernel's tools/testing/kunit/kunit_parser.py and on
# syzkaller's pkg/report.

"""Console log parsing for nsboot.

parse_log(lines) reads a console log (a file, stdin, or QEMU's output as it
arrives) and returns a BootResult:

- the KTAP tests ("KTAP version 1", "1..N", "ok N name", "not ok N name",
  "# SKIP", "# Subtest:" nesting by indentation);
- the splats, each titled syzbot-style, e.g.
  "do not call blocking ops in nst_reached", and attributed to the test
  whose output contains it;
- the nsboot markers: "nsboot: init started", "nsboot: end rc=N";
- one Status for the whole boot.

A test announces a splat it expects with a diagnostic line
"# expect-splat: <text>" before its result; such a splat does not count
against the boot, and a missing one is a TEST_FAILURE.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from enum import Enum
from typing import Dict, Iterable, List, Optional, Tuple


class Status(Enum):
	"""The outcome of one nsboot stage or of a whole run."""
	SUCCESS = 'SUCCESS'
	CONFIG_FAILURE = 'CONFIG_FAILURE'
	BUILD_FAILURE = 'BUILD_FAILURE'
	BOOT_FAILURE = 'BOOT_FAILURE'	# a hang, a crash, a panic, init never ran
	SPLAT = 'SPLAT'			# a splat no test expected
	TEST_FAILURE = 'TEST_FAILURE'	# a KTAP failure, a missing test or expected splat


class TestStatus(Enum):
	"""The status of one KTAP test (as in kunit_parser)."""
	SUCCESS = 'SUCCESS'
	FAILURE = 'FAILURE'
	SKIPPED = 'SKIPPED'
	TEST_CRASHED = 'TEST_CRASHED'	# planned, never reported
	NO_TESTS = 'NO_TESTS'


# ---------------------------------------------------------------------------
# Line clean-up

# "[    1.234567] ", optionally followed by a PRINTK_CALLER "[    T1] ".
TIMESTAMP = re.compile(r'^\[\s*\d+\.\d+\](?:\[\s*[CT]\d+\])? ?')
ANSI = re.compile(r'\x1b(?:\[[0-9;?]*[A-Za-z]|[@-Z\\^_c])')


def clean_line(line: str) -> str:
	"""Strip the line end, control junk, and the printk timestamp.

	Example: '[    1.500000] ok 1 wait_event\\r\\n' -> 'ok 1 wait_event'
	"""
	line = line.rstrip('\r\n').replace('\r', '').replace('\x00', '')
	line = ANSI.sub('', line)
	return TIMESTAMP.sub('', line, count=1)


# ---------------------------------------------------------------------------
# Splats

CUT_HERE = re.compile(r'^-+\[ cut here \]-+\s*$')
END_TRACE = re.compile(r'^-+\[ end trace [0-9a-f]+ \]-+\s*$')
END_PANIC = re.compile(r'^-+\[ end Kernel panic - not syncing: ')
WARNING_CPU = re.compile(r'^WARNING: CPU: \d+ PID: \d+ at (.*)$')
WARNING_HEAD = re.compile(r'^WARNING: (.+)$')
BUG_SLEEPING = re.compile(r'^BUG: sleeping function called from invalid context at (\S+)')
BUG_HEAD = re.compile(r'^BUG: (.+)$')
KERNEL_BUG = re.compile(r'^kernel BUG at (\S+)!')
OOPS = re.compile(r'^(?:Oops|invalid opcode): (.*)$')
GPF = re.compile(r'^general protection fault\b(.*)$')
HUNG_TASK = re.compile(r'^INFO: task (\S+?):(\d+) blocked for more than (\d+) seconds')
PANIC = re.compile(r'^Kernel panic - not syncing: (.*?)\s*$')
SOFT_LOCKUP = re.compile(r'^watchdog: BUG: soft lockup - CPU#\d+ stuck for')
RCU_STALL = re.compile(r'^rcu: INFO: (\S+) (?:self-)?detected stalls? on CPUs?/tasks')
DO_NOT_CALL = re.compile(r'do not call blocking ops when !TASK_RUNNING; state=(\w+) set at \[<[^>]*>\] (\S+)')
DO_NOT_CALL_SHORT = 'do not call blocking ops when !TASK_RUNNING'
RIP = re.compile(r'^RIP: [0-9a-f]{4}:(\S+)')
FRAME = re.compile(r'^\s*(\? )?([A-Za-z0-9_.$]+)\+0x[0-9a-f]+/0x[0-9a-f]+(?: \[(\S+)\])?\s*$')
OLD_FRAME = re.compile(r'^\s*\[<[0-9a-f]+>\] (\? )?([A-Za-z0-9_.$]+)\+0x[0-9a-f]+/0x[0-9a-f]+')
TASK_END = re.compile(r'^\s*</TASK>\s*$')

# Lockdep headlines (kernel/locking/lockdep.c) and their syzbot title stems.
LOCKDEP_TITLES: Tuple[Tuple[str, str], ...] = (
	('possible recursive locking detected', 'possible deadlock'),
	('possible circular locking dependency detected', 'possible deadlock'),
	('possible irq lock inversion dependency detected', 'possible deadlock'),
	('HARDIRQ-safe -> HARDIRQ-unsafe lock order detected', 'possible deadlock'),
	('SOFTIRQ-safe -> SOFTIRQ-unsafe lock order detected', 'possible deadlock'),
	('inconsistent lock state', 'inconsistent lock state'),
	('bad unlock balance detected!', 'bad unlock balance'),
	('bad contention detected!', 'bad contention'),
	('held lock freed!', 'held lock freed'),
	('lock held when returning to user space!', 'lock held when returning to user space'),
	('suspicious RCU usage', 'suspicious RCU usage'),
	('Nested lock was not taken', 'nested lock was not taken'),
	('lock held at task exit time!', 'lock held at task exit time'),
)

# Frames that are the machinery, not the culprit: the first frame that
# matches none of these names the splat (syzkaller's "skip" lists).
INFRA_FRAMES = re.compile(r'^(?:' + '|'.join((
	r'_*might_sleep', r'_*might_resched', r'_*might_fault', r'might_alloc',
	r'_*mutex_lock\w*', r'_*mutex_trylock\w*', r'_*mutex_unlock\w*',
	r'_*down(?:_\w+)?', r'_*up_\w+', r'rwsem_\w+', r'_*rt_mutex\w*', r'_*ww_mutex\w*',
	r'_*lock_acquire\w*', r'lock_release', r'lock_sync', r'_*lock_\w*acquire\w*',
	r'_raw_\w+', r'do_raw_\w+', r'_*raw_spin_\w+', r'spin_\w*lock\w*',
	r'lockdep_\w+', r'_*lockdep\w*', r'print_\w+', r'check_noncircular', r'check_prev_add',
	r'check_prevs_add', r'check_deadlock', r'validate_chain', r'debug_check_no_\w+',
	r'mark_lock\w*', r'valid_state', r'_*warn\w*', r'warn_slowpath\w*', r'report_bug',
	r'handle_bug', r'exc_invalid_op', r'asm_exc_invalid_op', r'dump_stack\w*', r'show_stack',
	r'_*kmalloc\w*', r'kmem_cache_alloc\w*', r'slob_\w+', r'_*slab_alloc\w*', r'kzalloc\w*',
	r'_*alloc_pages\w*', r'fs_reclaim_\w+', r'_*cond_resched\w*', r'_*schedule\w*',
	r'preempt_schedule\w*', r'_*copy_(?:from|to)_user\w*', r'_*get_user\w*', r'_*put_user\w*',
	r'strncpy_from_user', r'mmap_read_lock\w*',
)) + r')$')

# Hung-task titles also skip the sleeping primitives themselves.
SLEEP_FRAMES = re.compile(r'^(?:' + '|'.join((
	r'_*schedule\w*', r'io_schedule\w*', r'_*wait_for_common\w*', r'do_wait_for_common',
	r'wait_for_completion\w*', r'msleep\w*', r'usleep_range\w*', r'schedule_timeout\w*',
	r'_*mutex_lock\w*', r'_*down\w*', r'rwsem_down_\w+', r'rt_mutex\w*', r'prepare_to_wait\w*',
	r'finish_wait', r'wait_woken', r'woken_wake_function', r'kthread', r'ret_from_fork\w*',
)) + r')$')


@dataclass
class Frame:
	"""One call-trace entry: 'mutex_lock+0x1c/0x40 [mod]'."""
	function: str
	module: str = ''
	reliable: bool = True


@dataclass
class Splat:
	"""One kernel report on the console.

	kind is one of: blocking_ops, sleeping_in_atomic, warning, bug, oops,
	lockdep, hung_task, soft_lockup, rcu_stall, panic.
	"""
	kind: str
	headline: str
	first_line: int
	lines: List[str] = field(default_factory=list)
	message: str = ''
	location: str = ''
	rip: str = ''
	frames: List[Frame] = field(default_factory=list)
	set_at: str = ''	# blocking_ops: where the task state was set
	title: str = ''
	test: Optional[str] = None
	expected: bool = False
	closed: bool = False
	in_trace: bool = False

	def trimmed(self, max_frames: int = 16) -> List[str]:
		"""The splat as a changelog quotes it: the message, the WARNING/BUG
		line and the reliable call-trace frames, as printed (without the
		timestamps); registers, code bytes, the module list and '?' frames
		go."""
		out: List[str] = []
		frames = 0
		in_trace = False
		for line in self.lines:
			st = line.strip()
			if not in_trace:
				if st in ('Call Trace:', '<TASK>'):
					in_trace = True
					out.append(st if st == 'Call Trace:' else ' <TASK>')
				elif DO_NOT_CALL_SHORT in line or WARNING_CPU.match(line) or BUG_SLEEPING.match(line) \
						or line.startswith(('in_atomic(): ', 'preempt_count: ')):
					out.append(line.rstrip())
				continue
			if st == '<TASK>':
				out.append(' <TASK>')
			elif TASK_END.match(line) or END_TRACE.match(line):
				out.append(' </TASK>')
				break
			elif FRAME.match(line) and not st.startswith('? '):
				frames += 1
				if frames <= max_frames:
					out.append(' ' + st)
		return out

	def guilty(self, skip: 're.Pattern[str]' = INFRA_FRAMES) -> str:
		"""The first reliable call-trace frame that is not machinery."""
		for fr in self.frames:
			if fr.reliable and not skip.match(fr.function):
				return fr.function
		for fr in self.frames:
			if not skip.match(fr.function):
				return fr.function
		return self.rip or (self.frames[0].function if self.frames else '')

	def make_title(self) -> str:
		"""The syzbot-style title.

		Examples: 'do not call blocking ops in nst_reached',
		'BUG: sleeping function called from invalid context in foo_read',
		'WARNING in bar_probe', 'possible deadlock in baz_ioctl',
		'INFO: task hung in md_thread', 'kernel panic: Fatal exception'.
		"""
		def where(fn: str) -> str:
			return f' in {fn}' if fn else ''
		if self.kind == 'blocking_ops':
			return 'do not call blocking ops' + where(self.guilty())
		if self.kind == 'sleeping_in_atomic':
			return 'BUG: sleeping function called from invalid context' + where(self.guilty())
		if self.kind == 'warning':
			fn = self.rip if self.rip and not INFRA_FRAMES.match(self.rip) else self.guilty()
			return 'WARNING' + where(fn)
		if self.kind == 'lockdep':
			stem = self.headline
			for head, title in LOCKDEP_TITLES:
				if self.headline.startswith(head):
					stem = title
					break
			if stem == 'suspicious RCU usage' and self.location:
				return f'suspicious RCU usage at {self.location}'
			return stem + where(self.guilty())
		if self.kind == 'hung_task':
			return 'INFO: task hung' + where(self.guilty(SLEEP_FRAMES))
		if self.kind == 'soft_lockup':
			return 'BUG: soft lockup' + where(self.rip or self.guilty())
		if self.kind == 'rcu_stall':
			return 'INFO: rcu detected stall' + where(self.guilty(SLEEP_FRAMES))
		if self.kind == 'panic':
			return 'kernel panic: ' + self.message
		if self.kind in ('bug', 'oops'):
			head = self.headline
			head = re.sub(r',? address: .*$', '', head)
			head = re.sub(r' for address .*$', '', head)
			head = re.sub(r'^(kernel BUG) at .*$', r'\1', head)
			head = re.sub(r'^(general protection fault).*$', r'\1', head)
			head = re.sub(r'^(?:Oops|invalid opcode): .*$', 'Oops', head)
			head = re.sub(r'^(BUG: [^:]+): \S*/\d+.*$', r'\1', head)	# "...: insmod/70/0x2"
			fn = self.rip if self.rip else self.guilty()
			return head + where(fn)
		return self.headline

	def matches(self, text: str) -> bool:
		"""True when an expect-splat text names this splat."""
		return text in self.message or text in self.headline or self.title.startswith(text)


class SplatParser:
	"""A line-at-a-time state machine that cuts the console into splats."""

	MAX_LINES = 400

	def __init__(self) -> None:
		self.splats: List[Splat] = []
		self.cur: Optional[Splat] = None
		self._after_cut = False

	def _close(self) -> None:
		if self.cur is not None:
			self.cur.closed = True
			self.cur.title = self.cur.make_title()
			self.cur = None
		self._after_cut = False

	def _open(self, kind: str, headline: str, lineno: int, line: str) -> Splat:
		self._close()
		sp = Splat(kind, headline, lineno, [line])
		self.splats.append(sp)
		self.cur = sp
		return sp

	def interrupt(self) -> None:
		"""A KTAP result line or an nsboot marker ends any open splat."""
		self._close()

	def feed(self, lineno: int, line: str) -> None:
		"""Consume one cleaned console line."""
		cur = self.cur
		if self._feed_boundary(lineno, line, cur):
			return
		if cur is not None and cur.kind == 'warning' and DO_NOT_CALL_SHORT in line:
			self._retitle_blocking_ops(cur, line)
		if self._after_cut and cur is not None:
			self._after_cut = False
			if self._feed_cut_message(cur, line):
				return
		if self._feed_headline(lineno, line, cur):
			return
		if cur is None:
			return
		self._feed_body(cur, line)

	def _feed_boundary(self, lineno: int, line: str, cur: Optional[Splat]) -> bool:
		"""Open a splat at a cut-here or panic line, close one at an end marker."""
		if CUT_HERE.match(line):
			self._open('warning', 'WARNING', lineno, line)
			self._after_cut = True
			return True
		m = PANIC.match(line)
		if m:
			sp = self._open('panic', 'Kernel panic - not syncing', lineno, line)
			sp.message = m.group(1)
			return True
		if cur is not None and END_TRACE.match(line):
			cur.lines.append(line)
			self._close()
			return True
		if cur is not None and END_PANIC.match(line):
			cur.lines.append(line)
			self._close()
			return True
		return False

	def _retitle_blocking_ops(self, cur: Splat, line: str) -> None:
		"""Turn an open warning into blocking_ops when a later line names it."""
		# another printk (a device probe, say) came between the cut
		# line and the WARN's message: the message still names it
		m = DO_NOT_CALL.search(line)
		cur.kind = 'blocking_ops'
		cur.headline = DO_NOT_CALL_SHORT
		cur.message = line
		if m:
			cur.set_at = m.group(2)
		self._after_cut = False

	def _feed_cut_message(self, cur: Splat, line: str) -> bool:
		"""Take the line after a cut-here line as the WARN's message, unless it is a headline."""
		if WARNING_CPU.match(line) or KERNEL_BUG.match(line):
			return False
		cur.message = line
		cur.lines.append(line)
		m = DO_NOT_CALL.search(line)
		if m or DO_NOT_CALL_SHORT in line:
			cur.kind = 'blocking_ops'
			cur.headline = DO_NOT_CALL_SHORT
			if m:
				cur.set_at = m.group(2)
		return True

	def _feed_headline(self, lineno: int, line: str, cur: Optional[Splat]) -> bool:
		"""Open (or extend) a splat at a report headline; False if the line is none."""
		m = WARNING_CPU.match(line)
		if m:
			self._feed_warning_cpu(m, lineno, line, cur)
			return True
		m = KERNEL_BUG.match(line)
		if m:
			self._feed_kernel_bug(m, lineno, line, cur)
			return True
		m = BUG_SLEEPING.match(line)
		if m:
			sp = self._open('sleeping_in_atomic', 'BUG: sleeping function called from invalid context', lineno, line)
			sp.location = m.group(1)
			return True
		if SOFT_LOCKUP.match(line):
			self._open('soft_lockup', line, lineno, line)
			return True
		m = BUG_HEAD.match(line)
		if m:
			self._open('bug', 'BUG: ' + m.group(1), lineno, line)
			return True
		m = OOPS.match(line) or GPF.match(line)
		if m:
			self._feed_oops(lineno, line, cur)
			return True
		m = WARNING_HEAD.match(line)
		if m:
			head = m.group(1).strip()
			kind = 'lockdep' if any(head.startswith(h) for h, _ in LOCKDEP_TITLES) else 'warning'
			self._open(kind, head, lineno, line)
			return True
		m = HUNG_TASK.match(line)
		if m:
			sp = self._open('hung_task', line, lineno, line)
			sp.message = f'{m.group(1)}:{m.group(2)} blocked for more than {m.group(3)} seconds'
			return True
		m = RCU_STALL.match(line)
		if m:
			self._open('rcu_stall', line, lineno, line)
			return True
		return False

	def _feed_warning_cpu(self, m: 're.Match[str]', lineno: int, line: str, cur: Optional[Splat]) -> None:
		"""Take a 'WARNING: CPU: N PID: N at ...' line: the location and RIP of a warning."""
		if cur is None or cur.location or cur.kind not in ('warning', 'blocking_ops', 'bug'):
			cur = self._open('warning', 'WARNING', lineno, line)
		else:
			cur.lines.append(line)
		at = m.group(1).split()
		if at and ':' in at[0] and '+0x' not in at[0]:
			cur.location = at[0]
			at = at[1:]
		if at:
			cur.rip = at[0].split('+')[0].split('.')[0]

	def _feed_kernel_bug(self, m: 're.Match[str]', lineno: int, line: str, cur: Optional[Splat]) -> None:
		"""Take a 'kernel BUG at file:line!' line: a fresh cut-here warning becomes it, else a new bug."""
		if cur is not None and cur.kind == 'warning' and not cur.location and len(cur.lines) <= 2:
			cur.kind = 'bug'
			cur.headline = 'kernel BUG at ' + m.group(1)
			cur.location = m.group(1)
			cur.lines.append(line)
		else:
			sp = self._open('bug', 'kernel BUG at ' + m.group(1), lineno, line)
			sp.location = m.group(1)

	def _feed_oops(self, lineno: int, line: str, cur: Optional[Splat]) -> None:
		"""Take an Oops or general protection fault line: part of a fresh BUG, else a new oops."""
		if cur is not None and cur.kind == 'bug' and 'Oops' not in ''.join(cur.lines[:12]) \
				and lineno - cur.first_line < 12:
			cur.lines.append(line)
		elif line.startswith('general protection fault'):
			self._open('oops', 'general protection fault', lineno, line)
		else:
			self._open('oops', line, lineno, line)

	def _feed_body(self, cur: Splat, line: str) -> None:
		"""Take a line inside the current splat: RIP, call-trace frames, its end."""
		cur.lines.append(line)
		if len(cur.lines) > self.MAX_LINES:
			self._close()
			return
		m = RIP.match(line)
		if m and not cur.rip:
			cur.rip = m.group(1).split('+')[0].split('.')[0]
			return
		if line.strip() in ('Call Trace:', '<TASK>', 'stack backtrace:'):
			cur.in_trace = True
			return
		if cur.kind == 'lockdep' and cur.headline.startswith('suspicious RCU usage'):
			mm = re.match(r'^(\S+:\d+) ', line)
			if mm and not cur.location:
				cur.location = mm.group(1)
		m = FRAME.match(line) or OLD_FRAME.match(line)
		if m and cur.in_trace:
			fn = m.group(2).split('.')[0] or m.group(2)	# foo.cold, foo.isra.0
			cur.frames.append(Frame(fn, (m.group(3) if m.re is FRAME else '') or '', not m.group(1)))
			return
		if TASK_END.match(line) and cur.kind in ('sleeping_in_atomic', 'lockdep', 'hung_task', 'rcu_stall', 'soft_lockup'):
			self._close()

	def finish(self) -> None:
		"""Close the splat that is open at the end of the log."""
		self._close()


# ---------------------------------------------------------------------------
# KTAP

KTAP_START = re.compile(r'^(\s*)(K?TAP) version (\d+)\s*$')
KTAP_PLAN = re.compile(r'^(\s*)1\.\.(\d+)\s*(?:#\s*(.*))?$')
KTAP_RESULT = re.compile(r'^(\s*)(ok|not ok)\s+(\d+)\b(?:\s*-)?\s*([^#]*?)\s*(?:#\s*(.*?))?\s*$')
KTAP_SUBTEST = re.compile(r'^(\s*)#\s*Subtest:\s*(.*?)\s*$')
KTAP_DIAG = re.compile(r'^(\s*)#\s?(.*)$')
KTAP_BAIL = re.compile(r'^(\s*)Bail out!\s*(.*)$')
EXPECT_SPLAT = re.compile(r'^expect-splat:\s*(.+?)\s*$')


@dataclass
class Test:
	"""A KTAP test: a leaf case, or a document/suite with subtests."""
	name: str = ''
	number: int = 0
	status: TestStatus = TestStatus.TEST_CRASHED
	directive: str = ''
	expected_count: Optional[int] = None
	subtests: List['Test'] = field(default_factory=list)
	log: List[str] = field(default_factory=list)
	expect_splats: List[str] = field(default_factory=list)
	splats: List[Splat] = field(default_factory=list)
	first_line: int = 0
	last_line: int = 0
	indent: int = 0
	errors: List[str] = field(default_factory=list)

	def leaves(self) -> List['Test']:
		"""The leaf tests under this one (itself if it is a leaf)."""
		if not self.subtests:
			return [self]
		out: List[Test] = []
		for t in self.subtests:
			out.extend(t.leaves())
		return out


@dataclass
class TestCounts:
	"""Counts of leaf test statuses."""
	passed: int = 0
	failed: int = 0
	crashed: int = 0
	skipped: int = 0

	def total(self) -> int:
		"""All leaf tests."""
		return self.passed + self.failed + self.crashed + self.skipped

	def __str__(self) -> str:
		parts = [('passed', self.passed), ('failed', self.failed),
			 ('crashed', self.crashed), ('skipped', self.skipped)]
		return f'Ran {self.total()} tests: ' + ', '.join(f'{k}: {v}' for k, v in parts if v)


class _Doc:
	"""An open KTAP document (or subtest) while parsing."""

	def __init__(self, indent: int, test: Test, lineno: int) -> None:
		self.indent = indent
		self.test = test
		self.pending_start = lineno + 1
		self.pending_log: List[str] = []
		self.pending_expect: List[str] = []


class KtapParser:
	"""Line-at-a-time KTAP parser that tolerates interleaved kernel output."""

	def __init__(self) -> None:
		self.documents: List[Test] = []
		self.stack: List[_Doc] = []
		self.errors: List[str] = []

	def _top(self) -> Optional[_Doc]:
		return self.stack[-1] if self.stack else None

	def _close_docs_deeper_than(self, indent: int, lineno: int) -> Optional[_Doc]:
		"""Pop the documents deeper than indent; return the outermost popped."""
		popped = None
		while self.stack and self.stack[-1].indent > indent:
			popped = self.stack.pop()
			self._finish_doc(popped, lineno)
		return popped

	def _finish_doc(self, doc: _Doc, lineno: int) -> None:
		t = doc.test
		t.last_line = lineno
		if t.expected_count is not None:
			got = len(t.subtests)
			for n in range(got + 1, t.expected_count + 1):
				t.subtests.append(Test(name=f'(test {n}: no result)', number=n,
						       status=TestStatus.TEST_CRASHED, indent=doc.indent,
						       first_line=doc.pending_start, last_line=lineno,
						       log=list(doc.pending_log),
						       expect_splats=list(doc.pending_expect) if n == got + 1 else []))
				t.errors.append(f'test {n} planned but not reported')

	def is_ktap_line(self, line: str) -> bool:
		"""True for lines the parser consumes as KTAP structure."""
		return bool(KTAP_START.match(line) or (self.stack and (KTAP_PLAN.match(line) or KTAP_RESULT.match(line))))

	def feed(self, lineno: int, line: str) -> str:
		"""Consume one cleaned line; return 'result', 'start', 'plan', 'diag' or ''."""
		m = KTAP_START.match(line)
		if m:
			indent = len(m.group(1))
			top = self._top()
			if top is None or indent <= self.stack[0].indent:
				self._close_docs_deeper_than(-1, lineno)
				t = Test(name='main' if not self.documents else f'main{len(self.documents) + 1}',
					 indent=indent, first_line=lineno, status=TestStatus.NO_TESTS)
				self.documents.append(t)
				self.stack.append(_Doc(indent, t, lineno))
			elif indent > top.indent:
				t = Test(indent=indent, first_line=lineno)
				self.stack.append(_Doc(indent, t, lineno))
			else:
				self._close_docs_deeper_than(indent - 1, lineno)
				t = Test(indent=indent, first_line=lineno)
				self.stack.append(_Doc(indent, t, lineno))
			return 'start'
		if not self.stack:
			return ''
		m = KTAP_SUBTEST.match(line)
		if m:
			indent = len(m.group(1))
			top = self._top()
			assert top is not None
			if indent > top.indent:
				self.stack.append(_Doc(indent, Test(name=m.group(2), indent=indent, first_line=lineno), lineno))
			elif indent == top.indent and top is not self.stack[0] and not top.test.name:
				top.test.name = m.group(2)
			return 'start'
		m = KTAP_PLAN.match(line)
		if m:
			indent = len(m.group(1))
			top = self._top()
			assert top is not None
			if indent > top.indent:
				self.stack.append(_Doc(indent, Test(indent=indent, first_line=lineno), lineno))
				top = self._top()
				assert top is not None
			if indent == top.indent:
				top.test.expected_count = int(m.group(2))
				top.pending_start = lineno + 1
				if m.group(3) and m.group(3).upper().startswith('SKIP'):
					top.test.directive = m.group(3)
			return 'plan'
		m = KTAP_RESULT.match(line)
		if m:
			indent = len(m.group(1))
			top = self._top()
			assert top is not None
			if indent > top.indent:
				self.stack.append(_Doc(indent, Test(indent=indent, first_line=lineno), lineno))
			popped = self._close_docs_deeper_than(indent, lineno)
			parent = self._top()
			if parent is None:
				return ''
			if popped is not None:
				test = popped.test
			else:
				test = Test(indent=indent, first_line=parent.pending_start,
					    log=parent.pending_log, expect_splats=parent.pending_expect)
			test.number = int(m.group(3))
			name = m.group(4).strip()
			if name:
				test.name = name
			test.directive = (m.group(5) or '').strip()
			test.last_line = lineno
			test.status = _result_status(m.group(2), test.directive)
			if test.subtests and test.status == TestStatus.SUCCESS:
				if any(s.status in (TestStatus.FAILURE, TestStatus.TEST_CRASHED) for s in test.leaves()):
					test.status = TestStatus.FAILURE
			expected_number = len(parent.test.subtests) + 1
			if test.number != expected_number:
				parent.test.errors.append(f'expected test number {expected_number}, got {test.number}')
			parent.test.subtests.append(test)
			parent.pending_start = lineno + 1
			parent.pending_log = []
			parent.pending_expect = []
			return 'result'
		m = KTAP_BAIL.match(line)
		if m:
			self.errors.append('Bail out! ' + m.group(2))
			return 'diag'
		m = KTAP_DIAG.match(line)
		top = self._top()
		assert top is not None
		if m:
			text = m.group(2)
			e = EXPECT_SPLAT.match(text)
			if e:
				top.pending_expect.append(e.group(1))
			top.pending_log.append(line)
			return 'diag'
		top.pending_log.append(line)
		return ''

	def finish(self, lineno: int) -> None:
		"""Close every open document at the end of the log."""
		self._close_docs_deeper_than(-1, lineno)
		for doc in self.documents:
			if doc.subtests:
				doc.status = _aggregate(doc)


def _result_status(word: str, directive: str) -> TestStatus:
	d = directive.upper()
	if d.startswith('SKIP'):
		return TestStatus.SKIPPED
	if word == 'ok':
		return TestStatus.SUCCESS
	if d.startswith('TODO'):
		return TestStatus.SKIPPED	# an expected failure
	return TestStatus.FAILURE


def _aggregate(t: Test) -> TestStatus:
	c = count_tests([t])
	if c.total() == 0:
		return TestStatus.NO_TESTS
	if c.crashed:
		return TestStatus.TEST_CRASHED
	if c.failed:
		return TestStatus.FAILURE
	if c.passed:
		return TestStatus.SUCCESS
	return TestStatus.SKIPPED


def count_tests(tests: Iterable[Test]) -> TestCounts:
	"""Count the leaf statuses under tests."""
	c = TestCounts()
	for t in tests:
		for leaf in (t.leaves() if t.subtests else ([] if t.status == TestStatus.NO_TESTS else [t])):
			if leaf.status == TestStatus.SUCCESS:
				c.passed += 1
			elif leaf.status == TestStatus.FAILURE:
				c.failed += 1
			elif leaf.status == TestStatus.SKIPPED:
				c.skipped += 1
			elif leaf.status == TestStatus.TEST_CRASHED:
				c.crashed += 1
	return c


# ---------------------------------------------------------------------------
# The whole boot

INIT_STARTED = re.compile(r'^nsboot: init started')
INIT_END = re.compile(r'^nsboot: end rc=(\d+)')
INIT_MODULE = re.compile(r'^nsboot: module (\S+)')
KERNEL_START = re.compile(r'Linux version \d')	# SeaBIOS junk may precede it
RUN_INIT = re.compile(r'^Run (\S+) as init process')
SHUTDOWN = re.compile(r'^reboot: (Restarting system|System halted|Power down)')


@dataclass
class BootResult:
	"""Everything parse_log() learned from one console log."""
	status: Status = Status.BOOT_FAILURE
	reason: str = ''
	documents: List[Test] = field(default_factory=list)
	splats: List[Splat] = field(default_factory=list)
	kernel_started: bool = False
	init_started: bool = False
	ended: bool = False
	end_rc: Optional[int] = None
	shutdown: bool = False
	modules: List[str] = field(default_factory=list)
	timed_out: bool = False
	lines: int = 0
	ktap_errors: List[str] = field(default_factory=list)

	@property
	def counts(self) -> TestCounts:
		"""Leaf test counts over every KTAP document."""
		return count_tests(self.documents)

	def unexpected_splats(self) -> List[Splat]:
		"""Splats that no test announced."""
		return [s for s in self.splats if not s.expected]

	def expected_splats(self) -> List[Splat]:
		"""Splats that a test announced with '# expect-splat:'."""
		return [s for s in self.splats if s.expected]

	def splat_counts(self) -> Dict[str, int]:
		"""title -> how many times it appeared."""
		out: Dict[str, int] = {}
		for s in self.splats:
			out[s.title] = out.get(s.title, 0) + 1
		return out

	def missing_expected(self) -> List[Tuple[str, str]]:
		"""(test, text) for each announced splat that did not appear."""
		out = []
		for doc in self.documents:
			for leaf in doc.leaves():
				got = [s for s in leaf.splats if s.expected]
				for i, text in enumerate(leaf.expect_splats):
					if i >= len(got):
						out.append((leaf.name, text))
		return out

	def to_json(self) -> dict:
		"""A JSON-able summary (for boottest.json and --json)."""
		def test_json(t: Test) -> dict:
			d: dict = {'name': t.name, 'number': t.number, 'status': t.status.value}
			if t.directive:
				d['directive'] = t.directive
			if t.expect_splats:
				d['expect_splats'] = t.expect_splats
			if t.splats:
				d['splats'] = [s.title for s in t.splats]
			if t.subtests:
				d['subtests'] = [test_json(s) for s in t.subtests]
			diags = [l.strip()[2:] for l in t.log if l.strip().startswith('# ') and 'expect-splat' not in l]
			if diags and not t.subtests:
				d['diagnostics'] = diags
			return d
		c = self.counts
		return {
			'status': self.status.value,
			'reason': self.reason,
			'kernel_started': self.kernel_started,
			'init_started': self.init_started,
			'ended': self.ended,
			'end_rc': self.end_rc,
			'shutdown': self.shutdown,
			'timed_out': self.timed_out,
			'tests': {'passed': c.passed, 'failed': c.failed, 'crashed': c.crashed,
				  'skipped': c.skipped},
			'documents': [test_json(d) for d in self.documents],
			'splats': [{'title': s.title, 'kind': s.kind, 'line': s.first_line,
				    'test': s.test, 'expected': s.expected, 'message': s.message,
				    'frames': [f.function for f in s.frames][:32],
				    **({'trimmed': s.trimmed()} if s.kind in ('blocking_ops', 'sleeping_in_atomic') else {}),
				    **({'set_at': s.set_at} if s.set_at else {})}
				   for s in self.splats],
		}


class LogParser:
	"""Feeds console lines to the KTAP and splat parsers; live or offline."""

	def __init__(self) -> None:
		self.ktap = KtapParser()
		self.splat = SplatParser()
		self.result = BootResult()
		self.lineno = 0

	def feed(self, raw: str) -> Tuple[str, str]:
		"""Consume one raw console line.

		Returns (event, cleaned line); event is '', 'result', 'splat',
		'start', 'plan', 'diag', 'init' or 'end', for a live printer.
		"""
		self.lineno += 1
		line = clean_line(raw)
		r = self.result
		event = ''
		if KERNEL_START.search(line):
			r.kernel_started = True
		elif INIT_STARTED.match(line):
			r.init_started = True
			self.splat.interrupt()
			event = 'init'
		elif INIT_END.match(line):
			m = INIT_END.match(line)
			assert m is not None
			r.ended = True
			r.end_rc = int(m.group(1))
			self.splat.interrupt()
			event = 'end'
		elif INIT_MODULE.match(line):
			m = INIT_MODULE.match(line)
			assert m is not None
			r.modules.append(m.group(1))
		elif SHUTDOWN.match(line):
			r.shutdown = True
		before = len(self.splat.splats)
		structural = bool(KTAP_START.match(line) or (self.ktap.stack and KTAP_RESULT.match(line)))
		if structural:
			self.splat.interrupt()
		else:
			self.splat.feed(self.lineno, line)
		if len(self.splat.splats) > before:
			event = 'splat'
		ev = self.ktap.feed(self.lineno, line)
		if ev and not event:
			event = ev
		return event, line

	def finish(self, timed_out: bool = False) -> BootResult:
		"""Close the parsers, attribute splats to tests, and classify."""
		self.splat.finish()
		self.ktap.finish(self.lineno)
		r = self.result
		r.lines = self.lineno
		r.timed_out = timed_out
		r.documents = self.ktap.documents
		r.splats = self.splat.splats
		r.ktap_errors = list(self.ktap.errors)
		for d in r.documents:
			r.ktap_errors.extend(d.errors)
			for t in d.subtests:
				r.ktap_errors.extend(f'{t.name}: {e}' for e in t.errors)
		_attribute_splats(r)
		r.status, r.reason = classify(r)
		return r


def _attribute_splats(r: BootResult) -> None:
	leaves = [leaf for d in r.documents for leaf in d.leaves() if leaf is not d]
	for s in r.splats:
		for leaf in leaves:
			if leaf.first_line <= s.first_line <= leaf.last_line:
				s.test = leaf.name
				leaf.splats.append(s)
				break
	for leaf in leaves:
		want = list(leaf.expect_splats)
		for s in leaf.splats:
			for i, text in enumerate(want):
				if s.matches(text):
					s.expected = True
					del want[i]
					break


def classify(r: BootResult) -> Tuple[Status, str]:
	"""One Status and a one-line reason for a parsed boot.

	Order: BOOT_FAILURE (no kernel, panic, init never ran, no end marker),
	then SPLAT (a splat no test expected), then TEST_FAILURE (KTAP failures,
	missing results, an expected splat that did not appear, init rc != 0),
	then SUCCESS.
	"""
	panics = [s for s in r.splats if s.kind == 'panic']
	if not r.kernel_started and r.lines == 0:
		return Status.BOOT_FAILURE, 'no console output'
	if panics:
		before = [s for s in r.splats if s.kind != 'panic' and not s.expected
			  and s.first_line < panics[0].first_line]
		after = f', after {before[-1].title}' if before else ''
		return Status.BOOT_FAILURE, panics[0].title + after
	if not r.init_started:
		if r.timed_out:
			return Status.BOOT_FAILURE, 'hung before init (timed out)'
		return Status.BOOT_FAILURE, 'init never started'
	if not r.ended:
		unexpected = r.unexpected_splats()
		last = f'; last splat: {unexpected[-1].title}' if unexpected else ''
		if r.timed_out:
			return Status.BOOT_FAILURE, f'hung: no end marker before the timeout{last}'
		return Status.BOOT_FAILURE, f'the log stops before the end marker (crash?){last}'
	unexpected = r.unexpected_splats()
	if unexpected:
		groups: Dict[str, List[str]] = {}
		for s in unexpected:
			tests = groups.setdefault(s.title, [])
			if s.test:
				tests.append(s.test)
		parts = []
		for title, tests in list(groups.items())[:4]:
			n = sum(1 for s in unexpected if s.title == title)
			where = ''
			if tests:
				where = ' (test' + ('s ' if len(tests) > 1 else ' ') + ', '.join(tests[:3]) + \
					(f' and {len(tests) - 3} more' if len(tests) > 3 else '') + ')'
			parts.append(f'{n}x {title}{where}')
		return Status.SPLAT, f'{len(unexpected)} unexpected splat(s): ' + '; '.join(parts)
	problems: List[str] = []
	c = r.counts
	if c.failed or c.crashed:
		bad = [leaf.name for d in r.documents for leaf in d.leaves()
		       if leaf.status in (TestStatus.FAILURE, TestStatus.TEST_CRASHED)]
		problems.append(f'{c.failed} failed, {c.crashed} crashed: ' + ', '.join(bad[:8]))
	missing = r.missing_expected()
	if missing:
		problems.append('expected splat missing in ' + ', '.join(sorted({t for t, _ in missing})))
	if r.modules and not r.documents:
		problems.append('the test module printed no KTAP')
	if r.end_rc:
		problems.append(f'init reported rc={r.end_rc}')
	if problems:
		return Status.TEST_FAILURE, '; '.join(problems)
	if c.total():
		return Status.SUCCESS, str(c)
	return Status.SUCCESS, 'booted to init and shut down' if r.shutdown else 'booted to init'


def parse_log(lines: Iterable[str], timed_out: bool = False) -> BootResult:
	"""Parse a whole console log.

	Example:
		with open('console.log') as f:
			r = parse_log(f)
		print(r.status, r.reason)
	"""
	p = LogParser()
	for line in lines:
		p.feed(line)
	return p.finish(timed_out)


def format_splat(s: Splat) -> str:
	"""One line per splat for the summary: title, line, test, expected."""
	where = f' [test {s.test}]' if s.test else ''
	tag = 'expected' if s.expected else 'UNEXPECTED'
	return f'{tag}: {s.title} (line {s.first_line}){where}'
