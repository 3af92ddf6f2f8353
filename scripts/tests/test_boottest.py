# SPDX-License-Identifier: GPL-2.0-only
"""make boottest's judgement, without QEMU: the exercisers' headers and
wrapper script, and the matching of splats to findings, on golden console
logs of kernel-boot/test_data/ (real exerciser boots of the 6.1 tree) and
on made-up boot results.  Moved from kernel-boot/test_nsboot.py with
nestsleep.boot.boottest: nsboot's own tests stay there."""

import os
import shutil
import subprocess
import tempfile
import unittest

from nestsleep import TOP
from nestsleep.boot import boottest
from nsboot import parser as nsboot_parser

TEST_DATA = os.path.join(TOP, 'kernel-boot', 'test_data')


def parse(name: str) -> nsboot_parser.BootResult:
	"""Parse a golden log."""
	with open(os.path.join(TEST_DATA, name), encoding='utf-8', errors='replace') as f:
		return nsboot_parser.parse_log(f)


class ExerciserLogTest(unittest.TestCase):
	"""The splat matching of make boottest on real exerciser boots (6.1,
	kernel-boot/exercise/hpet.sh and sctp.sh on the unpatched kernel)."""

	def setUp(self) -> None:
		self.bt = boottest
		self.saved = dict(self.bt.WAITS)

	def tearDown(self) -> None:
		self.bt.WAITS.clear()
		self.bt.WAITS.update(self.saved)

	def doc(self, name: str, ex: str) -> dict:
		return {'boot': parse(name).to_json(), '_exercisers': [ex]}

	def test_hpet_read_reproduced(self) -> None:
		d = self.doc('real_hpet_before_tcg.log', 'hpet')
		(s,) = d['boot']['splats']
		self.assertTrue(self.bt.through_wait(s, 'hpet_read'))
		self.assertFalse(self.bt.through_wait(s, 'hpet_ioctl'))
		self.assertEqual(s['trimmed'][0], 'do not call blocking ops when !TASK_RUNNING; state=1 set at '
				 '[<(____ptrval____)>] hpet_read+0x77/0x14a')
		self.assertIn(' hpet_read+0xe7/0x14a', s['trimmed'])
		self.assertFalse([x for x in s['trimmed'] if 'RIP' in x or x.strip().startswith('?') or 'R10' in x])
		ev = self.bt.finding_evidence('hpet_read', 'hpet', [d], None)
		self.assertTrue(ev['reproduced'])
		self.assertEqual(ev['baseline_tries'], 1)

	def test_two_waits_of_one_function(self) -> None:
		"""acpi_aml_release() waits twice: on !acpi_aml_busy() (line 550) and on
		!acpi_aml_used() (line 558).  A splat through acpi_aml_busy() is the
		first wait's only."""
		d = self.doc('real_acpi_dbg_before_tcg.log', 'acpi_dbg')
		self.bt.WAITS.clear()
		self.bt.SITES.clear()
		self.bt.WAITS.update(self.bt.load_waits('linux-6.1.192'))
		busy, used = 'a91653ae05f79df0', '7bfbfecf6a5ed160'
		self.assertEqual(self.bt.SITES[busy]['hops'], ['acpi_aml_busy'])
		self.assertEqual(self.bt.hits(d, 'acpi_aml_release', busy), ['do not call blocking ops in acpi_aml_busy'])
		self.assertEqual(self.bt.hits(d, 'acpi_aml_release', used), [])
		self.assertTrue(self.bt.finding_evidence('acpi_aml_release', 'acpi_dbg', [d], None, busy)['reproduced'])
		self.assertFalse(self.bt.finding_evidence('acpi_aml_release', 'acpi_dbg', [d], None, used)['reproduced'])
		for fn in ('acpi_aml_read_cmd', 'acpi_aml_read', 'acpi_aml_write_log', 'acpi_aml_write'):
			self.assertTrue(self.bt.hits(d, fn), fn)
		self.bt.SITES.clear()

	def test_inlined_wait_needs_its_chain(self) -> None:
		"""sctp_wait_for_sndbuf() is inlined into sctp_sendmsg_to_asoc(): the
		splat matches by its primitive and the chain's first call only."""
		d = self.doc('real_sctp_before_tcg.log', 'sctp')
		(s,) = d['boot']['splats']
		self.assertNotIn('sctp_wait_for_sndbuf', s['frames'])
		self.bt.WAITS.clear()
		self.assertFalse(self.bt.through_wait(s, 'sctp_wait_for_sndbuf'))
		self.bt.WAITS.update(self.bt.load_waits('linux-6.1.192'))
		self.assertTrue(self.bt.through_wait(s, 'sctp_wait_for_sndbuf'))
		# the same primitive, but another chain; another chain, another primitive
		self.assertFalse(self.bt.through_wait(s, 'io_cqring_wait'))
		self.bt.WAITS['x_wait'] = {'primitive': 'prepare_to_wait', 'hops': ['sk_wmem_schedule']}
		self.assertFalse(self.bt.through_wait(s, 'x_wait'))
		self.assertTrue(self.bt.finding_evidence('sctp_wait_for_sndbuf', 'sctp', [d], None)['reproduced'])


class BoottestTest(unittest.TestCase):
	"""The per-patch boot test's exercisers and splat attribution, without QEMU."""

	def setUp(self) -> None:
		self.bt = boottest

	def test_exerciser_headers(self) -> None:
		ex = {e['name']: e for e in self.bt.exercisers()}
		self.assertIn('acpi_dbg', ex)
		self.assertEqual(ex['acpi_dbg']['files'], ['drivers/acpi/acpi_dbg.c'])
		self.assertIn('ACPI_DEBUGGER_USER', ex['acpi_dbg']['needs'])
		ps = [{'unit': 'drivers/acpi/acpi_dbg.c:acpi_aml_read'}, {'unit': 'drivers/media/radio/radio-cadet.c:cadet_read'}]
		self.assertEqual([e['name'] for e in self.bt.exercisers_for(ps, list(ex.values()))], ['acpi_dbg'])
		self.assertEqual(self.bt.exercisers_for(ps[1:], list(ex.values())), [])

	def test_wrapper_reports_each_exerciser_in_ktap(self) -> None:
		sh = shutil.which('busybox')
		if not sh:
			self.skipTest('busybox not installed')
		with tempfile.TemporaryDirectory() as d:
			exs = []
			for name, body in (('good', 'echo hello; exit 0'), ('bad', 'echo "not ok 1 x"; exit 3'),
					   ('skip', 'echo "ok 1 skip # SKIP no device"; exit 0')):
				path = os.path.join(d, name + '.sh')
				with open(path, 'w') as f:
					f.write('#!/bin/sh\n' + body + '\n')
				exs.append({'name': name, 'path': path, 'files': [], 'needs': []})
			w = self.bt.wrapper_script(os.path.join(d, 'test.sh'), exs)
			r = subprocess.run([sh, 'sh', w], capture_output=True, text=True, cwd=d)
			lines = r.stdout.splitlines()
			self.assertEqual(lines[:2], ['KTAP version 1', '1..3'])
			self.assertIn('# hello', lines)
			self.assertIn('ok 1 good', lines)
			self.assertIn('not ok 2 bad', lines)
			self.assertIn('ok 3 skip # SKIP', lines)
			self.assertNotEqual(r.returncode, 0)
			res = nsboot_parser.parse_log(['nsboot: init started'] + lines + ['nsboot: end rc=1'])
			self.assertEqual(res.to_json()['tests'], {'passed': 1, 'failed': 1, 'crashed': 0, 'skipped': 1})

	def test_hits_follow_the_call_trace(self) -> None:
		doc = {'boot': {'splats': [
			{'title': 'do not call blocking ops in acpi_aml_kern_writable', 'kind': 'blocking_ops',
			 'frames': ['__might_sleep', 'mutex_lock', 'acpi_aml_kern_writable', 'acpi_aml_write_log']},
			{'title': 'WARNING in foo', 'kind': 'warning', 'frames': ['acpi_aml_write_log']}]}}
		self.assertEqual(self.bt.hits(doc, 'acpi_aml_write_log'), ['do not call blocking ops in acpi_aml_kern_writable'])
		self.assertEqual(self.bt.hits(doc, 'acpi_aml_read'), [])

	def test_new_splats_known_bugs_apart(self) -> None:
		def sp(title, frames, kind='blocking_ops'):
			return {'title': title, 'kind': kind, 'frames': frames}
		base = {'boot': {'splats': [sp('do not call blocking ops in a_readable', ['mutex_lock', 'a_readable', 'a_read'])]}}
		doc = {'boot': {'splats': [sp('do not call blocking ops in a_readable', ['a_read']),
					   sp('do not call blocking ops in a_writable', ['mutex_lock', 'a_writable', 'a_write_log']),
					   sp('WARNING in b_probe', ['b_probe'], 'warning'),
					   sp('do not call blocking ops in c_cond', ['c_cond', 'c_wait'])]}}
		new, known = self.bt.new_splats(base, doc, {'a_write_log', 'a_read'})
		self.assertEqual(known, ['do not call blocking ops in a_writable'])
		self.assertEqual(new, ['WARNING in b_probe', 'do not call blocking ops in c_cond'])

	def test_patched_no_header(self) -> None:
		ex = {e['name']: e for e in self.bt.exercisers()}
		self.assertTrue(ex['hpet']['patched'])
		self.assertFalse(ex['wpan_phy_unregister']['patched'])
		self.assertIn('destroyed workqueue', ex['wpan_phy_unregister']['not_patched'])

	def test_program_header(self) -> None:
		ex = {e['name']: e for e in self.bt.exercisers()}
		for name, e in ex.items():
			for prog in e['programs']:
				self.assertTrue(os.path.isfile(prog), '%s: # program: %s does not exist' % (name, prog))

	def ev_docs(self, hits_per_boot, ex='hpet', status='SUCCESS', diag=()):
		"""Boot results whose splats run through the given functions, with
		the exerciser ex reported as status."""
		docs = []
		for fns in hits_per_boot:
			docs.append({'_exercisers': [ex], 'boot': {
				'splats': [{'title': 'do not call blocking ops in %s' % fn, 'kind': 'blocking_ops',
					    'frames': ['__might_sleep', fn], 'trimmed': ['do not call blocking ops', ' %s+0x1/0x2' % fn]}
					   for fn in fns],
				'documents': [{'name': 'main', 'subtests': [{'name': ex, 'status': status,
									      'diagnostics': list(diag)}]}]}})
		return docs

	def test_evidence_reproduced_then_gone(self) -> None:
		base = self.ev_docs([[], ['hpet_read']])
		after = self.ev_docs([[], []], diag=['read 1: 8 bytes, 1 interrupt(s), blocked 60.1 ms'])
		ev = self.bt.finding_evidence('hpet_read', 'hpet', base, after)
		self.assertTrue(ev['reproduced'])
		self.assertEqual(ev['baseline_tries'], 2)
		self.assertEqual(ev['splat'], ['do not call blocking ops', ' hpet_read+0x1/0x2'])
		self.assertTrue(ev['warning_gone'])
		self.assertEqual(ev['evidence'], 'reproduced in QEMU; exercised: warning gone')
		self.assertIn('blocked 60.1 ms', ev['patched_output'][0])

	def test_evidence_needs_the_wait_to_run(self) -> None:
		"""No warning after the patch proves nothing if the exerciser did not pass."""
		base = self.ev_docs([['hpet_read']])
		after = self.ev_docs([[]], status='FAILURE')
		ev = self.bt.finding_evidence('hpet_read', 'hpet', base, after)
		self.assertFalse(ev['warning_gone'])
		self.assertIn('did not pass', ev['evidence'])

	def test_evidence_other_functions_do_not_count(self) -> None:
		base = self.ev_docs([['acpi_aml_read'], ['acpi_aml_read']], ex='acpi_dbg')
		ev = self.bt.finding_evidence('acpi_aml_write', 'acpi_dbg', base, None)
		self.assertFalse(ev['reproduced'])
		self.assertEqual(ev['baseline_tries'], 2)
		self.assertNotIn('splat', ev)
		still = self.bt.finding_evidence('acpi_aml_read', 'acpi_dbg', base, self.ev_docs([['acpi_aml_read']], ex='acpi_dbg'))
		self.assertEqual(still['evidence'], 'the patched kernel still warns')
		self.assertFalse(still['warning_gone'])

	def test_evidence_counts_only_boots_that_ran_the_exerciser(self) -> None:
		base = self.ev_docs([['sctp_wait_for_sndbuf']], ex='sctp') + self.ev_docs([[]], ex='hpet')
		ev = self.bt.finding_evidence('hpet_read', 'hpet', base, None)
		self.assertEqual(ev['baseline_tries'], 1)
		self.assertEqual(ev['evidence'], 'exercised: the unpatched kernel did not warn')

	def test_report_only_targets(self) -> None:
		man = {'report_only': [{'fingerprint': 'a1', 'file': 'drivers/char/hpet.c', 'function': 'hpet_read'},
				       {'fingerprint': 'b2', 'file': 'drivers/foo/bar.c', 'function': 'bar_wait'}]}
		ex = [{'name': 'hpet', 'files': ['drivers/char/hpet.c'], 'needs': [], 'programs': []}]
		ts = self.bt.report_only_targets(man, ex)
		self.assertEqual([t['fingerprints'] for t in ts], [['a1']])
		self.assertEqual(self.bt.report_only_targets(man, ex, only='bar'), [])

	def test_functions_of_a_patch(self) -> None:
		p = {'unit': 'f.c:a', 'functions': ['a', 'b'], 'fingerprints': ['1', '2', '3']}
		self.assertEqual(self.bt.functions_of(p, {'1': {'function': 'a'}, '2': {'function': 'b'}, '3': {'function': 'b'}}),
				 {'1': 'a', '2': 'b', '3': 'b'})

	def test_booted(self) -> None:
		ok = {'status': 'SPLAT', 'boot': {'init_started': True, 'ended': True, 'timed_out': False}}
		self.assertTrue(self.bt.booted(ok))
		self.assertFalse(self.bt.booted({'status': 'BOOT_FAILURE', 'boot': {'init_started': True}}))
		self.assertFalse(self.bt.booted({'status': 'SPLAT', 'boot': {'init_started': True, 'ended': False}}))


if __name__ == '__main__':
	unittest.main()
