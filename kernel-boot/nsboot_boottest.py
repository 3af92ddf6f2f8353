# SPDX-License-Identifier: GPL-2.0-only
"""make boottest: build every patch of a 'make fixes' series into a kernel
and boot it in QEMU.

  nsboot.py boottest --patches DIR [--kdir K] [--only SUBSTR] [--max N]

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
unpatched baseline boot.  Each patch is then applied alone, built
incrementally, booted, and reverted.  It passes when it compiles, the
kernel boots to init and shuts down cleanly, and no splat appears that the
baseline did not have.

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

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from typing import Dict, List, Tuple

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
		cmd += ['--kconfig-add', '%s=y' % (s if s.startswith('CONFIG_') else 'CONFIG_' + s)]
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


def resolve_config(kdir: str, wanted: List[str], jobs: int, label: str) -> Tuple[List[str], Dict[str, str], Dict[str, str]]:
	"""(symbols to request, {wanted symbol: why it cannot be y}, generated values)."""
	import nsboot_config
	import nsboot_kernel
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


def syms_of(p: dict) -> List[str]:
	return sorted(s[len('CONFIG_'):] if s.startswith('CONFIG_') else s for s in p['kconfig'])


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
	for p in patches:
		if not os.path.isfile(os.path.join(out, p['patch'])):
			print('nsboot: boottest: %s is listed in series.json but missing' % p['patch'], file=sys.stderr)
			return 2
	# kernel builds use both cores: one at a time, with the other
	# kernel-building checks of this project (scripts/check_compile.py)
	import fcntl
	lock_path = os.path.join(os.path.dirname(cache_root()), 'kbuild.lock')
	os.makedirs(os.path.dirname(lock_path), exist_ok=True)
	lockf = open(lock_path, 'w')
	try:
		fcntl.flock(lockf, fcntl.LOCK_EX | fcntl.LOCK_NB)
	except OSError:
		log('waiting for %s (another kernel build is running)' % lock_path)
		fcntl.flock(lockf, fcntl.LOCK_EX)
	scratch = os.path.join(cache_root(), 'boottest-tree')
	if os.path.isdir(scratch):
		shutil.rmtree(scratch)
	os.makedirs(os.path.dirname(scratch), exist_ok=True)
	log('hard-link copy of %s in %s' % (kdir, scratch))
	if subprocess.run(['cp', '-al', kdir, scratch]).returncode != 0:
		print('nsboot: boottest: cannot copy the tree', file=sys.stderr)
		return 1
	bp = os.path.join(out, 'boottest.json')
	results: Dict[str, dict] = {}
	if os.path.isfile(bp):
		with open(bp) as f:
			results = json.load(f).get('results', {})

	# configurations: (label, requested symbols, patches)
	configs: List[Tuple[str, List[str], List[dict]]] = []
	if ns.share:
		wanted = sorted(set(s for p in patches for s in syms_of(p)))
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
			syms, bad, _ = resolve_config(scratch, key.split(), ns.jobs, 'g%d' % i)
			if bad:
				for p in ps:
					config_failed(results, p, blocked_by(p, bad))
			else:
				configs.append((key, syms, ps))

	for label, syms, ps in configs:
		log('configuration [%s]: %d patch(es), %d symbols: %s' % (label, len(ps), len(syms), ' '.join(syms)))
		base = nsboot_run(ns, scratch, syms, os.path.join(cache_root(), 'boottest-baseline.json'))
		bstat = base.get('status', 'NO_RESULT')
		units = [p['unit'] for p in ps]
		for p in ps:
			rec = {'config': 'tinyconfig+base+debug+lockdep + ' + ' '.join(syms_of(p)),
			       'resolved': ' '.join(syms),
			       'shared_build': ('one build dir and baseline for %d patches: %s' % (len(ps), ', '.join(units)))
			       if len(ps) > 1 else 'own build dir',
			       'baseline': bstat, 'baseline_s': base['_elapsed_s'],
			       'baseline_splats': splat_titles(base),
			       'exercised': False, 'note': 'booted, patched code not exercised'}
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
					   new_splats=new, splats=splat_titles(doc), seconds=doc['_elapsed_s'],
					   build_s=stages.get('build', {}).get('elapsed_s'), reason=doc.get('reason', ''))
			for fp in p['fingerprints']:
				results[fp] = rec
			log('%s: %s' % (p['unit'], rec['status']))
			save(bp, kdir, results)
	save(bp, kdir, results)
	r = subprocess.run([PY, os.path.join(TOP, 'scripts', 'fixes.py'), 'retest', out])
	ok = [fp for fp, r2 in results.items() if r2.get('status') == 'ok']
	print('nsboot: boottest: %d of %d tested findings booted clean; results in %s' % (len(ok), len(results), bp))
	return 0 if len(ok) == len(results) and r.returncode == 0 else 1


def config_failed(results: Dict[str, dict], p: dict, why: Dict[str, str]) -> None:
	rec = {'config': 'tinyconfig+base+debug+lockdep + ' + ' '.join(syms_of(p)), 'status': 'config failed',
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
