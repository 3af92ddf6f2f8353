# SPDX-License-Identifier: GPL-2.0-only
"""make boottest: build every patch of a 'make fixes' series into a kernel
and boot it in QEMU.

  python3 -m nestsleep boottest --patches DIR [--kdir K] [--only SUBSTR] [--max N]

Each boot is an 'nsboot run' (kernel-boot/nsboot: config, build, exec,
parse) in this process (nsboot_run()); this module decides what to boot
and judges the results.  It starts at main().

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
same symbols).  Each configuration gets one build directory and unpatched
baseline boots.  Each patch is then applied on top of the earlier patches
of its series (a series is made in order), built incrementally, booted,
and reverted with them.  It passes when it compiles, the kernel boots to
init and shuts down cleanly, and no splat appears that the baseline did
not have.

Runtime evidence (kernel-boot/exercise/NAME.sh, with '# exercises:' the
files it drives, '# needs:' its Kconfig symbols, '# program:' a C program
built for the initramfs, '# patched: no <why>' when it cannot run on the
patched kernel): after a baseline boot with no exerciser, each exerciser
of the configuration gets baseline boots of its own, up to MAX_TRIES until
each of its findings warned (an exerciser that crashes the kernel takes
only its own findings with it); the
findings of series.json's report_only list that an exerciser drives are
reproduced there too.  A patch whose file an exerciser drives boots with
that exerciser alone, as many times as the baseline needed.  Each finding
gets its own evidence (finding_evidence()): reproduced when an unpatched
boot printed a nested-sleep splat whose call trace runs through the
function of the wait (its trimmed splat is kept), warning gone when the
exerciser passed in every patched boot (it checks that the wait ran and
slept) and none printed it.  Other patches say "booted, patched code not
exercised".  Results go to DIR/boottest.json, keyed by fingerprint, with
the wall time of the run; then 'nestsleep retest DIR' rewrites the
testing paragraph of each patch from them.
"""

import collections
import contextlib
import fcntl
import io
import json
import os
import shutil
import subprocess
import sys
import time

from typing import Dict, List, Optional, Sequence, Tuple

from nestsleep import TOP, cache_dir
from nestsleep import exercisers as nestsleep_exercisers
from nestsleep import ktree
from nestsleep.boot import use_cache
from nestsleep.common import run_user
from nestsleep.series import records
from nsboot import cache_root
from nsboot import config as nsboot_config
from nsboot import kernel as nsboot_kernel
from nsboot import main as nsboot_main


def log(msg: str) -> None:
	print('[boottest] ' + msg, flush=True)


def nsboot_run(ns, tree: str, syms: List[str], jp: str, script: str = '',
	       extra: Sequence[str] = (), programs: Sequence[str] = ()) -> dict:
	"""'nsboot run' on tree, in this process; its JSON result, with the
	elapsed time, the command and the tail of what it printed.  syms are
	enabled as =y; extra are more 'nsboot run' options."""
	argv = ['run', '--kdir', tree, '--no-module', '--json', jp,
		'--timeout', str(int(ns.timeout)), '-j', str(ns.jobs)]
	if script:
		argv += ['--test-script', script]
	for prog in programs:
		argv += ['--exercise-bin', prog]
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


# function of a wait -> {'primitive': its wait primitive, 'hops': the first
# call of each sleeping chain}, from the triage report's findings.json
# (load_waits()); lets a splat match a wait whose function was inlined
WAITS: Dict[str, dict] = {}


def set_at(s: dict) -> str:
	"""The function that set the task state, as the warning names it."""
	return (s.get('set_at') or '').split('+')[0]


# fingerprint -> {'function', 'hops'}: tells apart two waits of one function
# (acpi_aml_release() waits on !acpi_aml_busy() and then on !acpi_aml_used())
SITES: Dict[str, dict] = {}


def through_wait(s: dict, fn: str, fp: str = '') -> bool:
	"""A nested-sleep splat of the wait in fn: its call trace runs through
	fn, or fn set the state itself; or, when fn was inlined into its caller,
	the state was set by fn's wait primitive and the trace holds the call
	that fn's sleeping chain starts with.  With fp, a splat whose trace holds
	the first call of another wait of fn, and none of fp's, is that other
	wait's."""
	if not _through_fn(s, fn):
		return False
	if fp and fp in SITES:
		frames = set(s.get('frames', []))
		if frames & set(SITES[fp]['hops']):
			return True
		others = [x for k, x in SITES.items() if k != fp and x['function'] == fn]
		if any(frames & set(x['hops']) for x in others):
			return False
	return True


def _through_fn(s: dict, fn: str) -> bool:
	if through(s, {fn}) or (s.get('kind') == 'blocking_ops' and set_at(s) == fn):
		return True
	w = WAITS.get(fn)
	if not w or s.get('kind') != 'blocking_ops':
		return False
	prim = w['primitive']
	want = 'prepare_to_wait_event' if 'wait_event' in prim else prim
	return set_at(s) == want and bool(set(w['hops']) & set(s.get('frames', [])))


def load_waits(tree_id: str, top: str = TOP) -> Dict[str, dict]:
	"""WAITS for one tree, from reports/<tree id>/findings.json, if there is
	one; SITES is filled from the same file."""
	path = os.path.join(top, 'reports', tree_id or '-', 'findings.json')
	out: Dict[str, dict] = {}
	if os.path.isfile(path):
		with open(path) as f:
			for r in json.load(f).get('findings', []):
				hops = [p['chain'][0] for p in r.get('paths') or [r] if p.get('chain')]
				out.setdefault(r['function'], {'primitive': r.get('primitive', ''), 'hops': hops})
				SITES[r['fingerprint']] = {'function': r['function'], 'hops': hops}
	return out


def splat_titles(doc: dict) -> List[str]:
	return sorted(set(s.get('title', '') for s in splats(doc)))


def hits(doc: dict, fn: str, fp: str = '') -> List[str]:
	"""Titles of the nested-sleep splats of the wait in fn (through_wait())."""
	return sorted(set(s.get('title', '') for s in splats(doc) if through_wait(s, fn, fp)))


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
		if any(through_wait(s, fn) for fn in known_fns):
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

EXERCISE_DIR = os.path.join(TOP, 'kernel-boot', 'exercise')
EXERCISE_TIMEOUT = 120	# seconds; a stuck exerciser is killed and reported 'not ok'


def exercisers() -> List[dict]:
	"""kernel-boot/exercise/*.sh with their headers (nestsleep.exercisers)."""
	return nestsleep_exercisers.read_all(EXERCISE_DIR)


def patch_file(p: dict) -> str:
	return p['unit'].rsplit(':', 1)[0]


def exercisers_for(ps: List[dict], all_ex: List[dict]) -> List[dict]:
	files = set(patch_file(p) for p in ps)
	return [e for e in all_ex if files & set(e['files'])]


def wrapper_script(path: str, exs: List[dict]) -> str:
	"""One /nsboot/test.sh that runs each exerciser and reports it in KTAP."""
	L = ['#!/bin/sh', '# generated by scripts/nestsleep/boot/boottest.py', 'echo "KTAP version 1"',
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
	lock_path = os.path.join(cache_dir(), 'kbuild.lock')
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


def plan_configs(ns, scratch: str, patches: List[dict], ros: List[dict], all_ex: List[dict],
		 results: Dict[str, dict]) -> List[Tuple[str, List[str], List[dict], List[dict]]]:
	"""The configurations to build, as (label, requested symbols, patches,
	report-only findings to reproduce); the patches whose symbols cannot be
	enabled go to results as config failures."""
	configs: List[Tuple[str, List[str], List[dict], List[dict]]] = []
	if ns.share:
		wanted = sorted(set(s for p in patches for s in syms_of(p)) |
				set(x for e in exercisers_for(patches + ros, all_ex) for x in e['needs']))
		syms, bad, _ = resolve_config(scratch, wanted, ns.jobs, 'shared')
		ok = []
		for p in patches:
			why = blocked_by(p, bad)
			if why:
				config_failed(results, p, why)
			else:
				ok.append(p)
		# an exerciser whose symbols cannot be enabled has nothing to reproduce
		ros = [r for r in ros if not any(x in bad for e in exercisers_for([r], all_ex) for x in e['needs'])]
		if ok or ros:
			configs.append(('shared', syms, ok, ros))
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
				configs.append((key, syms, ps, []))
		if ros:
			need = sorted(set(x for e in exercisers_for(ros, all_ex) for x in e['needs']))
			syms, bad, _ = resolve_config(scratch, need, ns.jobs, 'reproduce')
			if not bad:
				configs.append(('reproduce', syms, [], ros))
	return configs


# ---------------------------------------------------------------------------
# Runtime evidence: baseline tries, the patched boots, one verdict per finding

MAX_TRIES = 5	# boots per configuration until every exercised finding warned


def report_only_targets(man: dict, all_ex: List[dict], only: str = '') -> List[dict]:
	"""The findings series.json lists with no patch (report_only) whose file
	an exerciser drives: the unpatched kernel can still reproduce them.
	Shaped like a patch of series.json, with no patch file."""
	out = []
	for r in man.get('report_only', []):
		t = {'unit': '%s:%s' % (r['file'], r['function']), 'fingerprints': [r['fingerprint']],
		     'files': [r['file']], 'functions': [r['function']], 'kconfig': [], 'patch': None}
		if only and not any(x in t['unit'] for x in only.split(',') if x):
			continue
		if exercisers_for([t], all_ex):
			out.append(t)
	return out


def functions_of(p: dict, tests: Dict[str, dict]) -> Dict[str, str]:
	"""fingerprint -> the function of its wait, for each finding of p."""
	fns = p.get('functions') or [p['unit'].rsplit(':', 1)[1]]
	out = {}
	for fp in p['fingerprints']:
		fn = (tests.get(fp) or {}).get('function')
		out[fp] = fn if fn else fns[0] if len(fns) == 1 else p['unit'].rsplit(':', 1)[1]
	return out


def target_files(p: dict) -> List[str]:
	return p.get('files') or [patch_file(p)]


def mine(p: dict, exs: List[dict]) -> List[dict]:
	"""The exercisers that drive one of p's files."""
	return [e for e in exs if set(target_files(p)) & set(e['files'])]


def first_try(docs: List[dict], fn: str, fp: str = '') -> int:
	"""The number of the first boot whose nested-sleep splat is the wait's; 0 if none."""
	for i, d in enumerate(docs, 1):
		if hits(d, fn, fp):
			return i
	return 0


def splat_through(docs: List[dict], fn: str, fp: str = '') -> Optional[dict]:
	for d in docs:
		for s in splats(d):
			if through_wait(s, fn, fp):
				return s
	return None


def ex_result(doc: dict, name: str) -> Optional[dict]:
	"""The KTAP result of the exerciser name in one boot, if it ran."""
	for d in (doc.get('boot') or {}).get('documents', []):
		for t in d.get('subtests', []):
			if t.get('name') == name:
				return t
	return None


def merged(docs: List[dict]) -> dict:
	"""One boot result holding the splats of all docs."""
	return {'boot': {'splats': [s for d in docs for s in splats(d)]}}


def finding_evidence(fn: str, ex: str, base_docs: List[dict], patched_docs: Optional[List[dict]],
		     fp: str = '') -> dict:
	"""What the exerciser ex showed for the wait in fn: in the unpatched
	boots (base_docs, in order) and, if the finding has a patch, in the
	patched boots.  'reproduced': an unpatched boot printed a nested-sleep
	splat whose call trace runs through fn; 'warning gone': every patched
	boot ran the exerciser to success (the exerciser checks that the wait
	ran and slept) and none printed it."""
	runs = [d for d in base_docs if ex in d.get('_exercisers', [ex])]
	bt = first_try(runs, fn, fp)
	ev: dict = {'function': fn, 'exerciser': 'kernel-boot/exercise/%s.sh' % ex,
		    'baseline_tries': bt or len(runs), 'reproduced': bool(bt),
		    'baseline_hits': sorted(set(h for d in runs for h in hits(d, fn, fp)))}
	sp = splat_through(runs, fn, fp)
	if sp:
		ev['splat'] = sp.get('trimmed') or [sp.get('message') or sp.get('title', '')]
	if patched_docs is None:
		ev['evidence'] = 'reproduced in QEMU' if bt else 'exercised: the unpatched kernel did not warn'
		ev['exercised'] = bool(runs)
		return ev
	res = [ex_result(d, ex) for d in patched_docs]
	ran = bool(res) and all(r is not None and r.get('status') == 'SUCCESS' for r in res)
	after = sorted(set(h for d in patched_docs for h in hits(d, fn, fp)))
	ev.update(patched_tries=len(patched_docs), patched_hits=after, exercised=ran,
		  warning_gone=bool(bt) and ran and not after)
	last = res[-1] if res and res[-1] else {}
	if last.get('diagnostics'):
		ev['patched_output'] = last['diagnostics'][-40:]
	if after:
		ev['evidence'] = 'the patched kernel still warns'
	elif not ran:
		ev['evidence'] = ('reproduced in QEMU; ' if bt else '') + 'the exerciser did not pass on the patched kernel'
	elif bt:
		ev['evidence'] = 'reproduced in QEMU; exercised: warning gone'
	else:
		ev['evidence'] = 'exercised: no warning before or after'
	return ev


def boot_baseline(ns, scratch: str, label: str, syms: List[str], ps: List[dict], ros: List[dict],
		  all_ex: List[dict], tests: Dict[str, dict]) -> Tuple[List[dict], List[dict]]:
	"""(exercisers, the unpatched boots) of one configuration: first a boot
	with no exerciser (the reference every patch is compared with), then
	each exerciser in boots of its own, so that one that brings the kernel
	down (a race with a bug of its own) takes only its own findings with
	it: up to MAX_TRIES boots, until each of its findings warned."""
	log('configuration [%s]: %d patch(es), %d report-only finding(s), %d symbols: %s' % (
		label, len(ps), len(ros), len(syms), ' '.join(syms)))
	exs = exercisers_for(ps + ros, all_ex)
	plain = nsboot_run(ns, scratch, syms, os.path.join(cache_root(), 'boottest-baseline.json'))
	plain['_exercisers'] = []
	docs: List[dict] = [plain]
	if not booted(plain):
		return exs, docs
	for e in exs:
		fns = [(fp, fn) for t in ps + ros if mine(t, [e]) for fp, fn in functions_of(t, tests).items()]
		script = wrapper_script(os.path.join(cache_root(), 'boottest-exercise-%s.sh' % e['name']), [e])
		runs: List[dict] = []
		for n in range(1, MAX_TRIES + 1):
			log('baseline boot %d of at most %d with the exerciser %s' % (n, MAX_TRIES, e['name']))
			doc = nsboot_run(ns, scratch, syms, os.path.join(cache_root(), 'boottest-baseline.json'), script,
					 programs=e['programs'])
			doc['_exercisers'] = [e['name']]
			runs.append(doc)
			if all(first_try(runs, fn, fp) for fp, fn in fns):
				break
		docs += runs
	return exs, docs


def patch_record(p: dict, ps: List[dict], syms: List[str], docs: List[dict]) -> dict:
	"""The start of one patch's result: its configuration and the baseline boots."""
	base = docs[0]
	bstat = base.get('status', 'NO_RESULT')
	units = [q['unit'] for q in ps]
	return {'config': config_label(p),
		'resolved': ' '.join(syms),
		'shared_build': ('one build dir and baseline for %d patches: %s' % (len(ps), ', '.join(units)))
		if len(ps) > 1 else 'own build dir',
		'baseline': bstat, 'baseline_s': round(sum(d['_elapsed_s'] for d in docs), 1),
		'baseline_boots': len(docs),
		'baseline_splats': sorted(set(t for d in docs for t in splat_titles(d))),
		'exercised': False, 'note': 'booted, patched code not exercised'}


def baseline_failed(rec: dict, base: dict) -> None:
	"""Mark rec as not run because the unpatched kernel did not boot."""
	bstat = base.get('status', 'NO_RESULT')
	stage = base.get('stages', {})
	rec.update(status='config failed' if bstat == 'CONFIG_FAILURE' else 'baseline failed',
		   build='not run', boot='not run', reason=base.get('reason', base['_tail'][-400:]),
		   stages={k: v.get('status') for k, v in stage.items()})


def record(results: Dict[str, dict], p: dict, rec: dict, per_fp: Optional[Dict[str, dict]] = None) -> None:
	"""Store rec, with each finding's own evidence, as the result of each of p's findings."""
	for fp in p['fingerprints']:
		r = dict(rec)
		r.update((per_fp or {}).get(fp, {}))
		results[fp] = r
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


def boot_patched(ns, scratch: str, paths: List[str], syms: List[str], script: str,
		 programs: List[str], tries: int) -> Optional[List[dict]]:
	"""Boot the tree with the patches applied tries times (fewer if a boot
	fails), then revert them; None when they cannot be reverted."""
	docs: List[dict] = []
	try:
		for n in range(tries):
			doc = nsboot_run(ns, scratch, syms, os.path.join(cache_root(), 'boottest-patch.json'), script,
					 programs=programs)
			docs.append(doc)
			if not booted(doc):
				break
	finally:
		if not revert(scratch, paths):
			return None
	return docs


def note_of(evs: Dict[str, dict]) -> str:
	"""One line on what the exercisers showed for a patch's findings."""
	byev = collections.OrderedDict()
	for ev in evs.values():
		byev.setdefault(ev['evidence'], []).append(ev['function'] + '()')
	return '; '.join('%s: %s' % (', '.join(dict.fromkeys(fns)), e) for e, fns in byev.items())


def judge_patched(rec: dict, p: dict, base_docs: List[dict], docs: List[dict], exs: List[dict],
		  known_fns: set, tests: Dict[str, dict]) -> Dict[str, dict]:
	"""Fill rec from the patched boots: build, boot, new splats and the
	exercisers' verdict; the evidence of each finding of p."""
	first = docs[0]
	stages = first.get('stages', {})
	build_ok = stages.get('build', {}).get('status') == 'SUCCESS'
	new: List[str] = []
	known: List[str] = []
	base = merged(base_docs)
	for d in docs:
		n, k = new_splats(base, d, known_fns)
		new += [x for x in n if x not in new]
		known += [x for x in k if x not in known]
	boot_ok = all(booted(d) for d in docs) and not new
	per_fp: Dict[str, dict] = {}
	exm = [e for e in mine(p, exs) if e['patched']]
	for e in mine(p, exs):
		if not e['patched'] and boot_ok:
			for fp, fn in functions_of(p, tests).items():
				ev = finding_evidence(fn, e['name'], base_docs, None, fp)
				ev['evidence'] += '; not exercised with the patch: ' + e['not_patched']
				# the patched kernel did not run it: nothing is shown gone
				ev.update(exercised=False, warning_gone=False, not_patched=e['not_patched'])
				per_fp[fp] = ev
	if exm and boot_ok:
		for fp, fn in functions_of(p, tests).items():
			per_fp[fp] = finding_evidence(fn, exm[0]['name'], base_docs, docs, fp)
		if any(ev.get('patched_hits') for ev in per_fp.values()):
			boot_ok = False
		rec['note'] = 'exercised from the initramfs (%s): %s' % (', '.join(
			'kernel-boot/exercise/%s.sh' % e['name'] for e in exm), note_of(per_fp))
	status = 'ok' if boot_ok else ('build failed' if not build_ok else
				       'still warns' if any(ev.get('patched_hits') for ev in per_fp.values()) else 'boot failed')
	rec.update(status=status, build='ok' if build_ok else 'failed', boot='ok' if all(booted(d) for d in docs) else
		   first.get('status', 'NO_RESULT').lower(),
		   new_splats=new, known_splats=known, splats=sorted(set(t for d in docs for t in splat_titles(d))),
		   seconds=round(sum(d['_elapsed_s'] for d in docs), 1), patched_boots=len(docs),
		   build_s=stages.get('build', {}).get('elapsed_s'), reason=first.get('reason', ''))
	return per_fp


def try_patch(rec: dict, ns, scratch: str, paths: List[str], syms: List[str], p: dict,
	      base_docs: List[dict], exs: List[dict], known_fns: set,
	      tests: Dict[str, dict]) -> Optional[Dict[str, dict]]:
	"""Apply the earlier patches of p's series and p (the last of paths),
	boot as often as the baseline needed to reproduce p's findings, revert
	and judge into rec; the per-finding evidence, None when the patches
	cannot be reverted."""
	done = []
	for path in paths:
		ap = subprocess.run(['patch', '-p1', '-s', '--no-backup-if-mismatch', '-i', path], cwd=scratch,
				    capture_output=True, text=True)
		if ap.returncode != 0:
			rec.update(status='does not apply', build='not run', boot='not run',
				   reason='%s: %s' % (os.path.basename(path), (ap.stdout + ap.stderr)[-400:]))
			return {} if revert(scratch, done) else None
		done.append(path)
	rec['applied_after'] = [os.path.basename(x) for x in paths[:-1]]
	exm = [e for e in mine(p, exs) if e['patched']]
	script, programs, tries = '', [], 1
	if exm:
		script = wrapper_script(os.path.join(cache_root(), 'boottest-exercise-patch.sh'), exm)
		programs = [x for e in exm for x in e['programs']]
		runs = [d for d in base_docs if any(e['name'] in d.get('_exercisers', []) for e in exm)]
		# the same number of tries as the unpatched kernel needed
		tries = max([first_try(runs, fn, fp) for fp, fn in functions_of(p, tests).items()] + [1])
	docs = boot_patched(ns, scratch, paths, syms, script, programs, tries)
	if docs is None:
		return None
	return judge_patched(rec, p, base_docs, docs, exs, known_fns, tests)


def reproduce_only(results: Dict[str, dict], t: dict, exs: List[dict], docs: List[dict],
		   tests: Dict[str, dict]) -> None:
	"""The record of a finding with no patch: what the unpatched boots showed."""
	exm = mine(t, exs)
	for fp, fn in functions_of(t, tests).items():
		ev = finding_evidence(fn, exm[0]['name'], docs, None, fp)
		results[fp] = dict(ev, status='no patch', build='not run', boot='ok' if booted(docs[0]) else 'failed',
				   note='no patch: %s' % ev['evidence'])
		log('%s (no patch): %s' % (t['unit'], ev['evidence']))


def make_parser():
	"""The options of 'nestsleep boottest' (make boottest); its usage and
	errors read 'nsboot boottest' (and 'nsboot' for an unknown option),
	as when nsboot parsed them: a subcommand of a parser 'nsboot'."""
	top = nsboot_main.Parser(prog='nsboot')
	bt = top.add_subparsers(dest='subcommand').add_parser('boottest', help='build and boot each patch of a make fixes series')
	bt.add_argument('--patches', required=True, help='the OUT directory of make fixes (series.json)')
	bt.add_argument('--kdir', default=nsboot_kernel.default_kdir(), help='kernel tree, only read')
	bt.add_argument('--only', help='only patches whose unit or file name contains one of these (comma-separated)')
	bt.add_argument('--max', type=int, default=0, help='at most this many patches')
	bt.add_argument('--timeout', type=float, default=400, help='hard timeout per boot in seconds (default: %(default)s; a clean boot takes ~10 s)')
	bt.add_argument('--jobs', '-j', type=int, default=2)
	bt.add_argument('--no-share', dest='share', action='store_false',
			help='one configuration per group of patches with the same symbols, not one shared')
	return top


def main(argv: Sequence[str]) -> int:
	"""'nestsleep boottest ARGS': parse them, then run()."""
	use_cache()
	return run(make_parser().parse_args(['boottest'] + list(argv)))


def run(ns) -> int:
	"""Build and boot every selected patch of the series in ns.patches;
	the results go to boottest.json there, then 'nestsleep retest'."""
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
	all_ex = exercisers()
	ros = report_only_targets(man, all_ex, ns.only) if not ns.max else []
	if not patches and not ros:
		print('nsboot: boottest: no patch selected', file=sys.stderr)
		return 2
	for p in patches:
		if not os.path.isfile(os.path.join(out, p['patch'])):
			print('nsboot: boottest: %s is listed in series.json but missing' % p['patch'], file=sys.stderr)
			return 2
	tests = man.get('tests', {})
	WAITS.clear()
	SITES.clear()
	WAITS.update(load_waits(man.get('tree', '')))
	# kernel builds use both cores: one at a time, with the other
	# kernel-building checks of this project (scripts/dev/check_compile.py);
	# lockf stays open, and the lock held, until main returns
	lock_path = kbuild_lock_path()
	lockf = open(lock_path, 'w')
	take_lock(lockf, lock_path)
	t0 = time.monotonic()	# the wall time of the run, without the wait for the lock
	scratch = os.path.join(cache_root(), 'boottest-tree')
	err = make_scratch(kdir, scratch)
	if err:
		print('nsboot: boottest: ' + err, file=sys.stderr)
		return 1
	bp = os.path.join(out, 'boottest.json')
	results = load_results(bp)

	# functions with a finding of their own in this series: a splat in them
	# that the baseline happened not to show is a known bug, not the patch's
	known_fns = set(p['unit'].rsplit(':', 1)[1] for s in man['series'] for p in s['patches'])
	known_fns |= set(t['functions'][0] for t in ros)
	earlier = {p['patch']: [q['patch'] for q in s['patches'][:i]]
		   for s in man['series'] for i, p in enumerate(s['patches'])}
	configs = plan_configs(ns, scratch, patches, ros, all_ex, results)

	for label, syms, ps, rs in configs:
		exs, docs = boot_baseline(ns, scratch, label, syms, ps, rs, all_ex, tests)
		for t in rs:
			reproduce_only(results, t, exs, docs, tests)
		save(bp, kdir, results)
		for p in ps:
			rec = patch_record(p, ps, syms, docs)
			if not booted(docs[0]):
				baseline_failed(rec, docs[0])
				record(results, p, rec)
				continue
			# a series is made in order: each patch goes on top of the
			# earlier ones of its series
			paths = [os.path.join(out, q) for q in earlier.get(p['patch'], [])] + [os.path.join(out, p['patch'])]
			per_fp = try_patch(rec, ns, scratch, paths, syms, p, docs, exs, known_fns, tests)
			if per_fp is None:
				return 1
			# which code was booted: retest keeps the record only for it
			rec['code'] = records.code_digest(paths)
			record(results, p, rec, per_fp)
			save(bp, kdir, results)
	save(bp, kdir, results, round(time.monotonic() - t0))
	retested = run_user(lambda d: records.retest(d, None, kdir), out, "fixes")
	tested = [fp for fp, r2 in results.items() if r2.get('status') != 'no patch']
	ok = [fp for fp in tested if results[fp].get('status') == 'ok']
	print('nsboot: boottest: %d of %d tested findings booted clean; results in %s' % (len(ok), len(tested), bp))
	return 0 if len(ok) == len(tested) and retested == 0 else 1


def config_failed(results: Dict[str, dict], p: dict, why: Dict[str, str]) -> None:
	rec = {'config': config_label(p), 'status': 'config failed',
	       'build': 'not run', 'boot': 'not run', 'exercised': False,
	       'reason': '; '.join('CONFIG_%s cannot be enabled on x86_64: %s' % (s, w) for s, w in sorted(why.items()))}
	for fp in p['fingerprints']:
		results[fp] = rec
	log('%s: config failed: %s' % (p['unit'], rec['reason']))


def save(bp: str, kdir: str, results: Dict[str, dict], wall_s: Optional[int] = None) -> None:
	doc = {'kdir': kdir, 'arch': 'x86_64', 'qemu': 'TCG, -smp 2',
	       'config': 'tinyconfig + configs/base,debug,lockdep + the patch symbols, dependencies resolved',
	       'max_tries': MAX_TRIES, 'results': results}
	if os.path.isfile(bp):
		with open(bp) as f:
			old = json.load(f)
		if 'wall_s' in old:
			doc['wall_s'] = old['wall_s']
	if wall_s is not None:
		doc['wall_s'] = wall_s
	with open(bp + '.tmp', 'w') as f:
		json.dump(doc, f, indent=1, sort_keys=True)
	os.replace(bp + '.tmp', bp)
