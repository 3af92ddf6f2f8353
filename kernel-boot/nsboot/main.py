# SPDX-License-Identifier: GPL-2.0-only
#
# nsboot: build a tiny kernel, boot it in QEMU with a busybox initramfs and
# the nestsleep test module, and read the result from the console.
#
# Modelled on the kernel's tools/testing/kunit/kunit.py.

"""nsboot: the kernel-boot harness of nestsleep.

Stages, each callable alone ('run' is all four):

  config  tinyconfig + fragments (configs/*.config), merge_config.sh,
	  olddefconfig, then check the .config holds every requested symbol
  build   make -jN in a cached build dir (O=), then the test module (M=,
	  in a copy of kernel-boot/module/ in the cache)
  exec    write the initramfs, boot QEMU (TCG) with a hard timeout, tee the
	  console to <build dir>/console.log and parse it as it comes
  parse   re-read a saved console log (a file, or stdin)

Example:
  python3 -m nsboot run                  # 'before' module, base+debug config
  python3 -m nsboot parse kernel-boot/test_data/real_before_tcg.log

The last line is 'nsboot: <STATUS>: <reason>'.  Exit status 0 only for
SUCCESS; 1 for CONFIG_FAILURE, BUILD_FAILURE, BOOT_FAILURE, SPLAT or
TEST_FAILURE; 2 for bad usage.

Callers that know what is tested (nestsleep.boot: make boottest, make
runtime-proof) run these stages through entry(['run', ...]) in their own
process; nsboot imports nothing of theirs.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional, Sequence, TextIO, Tuple

from nsboot import config as nsboot_config
from nsboot import kernel as nsboot_kernel
from nsboot import parser as nsboot_parser
from nsboot.parser import Status, TestStatus


@dataclass
class ConfigRequest:
	"""What to configure: the tree, the fragments, the build dir."""
	kdir: str
	fragments: List[str]
	kconfig_add: List[str]
	arch: str = 'x86_64'
	build_dir: Optional[str] = None
	lockdep: bool = False


@dataclass
class BuildRequest(ConfigRequest):
	"""What to build: the kernel, and the test module variant."""
	jobs: int = 2
	module: bool = True
	variant: str = 'before'
	variant_file: Optional[str] = None
	variant_runner: Optional[str] = None


@dataclass
class ExecRequest(BuildRequest):
	"""How to boot."""
	timeout: float = 900.0
	accel: str = 'tcg'
	memory: int = 512
	smp: int = 2
	rounds: Optional[int] = None
	bound_ms: Optional[int] = None
	jitter_us: Optional[int] = None
	only: Optional[str] = None
	unfixed: Optional[str] = None
	append: str = ''
	log: Optional[str] = None
	raw_output: bool = False
	test_script: Optional[str] = None
	tree_modules: bool = False
	exercise_bins: Sequence[str] = ()
	json_path: Optional[str] = None


@dataclass
class Result:
	"""The outcome of a stage: a Status, a one-line reason, the time taken."""
	status: Status
	reason: str = ''
	elapsed: float = 0.0
	boot: Optional[nsboot_parser.BootResult] = None
	extra: Dict[str, object] = field(default_factory=dict)


def stamp(msg: str) -> None:
	"""Print msg after a [HH:MM:SS] time stamp, as kunit.py does."""
	print(time.strftime('[%H:%M:%S] ') + msg, flush=True)


# ---------------------------------------------------------------------------
# Setup shared by the stages

def _tree(req: ConfigRequest) -> nsboot_kernel.LinuxSourceTree:
	arch = nsboot_kernel.load_arch(req.arch)
	names = list(req.fragments) + (['lockdep'] if req.lockdep and 'lockdep' not in req.fragments else [])
	request = nsboot_config.load_fragments(names, req.kconfig_add)
	label = nsboot_config.fragment_names(names) + ('+cmdline' if req.kconfig_add else '')
	build_dir = req.build_dir or nsboot_kernel.default_build_dir(req.kdir, request, arch, label)
	return nsboot_kernel.LinuxSourceTree(req.kdir, build_dir, request, arch,
					     getattr(req, 'jobs', 2))


def _guard(status: Status, fn: Callable[[], Result]) -> Result:
	"""Run a stage; turn the harness's own errors into a Result."""
	t0 = time.monotonic()
	try:
		res = fn()
	except nsboot_config.KconfigParseError as e:
		res = Result(Status.CONFIG_FAILURE, str(e))
	except nsboot_kernel.ConfigError as e:
		res = Result(Status.CONFIG_FAILURE, str(e))
	except nsboot_kernel.BuildError as e:
		res = Result(Status.BUILD_FAILURE, str(e))
	except nsboot_kernel.BootError as e:
		res = Result(Status.BOOT_FAILURE, str(e))
	except OSError as e:
		res = Result(status, f'{e.filename or ""}: {e.strerror}' if e.strerror else str(e))
	if not res.elapsed:
		res.elapsed = time.monotonic() - t0
	return res


# ---------------------------------------------------------------------------
# The stages

def config_stage(req: ConfigRequest) -> Result:
	"""tinyconfig + fragments, merged and checked."""
	def body() -> Result:
		tree = _tree(req)
		stamp(f'Configuring kernel in {tree.build_dir} ...')
		tree.build_config()
		return Result(Status.SUCCESS, f'{len(tree.request)} requested symbols present',
			      extra={'build_dir': tree.build_dir})
	return _guard(Status.CONFIG_FAILURE, body)


def build_stage(req: BuildRequest) -> Result:
	"""make the kernel (incremental), then the test module."""
	def body() -> Result:
		tree = _tree(req)
		tree.check_tree()
		if tree.generated_config() is None:
			raise nsboot_kernel.ConfigError(f'no .config in {tree.build_dir} (run python3 -m nsboot config first)')
		stamp(f'Building kernel in {tree.build_dir} ...')
		t0 = time.monotonic()
		tree.build_kernel()
		kernel_time = time.monotonic() - t0
		stamp(f'Kernel built in {kernel_time:.1f}s: {tree.kernel_image()}')
		extra: Dict[str, object] = {'kernel_build_s': round(kernel_time, 1), 'build_dir': tree.build_dir}
		if req.module:
			stamp(f'Building test module ({req.variant}) ...')
			t1 = time.monotonic()
			ko = tree.build_module(req.variant, req.variant_file, req.variant_runner)
			extra['module_build_s'] = round(time.monotonic() - t1, 1)
			stamp(f'Module built in {extra["module_build_s"]}s: {ko}')
		return Result(Status.SUCCESS, 'built', extra=extra)
	return _guard(Status.BUILD_FAILURE, body)


class LivePrinter:
	"""Prints KTAP results and splat titles while the guest runs."""

	def __init__(self, parser: nsboot_parser.LogParser, raw: bool) -> None:
		self.parser = parser
		self.raw = raw
		self.shown = 0

	def __call__(self, line: str) -> bool:
		event, clean = self.parser.feed(line)
		if self.raw:
			return event == 'end'
		splats = self.parser.splat.splats
		while self.shown < len(splats) and splats[self.shown].closed:
			stamp('  splat: ' + splats[self.shown].title)
			self.shown += 1
		if event == 'result':
			stamp('  ' + clean.strip())
		elif event in ('init', 'end'):
			stamp('  ' + clean.strip())
		elif clean.startswith('Kernel panic'):
			stamp('  ' + clean.strip())
		return event == 'end'


def exec_stage(req: ExecRequest) -> Result:
	"""Boot the built kernel under QEMU and parse the console as it comes."""
	def body() -> Result:
		tree = _tree(req)
		kernel = tree.kernel_image()
		if not os.path.isfile(kernel):
			return Result(Status.BUILD_FAILURE, f'no kernel image at {kernel} (run python3 -m nsboot build first)')
		ko = None
		if req.module:
			ko = tree.module_path(req.variant)
			if not os.path.isfile(ko):
				return Result(Status.BUILD_FAILURE, f'no test module at {ko} (run python3 -m nsboot build first)')
			if tree.module_is_stale(req.variant):
				stamp(f'warning: {ko} is older than kernel-boot/module/ (run python3 -m nsboot build)')
		nsboot_kernel.qemu_binary(tree.arch)	# fail early when QEMU is missing
		accel = req.accel
		if accel == 'auto':
			ok, why = nsboot_kernel.kvm_probe(tree.arch, kernel)
			accel = 'kvm' if ok else 'tcg'
			stamp(f'KVM probe: {why}; using {accel.upper()}')
		initrd = os.path.join(tree.build_dir, nsboot_kernel.INITRAMFS_PATH)
		extra: List[Tuple[str, str]] = []
		if req.tree_modules:
			release, extra = tree.tree_modules()
			n = sum(1 for name, _ in extra if name.endswith('.ko'))
			stamp(f'The kernel\'s own modules go in /lib/modules/{release}: {n} .ko')
		for src in req.exercise_bins:
			name, binary = nsboot_kernel.build_exercise_bin(src, tree.build_dir)
			extra.append((name, binary))
			stamp(f'Exerciser program {src} goes in /{name}')
		size = nsboot_kernel.make_initramfs(initrd, ko, req.test_script, extra_files=extra)
		stamp(f'Wrote {initrd} ({size // 1024} KiB: busybox, /init'
		      f'{", " + os.path.basename(ko) if ko else ""}{", test.sh" if req.test_script else ""}'
		      f'{", the kernel modules" if extra else ""})')
		append = ['panic=-1', 'oops=panic', 'printk.devkmsg=on']
		if req.rounds is not None:
			append.append(f'nsboot_rounds={req.rounds}')
		if req.bound_ms is not None:
			append.append(f'nsboot_bound_ms={req.bound_ms}')
		if req.jitter_us is not None:
			append.append(f'nsboot_jitter_us={req.jitter_us}')
		if req.only:
			append.append(f'nsboot_only={req.only}')
		if req.unfixed:
			append.append(f'nsboot_unfixed={req.unfixed}')
		if req.append:
			append.append(req.append)
		cmd = nsboot_kernel.qemu_command(tree.arch, kernel, initrd, ' '.join(append),
						 accel, req.memory, req.smp)
		log = req.log or os.path.join(tree.build_dir, nsboot_kernel.OUTFILE_PATH)
		stamp(f'Starting kernel ({accel.upper()}, timeout {req.timeout:.0f}s, console -> {log}) ...')
		parser = nsboot_parser.LogParser()
		out = nsboot_kernel.run_qemu(cmd, log, req.timeout, LivePrinter(parser, req.raw_output),
					     accel=accel, echo=req.raw_output)
		boot = parser.finish(timed_out=out.timed_out)
		if out.timed_out:
			boot.reason = f'{boot.reason} [QEMU killed after {req.timeout:.0f}s]'
		if out.killed_after_end and boot.status == Status.SUCCESS:
			boot.status = Status.BOOT_FAILURE
			boot.reason = 'the guest ended its tests but did not shut down (QEMU killed)'
		res = Result(boot.status, boot.reason, out.elapsed, boot,
			     extra={'boot_s': round(out.elapsed, 1), 'accel': accel, 'log': log,
				    'qemu_exit': out.exit_code})
		return res
	return _guard(Status.BOOT_FAILURE, body)


def parse_stage(path: Optional[str]) -> Result:
	"""Re-read a saved console log (a file, or stdin for '-' or no file)."""
	def body() -> Result:
		if path and path != '-':
			with open(path, encoding='utf-8', errors='replace') as f:
				boot = nsboot_parser.parse_log(f)
		else:
			if sys.stdin.isatty():
				return Result(Status.BOOT_FAILURE, 'parse: give a console log file, or pipe one in')
			boot = nsboot_parser.parse_log(sys.stdin)
		return Result(boot.status, boot.reason, boot=boot)
	return _guard(Status.BOOT_FAILURE, body)


# ---------------------------------------------------------------------------
# Output

def print_boot(boot: nsboot_parser.BootResult, out: Optional[TextIO] = None) -> None:
	"""The human summary of a parsed boot: tests, splats, counts."""
	out = out or sys.stdout
	def p(msg: str) -> None:
		print(time.strftime('[%H:%M:%S] ') + msg, file=out, flush=True)

	for doc in boot.documents:
		n = len(doc.subtests)
		p(f'{"=" * 10} {", ".join(boot.modules) or doc.name} ({n} tests) {"=" * 10}')
		for t in doc.leaves():
			if t is doc:
				continue
			tag = {TestStatus.SUCCESS: '[PASSED]', TestStatus.FAILURE: '[FAILED]',
			       TestStatus.SKIPPED: '[SKIPPED]', TestStatus.TEST_CRASHED: '[CRASHED]'}.get(t.status, '[?]')
			splats = ''
			if t.splats:
				exp = sum(1 for s in t.splats if s.expected)
				splats = f'  ({len(t.splats)} splat{"s" if len(t.splats) != 1 else ""}, {exp} expected)'
			elif t.expect_splats:
				splats = f'  (MISSING expected splat: {t.expect_splats[0]})'
			p(f'{tag} {t.name}{splats}')
			if t.status in (TestStatus.FAILURE, TestStatus.TEST_CRASHED):
				for line in t.log:
					if line.strip().startswith('#') and 'expect-splat' not in line:
						p('    ' + line.strip())
	for err in boot.ktap_errors:
		p('[ERROR] ' + err)
	c = boot.counts
	if c.total():
		p('Testing complete. ' + str(c))
	exp, unexp = boot.expected_splats(), boot.unexpected_splats()
	missing = boot.missing_expected()
	p(f'Splats: {len(boot.splats)} ({len(exp)} expected, {len(unexp)} unexpected, '
	  f'{len(missing)} expected but missing)')
	for title, n in sorted(boot.splat_counts().items()):
		kinds = {('expected' if s.expected else 'UNEXPECTED') for s in boot.splats if s.title == title}
		p(f'  {n}x {title} [{"/".join(sorted(kinds))}]')
	for test, text in missing:
		p(f'  missing in {test}: {text}')


def write_json(path: str, results: Dict[str, Result], final: Result) -> None:
	"""Write a machine-readable record of the run."""
	doc: Dict[str, object] = {
		'status': final.status.value,
		'reason': final.reason,
		'stages': {k: {'status': v.status.value, 'reason': v.reason,
			       'elapsed_s': round(v.elapsed, 1), **v.extra} for k, v in results.items()},
	}
	if final.boot is not None:
		doc['boot'] = final.boot.to_json()
	with open(path, 'w') as f:
		json.dump(doc, f, indent=1)
		f.write('\n')


def finish(results: Dict[str, Result], json_path: Optional[str] = None) -> int:
	"""Print the elapsed times and the final 'nsboot: STATUS: reason' line."""
	final = list(results.values())[-1]
	for r in results.values():
		if r.status != Status.SUCCESS:
			final = r
			break
	if len(results) > 1 or 'exec' in results:
		stamp('Elapsed time: ' + ', '.join(f'{v.elapsed:.1f}s {k}' for k, v in results.items()))
	if json_path:
		try:
			write_json(json_path, results, final)
		except OSError as e:
			print(f'nsboot: cannot write {json_path}: {e.strerror}', file=sys.stderr)
	reason = final.reason.splitlines()
	if len(reason) > 1:
		for line in reason[1:]:
			print(line)
	print(f'nsboot: {final.status.value}: {reason[0] if reason else ""}', flush=True)
	return 0 if final.status == Status.SUCCESS else 1


# ---------------------------------------------------------------------------
# Command line

def add_common_opts(p: argparse.ArgumentParser) -> None:
	"""Options for every stage that touches the tree."""
	p.add_argument('--kdir', default=nsboot_kernel.default_kdir(),
		       help='kernel tree, only read (default: %(default)s)')
	p.add_argument('--build_dir', '--build-dir', dest='build_dir',
		       help='build dir (default: cached, keyed by tree and config)')
	p.add_argument('--arch', default='x86_64', help='qemu_configs/<arch>.py (default: %(default)s)')
	p.add_argument('--fragment', '--kunitconfig', dest='fragments', action='append',
		       help='a config fragment: a name in configs/ or a file; repeatable '
		       '(default: ' + ' '.join(nsboot_config.DEFAULT_FRAGMENTS) + ')')
	p.add_argument('--kconfig_add', '--kconfig-add', dest='kconfig_add', action='append', default=[],
		       help='one more symbol, e.g. CONFIG_MD_RAID456=y; repeatable')
	p.add_argument('--lockdep', action='store_true', help='add configs/lockdep.config (PROVE_LOCKING; already in the default set)')


def add_build_opts(p: argparse.ArgumentParser) -> None:
	"""Options for building."""
	p.add_argument('--jobs', '-j', type=int, default=2, help='make -j (default: %(default)s)')
	add_module_opts(p)


def add_module_opts(p: argparse.ArgumentParser) -> None:
	"""Which test module to build or boot."""
	p.add_argument('--no-module', dest='module', action='store_false', help='boot without the test module')
	p.add_argument('--variant', default='before',
		       help="the module's wait bodies: 'before' (module/before.c) or a generated one")
	p.add_argument('--variant-file', '--variant_file', dest='variant_file',
		       help='the generated wait bodies (e.g. after.c from nestsleep MODE=patch)')
	p.add_argument('--variant-runner', '--variant_runner', dest='variant_runner',
		       help='a generated nestsleep_test.c (MODE=patch converts its wake_up_process() wakers)')


def add_exec_opts(p: argparse.ArgumentParser) -> None:
	"""Options for booting."""
	p.add_argument('--timeout', type=float, default=900, help='hard timeout in seconds (default: %(default)s)')
	p.add_argument('--accel', choices=('tcg', 'kvm', 'auto'), default='tcg',
		       help='tcg (default), kvm, or auto (probe KVM with a short timeout)')
	p.add_argument('--memory', '-m', type=int, default=512, help='MiB (default: %(default)s)')
	p.add_argument('--smp', type=int, default=2, help='CPUs (default: %(default)s)')
	p.add_argument('--rounds', type=int, help='stress rounds per case (module default 10000)')
	p.add_argument('--bound-ms', '--bound_ms', dest='bound_ms', type=int,
		       help='a wakeup later than this is lost (module default 1000)')
	p.add_argument('--jitter-us', '--jitter_us', dest='jitter_us', type=int,
		       help='stress: random delay before each wake, 0..N us (module default 0)')
	p.add_argument('--only', help='comma-separated module cases; a trailing * matches a prefix')
	p.add_argument('--unfixed', help='comma-separated before.c functions MODE=patch left alone '
		       '(their cases expect the warning in the after form too)')
	p.add_argument('--append', default='', help='more kernel command line')
	p.add_argument('--log', help='console log path (default: <build dir>/console.log)')
	p.add_argument('--raw_output', '--raw-output', dest='raw_output', action='store_true',
		       help='print the whole console as it comes')
	p.add_argument('--test-script', '--test_script', dest='test_script',
		       help='a shell script the guest runs as /nsboot/test.sh')
	p.add_argument('--tree-modules', '--tree_modules', dest='tree_modules', action='store_true',
		       help="put the kernel's own modules (CONFIG_X=m) in the initramfs, in "
		       '/lib/modules/<release>; /init runs depmod, so the test script can modprobe them')
	p.add_argument('--exercise-bin', '--exercise_bin', dest='exercise_bins', action='append', default=[],
		       help='a C program (kernel-boot/exercise/NAME.c), built static with the host gcc '
		       'and put in the initramfs as /nsboot/bin/NAME, on the test script\'s PATH; repeatable')
	p.add_argument('--json', dest='json_path', help='write the results as JSON here')


class Parser(argparse.ArgumentParser):
	"""A bad option: one line on stderr and exit 2, not the usage block."""

	def error(self, message):
		sys.stderr.write(f'{self.prog}: error: {message} (see --help)\n')
		sys.exit(2)


def make_parser() -> argparse.ArgumentParser:
	"""The nsboot argument parser."""
	ap = Parser(prog='nsboot', description=__doc__.split('\n\n')[0],
				     formatter_class=argparse.RawDescriptionHelpFormatter)
	sub = ap.add_subparsers(dest='subcommand', metavar='{run,config,build,exec,parse}')
	run = sub.add_parser('run', help='config + build + exec + parse')
	add_common_opts(run)
	add_build_opts(run)
	add_exec_opts(run)
	cfg = sub.add_parser('config', help='write and check the .config')
	add_common_opts(cfg)
	bld = sub.add_parser('build', help='build the kernel and the test module')
	add_common_opts(bld)
	add_build_opts(bld)
	exe = sub.add_parser('exec', help='boot the built kernel in QEMU and parse its console')
	add_common_opts(exe)
	add_module_opts(exe)
	add_exec_opts(exe)
	prs = sub.add_parser('parse', help='parse a saved console log (a file, or stdin)')
	prs.add_argument('file', nargs='?', help='console log; stdin if absent or -')
	prs.add_argument('--json', dest='json_path', help='write the results as JSON here')
	prs.add_argument('--quiet', '-q', action='store_true', help='only the final line')
	return ap


def _fragments(ns: argparse.Namespace) -> List[str]:
	return ns.fragments if ns.fragments else list(nsboot_config.DEFAULT_FRAGMENTS)


def main(argv: Sequence[str]) -> int:
	"""Run one subcommand; return the exit status."""
	ns = make_parser().parse_args(argv)
	if not ns.subcommand:
		make_parser().print_help()
		return 2
	results: Dict[str, Result] = {}
	if ns.subcommand == 'parse':
		r = parse_stage(ns.file)
		results['parse'] = r
		if r.boot is not None and not ns.quiet:
			print_boot(r.boot)
		return finish(results, ns.json_path)

	common = dict(kdir=ns.kdir, fragments=_fragments(ns), kconfig_add=ns.kconfig_add,
		      arch=ns.arch, build_dir=ns.build_dir, lockdep=ns.lockdep)
	if ns.subcommand == 'config':
		results['config'] = config_stage(ConfigRequest(**common))
		return finish(results)
	module = dict(module=ns.module, variant=ns.variant, variant_file=ns.variant_file,
		      variant_runner=ns.variant_runner)
	if ns.subcommand == 'build':
		results['build'] = build_stage(BuildRequest(**common, jobs=ns.jobs, **module))
		return finish(results)
	execopts = dict(timeout=ns.timeout, accel=ns.accel, memory=ns.memory, smp=ns.smp,
			rounds=ns.rounds, bound_ms=ns.bound_ms, jitter_us=ns.jitter_us, only=ns.only,
			unfixed=getattr(ns, 'unfixed', None), append=ns.append,
			log=ns.log, raw_output=ns.raw_output, test_script=ns.test_script,
			tree_modules=ns.tree_modules, exercise_bins=ns.exercise_bins, json_path=ns.json_path)
	if ns.subcommand == 'exec':
		req = ExecRequest(**common, **module, **execopts)
		results['exec'] = exec_stage(req)
	else:
		req = ExecRequest(**common, jobs=ns.jobs, **module, **execopts)
		for name, fn in (('config', config_stage), ('build', build_stage), ('exec', exec_stage)):
			results[name] = fn(req)	# type: ignore[operator]
			if results[name].status != Status.SUCCESS and name != 'exec':
				break
	boot = results.get('exec', Result(Status.SUCCESS)).boot
	if boot is not None:
		print_boot(boot)
	return finish(results, ns.json_path)


def entry(argv: Sequence[str]) -> int:
	"""main() for a user: an interrupt or an internal error is one line."""
	try:
		return main(argv)
	except KeyboardInterrupt:
		print('nsboot: interrupted', file=sys.stderr)
		return 130
	except Exception as e:	# never a traceback for the user; NSBOOT_DEBUG=1 shows it
		if os.environ.get('NSBOOT_DEBUG'):
			raise
		print(f'nsboot: internal error: {type(e).__name__}: {e} (NSBOOT_DEBUG=1 shows the traceback)',
		      file=sys.stderr)
		return 1

