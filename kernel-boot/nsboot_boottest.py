# SPDX-License-Identifier: GPL-2.0-only
"""make boottest: build every patch of a 'make fixes' series into a kernel
and boot it in QEMU.

  nsboot.py boottest --patches DIR [--kdir K] [--only SUBSTR] [--max N]

Works in a scratch hard-link copy of KDIR (patch(1) writes a new file and
renames it, so the links to KDIR are broken, never written through).
Patches are grouped by the Kconfig symbols that build their files
(series.json); each group gets one build directory (the tiny debug base
plus those symbols, checked against the .config: a symbol that cannot be
enabled is a CONFIG_FAILURE with its unmet dependencies) and one unpatched
baseline boot.  Each patch is then applied alone, built incrementally,
booted, and reverted.  It passes when it compiles, the kernel boots to init
and shuts down cleanly, and no splat appears that the baseline did not have.

No initramfs test drives the patched drivers yet, so every result says
"booted, patched code not exercised".  Results go to DIR/boottest.json,
keyed by fingerprint; then 'scripts/fixes.py retest DIR' rewrites the
testing paragraph of each patch from them.
"""

import json
import os
import shutil
import subprocess
import sys
import time
from typing import Dict, List

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.dirname(HERE)
PY = '/usr/bin/python3'


def cache_root() -> str:
	return os.path.join(os.environ.get('NESTSLEEP_CACHE', os.path.expanduser('~/.cache/nestsleep')), 'kernel-boot')


def log(msg: str) -> None:
	print('[boottest] ' + msg, flush=True)


def nsboot_run(ns, tree: str, syms: List[str], jp: str) -> dict:
	cmd = [PY, os.path.join(HERE, 'nsboot.py'), 'run', '--kdir', tree, '--no-module', '--json', jp,
	       '--timeout', str(int(ns.timeout)), '-j', str(ns.jobs)]
	for s in syms:
		cmd += ['--kconfig-add', '%s=y' % s]
	log('$ ' + ' '.join(cmd))
	if os.path.exists(jp):
		os.unlink(jp)
	t = time.monotonic()
	r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
	doc = {}
	if os.path.exists(jp):
		with open(jp) as f:
			doc = json.load(f)
	doc['_elapsed_s'] = round(time.monotonic() - t, 1)
	doc['_tail'] = r.stdout[-1500:]
	return doc


def splat_titles(doc: dict) -> List[str]:
	return sorted(s.get('title', '') for s in (doc.get('boot') or {}).get('splats', []))


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
	patches = [p for s in man['series'] for p in s['patches']]
	if ns.only:
		patches = [p for p in patches if ns.only in p['unit'] or ns.only in p['patch']]
	if ns.max:
		patches = patches[:ns.max]
	if not patches:
		print('nsboot: boottest: no patch selected', file=sys.stderr)
		return 2
	scratch = os.path.join(cache_root(), 'boottest-tree')
	if os.path.isdir(scratch):
		shutil.rmtree(scratch)
	os.makedirs(os.path.dirname(scratch), exist_ok=True)
	log('hard-link copy of %s in %s' % (kdir, scratch))
	if subprocess.run(['cp', '-al', kdir, scratch]).returncode != 0:
		print('nsboot: boottest: cannot copy the tree', file=sys.stderr)
		return 1
	groups: Dict[str, List[dict]] = {}
	for p in patches:
		groups.setdefault(' '.join(sorted(p['kconfig'])), []).append(p)
	bp = os.path.join(out, 'boottest.json')
	results: Dict[str, dict] = {}
	if os.path.isfile(bp):
		with open(bp) as f:
			results = json.load(f).get('results', {})
	for key, ps in groups.items():
		syms = key.split() if key else []
		log('group [%s]: %d patch(es)' % (key or 'base config', len(ps)))
		base = nsboot_run(ns, scratch, syms, os.path.join(cache_root(), 'boottest-baseline.json'))
		bstat = base.get('status', 'NO_RESULT')
		for p in ps:
			rec = {'config': '+'.join(syms) or 'base', 'shared_build': 'one build dir for [%s] (%d patches)' % (
				key or 'base', len(ps)), 'baseline': bstat, 'baseline_s': base['_elapsed_s'],
				'exercised': '', 'note': 'booted, patched code not exercised'}
			if bstat != 'SUCCESS':
				stage = base.get('stages', {})
				rec.update(status='config failed' if bstat == 'CONFIG_FAILURE' else 'baseline failed',
					   build='not run', boot='not run', reason=base.get('reason', base['_tail'][-400:]),
					   stages={k: v.get('status') for k, v in stage.items()})
				for fp in p['fingerprints']:
					results[fp] = rec
				log('%s: %s' % (p['unit'], rec['status']))
				continue
			path = os.path.join(out, p['patch'])
			ap = subprocess.run(['patch', '-p1', '-s', '--no-backup-if-mismatch', '-i', path], cwd=scratch,
					    capture_output=True, text=True)
			if ap.returncode != 0:
				rec.update(status='does not apply', build='not run', boot='not run',
					   reason=(ap.stdout + ap.stderr)[-400:])
			else:
				try:
					doc = nsboot_run(ns, scratch, syms, os.path.join(cache_root(), 'boottest-patch.json'))
				finally:
					rv = subprocess.run(['patch', '-p1', '-R', '-s', '--no-backup-if-mismatch', '-i', path],
							    cwd=scratch, capture_output=True, text=True)
					if rv.returncode != 0:
						print('nsboot: boottest: cannot revert %s; stopping' % path, file=sys.stderr)
						return 1
				st = doc.get('status', 'NO_RESULT')
				stages = doc.get('stages', {})
				build_ok = stages.get('build', {}).get('status') == 'SUCCESS'
				new = [t for t in splat_titles(doc) if t not in splat_titles(base)]
				boot_ok = st == 'SUCCESS' and not new
				rec.update(status='ok' if boot_ok else ('build failed' if not build_ok else 'boot failed'),
					   build='ok' if build_ok else 'failed', boot='ok' if boot_ok else st.lower(),
					   new_splats=new, seconds=doc['_elapsed_s'], reason=doc.get('reason', ''))
			for fp in p['fingerprints']:
				results[fp] = rec
			log('%s: %s' % (p['unit'], rec['status']))
	with open(bp + '.tmp', 'w') as f:
		json.dump({'kdir': kdir, 'arch': 'x86_64', 'qemu': 'TCG, -smp 2',
			   'config': 'tinyconfig + configs/base,debug,lockdep + the patch symbols',
			   'results': results}, f, indent=1)
	os.replace(bp + '.tmp', bp)
	r = subprocess.run([PY, os.path.join(TOP, 'scripts', 'fixes.py'), 'retest', out])
	ok = [fp for fp, r2 in results.items() if r2.get('status') == 'ok']
	print('nsboot: boottest: %d of %d tested findings booted clean; results in %s' % (len(ok), len(results), bp))
	return 0 if len(ok) == len(results) and r.returncode == 0 else 1
