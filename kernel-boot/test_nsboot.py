#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-only
#
# Unit tests for nsboot: the console parser (against the golden logs in
# test_data/), the Kconfig fragment checks (against test_data/kconfig/), the
# initramfs writer and the QEMU plumbing (with a fake QEMU).  No QEMU, no
# kernel tree and no build are needed.
#
# Modelled on the kernel's tools/testing/kunit/kunit_tool_test.py.

"""Unit tests for kernel-boot/nsboot/; run: PYTHONPATH=scripts:kernel-boot python3 kernel-boot/test_nsboot.py."""

import contextlib
import gzip
import io
import json
import os
import shutil
import stat
import sys
import tempfile
import unittest
from typing import Dict, List
from unittest import mock

HERE = os.path.dirname(os.path.abspath(__file__))

from nsboot import main as nsboot
from nsboot import config as nsboot_config
from nsboot import kernel as nsboot_kernel
from nsboot import parser as nsboot_parser
from nsboot.parser import Status, TestStatus

TEST_DATA = os.path.join(HERE, 'test_data')
SPLAT = 'do not call blocking ops in nst_reached'


def test_data_path(name: str) -> str:
	"""A file in test_data/."""
	return os.path.join(TEST_DATA, name)


def parse(name: str) -> nsboot_parser.BootResult:
	"""Parse a golden log."""
	with open(test_data_path(name), encoding='utf-8', errors='replace') as f:
		return nsboot_parser.parse_log(f)


_CACHE: Dict[str, object] = {}


def cached(key: str, make):
	"""Compute once per process.  Not setUpClass: scripts/dev/run_tests.py runs
	each test method alone, and TestCase.run() alone skips setUpClass."""
	if key not in _CACHE:
		_CACHE[key] = make()
	return _CACHE[key]


def leaves(r: nsboot_parser.BootResult) -> Dict[str, nsboot_parser.Test]:
	"""name -> leaf test."""
	return {t.name: t for d in r.documents for t in d.leaves() if t is not d}


class CleanLineTest(unittest.TestCase):
	"""printk prefixes and line ends."""

	def test_timestamp_and_crlf(self) -> None:
		self.assertEqual(nsboot_parser.clean_line('[    1.500000] ok 1 wait_event\r\n'), 'ok 1 wait_event')

	def test_caller_id_and_indent_kept(self) -> None:
		self.assertEqual(nsboot_parser.clean_line('[   12.000001][    T1]     ok 2 x\n'), '    ok 2 x')

	def test_no_timestamp(self) -> None:
		self.assertEqual(nsboot_parser.clean_line('nsboot: end rc=0\n'), 'nsboot: end rc=0')

	def test_ansi_junk(self) -> None:
		self.assertEqual(nsboot_parser.clean_line('\x1b[2J\x1b[0mSeaBIOS\r\n'), 'SeaBIOS')


class RealLogTest(unittest.TestCase):
	"""The real TCG boot of the 'before' module."""

	def setUp(self) -> None:
		self.r = cached('real', lambda: parse('real_before_tcg.log'))

	def test_status(self) -> None:
		self.assertEqual(self.r.status, Status.SUCCESS, self.r.reason)
		self.assertTrue(self.r.kernel_started and self.r.init_started and self.r.ended and self.r.shutdown)
		self.assertEqual(self.r.end_rc, 0)
		self.assertEqual(self.r.modules, ['nestsleep_tests'])

	def test_counts(self) -> None:
		c = self.r.counts
		self.assertEqual((c.passed, c.failed, c.crashed, c.skipped), (23, 0, 0, 0))
		self.assertEqual(str(c), 'Ran 23 tests: passed: 23')

	def test_one_warning_per_before_case(self) -> None:
		self.assertEqual(len(self.r.splats), 22)
		self.assertEqual(self.r.splat_counts(), {SPLAT: 22})
		self.assertFalse(self.r.unexpected_splats())
		self.assertFalse(self.r.missing_expected())
		for name, t in leaves(self.r).items():
			want = 0 if name == 'msleep_in_condition' else 1
			self.assertEqual(len(t.splats), want, name)
			self.assertEqual(len(t.expect_splats), want, name)

	def test_interleaved_printk(self) -> None:
		# seen in a real boot: the mouse probe printed between the cut
		# line and the WARN message; the splat is still the nested sleep
		r = parse('derived_interleaved_probe.log')
		self.assertEqual(r.splat_counts(), {SPLAT: 22})
		self.assertFalse(r.unexpected_splats())
		self.assertEqual(r.status, Status.SUCCESS, r.reason)

	def test_splat_details(self) -> None:
		by_test = {s.test: s for s in self.r.splats}
		s = by_test['wait_event']
		self.assertEqual(s.kind, 'blocking_ops')
		self.assertEqual(s.location, 'kernel/sched/core.c:9944')
		self.assertEqual(s.rip, '__might_sleep')
		self.assertTrue(s.set_at.startswith('prepare_to_wait_event+'))
		self.assertEqual([f.function for f in s.frames][:3], ['mutex_lock', 'nst_reached', 'nst_wait_event'])
		self.assertTrue(by_test['prepare_to_wait_loop'].set_at.startswith('prepare_to_wait+'))
		self.assertTrue(by_test['set_current_state_loop'].set_at.startswith('nst_set_current_state_loop+'))

	def test_unreliable_frames_skipped_in_title(self) -> None:
		s = [s for s in self.r.splats if s.test == 'set_current_state_loop'][0]
		self.assertFalse(s.frames[0].reliable)	# '? nst_set_current_state_loop+...'
		self.assertEqual(s.title, SPLAT)

	def test_json(self) -> None:
		j = self.r.to_json()
		json.dumps(j)
		self.assertEqual(j['status'], 'SUCCESS')
		self.assertEqual(j['tests'], {'passed': 23, 'failed': 0, 'crashed': 0, 'skipped': 0})
		self.assertEqual(len(j['splats']), 22)
		case16 = j['documents'][0]['subtests'][15]
		self.assertEqual(case16['name'], 'msleep_in_condition')
		self.assertTrue(any('did not time out' in d for d in case16['diagnostics']))

	def test_live_feed_equals_offline(self) -> None:
		p = nsboot_parser.LogParser()
		events: List[str] = []
		with open(test_data_path('real_before_tcg.log'), errors='replace') as f:
			for line in f:
				events.append(p.feed(line)[0])
		r = p.finish()
		self.assertEqual(r.to_json(), self.r.to_json())
		self.assertEqual(events.count('result'), 23)
		self.assertEqual(events.count('splat'), 22)
		self.assertEqual(events.count('end'), 1)


class LockdepLogTest(unittest.TestCase):
	"""The real boot with PROVE_LOCKING: same counts, lockdep's mutex frames skipped."""

	def test_counts_and_titles(self) -> None:
		r = parse('real_before_lockdep_tcg.log')
		self.assertEqual(r.splat_counts(), {SPLAT: 22})
		self.assertFalse(r.unexpected_splats())
		s = r.splats[0]
		self.assertEqual(s.frames[0].function, '__mutex_lock')


class GoldenStatusTest(unittest.TestCase):
	"""Every golden log gets its documented status and reason."""

	CASES = (
		('derived_hang_after_case15.log', Status.BOOT_FAILURE, 'the log stops before the end marker'),
		('derived_missing_splat.log', Status.TEST_FAILURE, 'expected splat missing in wait_event_interruptible'),
		('derived_after_unexpected.log', Status.SPLAT, f'22 unexpected splat(s): 22x {SPLAT}'),
		('lockdep_recursive.log', Status.SPLAT, 'possible deadlock in nst_reached (test recursive)'),
		('lockdep_circular.log', Status.SPLAT, 'possible deadlock in raid5d'),
		('sleeping_in_atomic.log', Status.SPLAT,
		 'BUG: sleeping function called from invalid context in nst_reached'),
		('oops_panic.log', Status.BOOT_FAILURE,
		 'kernel panic: Fatal exception, after BUG: kernel NULL pointer dereference in nst_advance'),
		('hung_task.log', Status.BOOT_FAILURE, 'INFO: task hung in nst_set_current_state_loop'),
		('no_init.log', Status.BOOT_FAILURE, 'kernel panic: No working init found.'),
		('ktap_nested.log', Status.TEST_FAILURE, '1 failed, 0 crashed: wait_event_timeout'),
		('real_before_tcg.log', Status.SUCCESS, 'Ran 23 tests: passed: 23'),
		('derived_interleaved_probe.log', Status.SUCCESS, 'Ran 23 tests: passed: 23'),
		('real_before_lockdep_tcg.log', Status.SUCCESS, 'Ran 23 tests: passed: 23'),
		('real_plain_boot_tcg.log', Status.SUCCESS, 'booted to init and shut down'),
		('real_ownqueue_before_tcg.log', Status.SPLAT,
		 '1 unexpected splat(s): 1x do not call blocking ops in rfcomm_run (test modprobe_rfcomm)'),
		('real_ownqueue_after_tcg.log', Status.SUCCESS, 'Ran 6 tests: passed: 6'),
		('derived_ownqueue_rmmod_stuck.log', Status.TEST_FAILURE,
		 '1 failed, 0 crashed: rmmod_rfcomm; init reported rc=1'),
		('real_hpet_before_tcg.log', Status.SPLAT, '1 unexpected splat(s): 1x do not call blocking ops in hpet_read'),
		('real_acpi_dbg_before_tcg.log', Status.SPLAT,
		 '12 unexpected splat(s): 8x do not call blocking ops in acpi_aml_kern_readable'),
		('real_sctp_before_tcg.log', Status.SPLAT,
		 '1 unexpected splat(s): 1x do not call blocking ops in mem_cgroup_out_of_memory'),
	)

	def test_statuses(self) -> None:
		for name, status, reason in self.CASES:
			with self.subTest(log=name):
				r = parse(name)
				self.assertEqual(r.status, status, r.reason)
				self.assertIn(reason, r.reason)

	def test_every_log_is_covered(self) -> None:
		logs = {f for f in os.listdir(TEST_DATA) if f.endswith('.log')}
		self.assertEqual(logs, {c[0] for c in self.CASES})


class SplatTest(unittest.TestCase):
	"""Recognition and titles of each kind of report."""

	def test_lockdep_recursive(self) -> None:
		r = parse('lockdep_recursive.log')
		(s,) = r.splats
		self.assertEqual(s.kind, 'lockdep')
		self.assertEqual(s.headline, 'possible recursive locking detected')
		self.assertEqual(s.title, 'possible deadlock in nst_reached')
		self.assertEqual(s.test, 'recursive')
		self.assertEqual(leaves(r)['recursive'].status, TestStatus.FAILURE)

	def test_lockdep_circular_outside_tests(self) -> None:
		(s,) = parse('lockdep_circular.log').splats
		self.assertEqual(s.title, 'possible deadlock in raid5d')
		self.assertIsNone(s.test)
		self.assertEqual(s.lines[-1].strip(), '</TASK>')	# the "-> #1" chain did not end it early

	def test_sleeping_in_atomic(self) -> None:
		(s,) = parse('sleeping_in_atomic.log').splats
		self.assertEqual(s.kind, 'sleeping_in_atomic')
		self.assertEqual(s.location, 'kernel/locking/mutex.c:580')
		self.assertEqual(s.title, 'BUG: sleeping function called from invalid context in nst_reached')

	def test_oops_then_panic(self) -> None:
		r = parse('oops_panic.log')
		self.assertEqual([s.kind for s in r.splats], ['bug', 'panic'])
		self.assertEqual(r.splats[0].title, 'BUG: kernel NULL pointer dereference in nst_advance')
		self.assertTrue(any(l.startswith('Oops: 0002') for l in r.splats[0].lines))
		self.assertEqual(r.splats[1].title, 'kernel panic: Fatal exception')
		self.assertEqual(r.counts.crashed, 2)

	def test_hung_task(self) -> None:
		(s,) = parse('hung_task.log').splats
		self.assertEqual(s.kind, 'hung_task')
		self.assertEqual(s.message, 'nst/wait_event:75 blocked for more than 30 seconds')
		self.assertEqual(s.title, 'INFO: task hung in nst_set_current_state_loop')

	def test_plain_warn_on(self) -> None:
		log = ['[ 1.0] ------------[ cut here ]------------',
		       '[ 1.0] WARNING: CPU: 1 PID: 9 at drivers/md/md.c:123 md_check+0x10/0x20',
		       '[ 1.0] Call Trace:', '[ 1.0]  <TASK>', '[ 1.0]  ? __warn+0x7d/0xc0',
		       '[ 1.0]  md_run+0x2/0x30', '[ 1.0]  </TASK>', '[ 1.0] ---[ end trace 0000000000000000 ]---']
		(s,) = nsboot_parser.parse_log(log).splats
		self.assertEqual(s.kind, 'warning')
		self.assertEqual(s.location, 'drivers/md/md.c:123')
		self.assertEqual(s.title, 'WARNING in md_check')

	def test_warn_with_message_in_infra(self) -> None:
		log = ['------------[ cut here ]------------', 'DEBUG_LOCKS_WARN_ON(1)',
		       'WARNING: CPU: 0 PID: 1 at kernel/locking/lockdep.c:232 lock_acquire+0x1/0x2',
		       'Call Trace:', ' lock_acquire+0x1/0x2', ' foo_probe+0x3/0x4', '---[ end trace 0 ]---']
		(s,) = nsboot_parser.parse_log(log).splats
		self.assertEqual(s.message, 'DEBUG_LOCKS_WARN_ON(1)')
		self.assertEqual(s.title, 'WARNING in foo_probe')

	def test_kernel_bug(self) -> None:
		log = ['------------[ cut here ]------------', 'kernel BUG at mm/slub.c:42!',
		       'invalid opcode: 0000 [#1] PREEMPT SMP', 'RIP: 0010:kfree_thing+0x5/0x9',
		       'Call Trace:', ' <TASK>', ' bar+0x1/0x2', ' </TASK>', '---[ end trace 0000000000000000 ]---']
		(s,) = nsboot_parser.parse_log(log).splats
		self.assertEqual(s.title, 'kernel BUG in kfree_thing')

	def test_scheduling_while_atomic_title(self) -> None:
		log = ['BUG: scheduling while atomic: insmod/70/0x00000002', 'Call Trace:', ' <TASK>',
		       ' __schedule+0x1/0x2', ' schedule+0x1/0x2', ' nst_bad+0x1/0x2 [m]', ' </TASK>']
		(s,) = nsboot_parser.parse_log(log).splats
		self.assertEqual(s.title, 'BUG: scheduling while atomic in nst_bad')

	def test_suspicious_rcu(self) -> None:
		log = ['=============================', 'WARNING: suspicious RCU usage', '6.1.0 #1 Not tainted',
		       '-----------------------------', 'kernel/sched/core.c:9876 Illegal context switch in RCU read-side critical section!',
		       'stack backtrace:', 'Call Trace:', ' <TASK>', ' dump_stack_lvl+0x1/0x2', ' foo+0x1/0x2', ' </TASK>']
		(s,) = nsboot_parser.parse_log(log).splats
		self.assertEqual(s.title, 'suspicious RCU usage at kernel/sched/core.c:9876')

	def test_old_style_frames(self) -> None:
		log = ['BUG: sleeping function called from invalid context at mm/slab.h:1', 'Call Trace:',
		       ' [<ffffffff81000000>] dump_stack+0x1/0x2', ' [<ffffffff81000001>] __might_sleep+0x1/0x2',
		       ' [<ffffffff81000002>] kmem_cache_alloc+0x1/0x2', ' [<ffffffff81000003>] hidp_session_thread+0x1/0x2']
		(s,) = nsboot_parser.parse_log(log).splats
		self.assertEqual(s.title, 'BUG: sleeping function called from invalid context in hidp_session_thread')

	def test_cold_suffix_stripped(self) -> None:
		log = ['BUG: sleeping function called from invalid context at x.c:1', 'Call Trace:', ' <TASK>',
		       ' __might_resched.cold+0xcc/0xdc', ' foo_read.isra.0+0x1/0x2', ' </TASK>']
		(s,) = nsboot_parser.parse_log(log).splats
		self.assertEqual(s.title, 'BUG: sleeping function called from invalid context in foo_read')

	def test_ktap_result_ends_an_open_splat(self) -> None:
		log = ['KTAP version 1', '1..1', 'BUG: something odd', 'some detail', 'ok 1 t', 'nsboot: end rc=0']
		r = nsboot_parser.parse_log(['Linux version 6.1', 'nsboot: init started'] + log)
		self.assertEqual(r.splats[0].lines, ['BUG: something odd', 'some detail'])
		self.assertEqual(r.splats[0].test, 't')
		self.assertEqual(r.counts.passed, 1)


def boot(lines: List[str]) -> List[str]:
	"""Wrap KTAP lines in a boot that reached init and ended."""
	return ['Linux version 6.1.0', 'nsboot: init started'] + lines + ['nsboot: end rc=0', 'reboot: Restarting system']


class KtapTest(unittest.TestCase):
	"""KTAP structure."""

	def test_nested(self) -> None:
		r = parse('ktap_nested.log')
		doc = r.documents[0]
		self.assertEqual([t.name for t in doc.subtests], ['waits', 'stress'])
		self.assertEqual(doc.subtests[0].status, TestStatus.FAILURE)
		self.assertEqual([t.status for t in doc.subtests[0].subtests],
				 [TestStatus.SUCCESS, TestStatus.FAILURE, TestStatus.SKIPPED])
		self.assertEqual(doc.subtests[0].subtests[2].directive, 'SKIP no SIGKILL support')
		c = r.counts
		self.assertEqual((c.passed, c.failed, c.skipped), (2, 1, 1))

	def test_missing_results_are_crashes(self) -> None:
		r = nsboot_parser.parse_log(boot(['KTAP version 1', '1..3', 'ok 1 a']))
		self.assertEqual(r.counts.crashed, 2)
		self.assertEqual(r.status, Status.TEST_FAILURE)
		self.assertIn('test 2 planned but not reported', r.ktap_errors)

	def test_no_plan(self) -> None:
		r = nsboot_parser.parse_log(boot(['KTAP version 1', 'ok 1 a', 'not ok 2 b']))
		self.assertEqual((r.counts.passed, r.counts.failed), (1, 1))
		self.assertEqual(r.status, Status.TEST_FAILURE)

	def test_tap13_and_dash(self) -> None:
		r = nsboot_parser.parse_log(boot(['TAP version 13', '1..2', 'ok 1 - a', 'not ok 2 - b # TODO flaky']))
		self.assertEqual([t.name for t in r.documents[0].subtests], ['a', 'b'])
		self.assertEqual(r.status, Status.SUCCESS)	# TODO is an expected failure

	def test_wrong_number(self) -> None:
		r = nsboot_parser.parse_log(boot(['KTAP version 1', '1..2', 'ok 1 a', 'ok 3 b']))
		self.assertIn('expected test number 2, got 3', r.ktap_errors)

	def test_module_without_ktap(self) -> None:
		r = nsboot_parser.parse_log(['Linux version', 'nsboot: init started', 'nsboot: module m', 'nsboot: end rc=0'])
		self.assertEqual(r.status, Status.TEST_FAILURE)
		self.assertIn('printed no KTAP', r.reason)

	def test_plain_boot(self) -> None:
		r = nsboot_parser.parse_log(boot([]))
		self.assertEqual((r.status, r.reason), (Status.SUCCESS, 'booted to init and shut down'))

	def test_init_rc(self) -> None:
		r = nsboot_parser.parse_log(['Linux version', 'nsboot: init started', 'nsboot: end rc=1'])
		self.assertEqual((r.status, r.reason), (Status.TEST_FAILURE, 'init reported rc=1'))

	def test_empty_and_timeout(self) -> None:
		self.assertEqual(nsboot_parser.parse_log([]).reason, 'no console output')
		r = nsboot_parser.parse_log(['SeaBIOS', 'Linux version 6.1'], timed_out=True)
		self.assertEqual((r.status, r.reason), (Status.BOOT_FAILURE, 'hung before init (timed out)'))

	def test_expected_splat_matching(self) -> None:
		warn = ['------------[ cut here ]------------',
			'do not call blocking ops when !TASK_RUNNING; state=2 set at [<0>] prepare_to_wait_event+0x1/0x2',
			'WARNING: CPU: 0 PID: 1 at kernel/sched/core.c:9944 __might_sleep+0x4d/0x60',
			'Call Trace:', ' <TASK>', ' mutex_lock+0x1/0x2', ' foo+0x1/0x2', ' </TASK>', '---[ end trace 0 ]---']
		lines = ['KTAP version 1', '1..2', '# expect-splat: do not call blocking ops when !TASK_RUNNING'] + warn + \
			['ok 1 a'] + warn + ['ok 2 b']
		r = nsboot_parser.parse_log(boot(lines))
		self.assertEqual([s.expected for s in r.splats], [True, False])
		self.assertEqual(r.status, Status.SPLAT)
		self.assertIn('1x do not call blocking ops in foo (test b)', r.reason)


class BuildKeyTest(unittest.TestCase):
	"""A build directory is never shared by two kernel versions: boottest
	hard-links each tree into the same path, and a 6.1 build in the
	6.12 build's O= directory failed in objtool (INAT_NO_REX2)."""

	def test_version_in_key(self) -> None:
		arch = nsboot_kernel.load_arch('x86_64')
		req = nsboot_config.parse_from_string('CONFIG_A=y\n', 'f')
		with tempfile.TemporaryDirectory() as d:
			keys = []
			for sub in ('1', '12'):
				with open(os.path.join(d, 'Makefile'), 'w') as f:
					f.write('# SPDX-License-Identifier: GPL-2.0\nVERSION = 6\nPATCHLEVEL = %s\n'
						'SUBLEVEL = 0\nEXTRAVERSION =\n' % sub)
				keys.append(nsboot_kernel.build_key(d, req, arch))
			self.assertNotEqual(keys[0], keys[1])
			self.assertEqual(keys[1], nsboot_kernel.build_key(d, req, arch))


class ConfigFragmentTest(unittest.TestCase):
	"""The fragment format and the merge rules."""

	def test_parse(self) -> None:
		k = nsboot_config.parse_from_string(
			'##: section\nCONFIG_A=y\t\t# reason\n# CONFIG_B is not set\nCONFIG_C="x y"\nCONFIG_D=30\n', 'f')
		self.assertEqual([str(e) for e in k.as_entries()],
				 ['CONFIG_A=y', '# CONFIG_B is not set', 'CONFIG_C="x y"', 'CONFIG_D=30'])
		self.assertEqual(k.as_entries()[0].origin, 'f:2')

	def test_bad_line(self) -> None:
		with self.assertRaisesRegex(nsboot_config.KconfigParseError, 'f:1: not a Kconfig line: FOO'):
			nsboot_config.parse_from_string('FOO=y', 'f')

	def test_default_fragments_have_what_the_issue_asks(self) -> None:
		k = nsboot_config.load_fragments(nsboot_config.DEFAULT_FRAGMENTS)
		for sym in ('64BIT PRINTK PRINTK_TIME BUG TTY SERIAL_8250 SERIAL_8250_CONSOLE BLK_DEV_INITRD '
			    'RD_GZIP BINFMT_ELF BINFMT_SCRIPT PROC_FS SYSFS DEVTMPFS MODULES MODULE_UNLOAD SMP '
			    'MULTIUSER FUTEX KALLSYMS DEBUG_KERNEL DEBUG_ATOMIC_SLEEP DEBUG_FS').split():
			self.assertEqual(k.get(sym), 'y', sym)
		self.assertEqual(k.get('PROVE_LOCKING'), 'y')
		self.assertIsNone(nsboot_config.load_fragments(['base', 'debug']).get('PROVE_LOCKING'))

	def test_fragment_files_strip_to_plain_kconfig(self) -> None:
		text = nsboot_config.load_fragments(nsboot_config.DEFAULT_FRAGMENTS).to_fragment()
		for line in text.splitlines():
			self.assertRegex(line, r'^(CONFIG_\w+=\S+|# CONFIG_\w+ is not set)$')

	def test_conflicts_refused_cmdline_wins(self) -> None:
		with tempfile.TemporaryDirectory() as d:
			a, b = os.path.join(d, 'a.config'), os.path.join(d, 'b.config')
			with open(a, 'w') as f:
				f.write('CONFIG_X=y\n')
			with open(b, 'w') as f:
				f.write('# CONFIG_X is not set\n')
			with self.assertRaisesRegex(nsboot_config.KconfigParseError, 'conflicting fragments'):
				nsboot_config.load_fragments([a, b])
			k = nsboot_config.load_fragments([a], ['X=m', 'CONFIG_Y=y'])
			self.assertEqual((k.get('X'), k.get('Y')), ('m', 'y'))

	def test_unknown_fragment(self) -> None:
		with self.assertRaisesRegex(nsboot_config.KconfigParseError, r"no fragment 'nope' \(choices: base"):
			nsboot_config.load_fragments(['nope'])

	def test_subset(self) -> None:
		req = nsboot_config.parse_from_string('CONFIG_A=y\n# CONFIG_B is not set\nCONFIG_C=y')
		gen = nsboot_config.parse_from_string('CONFIG_A=y\nCONFIG_C=m')
		self.assertEqual([(str(e), got) for e, got in req.missing_from(gen)], [('CONFIG_C=y', 'm')])
		self.assertFalse(req.is_subset_of(gen))


class KconfigTreeTest(unittest.TestCase):
	"""Explaining unmet dependencies from the miniature tree in test_data/kconfig."""

	def setUp(self) -> None:
		self.tree = cached('tree', lambda: nsboot_config.KconfigTree(test_data_path('kconfig'), 'x86'))

	def explain(self, name: str, want: str = 'y', config: str = '') -> str:
		return self.tree.explain(name, want, nsboot_config.parse_from_string(config).values())

	def test_help_text_skipped(self) -> None:
		self.assertNotIn('NOT_A_SYMBOL', self.tree.symbols)
		self.assertIn('LOCK_DEBUGGING_SUPPORT', self.tree.symbols)	# via source "arch/$(SRCARCH)/Kconfig"
		self.assertIn('PROVE_LOCKING', self.tree.symbols)		# via rsource

	def test_menu_and_continued_depends(self) -> None:
		why = self.explain('MD_RAID456', config='CONFIG_MD=y')
		self.assertIn('depends on BLOCK && MD && BLK_DEV_MD', why)
		self.assertIn('unmet: BLOCK=n', why)
		self.assertIn('BLK_DEV_MD=n', why)
		self.assertNotIn('MD=n,', why)

	def test_if_block_and_promptless_leaf(self) -> None:
		why = self.explain('PROVE_LOCKING', config='CONFIG_DEBUG_KERNEL=y')
		self.assertIn('unmet: LOCK_DEBUGGING_SUPPORT=n', why)
		self.assertIn('TRACE_IRQFLAGS_SUPPORT=n', why)
		self.assertIn('DEBUG_KERNEL && LOCK_DEBUGGING_SUPPORT', self.explain('PROVE_LOCKING'))

	def test_selected_only(self) -> None:
		why = self.explain('LOCKDEP', config='CONFIG_DEBUG_KERNEL=y')
		self.assertIn('no prompt', why)
		self.assertIn('selected by PROVE_LOCKING', why)

	def test_wanted_off_but_selected(self) -> None:
		why = self.explain('PREEMPT_COUNT', 'n', 'CONFIG_DEBUG_KERNEL=y\nCONFIG_DEBUG_ATOMIC_SLEEP=y\nCONFIG_PREEMPT_COUNT=y')
		self.assertEqual(why, 'selected by DEBUG_ATOMIC_SLEEP')

	def test_negated_dependency(self) -> None:
		why = self.explain('DEBUG_ATOMIC_SLEEP', config='CONFIG_DEBUG_KERNEL=y\nCONFIG_ARCH_NO_PREEMPT=y')
		self.assertIn('ARCH_NO_PREEMPT=y (must be n)', why)

	def test_unknown(self) -> None:
		self.assertIn('no such symbol', self.explain('DEBUG_ATOMC_SLEEP'))

	def test_check_config_message(self) -> None:
		req = nsboot_config.parse_from_string('CONFIG_MD_RAID456=y\nCONFIG_HZ=300\nCONFIG_DEBUG_KERNEL=y', 'frag')
		gen = nsboot_config.parse_from_string('CONFIG_DEBUG_KERNEL=y\nCONFIG_HZ=250')
		check = nsboot_config.check_config(req, gen, self.tree)
		self.assertFalse(check.ok)
		msg = check.message().splitlines()
		self.assertTrue(msg[0].startswith('Not all requested Kconfig options'))
		self.assertTrue(msg[1].startswith('  CONFIG_MD_RAID456=y (frag:1): got n; depends on BLOCK'))
		self.assertTrue(msg[2].startswith('  CONFIG_HZ=300 (frag:2): got 250; the value differs'))
		self.assertEqual(check.summary(), 'missing CONFIG_MD_RAID456=y, CONFIG_HZ=300')

	def test_expressions(self) -> None:
		v = {'A': 'y', 'B': 'm', 'N': '30'}
		self.assertEqual(nsboot_config.evaluate('A && B', v), 1)
		self.assertEqual(nsboot_config.evaluate('A && !C', v), 2)
		self.assertEqual(nsboot_config.evaluate('(C || B) && N >= 20', v), 1)
		self.assertEqual(nsboot_config.evaluate('N = 30 && A != n', v), 2)
		self.assertEqual(nsboot_config.unmet_terms('A && (C || D)', v), ['one of (C=n || D=n)'])


class ResolveTest(unittest.TestCase):
	"""Proposing the symbols a patched file needs (boottest's config)."""

	def setUp(self) -> None:
		self.tree = cached('tree', lambda: nsboot_config.KconfigTree(test_data_path('kconfig'), 'x86'))
		self.values = {'HAS_IOMEM': 'y', 'X86_64': 'y'}

	def step(self, *names: str):
		return nsboot_config.resolve_step(self.tree, list(names), self.values)

	def test_depends_and_or_prefers_real_over_compile_test(self) -> None:
		# ISA_BUS needs X86_32, which is not y and has no prompt here:
		# the choice falls to COMPILE_TEST
		self.assertEqual(self.step('RADIO_FOO'), (['COMPILE_TEST', 'PCI'], []))
		self.values['X86_32'] = 'y'
		self.assertEqual(self.step('RADIO_FOO'), (['ISA_BUS', 'PCI'], []))

	def test_menu_and_if_dependencies(self) -> None:
		add, why = self.step('MD_RAID456')
		self.assertEqual(sorted(add), ['BLK_DEV_MD', 'BLOCK', 'MD'])
		self.assertEqual(why, [])

	def test_promptless_symbol_takes_the_cheapest_selector(self) -> None:
		# SMALL_GPU needs PCI; BIG_GPU needs PCI and COMPILE_TEST
		self.assertEqual(self.step('SCHED_LIB'), (['SMALL_GPU'], []))
		self.values['BIG_GPU'] = 'y'
		self.assertEqual(self.step('SCHED_LIB'), ([], []))

	def test_other_architecture_is_explained(self) -> None:
		add, why = self.step('PMAC_ONLY')
		self.assertEqual(add, [])
		self.assertEqual(len(why), 1)
		self.assertIn('PMAC_ONLY: none of ((PPC_PMAC || MAC)) exists on x86', why[0])
		self.assertIn('no such symbol', self.step('NO_SUCH_DRIVER')[1][0])

	def test_promptless_symbol_follows_its_default(self) -> None:
		# SPI_MASTER has no prompt and no selector: 'default SPI' inside 'if SPI'
		self.assertEqual(self.step('MTD_SPI_NOR'), (['SPI_MASTER'], []))
		self.assertEqual(self.step('SPI_MASTER'), (['SPI'], []))
		self.values['SPI'] = 'y'
		self.assertEqual(self.step('SPI_MASTER'), ([], []))

	def test_already_on_needs_nothing(self) -> None:
		self.values.update(PCI='y', COMPILE_TEST='y', RADIO_FOO='y')
		self.assertEqual(self.step('RADIO_FOO'), ([], []))


def read_newc(data: bytes) -> Dict[str, tuple]:
	"""name -> (mode, data, rdevmajor, rdevminor) from a newc archive."""
	out = {}
	pos = 0
	while True:
		assert data[pos:pos + 6] == b'070701', pos
		f = [int(data[pos + 6 + 8 * i:pos + 14 + 8 * i], 16) for i in range(13)]
		namesize, filesize = f[11], f[6]
		name = data[pos + 110:pos + 110 + namesize - 1].decode()
		pos += 110 + namesize
		pos += -pos % 4
		body = data[pos:pos + filesize]
		pos += filesize
		pos += -pos % 4
		if name == 'TRAILER!!!':
			return out
		out[name] = (f[1], body, f[9], f[10])


def write_bytes(path: str, data: bytes) -> str:
	"""Write data to path (its directories made); return path."""
	os.makedirs(os.path.dirname(path), exist_ok=True)
	with open(path, 'wb') as f:
		f.write(data)
	return path


def initramfs_entries(path: str) -> Dict[str, tuple]:
	"""The members of a gzip'd newc initramfs."""
	with open(path, 'rb') as f:
		return read_newc(gzip.decompress(f.read()))


class InitramfsTest(unittest.TestCase):
	"""The cpio writer and the initramfs contents."""

	def test_newc_roundtrip(self) -> None:
		buf = io.BytesIO()
		w = nsboot_kernel.CpioWriter(buf)
		w.directory('dev')
		w.chardev('dev/console', 5, 1)
		w.file('init', b'#!/bin/sh\n', 0o755)
		w.symlink('bin/sh', 'busybox')
		w.trailer()
		data = buf.getvalue()
		self.assertEqual(len(data) % 512, 0)
		ents = read_newc(data)
		self.assertEqual(ents['dev/console'][0], stat.S_IFCHR | 0o600)
		self.assertEqual(ents['dev/console'][2:], (5, 1))
		self.assertEqual(ents['init'][1], b'#!/bin/sh\n')
		self.assertTrue(stat.S_ISLNK(ents['bin/sh'][0]))
		self.assertEqual(ents['bin/sh'][1], b'busybox')

	@unittest.skipUnless(os.path.isfile('/bin/busybox'), '/bin/busybox missing')
	def test_make_initramfs(self) -> None:
		with tempfile.TemporaryDirectory() as d:
			ko = os.path.join(d, 'x.ko')
			with open(ko, 'wb') as f:
				f.write(b'\x7fELFmodule')
			out = os.path.join(d, 'i.cpio.gz')
			nsboot_kernel.make_initramfs(out, ko)
			with open(out, 'rb') as f:
				raw = f.read()
			ents = read_newc(gzip.decompress(raw))
			init = ents['init'][1].decode()
			self.assertIn('clear_warn_once', init)
			self.assertIn('say "end rc=$rc"', init)
			self.assertIn('reboot -f', init)
			self.assertEqual(ents['nsboot/nestsleep_tests.ko'][1], b'\x7fELFmodule')
			self.assertTrue(nsboot_kernel.is_static_elf('/bin/busybox'))
			nsboot_kernel.make_initramfs(out + '2', ko)
			with open(out + '2', 'rb') as f:
				self.assertEqual(f.read(), raw)	# reproducible

	def fake_build(self, d: str, order: List[str]) -> nsboot_kernel.LinuxSourceTree:
		"""A build dir with kernel.release, modules.order (order, or none) and modules.builtin."""
		if order:
			write_bytes(os.path.join(d, 'include', 'config', 'kernel.release'), b'6.1.192\n')
			write_bytes(os.path.join(d, 'modules.order'), ''.join(x + '\n' for x in order).encode())
			write_bytes(os.path.join(d, 'modules.builtin'), b'kernel/lib/crc32.ko\n')
		return nsboot_kernel.LinuxSourceTree(d, d, nsboot_config.Kconfig(), nsboot_kernel.load_arch('x86_64'))

	def test_tree_modules_as_modules_install_lays_them_out(self) -> None:
		with tempfile.TemporaryDirectory() as d:
			tree = self.fake_build(d, ['net/bluetooth/bluetooth.ko', 'kernel/net/bluetooth/rfcomm/rfcomm.ko',
						   'net/bluetooth/hidp/hidp.o'])
			for ko in ('net/bluetooth/bluetooth.ko', 'net/bluetooth/rfcomm/rfcomm.ko',
				   'net/bluetooth/hidp/hidp.ko'):
				write_bytes(os.path.join(d, ko), b'\x7fELF' + ko.encode())
			release, files = tree.tree_modules()
			self.assertEqual(release, '6.1.192')
			self.assertEqual([n for n, _ in files], [
				'lib/modules/6.1.192/kernel/net/bluetooth/bluetooth.ko',
				'lib/modules/6.1.192/kernel/net/bluetooth/rfcomm/rfcomm.ko',
				'lib/modules/6.1.192/kernel/net/bluetooth/hidp/hidp.ko',
				'lib/modules/6.1.192/modules.order', 'lib/modules/6.1.192/modules.builtin'])
			self.assertEqual(files[2][1], os.path.join(d, 'net/bluetooth/hidp/hidp.ko'))

	def test_tree_modules_missing_ko_is_a_build_error(self) -> None:
		with tempfile.TemporaryDirectory() as d:
			tree = self.fake_build(d, ['net/bluetooth/bluetooth.ko'])
			with self.assertRaisesRegex(nsboot_kernel.BuildError, 'lists net/bluetooth/bluetooth.ko'):
				tree.tree_modules()
		with tempfile.TemporaryDirectory() as d:
			with self.assertRaisesRegex(nsboot_kernel.BuildError, 'build the kernel first'):
				self.fake_build(d, []).tree_modules()

	@unittest.skipUnless(os.path.isfile('/bin/busybox'), '/bin/busybox missing')
	def test_extra_files_with_their_directories(self) -> None:
		with tempfile.TemporaryDirectory() as d:
			src = write_bytes(os.path.join(d, 'rfcomm.ko'), b'\x7fELFrfcomm')
			out = os.path.join(d, 'i.cpio.gz')
			nsboot_kernel.make_initramfs(out, None, None, extra_files=[
				('lib/modules/6.1/kernel/net/bluetooth/rfcomm/rfcomm.ko', src),
				('lib/modules/6.1/modules.order', src)])
			ents = initramfs_entries(out)
			self.assertEqual(ents['lib/modules/6.1/kernel/net/bluetooth/rfcomm/rfcomm.ko'][1], b'\x7fELFrfcomm')
			for dname in ('lib', 'lib/modules', 'lib/modules/6.1', 'lib/modules/6.1/kernel/net/bluetooth/rfcomm'):
				self.assertTrue(stat.S_ISDIR(ents[dname][0]), dname)
			self.assertIn('bin/depmod', ents)
			self.assertEqual(ents['sbin/modprobe'][1], b'/bin/busybox')
			self.assertIn('depmod ||', ents['init'][1].decode())

	def test_dynamic_elf_refused(self) -> None:
		if nsboot_kernel.is_static_elf(sys.executable):
			self.skipTest('python is static here')
		with self.assertRaisesRegex(nsboot_kernel.BootError, 'not statically linked'):
			nsboot_kernel.make_initramfs('/nonexistent/x', None, None, busybox=os.path.realpath(sys.executable))


class FakeQemuTest(unittest.TestCase):
	"""run_qemu's tee, end marker and hard timeout, with sh as QEMU."""

	def run_fake(self, script: str, timeout: float, grace: float = 5.0):
		with tempfile.TemporaryDirectory() as d:
			log = os.path.join(d, 'console.log')
			p = nsboot_parser.LogParser()
			with contextlib.redirect_stdout(io.StringIO()):
				out = nsboot_kernel.run_qemu(['sh', '-c', script], log, timeout,
							     lambda l: p.feed(l)[0] == 'end', end_grace=grace)
			with open(log, 'rb') as f:
				text = f.read()
			return out, p.finish(out.timed_out), text

	def test_clean_end(self) -> None:
		real = test_data_path('real_before_tcg.log')
		out, r, text = self.run_fake(f'cat {real}', 20)
		self.assertFalse(out.timed_out)
		self.assertEqual(out.exit_code, 0)
		self.assertEqual(r.status, Status.SUCCESS)
		with open(real, 'rb') as f:
			self.assertEqual(text, f.read())	# the tee is byte-exact

	def test_hang_is_boot_failure(self) -> None:
		out, r, _ = self.run_fake('echo "Linux version 6.1"; echo "nsboot: init started"; sleep 30', 1.0)
		self.assertTrue(out.timed_out)
		self.assertLess(out.elapsed, 10)
		self.assertEqual((r.status, r.reason), (Status.BOOT_FAILURE, 'hung: no end marker before the timeout'))

	def test_no_shutdown_after_end(self) -> None:
		out, r, _ = self.run_fake('echo "nsboot: init started"; echo "nsboot: end rc=0"; sleep 30', 20, grace=0.5)
		self.assertTrue(out.killed_after_end)
		self.assertFalse(out.timed_out)


class CliTest(unittest.TestCase):
	"""The command line: exit codes and one-line errors."""

	def run_main(self, argv: List[str]):
		buf = io.StringIO()
		with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(io.StringIO()):
			rc = nsboot.main(argv)
		lines = buf.getvalue().splitlines()
		return rc, lines

	def test_parse_success(self) -> None:
		rc, lines = self.run_main(['parse', test_data_path('real_before_tcg.log')])
		self.assertEqual(rc, 0)
		self.assertEqual(lines[-1], 'nsboot: SUCCESS: Ran 23 tests: passed: 23')
		self.assertTrue(any(f'22x {SPLAT} [expected]' in l for l in lines))

	def test_parse_failure_and_json(self) -> None:
		with tempfile.TemporaryDirectory() as d:
			j = os.path.join(d, 'r.json')
			rc, lines = self.run_main(['parse', '-q', test_data_path('oops_panic.log'), '--json', j])
			self.assertEqual(rc, 1)
			self.assertEqual(len(lines), 1)
			self.assertTrue(lines[0].startswith('nsboot: BOOT_FAILURE: kernel panic: Fatal exception'))
			with open(j) as f:
				self.assertEqual(json.load(f)['boot']['status'], 'BOOT_FAILURE')

	def test_parse_missing_file(self) -> None:
		rc, lines = self.run_main(['parse', '/nonexistent/console.log'])
		self.assertEqual(rc, 1)
		self.assertEqual(lines, ['nsboot: BOOT_FAILURE: /nonexistent/console.log: No such file or directory'])

	def test_parse_stdin(self) -> None:
		with open(test_data_path('lockdep_circular.log')) as f, mock.patch('sys.stdin', f):
			rc, lines = self.run_main(['parse', '-q'])
		self.assertEqual(rc, 1)
		self.assertTrue(lines[-1].startswith('nsboot: SPLAT: 1 unexpected splat(s): 1x possible deadlock in raid5d'))

	def test_no_tree(self) -> None:
		with tempfile.TemporaryDirectory() as d:
			rc, lines = self.run_main(['config', '--kdir', os.path.join(d, 'linux'), '--build-dir', os.path.join(d, 'b')])
		self.assertEqual(rc, 1)
		self.assertEqual(lines[-1], f'nsboot: CONFIG_FAILURE: no kernel tree at {d}/linux (run make setup, or pass --kdir)')

	def test_build_dir_inside_tree(self) -> None:
		with tempfile.TemporaryDirectory() as d:
			for f in ('Makefile', 'Kconfig'):
				open(os.path.join(d, f), 'w').close()
			rc, lines = self.run_main(['config', '--kdir', d, '--build-dir', os.path.join(d, 'out')])
		self.assertEqual(rc, 1)
		self.assertIn('is inside the tree', lines[-1])

	def test_bad_fragment(self) -> None:
		rc, lines = self.run_main(['config', '--fragment', 'nope'])
		self.assertEqual(rc, 1)
		self.assertTrue(lines[-1].startswith("nsboot: CONFIG_FAILURE: no fragment 'nope'"))

	def test_exec_without_image(self) -> None:
		with tempfile.TemporaryDirectory() as d:
			rc, lines = self.run_main(['exec', '--build-dir', d, '--no-module'])
		self.assertEqual(rc, 1)
		self.assertIn('nsboot: BUILD_FAILURE: no kernel image at', lines[-1])

	def test_exec_without_qemu(self) -> None:
		with tempfile.TemporaryDirectory() as d:
			os.makedirs(os.path.join(d, 'arch/x86/boot'))
			open(os.path.join(d, 'arch/x86/boot/bzImage'), 'w').close()
			with mock.patch.object(shutil, 'which', return_value=None):
				rc, lines = self.run_main(['exec', '--build-dir', d, '--no-module'])
		self.assertEqual(rc, 1)
		self.assertEqual(lines[-1], 'nsboot: BOOT_FAILURE: qemu-system-x86_64 not found (apt-get install qemu-system-x86)')

	def test_bad_arch(self) -> None:
		rc, lines = self.run_main(['config', '--arch', 'vax'])
		self.assertEqual(rc, 1)
		self.assertIn("vax is not a valid arch, options are ['x86_64']", lines[-1])

	def test_qemu_command(self) -> None:
		arch = nsboot_kernel.load_arch('x86_64')
		with mock.patch.object(shutil, 'which', return_value='/usr/bin/qemu-system-x86_64'):
			cmd = nsboot_kernel.qemu_command(arch, 'bz', 'i.gz', 'panic=-1')
		for arg in ('-nodefaults', '-nographic', '-no-reboot'):
			self.assertIn(arg, cmd)
		self.assertEqual(cmd[cmd.index('-serial') + 1], 'stdio')
		self.assertEqual(cmd[cmd.index('-accel') + 1], 'tcg')
		self.assertEqual(cmd[cmd.index('-smp') + 1], '2,sockets=2')
		self.assertEqual(cmd[cmd.index('-append') + 1], 'console=ttyS0 panic=-1')

	def test_build_dir_keyed_by_config(self) -> None:
		arch = nsboot_kernel.load_arch('x86_64')
		a = nsboot_config.load_fragments(['base', 'debug'])
		b = nsboot_config.load_fragments(['base', 'debug', 'lockdep'])
		da = nsboot_kernel.default_build_dir('/k', a, arch, 'base+debug')
		self.assertNotEqual(da, nsboot_kernel.default_build_dir('/k', b, arch, 'base+debug'))
		self.assertNotEqual(da, nsboot_kernel.default_build_dir('/other', a, arch, 'base+debug'))
		self.assertTrue(da.startswith(nsboot_kernel.cache_root()))


if __name__ == '__main__':
	unittest.main(verbosity=1)
