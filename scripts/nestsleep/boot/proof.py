# SPDX-License-Identifier: GPL-2.0-only
"""The runtime proof: the test module's "before" wait bodies against the
"after" form that nestsleep MODE=patch generates from them.

  python3 -m nestsleep runtime-proof [--kdir K] [--rounds N] [--out DIR] [run options]

Each boot is an 'nsboot run' (kernel-boot/nsboot) in this process (boot());
this module generates the after form and compares.  It starts at run().

1. derive: copy module/ into a scratch directory, run
   'nestsleep coccicheck --kdir <scratch> --mode patch', apply the diff.
   The after form is never written by hand.  The diff may touch
   nestsleep_test.c too: the set_current_state() case's waker is a
   wake_up_process(ctx->waiter) that the rewrite turns into a wake_up().
2. boot the before form, then the after form (same kernel build).
3. compare: every before wait case warns "do not call blocking ops when
   !TASK_RUNNING", the after form has no splat at all, the stress rounds of
   the after form lose no wakeup, and the semantics cases (timeouts,
   remainders, signals, killable) give the same results in both forms.

DIR/proof.json holds each check with its verdict; 'check_runtime.py' turns
it into make check results.
"""

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

from typing import Dict, List, Sequence, Tuple

from nestsleep import TOP, cache_dir
from nestsleep.analysis import pipeline
from nestsleep.boot import use_cache
from nsboot import cache_root
from nsboot import kernel as nsboot_kernel
from nsboot import main as nsboot_main

MODULE_DIR = os.path.join(TOP, 'kernel-boot', 'module')
WAIT_CASES = ('wait_event', 'wait_event_interruptible', 'wait_event_timeout',
	      'wait_event_interruptible_timeout', 'wait_event_killable', 'prepare_to_wait_loop',
	      'set_current_state_loop',
	      # issue 34: a prepare_to_wait_exclusive() loop left by gotos (sctp)
	      'prepare_to_wait_goto',
	      # entries.py: an entry with its own wake function, restored before the call
	      'own_wake_function')
SEMANTICS = ('timeout_expires', 'interruptible_timeout_expires', 'timeout_remainder',
	     'interruptible_timeout_remainder', 'interruptible_signal', 'interruptible_timeout_signal',
	     'killable_sigkill', 'killable_ignores_sigusr1')
SPLAT = 'do not call blocking ops'
# the waker rule's cases: patched with the waker converted, or refused with
# the reason (a phrase of it)
KTHREAD_PATCHED = ('kthread_global', 'kthread_member', 'kthread_copy', 'kthread_ownq')
KTHREAD_REFUSED = {'kthread_escape': 'nst_kstash()'}
KTHREAD_EITHER = {'kthread_park': 'kthread_park()'}
# issue 31: a wakeup of the wrong mode (MODE=patch fixes the writer; the
# module's verdict differs by form: every before round waits out its
# timeout, every after round is woken well before it), and a poll whose
# only waker needs the waiter's lock (refused with this phrase; both forms
# keep the poll, and a hand-written wait_woken() form waits out its timeout)
MISSED_CASE, MISSED_WRITER, MISSED_WAIT = 'missed_wakeup_mode', 'nst_mode_done', 'nst_mode_wait'
POLL_CASE, POLL_WAIT, POLL_REASON = 'poll_held_lock', 'nst_poll_wait', 'takes p->lock, which the waiter holds'
# issue 34: a prepare_to_wait() loop on a variable's hashed queue, woken by
# wake_up_var(), that leaves its entry queued (pkt_make_request_write()):
# MODE=patch adds finish_wait() after the loop
VAR_CASE, VAR_WAIT = 'var_endblock', 'nst_var_wait_endblock'
# issue 34: a set_current_state() in the middle of its loop, moved after the
# work by fix/setter.py (the kthread machinery: rounds, 0 lost wakeups)
KTHREAD_PATCHED += ('kthread_setter',)


class ProofError(Exception):
	pass


def derive_after(out: str, kdir: str = '') -> Dict[str, object]:
	"""Generate after.c (and the converted runner) with nestsleep MODE=patch,
	run as on an external module: KDIR= the kernel tree the proof boots (so
	that the waker rule reads that tree's wait_woken()), M= a copy of the
	module.  Without a tree, the module copy is its own KDIR.  Every
	rewrite, whatever its confidence (CONFIDENCE=low): the proof boots
	them all."""
	tmp = tempfile.mkdtemp(prefix='nsboot-after-')
	try:
		mod = os.path.join(tmp, 'module')
		os.mkdir(mod)
		for n in ('before.c', 'nestsleep_test.c', 'nst.h'):
			shutil.copy(os.path.join(MODULE_DIR, n), mod)
		if kdir and os.path.isfile(os.path.join(kdir, 'Makefile')):
			opts = pipeline.Options(kdir=kdir, m=mod, mode='patch', cache=cache_dir(), confidence='low')
		else:
			opts = pipeline.Options(kdir=mod, mode='patch', cache=os.path.join(cache_dir(), 'test-cache'),
						confidence='low')
		print('$ nestsleep coccicheck --mode patch --confidence low --kdir %s%s' % (
			opts.kdir, (' --m ' + opts.m) if opts.m else ''),
		      flush=True)
		try:
			res = pipeline.check(opts)
		except pipeline.UserError as e:
			raise ProofError('nestsleep MODE=patch failed: %s' % e)
		diff = res.output
		if not diff.strip():
			raise ProofError('nestsleep MODE=patch gave an empty diff for module/before.c')
		p = subprocess.run(['patch', '-p1', '-s', '--no-backup-if-mismatch'], input=diff, cwd=mod,
				   capture_output=True, text=True)
		if p.returncode != 0:
			raise ProofError('the generated diff does not apply: ' + (p.stdout + p.stderr)[-800:])
		findings = res.findings
		os.makedirs(out, exist_ok=True)
		shutil.copy(os.path.join(mod, 'before.c'), os.path.join(out, 'after.c'))
		shutil.copy(os.path.join(mod, 'nestsleep_test.c'), os.path.join(out, 'nestsleep_test.after.c'))
		with open(os.path.join(out, 'after.diff'), 'w') as f:
			f.write(diff)
		fixed = sorted(f['function'] for f in findings if f['fix']['status'] == 'patch')
		unfixed = sorted('%s (%s)' % (f['function'], f['fix']['reason']) for f in findings
				 if f['fix']['status'] != 'patch')
		reasons = {f['function']: f['fix']['reason'] for f in findings if f['fix']['status'] != 'patch'}
		missed = {f['function']: [f['fix']['status'], f['fix'].get('reason', '')] for f in findings
			  if f.get('kind') == 'missed_wakeup'}
		touched = sorted(set(l[6:].strip() for l in diff.splitlines() if l.startswith('+++ b/')))
		return {'fixed': fixed, 'unfixed': unfixed, 'unfixed_reasons': reasons, 'touched': touched,
			'missed': missed,
			'kdir': opts.kdir,
			'after_c': os.path.join(out, 'after.c'),
			'runner_c': os.path.join(out, 'nestsleep_test.after.c')}
	finally:
		shutil.rmtree(tmp, ignore_errors=True)


def boot(ns, variant: str, out: str, extra: List[str]) -> Tuple[int, dict, float]:
	jp = os.path.join(out, '%s.json' % variant)
	if os.path.exists(jp):
		os.unlink(jp)
	argv = ['run', '--variant', variant, '--json', jp,
		'--timeout', str(int(ns.timeout)), '--accel', ns.accel, '-j', str(ns.jobs)] + extra
	if ns.kdir:
		argv += ['--kdir', ns.kdir]
	if ns.rounds:
		argv += ['--rounds', str(ns.rounds)]
	if ns.bound_ms:
		argv += ['--bound-ms', str(ns.bound_ms)]
	if ns.jitter_us:
		argv += ['--jitter-us', str(ns.jitter_us)]
	if ns.only:
		argv += ['--only', ns.only]
	print('$ nsboot ' + ' '.join(argv), flush=True)
	t = time.monotonic()
	rc = nsboot_main.entry(argv)
	el = time.monotonic() - t
	doc = {}
	if os.path.exists(jp):
		with open(jp) as f:
			doc = json.load(f)
	return rc, doc, el


def tests_of(doc: dict) -> Dict[str, dict]:
	out: Dict[str, dict] = {}

	def walk(t):
		if t.get('subtests'):
			for s in t['subtests']:
				walk(s)
		else:
			out[t['name']] = t
	for d in (doc.get('boot') or {}).get('documents', []):
		walk(d)
	return out


def compare(der: dict, before: dict, after: dict) -> List[Tuple[str, bool, str]]:
	"""[(check, ok, detail)]."""
	checks: List[Tuple[str, bool, str]] = []
	tb, ta = tests_of(before), tests_of(after)
	bsplats = (before.get('boot') or {}).get('splats', [])
	asplats = (after.get('boot') or {}).get('splats', [])
	checks.append(('after/generated', set(der['fixed']) >= {
		'nst_wait_event', 'nst_wait_event_interruptible', 'nst_wait_event_timeout',
		'nst_wait_event_interruptible_timeout', 'nst_wait_event_killable', 'nst_prepare_to_wait_loop',
		'nst_set_current_state_loop',
		# issue 34
		'nst_prepare_to_wait_goto'},
		'rewritten: %s; not: %s; files: %s' % (', '.join(der['fixed']), '; '.join(der['unfixed']) or 'none',
							', '.join(der['touched']))))
	checks.append(('before/boot', before.get('status') == 'SUCCESS',
		       '%s: %s' % (before.get('status', 'no result'), before.get('reason', ''))))
	checks.append(('after/boot', after.get('status') == 'SUCCESS',
		       '%s: %s' % (after.get('status', 'no result'), after.get('reason', ''))))
	for case in WAIT_CASES:
		n = sum(1 for s in bsplats if SPLAT in s.get('title', '') and s.get('test') == case)
		if not n:
			n = len([s for s in tb.get(case, {}).get('splats', []) if SPLAT in s])
		checks.append(('before/%s/warns' % case, n >= 1, '%d "%s" splat(s)' % (n, SPLAT)))
		st = ta.get(case, {}).get('status', 'missing')
		checks.append(('after/%s' % case, st in ('PASS', 'SUCCESS') and not ta.get(case, {}).get('splats'),
			       'status %s, splats %s' % (st, ta.get(case, {}).get('splats', []))))
	unexpected = [s for s in asplats if not s.get('expected')]
	checks.append(('after/no-splat', not unexpected, '%d unexpected splats: %s' % (
		len(unexpected), '; '.join(s.get('title', '') for s in unexpected[:5]))))
	checks += compare_kthreads(der, tb, ta, bsplats)
	checks += compare_wakeups(der, tb, ta)
	for case in WAIT_CASES:
		name = 'stress_' + case
		st = ta.get(name, {}).get('status', 'missing')
		diag = '; '.join(ta.get(name, {}).get('diagnostics', [])[-2:])
		checks.append(('after/%s' % name, st in ('PASS', 'SUCCESS'), 'status %s %s' % (st, diag)))
	for case in SEMANTICS:
		sb = tb.get(case, {}).get('status', 'missing')
		sa = ta.get(case, {}).get('status', 'missing')
		checks.append(('same/%s' % case, sb == sa and sa in ('PASS', 'SUCCESS'), 'before %s, after %s' % (sb, sa)))
	checks += compare_kexit(der, tb, ta, bsplats)
	checks += compare_var_endblock(der, tb, ta, bsplats)
	return checks


# the thread exit (nst.h): before.c's nst_kthread_exit() breaks out of its
# loop with the state set; kthread_exit() warns
KEXIT_CASE = 'kthread_exit'


def compare_kexit(der: dict, tb: Dict[str, dict], ta: Dict[str, dict], bsplats: list) -> List[Tuple[str, bool, str]]:
	"""The thread exit: it warns before, MODE=patch rewrites it, and its
	rounds of kthread_run() and kthread_stop() pass after with no splat."""
	case, func = KEXIT_CASE, 'nst_' + KEXIT_CASE
	n = sum(1 for s in bsplats if SPLAT in s.get('title', '') and s.get('test') == case)
	sb = tb.get(case, {}).get('status', 'missing')
	t = ta.get(case, {})
	st = t.get('status', 'missing')
	rounds = '; '.join(d for d in t.get('diagnostics', []) if 'rounds=' in d) or 'no round count'
	return [('before/%s' % case, sb in ('PASS', 'SUCCESS') and n >= 1,
		 'status %s, %d "%s" splat(s)' % (sb, n, SPLAT)),
		('rule/%s' % case, func in der['fixed'],
		 'rewritten' if func in der['fixed'] else 'not rewritten: %s' % der.get('unfixed_reasons', {}).get(
			 func, 'no finding')),
		('after/%s' % case, st in ('PASS', 'SUCCESS') and not t.get('splats'),
		 'status %s, %s, splats %s' % (st, rounds, t.get('splats', [])))]


def lost_of(t: dict) -> str:
	"""'rounds=N/M lost=K' from a kthread case's diagnostics."""
	for d in t.get('diagnostics', []):
		m = re.search(r'rounds=(\S+) lost=(\d+)', d)
		if m:
			return 'rounds=%s lost=%s' % m.groups()
	return 'no round count'


def compare_kthreads(der: dict, tb: Dict[str, dict], ta: Dict[str, dict], bsplats: list) -> List[Tuple[str, bool, str]]:
	"""The waker rule's six kthread cases: each warns before; the patched
	ones lose no wakeup and do not warn after; the refused ones are left
	alone with their reason, and still lose none."""
	checks: List[Tuple[str, bool, str]] = []
	reasons = der.get('unfixed_reasons', {})
	for case in KTHREAD_PATCHED + tuple(KTHREAD_REFUSED) + tuple(KTHREAD_EITHER):
		func = 'nst_' + case
		n = sum(1 for s in bsplats if SPLAT in s.get('title', '') and s.get('test') == case)
		sb = tb.get(case, {}).get('status', 'missing')
		checks.append(('before/%s' % case, sb in ('PASS', 'SUCCESS') and n >= 1,
			       'status %s, %d "%s" splat(s), %s' % (sb, n, SPLAT, lost_of(tb.get(case, {})))))
		if case in KTHREAD_PATCHED:
			ok = func in der['fixed']
			detail = 'rewritten' if ok else 'not rewritten: %s' % reasons.get(func, 'no finding')
		elif case in KTHREAD_REFUSED:
			ok = func in reasons and KTHREAD_REFUSED[case] in reasons[func]
			detail = 'refused: %s' % reasons.get(func, 'rewritten, but the rule must refuse it')
		else:
			ok = func in der['fixed'] or KTHREAD_EITHER[case] in reasons.get(func, '')
			detail = 'rewritten' if func in der['fixed'] else 'refused: %s' % reasons.get(func, 'no finding')
		checks.append(('rule/%s' % case, ok, detail))
		t = ta.get(case, {})
		st = t.get('status', 'missing')
		splats = t.get('splats', [])
		quiet = not splats if func in der['fixed'] else True
		checks.append(('after/%s' % case, st in ('PASS', 'SUCCESS') and quiet,
			       'status %s, %s, splats %s' % (st, lost_of(t), splats)))
	return checks


def diag_of(t: dict) -> str:
	"""The case's diagnostics that count rounds, or its status."""
	d = [x for x in t.get('diagnostics', []) if 'rounds=' in x or 'must' in x]
	return '; '.join(d) or 'status %s' % t.get('status', 'missing')


def writer_text(path: str, func: str) -> str:
	"""func's definition in the C file path, or ''."""
	try:
		with open(path) as f:
			src = f.read()
	except OSError:
		return ''
	m = re.search(r'^\w[^\n;]*\b%s\([^)]*\)\n\{\n.*?^\}$' % re.escape(func), src, re.M | re.S)
	return m.group(0) if m else ''


def compare_wakeups(der: dict, tb: Dict[str, dict], ta: Dict[str, dict]) -> List[Tuple[str, bool, str]]:
	"""The wrong-mode wakeup and the poll that needs the waiter's lock."""
	checks: List[Tuple[str, bool, str]] = []
	st, why = (der.get('missed') or {}).get(MISSED_WRITER, ['no finding', ''])
	body = writer_text(der.get('after_c', ''), MISSED_WRITER)
	ok = st == 'patch' and MISSED_WAIT in der['fixed'] and 'wake_up(&m->wq)' in body and \
		'wake_up_interruptible' not in body
	checks.append(('rule/%s' % MISSED_CASE, ok, 'missed wakeup %s: %s; after.c %s() wakes with %s' % (
		st, why, MISSED_WRITER, ', '.join(re.findall(r'\b(wake_up\w*)\(', body)) or 'nothing')))
	reasons = der.get('unfixed_reasons', {})
	checks.append(('rule/%s' % POLL_CASE, POLL_WAIT not in der['fixed'] and POLL_REASON in reasons.get(POLL_WAIT, ''),
		       'refused: %s' % reasons.get(POLL_WAIT, 'rewritten, but the poll rule must refuse it')))
	for case in (MISSED_CASE, POLL_CASE):
		for form, t in (('before', tb), ('after', ta)):
			c = t.get(case, {})
			s = c.get('status', 'missing')
			quiet = form == 'before' or not c.get('splats')
			checks.append(('%s/%s' % (form, case), s in ('PASS', 'SUCCESS') and quiet,
				       '%s, splats %s' % (diag_of(c), c.get('splats', []))))
	return checks


def compare_var_endblock(der: dict, tb: Dict[str, dict], ta: Dict[str, dict],
			 bsplats: list) -> List[Tuple[str, bool, str]]:
	"""The loop that leaves its entry queued: finish_wait() added after it;
	the before form warns, the after form does not and loses no wakeup."""
	body = writer_text(der.get('after_c', ''), VAR_WAIT)
	ok = VAR_WAIT in der['fixed'] and 'finish_wait(__var_waitqueue(&ctx->seq), &wqe.wq_entry);' in body
	checks = [('rule/%s' % VAR_CASE, ok, 'rewritten' if ok else 'not rewritten: %s' % der.get(
		'unfixed_reasons', {}).get(VAR_WAIT, 'no finish_wait() in after.c'))]
	b = tb.get(VAR_CASE, {})
	n = sum(1 for s in bsplats if SPLAT in s.get('title', '') and s.get('test') == VAR_CASE) or \
		len([s for s in b.get('splats', []) if SPLAT in s])
	checks.append(('before/%s/warns' % VAR_CASE, b.get('status') in ('PASS', 'SUCCESS') and n >= 1,
		       'status %s, %d "%s" splat(s), %s' % (b.get('status', 'missing'), n, SPLAT, lost_of(b))))
	a = ta.get(VAR_CASE, {})
	checks.append(('after/%s' % VAR_CASE, a.get('status') in ('PASS', 'SUCCESS') and not a.get('splats'),
		       'status %s, %s, splats %s' % (a.get('status', 'missing'), lost_of(a), a.get('splats', []))))
	return checks


def make_parser():
	"""The options of 'nestsleep runtime-proof' (make runtime-proof, make
	stress): nsboot's, for the two boots, and --out; its usage and errors
	read 'nsboot proof' (and 'nsboot' for an unknown option), as when
	nsboot parsed them: a subcommand of a parser 'nsboot'."""
	top = nsboot_main.Parser(prog='nsboot')
	prf = top.add_subparsers(dest='subcommand').add_parser('proof', help='the runtime proof: before and generated after forms, compared')
	nsboot_main.add_common_opts(prf)
	prf.add_argument('--jobs', '-j', type=int, default=2, help='make -j (default: %(default)s)')
	nsboot_main.add_exec_opts(prf)
	prf.add_argument('--out', help='where to keep after.c, the diff and both JSON results '
			 '(default: <cache>/kernel-boot/proof)')
	return top


def main(argv: Sequence[str]) -> int:
	"""'nestsleep runtime-proof ARGS': parse them, then run()."""
	use_cache()
	return run(make_parser().parse_args(['proof'] + list(argv)))


def run(ns) -> int:
	"""Generate the after form, boot both forms, compare; DIR/proof.json."""
	out = ns.out or os.path.join(cache_root(), 'proof')
	os.makedirs(out, exist_ok=True)
	result: Dict[str, object] = {'checks': []}
	try:
		der = derive_after(out, ns.kdir or nsboot_kernel.default_kdir())
	except (ProofError, OSError, subprocess.TimeoutExpired) as e:
		print('nsboot: proof: %s' % e, file=sys.stderr)
		result['checks'] = [{'name': 'after/generated', 'ok': False, 'detail': str(e)}]
		with open(os.path.join(out, 'proof.json'), 'w') as f:
			json.dump(result, f, indent=1)
		print('nsboot: TEST_FAILURE: the after form could not be generated')
		return 1
	result['derive'] = der
	rcb, before, tb = boot(ns, 'before', out, [])
	left = ','.join(f for f in der['unfixed_reasons'] if f.startswith('nst_kthread_'))
	rca, after, ta = boot(ns, 'after', out, ['--variant-file', der['after_c'], '--variant-runner', der['runner_c']] +
			      (['--unfixed', left] if left else []))
	checks = compare(der, before, after)
	result['times_s'] = {'before': round(tb, 1), 'after': round(ta, 1)}
	result['checks'] = [{'name': n, 'ok': ok, 'detail': d} for n, ok, d in checks]
	result['splats'] = {'before': len((before.get('boot') or {}).get('splats', [])),
			    'after': len((after.get('boot') or {}).get('splats', []))}
	with open(os.path.join(out, 'proof.json'), 'w') as f:
		json.dump(result, f, indent=1)
	bad = [c for c in checks if not c[1]]
	print('\nRuntime proof (%s):' % out)
	for n, ok, d in checks:
		print('  %-48s %s  %s' % (n, 'ok' if ok else 'FAIL', d))
	print('splats: before %d, after %d; boots %.0fs + %.0fs' % (
		result['splats']['before'], result['splats']['after'], tb, ta))
	if bad:
		print('nsboot: TEST_FAILURE: %d of %d proof checks failed' % (len(bad), len(checks)))
		return 1
	print('nsboot: SUCCESS: %d proof checks passed' % len(checks))
	return 0
