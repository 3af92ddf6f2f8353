# SPDX-License-Identifier: GPL-2.0-only
"""make boottest: build every patch of a 'make fixes' series into a kernel
and boot it in QEMU.

  python3 -m nsboot boottest --patches DIR [--kdir K] [--only SUBSTR] [--max N]

Works in a scratch hard-link copy of KDIR (patch(1) writes a new file and
renames it, so the links to KDIR are broken, never written through).

Config: each patch needs the Kconfig symbols that build its files
(series.json).  Their dependencies are resolved against the real Kconfig:
olddefconfig on the tiny debug base plus the symbols, then the unmet
'depends on' terms (or, for a symbol without a prompt, the cheapest symbol
that selects it) are added, until the .config holds them all or nothing
more can be added.  A symbol that still cannot be enabled (another
architecture's driver) makes that patch a CONFIG_FAILURE, with its unmet
dependencies; it is never booted.

Build: by default all patches whose symbols can be enabled share one
configuration, the union (--no-share: one per group of patches with the
same symbols).  Each configuration gets one build directory and one
unpatched baseline boot.  Each patch is then applied on top of the
earlier patches of its series (a series is made in order), built
incrementally, booted, and reverted with them.  It passes when it compiles, the
kernel boots to init and shuts down cleanly, and no splat appears that the
baseline did not have.

No initramfs test drives the patched drivers yet, so every result says
"booted, patched code not exercised".  Results go to DIR/boottest.json,
keyed by fingerprint; then 'nestsleep retest DIR' rewrites the
testing paragraph of each patch from them.
"""

import contextlib
import fcntl
import io
import json
import os
import shutil
import subprocess
import sys
import time

from nestsleep import ktree
from nestsleep.common import run_user
from nestsleep.series import series
from nsboot import HARNESS, cache_root
from nsboot import config as nsboot_config
from nsboot import kernel as nsboot_kernel
from typing import Dict, List, Optional, Sequence, Tuple



def log(msg: str) -> None:
	print('[boottest] ' + msg, flush=True)


def nsboot_run(ns, tree: str, syms: List[str], jp: str, script: str = '',
	       extra: Sequence[str] = ()) -> dict:
	"""'nsboot run' on tree, in this process; its JSON result, with the
	elapsed time, the command and the tail of what it printed.  syms are
	enabled as =y; extra are more 'nsboot run' options."""
	from nsboot import main as nsboot_main
	argv = ['run', '--kdir', tree, '--no-module', '--json', jp,
		'--timeout', str(int(ns.timeout)), '-j', str(ns.jobs)]
	if script:
		argv += ['--test-script', script]
	for s in syms:
		argv += ['--kconfig-add', 'CONFIG_%s=y' % bare(s)]
	argv += list(extra)
	log('$ nsboot ' + ' '.join(argv))
	if os.path.exists(jp):
		os.unlink(jp)
	t = time.monotonic()
	printed = io.StringIO()
	with contextlib.redirect_stdout(printed):
		nsboot_main.entry(argv)
	doc = {}
	if os.path.exists(jp):
		with open(jp) as f:
			doc = json.load(f)
	doc['_elapsed_s'] = round(time.monotonic() - t, 1)
	doc['_argv'] = argv
	doc['_tail'] = printed.getvalue()[-1500:]
	return doc


def bare(sym: str) -> str:
	"""A Kconfig symbol without its CONFIG_ prefix."""
	return sym[len('CONFIG_'):] if sym.startswith('CONFIG_') else sym


def splats(doc: dict) -> List[dict]:
	return (doc.get('boot') or {}).get('splats', [])


def through(s: dict, fns: set) -> bool:
	"""A nested-sleep splat whose call trace runs through one of fns."""
	return s.get('kind') in ('blocking_ops', 'sleeping_in_atomic') and bool(fns & set(s.get('frames', [])))


def splat_titles(doc: dict) -> List[str]:
	return sorted(set(s.get('title', '') for s in splats(doc)))


def hits(doc: dict, fn: str) -> List[str]:
	"""Titles of the nested-sleep splats whose call trace runs through fn."""
	return sorted(set(s.get('title', '') for s in splats(doc) if through(s, {fn})))


def new_splats(base: dict, doc: dict, known_fns: set) -> Tuple[List[str], List[str]]:
	"""(titles the baseline did not show, those of them that run through a
	function with a finding of its own in the series).  Exercisers are not
	deterministic: a wait that did not have to sleep in the baseline boot may
	sleep, and warn, in the next one."""
	seen = set(splat_titles(base))
	new, known = [], []
	for s in splats(doc):
		t = s.get('title', '')
		if t in seen or t in new or t in known:
			continue
		if through(s, known_fns):
			known.append(t)
		else:
			new.append(t)
	return new, known


def booted(doc: dict) -> bool:
	"""The kernel reached init, init printed its end marker, the VM ended."""
	b = doc.get('boot') or {}
	return bool(b.get('init_started') and b.get('ended') and not b.get('timed_out')) and \
		doc.get('status') in ('SUCCESS', 'SPLAT', 'TEST_FAILURE')


# ---------------------------------------------------------------------------
# Exercisers: initramfs scripts that drive a patched file's code

EXERCISE_DIR = os.path.join(HARNESS, 'exercise')
EXERCISE_TIMEOUT = 120	# seconds; a stuck exerciser is killed and reported 'not ok'


def exercisers() -> List[dict]:
	"""kernel-boot/exercise/*.sh with their '# exercises:' files and
	'# needs:' Kconfig symbols."""
	out = []
	if not os.path.isdir(EXERCISE_DIR):
		return out
	for name in sorted(os.listdir(EXERCISE_DIR)):
		if not name.endswith('.sh'):
			continue
		path = os.path.join(EXERCISE_DIR, name)
		files: List[str] = []
		needs: List[str] = []
		with open(path) as f:
			for line in f:
				if line.startswith('# exercises:'):
					files += line.split(':', 1)[1].split()
				elif line.startswith('# needs:'):
					needs += [bare(x) for x in line.split(':', 1)[1].split()]
		out.append({'name': name[:-3], 'path': path, 'files': files, 'needs': needs})
	return out


def patch_file(p: dict) -> str:
	return p['unit'].rsplit(':', 1)[0]


def exercisers_for(ps: List[dict], all_ex: List[dict]) -> List[dict]:
	files = set(patch_file(p) for p in ps)
	return [e for e in all_ex if files & set(e['files'])]


def wrapper_script(path: str, exs: List[dict]) -> str:
	"""One /nsboot/test.sh that runs each exerciser and reports it in KTAP."""
	L = ['#!/bin/sh', '# generated by kernel-boot/nsboot/boottest.py', 'echo "KTAP version 1"',
	     'echo "1..%d"' % len(exs), 'rc=0']
	for i, e in enumerate(exs, 1):
		with open(e['path']) as f:
			body = f.read()
		L += ['cat > /tmp/ex%d.sh <<\'NSBOOT_EOF\'' % i, body.rstrip('\n'), 'NSBOOT_EOF',
		      'timeout -s KILL %d sh /tmp/ex%d.sh > /tmp/ex%d.out 2>&1; st=$?' % (EXERCISE_TIMEOUT, i, i),
		      "grep -v '^\\(not \\)\\{0,1\\}ok ' /tmp/ex%d.out | sed 's/^/# /'" % i,
		      'if grep -q "# SKIP" /tmp/ex%d.out; then echo "ok %d %s # SKIP"; '
		      'elif [ $st -eq 0 ]; then echo "ok %d %s"; else echo "not ok %d %s"; rc=1; fi'
		      % (i, i, e['name'], i, e['name'], i, e['name'])]
	L += ['exit $rc', '']
	with open(path, 'w') as f:
		f.write('\n'.join(L))
	os.chmod(path, 0o755)
	return path


def resolve_config(kdir: str, wanted: List[str], jobs: int, label: str) -> Tuple[List[str], Dict[str, str], Dict[str, str]]:
	"""(symbols to request, {wanted symbol: why it cannot be y}, generated values)."""
	ktree = nsboot_config.KconfigTree(kdir)
	arch = nsboot_kernel.load_arch('x86_64')
	extra = list(wanted)
	bdir = os.path.join(cache_root(), 'boottest-resolve-' + label)
	values: Dict[str, str] = {}
	for rnd in range(12):
		request = nsboot_config.load_fragments(list(nsboot_config.DEFAULT_FRAGMENTS),
						       ['CONFIG_%s=y' % x for x in extra])
		lt = nsboot_kernel.LinuxSourceTree(kdir, bdir, request, arch, jobs)
		try:
			lt.build_config()
		except nsboot_kernel.ConfigError:
			pass
		gen = lt.generated_config()
		values = gen.values() if gen is not None else {}
		missing = [x for x in extra if values.get(x) != 'y']
		if not missing:
			log('config [%s]: resolved in %d round(s): %d symbols' % (label, rnd + 1, len(extra)))
			return extra, {}, values
		add, _why = nsboot_config.resolve_step(ktree, missing, values)
		add = [a for a in add if a not in extra]
		log('config [%s] round %d: %d not y (%s); adding %s' % (
			label, rnd + 1, len(missing), ' '.join(missing[:8]), ' '.join(add) or 'nothing'))
		if not add:
			break
		extra += add
	bad = {}
	for x in wanted:
		if values.get(x) != 'y':
			bad[x] = ktree.explain(x, 'y', values)
	return [x for x in extra if values.get(x) == 'y'], bad, values


def blocked_by(p: dict, bad: Dict[str, str]) -> Dict[str, str]:
	return {s: bad[s] for s in syms_of(p) if s in bad}


def config_label(p: dict) -> str:
	return 'tinyconfig+base+debug+lockdep + ' + ' '.join(syms_of(p))


def syms_of(p: dict) -> List[str]:
	return sorted(bare(s) for s in p['kconfig'])


def select_patches(ns, man: dict) -> List[dict]:
	"""The patches of series.json that --only and --max select."""
	patches = [p for s in man['series'] for p in s['patches']]
	if ns.only:
		subs = [x for x in ns.only.split(',') if x]
		patches = [p for p in patches if any(x in p['unit'] or x in p['patch'] for x in subs)]
	if ns.max:
		patches = patches[:ns.max]
	return patches


def kbuild_lock_path() -> str:
	"""The lock file shared by every kernel build of this project; its directory is created."""
	lock_path = os.path.join(os.path.dirname(cache_root()), 'kbuild.lock')
	os.makedirs(os.path.dirname(lock_path), exist_ok=True)
	return lock_path


def take_lock(lockf, lock_path: str) -> None:
	"""Lock lockf exclusively, saying so when another kernel build holds it."""
	try:
		fcntl.flock(lockf, fcntl.LOCK_EX | fcntl.LOCK_NB)
	except OSError:
		log('waiting for %s (another kernel build is running)' % lock_path)
		fcntl.flock(lockf, fcntl.LOCK_EX)


def make_scratch(kdir: str, scratch: str) -> str:
	"""A fresh hard-link copy of kdir in scratch; an error message, or ''."""
	if os.path.isdir(scratch):
		shutil.rmtree(scratch)
	os.makedirs(os.path.dirname(scratch), exist_ok=True)
	log('hard-link copy of %s in %s' % (kdir, scratch))
	return ktree.scratch_copy(kdir, scratch)


def load_results(bp: str) -> Dict[str, dict]:
	"""The results already in boottest.json, if there is one."""
	results: Dict[str, dict] = {}
	if os.path.isfile(bp):
		with open(bp) as f:
			results = json.load(f).get('results', {})
	return results


def plan_configs(ns, scratch: str, patches: List[dict], all_ex: List[dict],
		 results: Dict[str, dict]) -> List[Tuple[str, List[str], List[dict]]]:
	"""The configurations to build, as (label, requested symbols, patches);
	the patches whose symbols cannot be enabled go to results as config failures."""
	configs: List[Tuple[str, List[str], List[dict]]] = []
	if ns.share:
		wanted = sorted(set(s for p in patches for s in syms_of(p)) |
				set(x for e in exercisers_for(patches, all_ex) for x in e['needs']))
		syms, bad, _ = resolve_config(scratch, wanted, ns.jobs, 'shared')
		ok = []
		for p in patches:
			why = blocked_by(p, bad)
			if why:
				config_failed(results, p, why)
			else:
				ok.append(p)
		if ok:
			configs.append(('shared', syms, ok))
	else:
		groups: Dict[str, List[dict]] = {}
		for p in patches:
			groups.setdefault(' '.join(syms_of(p)), []).append(p)
		for i, (key, ps) in enumerate(groups.items()):
			need = [x for e in exercisers_for(ps, all_ex) for x in e['needs'] if x not in key.split()]
			syms, bad, _ = resolve_config(scratch, key.split() + need, ns.jobs, 'g%d' % i)
			if bad:
				for p in ps:
					config_failed(results, p, blocked_by(p, bad))
			else:
				configs.append((key, syms, ps))
	return configs


def boot_baseline(ns, scratch: str, label: str, syms: List[str], ps: List[dict],
		  all_ex: List[dict]) -> Tuple[List[dict], str, dict]:
	"""(exercisers, test script, baseline result) of one configuration, booted unpatched."""
	log('configuration [%s]: %d patch(es), %d symbols: %s' % (label, len(ps), len(syms), ' '.join(syms)))
	exs = exercisers_for(ps, all_ex)
	script = ''
	if exs:
		script = wrapper_script(os.path.join(cache_root(), 'boottest-exercise-%s.sh' % label[:40].replace(' ', '_')), exs)
		log('exercisers for [%s]: %s' % (label, ', '.join(e['name'] for e in exs)))
	base = nsboot_run(ns, scratch, syms, os.path.join(cache_root(), 'boottest-baseline.json'), script)
	return exs, script, base


def patch_record(p: dict, ps: List[dict], syms: List[str], base: dict) -> dict:
	"""The start of one patch's result: its configuration and the baseline boot."""
	bstat = base.get('status', 'NO_RESULT')
	units = [q['unit'] for q in ps]
	return {'config': config_label(p),
		'resolved': ' '.join(syms),
		'shared_build': ('one build dir and baseline for %d patches: %s' % (len(ps), ', '.join(units)))
		if len(ps) > 1 else 'own build dir',
		'baseline': bstat, 'baseline_s': base['_elapsed_s'],
		'baseline_splats': splat_titles(base),
		'exercised': False, 'note': 'booted, patched code not exercised'}


def baseline_failed(rec: dict, base: dict) -> None:
	"""Mark rec as not run because the unpatched kernel did not boot."""
	bstat = base.get('status', 'NO_RESULT')
	stage = base.get('stages', {})
	rec.update(status='config failed' if bstat == 'CONFIG_FAILURE' else 'baseline failed',
		   build='not run', boot='not run', reason=base.get('reason', base['_tail'][-400:]),
		   stages={k: v.get('status') for k, v in stage.items()})


def record(results: Dict[str, dict], p: dict, rec: dict) -> None:
	"""Store rec as the result of each of p's findings and log its status."""
	for fp in p['fingerprints']:
		results[fp] = rec
	log('%s: %s' % (p['unit'], rec['status']))


def revert(scratch: str, paths: List[str]) -> bool:
	"""Revert the applied patches, the last first; False when one cannot be."""
	for path in reversed(paths):
		rv = subprocess.run(['patch', '-p1', '-R', '-s', '--no-backup-if-mismatch', '-i', path],
				    cwd=scratch, capture_output=True, text=True)
		if rv.returncode != 0:
			print('nsboot: boottest: cannot revert %s; stopping' % path, file=sys.stderr)
			return False
	return True


def boot_patched(ns, scratch: str, paths: List[str], syms: List[str], script: str) -> Optional[dict]:
	"""Boot the tree with the patches applied, then revert them; None when they cannot be reverted."""
	try:
		doc = nsboot_run(ns, scratch, syms, os.path.join(cache_root(), 'boottest-patch.json'), script)
	finally:
		if not revert(scratch, paths):
			return None
	return doc


def note_exercise(rec: dict, ex: str, fn: str, before: List[str], after: List[str], tests: dict) -> bool:
	"""Record what the exerciser ex showed in rec; False when the patched kernel still warns in fn."""
	ran = tests.get('passed', 0) > 0 and not tests.get('failed') and not tests.get('crashed')
	rec['exercised'] = ran
	rec['exerciser'] = 'kernel-boot/exercise/%s.sh' % ex
	rec['baseline_hits'], rec['patched_hits'] = before, after
	if not ran:
		rec['note'] = 'booted; the exerciser %s did not run to completion' % ex
	elif after:
		rec['note'] = 'exercised: the patched kernel still warns in %s(): %s' % (fn, '; '.join(after))
		return False
	elif before:
		rec['note'] = ('exercised from the initramfs (%s): the unpatched kernel warned "%s"; '
			       'the patched kernel did not' % (rec['exerciser'], before[0]))
	else:
		rec['note'] = ('exercised from the initramfs (%s), but the unpatched kernel did not '
			       'warn in %s() either: no difference shown' % (rec['exerciser'], fn))
	return True


def judge_patched(rec: dict, p: dict, base: dict, doc: dict, exs: List[dict], known_fns: set) -> None:
	"""Fill rec from the patched boot: build, boot, new splats and the exercisers' verdict."""
	st = doc.get('status', 'NO_RESULT')
	stages = doc.get('stages', {})
	build_ok = stages.get('build', {}).get('status') == 'SUCCESS'
	new, known = new_splats(base, doc, known_fns)
	boot_ok = booted(doc) and not new
	fn = p['unit'].rsplit(':', 1)[1]
	mine = [e['name'] for e in exs if patch_file(p) in e['files']]
	before, after = hits(base, fn), hits(doc, fn)
	tests = (doc.get('boot') or {}).get('tests', {})
	if mine and boot_ok:
		boot_ok = note_exercise(rec, mine[0], fn, before, after, tests)
	rec.update(status='ok' if boot_ok else ('build failed' if not build_ok else 'boot failed'),
		   build='ok' if build_ok else 'failed', boot='ok' if booted(doc) else st.lower(),
		   new_splats=new, known_splats=known, splats=splat_titles(doc), seconds=doc['_elapsed_s'],
		   build_s=stages.get('build', {}).get('elapsed_s'), reason=doc.get('reason', ''))


def try_patch(rec: dict, ns, scratch: str, paths: List[str], syms: List[str], script: str,
	      p: dict, base: dict, exs: List[dict], known_fns: set) -> bool:
	"""Apply the earlier patches of p's series and p (the last of paths),
	boot, revert and judge into rec; False when they cannot be reverted."""
	done = []
	for path in paths:
		ap = subprocess.run(['patch', '-p1', '-s', '--no-backup-if-mismatch', '-i', path], cwd=scratch,
				    capture_output=True, text=True)
		if ap.returncode != 0:
			rec.update(status='does not apply', build='not run', boot='not run',
				   reason='%s: %s' % (os.path.basename(path), (ap.stdout + ap.stderr)[-400:]))
			return revert(scratch, done)
		done.append(path)
	rec['applied_after'] = [os.path.basename(x) for x in paths[:-1]]
	doc = boot_patched(ns, scratch, paths, syms, script)
	if doc is None:
		return False
	judge_patched(rec, p, base, doc, exs, known_fns)
	return True


def main(ns) -> int:
	out = os.path.abspath(ns.patches or '')
	sp = os.path.join(out, 'series.json')
	if not ns.patches or not os.path.isfile(sp):
		print('nsboot: boottest: PATCHES= must name a directory written by make fixes (no %s)' % sp,
		      file=sys.stderr)
		return 2
	kdir = os.path.realpath(ns.kdir)
	if not os.path.isfile(os.path.join(kdir, 'Makefile')):
		print('nsboot: boottest: no kernel tree at %s' % ns.kdir, file=sys.stderr)
		return 2
	with open(sp) as f:
		man = json.load(f)
	patches = select_patches(ns, man)
	if not patches:
		print('nsboot: boottest: no patch selected', file=sys.stderr)
		return 2
	for p in patches:
		if not os.path.isfile(os.path.join(out, p['patch'])):
			print('nsboot: boottest: %s is listed in series.json but missing' % p['patch'], file=sys.stderr)
			return 2
	# kernel builds use both cores: one at a time, with the other
	# kernel-building checks of this project (scripts/dev/check_compile.py);
	# lockf stays open, and the lock held, until main returns
	lock_path = kbuild_lock_path()
	lockf = open(lock_path, 'w')
	take_lock(lockf, lock_path)
	scratch = os.path.join(cache_root(), 'boottest-tree')
	err = make_scratch(kdir, scratch)
	if err:
		print('nsboot: boottest: ' + err, file=sys.stderr)
		return 1
	bp = os.path.join(out, 'boottest.json')
	results = load_results(bp)

	all_ex = exercisers()
	# functions with a finding of their own in this series: a splat in them
	# that the baseline happened not to show is a known bug, not the patch's
	known_fns = set(p['unit'].rsplit(':', 1)[1] for s in man['series'] for p in s['patches'])
	earlier = {p['patch']: [q['patch'] for q in s['patches'][:i]]
		   for s in man['series'] for i, p in enumerate(s['patches'])}
	configs = plan_configs(ns, scratch, patches, all_ex, results)

	for label, syms, ps in configs:
		exs, script, base = boot_baseline(ns, scratch, label, syms, ps, all_ex)
		for p in ps:
			rec = patch_record(p, ps, syms, base)
			if not booted(base):
				baseline_failed(rec, base)
				record(results, p, rec)
				continue
			# a series is made in order: each patch goes on top of the
			# earlier ones of its series
			paths = [os.path.join(out, q) for q in earlier.get(p['patch'], [])] + [os.path.join(out, p['patch'])]
			if not try_patch(rec, ns, scratch, paths, syms, script, p, base, exs, known_fns):
				return 1
			record(results, p, rec)
			save(bp, kdir, results)
	save(bp, kdir, results)
	retested = run_user(series.retest, out, "fixes")
	ok = [fp for fp, r2 in results.items() if r2.get('status') == 'ok']
	print('nsboot: boottest: %d of %d tested findings booted clean; results in %s' % (len(ok), len(results), bp))
	return 0 if len(ok) == len(results) and retested == 0 else 1


def config_failed(results: Dict[str, dict], p: dict, why: Dict[str, str]) -> None:
	rec = {'config': config_label(p), 'status': 'config failed',
	       'build': 'not run', 'boot': 'not run', 'exercised': False,
	       'reason': '; '.join('CONFIG_%s cannot be enabled on x86_64: %s' % (s, w) for s, w in sorted(why.items()))}
	for fp in p['fingerprints']:
		results[fp] = rec
	log('%s: config failed: %s' % (p['unit'], rec['reason']))


def save(bp: str, kdir: str, results: Dict[str, dict]) -> None:
	with open(bp + '.tmp', 'w') as f:
		json.dump({'kdir': kdir, 'arch': 'x86_64', 'qemu': 'TCG, -smp 2',
			   'config': 'tinyconfig + configs/base,debug,lockdep + the patch symbols, dependencies resolved',
			   'results': results}, f, indent=1, sort_keys=True)
	os.replace(bp + '.tmp', bp)
