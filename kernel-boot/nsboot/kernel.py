# SPDX-License-Identifier: GPL-2.0-only
#
# Configures and builds the kernel (always out of tree, with O=), builds the
# test module out of the repository, writes the busybox initramfs, and runs
# QEMU with a hard timeout while teeing the console to a log file.
#
# Modelled on the kernel's tools/testing/kunit/kunit_kernel.py.

"""Kernel tree operations for nsboot: config, build, module, initramfs, QEMU."""

from __future__ import annotations

import gzip
import hashlib
import importlib.util
import io
import json
import os
import queue
import re
import shlex
import shutil
import signal
import stat
import struct
import subprocess
import threading
import time
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from nsboot import HARNESS, cache_dir, cache_root
from nsboot import config as nsboot_config
from nsboot.qemu_config import QemuArchParams

QEMU_CONFIGS_DIR = os.path.join(HARNESS, 'qemu_configs')
MODULE_SRC_DIR = os.path.join(HARNESS, 'module')
MODULE_SOURCES = ('Kbuild', 'nst.h', 'nestsleep_test.c', 'before.c')
MODULE_NAME = 'nestsleep_tests'
KCONFIG_PATH = '.config'
REQUEST_PATH = 'nsboot.request'		# the last request, as a fragment
FRAGMENT_PATH = 'nsboot.fragment.config'	# what merge_config.sh merged
BUILD_LOG = 'build.log'
OUTFILE_PATH = 'console.log'
INITRAMFS_PATH = 'nsboot-initramfs.cpio.gz'
BUSYBOX = '/bin/busybox'
BUSYBOX_APPLETS = ('sh', 'mount', 'umount', 'echo', 'cat', 'insmod', 'rmmod', 'lsmod',
		   'modprobe', 'reboot', 'poweroff', 'sleep', 'uname', 'dmesg', 'mkdir', 'ls',
		   'true', 'false', 'test', '[', 'printf', 'grep', 'sed', 'tr', 'sync', 'cp',
		   'mknod', 'dd', 'wc', 'head', 'tail', 'env', 'date', 'seq', 'kill', 'timeout',
		   'depmod', 'ip', 'rmdir', 'rm', 'cut', 'awk', 'expr', 'ps', 'touch')
INITRAMFS_DIRS = ('bin', 'sbin', 'dev', 'proc', 'sys', 'tmp', 'etc', 'root', 'nsboot')
MODULES_ORDER = 'modules.order'
KERNEL_RELEASE = os.path.join('include', 'config', 'kernel.release')
# what modules_install copies besides the .ko files; busybox depmod in the
# guest writes modules.dep from the .ko files themselves
MODULES_META = ('modules.order', 'modules.builtin', 'modules.builtin.modinfo')


class ConfigError(Exception):
	"""The kernel could not be configured as requested."""


class BuildError(Exception):
	"""The kernel or the test module did not build."""


class BootError(Exception):
	"""QEMU could not be started (not: the kernel did not boot)."""


def default_kdir() -> str:
	"""The kernel tree that 'make setup' unpacks."""
	return os.path.join(cache_dir(), 'linux-source-6.1')


def print_cmd(cmd: Sequence[str], cwd: Optional[str] = None) -> None:
	"""Print a command the way a user would type it.

	Example: '$ make -C /src O=/build -j2'
	"""
	prefix = f'(cd {shlex.quote(cwd)} && ' if cwd else ''
	suffix = ')' if cwd else ''
	print('$ ' + prefix + ' '.join(shlex.quote(c) for c in cmd) + suffix, flush=True)


def run_logged(cmd: Sequence[str], log_path: str, cwd: Optional[str] = None,
	       error: type = BuildError) -> None:
	"""Run cmd, printing it first, with its output appended to log_path.

	Raises error (with the last lines of output) when it fails.
	"""
	print_cmd(cmd, cwd)
	with open(log_path, 'ab') as log:
		log.write(('$ ' + ' '.join(shlex.quote(c) for c in cmd) + '\n').encode())
		log.flush()
		try:
			rc = subprocess.call(list(cmd), stdout=log, stderr=subprocess.STDOUT,
					     stdin=subprocess.DEVNULL, cwd=cwd)
		except OSError as e:
			raise error(f'cannot run {cmd[0]}: {e.strerror}') from None
	if rc != 0:
		raise error(f'{cmd[0]} {" ".join(cmd[1:3])}... failed (exit {rc}); '
			    f'see {log_path}:\n' + error_excerpt(log_path))


def error_excerpt(log_path: str, limit: int = 25) -> str:
	"""The compiler/make error lines of a build log (or its last lines)."""
	try:
		with open(log_path, errors='replace') as f:
			lines = f.read().splitlines()
	except OSError:
		return ''
	errs = [l for l in lines if re.search(r'\berror\b|Error \d|\*\*\*|undefined reference|No rule', l)]
	pick = errs[-limit:] if errs else lines[-limit:]
	return '\n'.join('  ' + l for l in pick)


def load_arch(name_or_path: str) -> QemuArchParams:
	"""An architecture name ('x86_64') or a qemu_configs-style file.

	Raises ConfigError listing the valid names.
	"""
	path = name_or_path
	if not os.path.isfile(path):
		path = os.path.join(QEMU_CONFIGS_DIR, name_or_path + '.py')
	if not os.path.isfile(path):
		options = sorted(f[:-3] for f in os.listdir(QEMU_CONFIGS_DIR) if f.endswith('.py'))
		raise ConfigError(f'{name_or_path} is not a valid arch, options are {options}')
	spec = importlib.util.spec_from_file_location('nsboot_qemu_config_' + os.path.basename(path)[:-3], path)
	assert spec is not None and spec.loader is not None
	mod = importlib.util.module_from_spec(spec)
	spec.loader.exec_module(mod)
	params = getattr(mod, 'QEMU_ARCH', None)
	if not isinstance(params, QemuArchParams):
		raise ConfigError(f'{path} has no QEMU_ARCH = QemuArchParams(...)')
	return params


def tree_version(kdir: str) -> str:
	"""'6.1.192' from the top Makefile's VERSION, PATCHLEVEL, SUBLEVEL and
	EXTRAVERSION lines, or '' when it has none."""
	vals = {}
	try:
		with open(os.path.join(kdir, 'Makefile'), errors='replace') as f:
			for line in f.read(4096).split('\n'):
				m = re.match(r'^(VERSION|PATCHLEVEL|SUBLEVEL|EXTRAVERSION)\s*=\s*(\S*)', line)
				if m:
					vals.setdefault(m.group(1), m.group(2))
	except OSError:
		return ''
	return '.'.join(vals.get(k, '') for k in ('VERSION', 'PATCHLEVEL', 'SUBLEVEL')) + vals.get('EXTRAVERSION', '')


def build_key(kdir: str, request: nsboot_config.Kconfig, arch: QemuArchParams) -> str:
	"""The cache key of a build dir: the tree's path and version (boottest
	hard-links every tree into one path: a build dir left by another
	version breaks the build, objtool first), the arch, the request."""
	h = hashlib.sha256()
	h.update(os.path.realpath(kdir).encode() + b'\0' + tree_version(kdir).encode() + b'\0' +
		 arch.linux_arch.encode() + b'\0')
	h.update(request.to_fragment().encode())
	return h.hexdigest()[:12]


def default_build_dir(kdir: str, request: nsboot_config.Kconfig, arch: QemuArchParams,
		      label: str) -> str:
	"""~/.cache/nestsleep/kernel-boot/build-<label>-<key>."""
	label = re.sub(r'[^A-Za-z0-9_+.-]', '_', label)
	return os.path.join(cache_root(), f'build-{arch.linux_arch}-{label}-{build_key(kdir, request, arch)}')


class LinuxSourceTree:
	"""One kernel tree (only read) and one build directory (O=)."""

	def __init__(self, kdir: str, build_dir: str, request: nsboot_config.Kconfig,
		     arch: QemuArchParams, jobs: int = 2) -> None:
		self.kdir = os.path.abspath(kdir)
		self.build_dir = os.path.abspath(build_dir)
		self.request = request
		self.arch = arch
		self.jobs = jobs

	# -- the tree --------------------------------------------------------
	def check_tree(self) -> None:
		"""Refuse a missing tree, an in-place configured tree, or O= inside it."""
		if not os.path.isfile(os.path.join(self.kdir, 'Makefile')) or \
				not os.path.isfile(os.path.join(self.kdir, 'Kconfig')):
			raise ConfigError(f'no kernel tree at {self.kdir} (run make setup, or pass --kdir)')
		if os.path.exists(os.path.join(self.kdir, '.config')) or \
				os.path.isdir(os.path.join(self.kdir, 'include', 'config')):
			raise ConfigError(f'the tree at {self.kdir} is configured in place; O= builds need a '
					  "clean tree ('make mrproper' there, or use a copy)")
		real_k = os.path.realpath(self.kdir) + os.sep
		if (os.path.realpath(self.build_dir) + os.sep).startswith(real_k):
			raise ConfigError(f'the build dir {self.build_dir} is inside the tree; nsboot never '
					  'writes into the tree')

	def _make(self, *args: str, log: Optional[str] = None, error: type = BuildError) -> None:
		cmd = ['make', '-C', self.kdir, 'O=' + self.build_dir, 'ARCH=' + self.arch.linux_arch] + list(args)
		run_logged(cmd, log or os.path.join(self.build_dir, BUILD_LOG), error=error)

	# -- config ----------------------------------------------------------
	def generated_config(self) -> Optional[nsboot_config.Kconfig]:
		"""The build dir's .config, parsed (None if there is none)."""
		path = os.path.join(self.build_dir, KCONFIG_PATH)
		if not os.path.isfile(path):
			return None
		return nsboot_config.parse_file(path)

	def validate_config(self) -> nsboot_config.ConfigCheck:
		"""Check the .config against the request; explain what is missing."""
		gen = self.generated_config()
		if gen is None:
			raise ConfigError(f'no .config in {self.build_dir}')
		return nsboot_config.check_config(
			self.request, gen,
			tree_factory=lambda: nsboot_config.KconfigTree(self.kdir, self.arch.srcarch))

	def config_is_current(self) -> bool:
		"""True when the .config came from this very request and still holds it."""
		try:
			with open(os.path.join(self.build_dir, REQUEST_PATH)) as f:
				old = f.read()
		except OSError:
			return False
		gen = self.generated_config()
		return old == self.request.to_fragment() and gen is not None and self.request.is_subset_of(gen)

	def build_config(self) -> None:
		"""tinyconfig + the fragments (merge_config.sh) + olddefconfig, then check.

		Raises ConfigError naming each missing symbol and its unmet dependencies.
		"""
		self.check_tree()
		os.makedirs(self.build_dir, exist_ok=True)
		if self.config_is_current():
			print(f'Config is up to date ({os.path.join(self.build_dir, KCONFIG_PATH)})')
			return
		log = os.path.join(self.build_dir, 'config.log')
		if os.path.exists(log):
			os.unlink(log)
		try:
			os.unlink(os.path.join(self.build_dir, REQUEST_PATH))
		except FileNotFoundError:
			pass
		self._make('tinyconfig', log=log, error=ConfigError)
		frag = os.path.join(self.build_dir, FRAGMENT_PATH)
		with open(frag, 'w') as f:
			f.write(self.request.to_fragment())
		merge = os.path.join(self.kdir, 'scripts', 'kconfig', 'merge_config.sh')
		run_logged(['sh', merge, '-m', '-O', self.build_dir,
			    os.path.join(self.build_dir, KCONFIG_PATH), frag],
			   log, cwd=self.build_dir, error=ConfigError)
		self._make('olddefconfig', log=log, error=ConfigError)
		check = self.validate_config()
		if not check.ok:
			raise ConfigError(check.summary() + ' (unmet dependencies, see above)\n' + check.message())
		with open(os.path.join(self.build_dir, REQUEST_PATH), 'w') as f:
			f.write(self.request.to_fragment())

	# -- build -----------------------------------------------------------
	def kernel_image(self) -> str:
		"""The bootable image in the build dir."""
		return os.path.join(self.build_dir, self.arch.kernel_path)

	def build_kernel(self) -> None:
		"""make -jN in the build dir (incremental); then re-check the config."""
		log = os.path.join(self.build_dir, BUILD_LOG)
		if os.path.exists(log):
			os.unlink(log)
		self._make('-j' + str(self.jobs), log=log)
		if not os.path.isfile(self.kernel_image()):
			raise BuildError(f'make succeeded but there is no {self.kernel_image()}')
		check = self.validate_config()
		if not check.ok:
			raise ConfigError(check.summary() + ' (unmet dependencies, see above)\n' + check.message())

	def module_dir(self, variant: str) -> str:
		"""Where the module is built: the cache, never the repository."""
		return os.path.join(cache_root(), 'module-build',
				    f'{os.path.basename(self.build_dir)}-{variant}')

	def module_path(self, variant: str) -> str:
		"""The built .ko of a variant."""
		return os.path.join(self.module_dir(variant), MODULE_NAME + '.ko')

	def module_is_stale(self, variant: str) -> bool:
		"""True when a module source in the repository is newer than the built .ko."""
		try:
			built = os.path.getmtime(self.module_path(variant))
		except OSError:
			return True
		return any(os.path.getmtime(os.path.join(MODULE_SRC_DIR, n)) > built for n in MODULE_SOURCES)

	def build_module(self, variant: str = 'before', variant_file: Optional[str] = None,
			 variant_runner: Optional[str] = None) -> str:
		"""Copy the module source into the cache and build it there (M=).

		variant 'before' links module/before.c; any other variant links
		variant_file (e.g. the after.c that nestsleep MODE=patch wrote),
		copied in as <variant>.c.  Returns the .ko path.
		"""
		if not re.fullmatch(r'[A-Za-z][A-Za-z0-9_]*', variant):
			raise BuildError(f'bad variant name {variant!r} (letters, digits, _)')
		if variant != 'before' and not variant_file:
			cand = os.path.join(MODULE_SRC_DIR, variant + '.c')
			if not os.path.isfile(cand):
				raise BuildError(f'variant {variant!r} needs --variant-file (the generated {variant}.c)')
			variant_file = cand
		if variant_file and not os.path.isfile(variant_file):
			raise BuildError(f'no variant file {variant_file}')
		mdir = self.module_dir(variant)
		os.makedirs(mdir, exist_ok=True)
		sources: Dict[str, str] = {n: os.path.join(MODULE_SRC_DIR, n) for n in MODULE_SOURCES}
		if variant_file:
			sources[variant + '.c'] = variant_file
		if variant_runner:
			# the runner with its wakers converted by MODE=patch
			if not os.path.isfile(variant_runner):
				raise BuildError(f'no variant runner {variant_runner}')
			sources['nestsleep_test.c'] = variant_runner
		for name, src in sources.items():
			_sync_file(src, os.path.join(mdir, name))
		log = os.path.join(mdir, BUILD_LOG)
		if os.path.exists(log):
			os.unlink(log)
		self._make('M=' + mdir, 'NST_VARIANT=' + variant, '-j' + str(self.jobs), 'modules', log=log)
		ko = self.module_path(variant)
		if not os.path.isfile(ko):
			raise BuildError(f'make succeeded but there is no {ko}')
		return ko

	def tree_modules(self) -> Tuple[str, List[Tuple[str, str]]]:
		"""The kernel's own modules (CONFIG_X=m), as modules_install lays them out.

		Returns (kernel release, [(path in the initramfs, file in the build
		dir)]): lib/modules/<release>/kernel/<path>.ko for each module of
		modules.order, and the modules.* lists next to them.  Raises
		BuildError when the build dir has no modules.order or a listed .ko
		is missing (the kernel was not built).
		"""
		try:
			with open(os.path.join(self.build_dir, KERNEL_RELEASE)) as f:
				release = f.read().strip()
			with open(os.path.join(self.build_dir, MODULES_ORDER)) as f:
				order = [l.strip() for l in f if l.strip()]
		except OSError as e:
			raise BuildError(f'{e.filename}: {e.strerror} (build the kernel first)') from None
		base = f'lib/modules/{release}'
		files: List[Tuple[str, str]] = []
		for rel in order:
			rel = re.sub(r'^kernel/', '', rel)
			if rel.endswith('.o'):	# 6.2 and later list the objects
				rel = rel[:-2] + '.ko'
			ko = os.path.join(self.build_dir, rel)
			if not os.path.isfile(ko):
				raise BuildError(f'{MODULES_ORDER} lists {rel}, but there is no {ko}')
			files.append((f'{base}/kernel/{rel}', ko))
		for name in MODULES_META:
			path = os.path.join(self.build_dir, name)
			if os.path.isfile(path):
				files.append((f'{base}/{name}', path))
		return release, files


def _sync_file(src: str, dst: str) -> None:
	"""Copy src to dst only when the content differs (keeps make incremental)."""
	with open(src, 'rb') as f:
		data = f.read()
	try:
		with open(dst, 'rb') as f:
			if f.read() == data:
				return
	except OSError:
		pass
	with open(dst, 'wb') as f:
		f.write(data)


# ---------------------------------------------------------------------------
# The initramfs

class CpioWriter:
	"""Writes a 'newc' cpio archive, as the kernel's initramfs unpacker reads it.

	Written in Python so that device nodes need no root and the archive is
	byte-for-byte reproducible (fixed inode numbers, mtime 0).
	"""

	def __init__(self, out: io.BufferedIOBase) -> None:
		self.out = out
		self.ino = 1000
		self.pos = 0

	def _write(self, b: bytes) -> None:
		self.out.write(b)
		self.pos += len(b)

	def _pad(self) -> None:
		self._write(b'\0' * (-self.pos % 4))

	def entry(self, name: str, mode: int, data: bytes = b'', rdev: Tuple[int, int] = (0, 0),
		  nlink: int = 1) -> None:
		"""One archive member; name is relative ('bin/sh')."""
		self.ino += 1
		bname = name.encode() + b'\0'
		fields = (self.ino, mode, 0, 0, nlink, 0, len(data), 0, 0, rdev[0], rdev[1], len(bname), 0)
		self._write(b'070701' + ''.join('%08X' % v for v in fields).encode())
		self._write(bname)
		self._pad()
		self._write(data)
		self._pad()

	def directory(self, name: str, mode: int = 0o755) -> None:
		"""A directory."""
		self.entry(name, stat.S_IFDIR | mode, nlink=2)

	def file(self, name: str, data: bytes, mode: int = 0o644) -> None:
		"""A regular file."""
		self.entry(name, stat.S_IFREG | mode, data)

	def symlink(self, name: str, target: str) -> None:
		"""A symbolic link."""
		self.entry(name, stat.S_IFLNK | 0o777, target.encode())

	def chardev(self, name: str, major: int, minor: int, mode: int = 0o600) -> None:
		"""A character device node."""
		self.entry(name, stat.S_IFCHR | mode, rdev=(major, minor))

	def trailer(self) -> None:
		"""The end of the archive."""
		self.ino = 0
		self.entry('TRAILER!!!', 0, nlink=1)
		self._write(b'\0' * (-self.pos % 512))


def is_static_elf(path: str) -> bool:
	"""True when path is an ELF executable with no PT_INTERP (no dynamic loader)."""
	with open(path, 'rb') as f:
		head = f.read(64)
		if head[:4] != b'\x7fELF':
			return False
		is64 = head[4] == 2
		end = '<' if head[5] == 1 else '>'
		if is64:
			phoff, = struct.unpack(end + 'Q', head[32:40])
			phentsize, phnum = struct.unpack(end + 'HH', head[54:58])
		else:
			phoff, = struct.unpack(end + 'I', head[28:32])
			phentsize, phnum = struct.unpack(end + 'HH', head[42:46])
		for i in range(phnum):
			f.seek(phoff + i * phentsize)
			p_type, = struct.unpack(end + 'I', f.read(4))
			if p_type == 3:	# PT_INTERP
				return False
	return True


INIT_SCRIPT = r'''#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only
# nsboot's /init (generated by kernel-boot/nsboot/kernel.py): mount the
# pseudo file systems, run the test module one case at a time (resetting
# WARN_ONCE in between), run /nsboot/test.sh if there is one, print the end
# marker and end the VM (reboot -f; QEMU runs with -no-reboot).
# Markers go through /dev/kmsg so they stay in order with kernel messages.
export PATH=/nsboot/bin:/bin:/sbin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev 2>/dev/null
mount -t debugfs debugfs /sys/kernel/debug 2>/dev/null
say() {
	if [ -w /dev/kmsg ]; then echo "nsboot: $*" > /dev/kmsg; else echo "nsboot: $*"; fi
}
say "init started"
rc=0
# the kernel's own modules, if the initramfs has them: modprobe needs modules.dep
if [ -d /lib/modules ]; then
	depmod || say "depmod failed"
fi
MOD=/nsboot/@MODULE@.ko
if [ -f $MOD ]; then
	say "module @MODULE@"
	set --
	[ -n "$nsboot_rounds" ] && set -- "$@" rounds=$nsboot_rounds
	[ -n "$nsboot_bound_ms" ] && set -- "$@" bound_ms=$nsboot_bound_ms
	[ -n "$nsboot_jitter_us" ] && set -- "$@" jitter_us=$nsboot_jitter_us
	[ -n "$nsboot_only" ] && set -- "$@" "only=$nsboot_only"
	[ -n "$nsboot_unfixed" ] && set -- "$@" "unfixed=$nsboot_unfixed"
	if insmod $MOD "$@"; then
		P=/sys/module/@MODULE@/parameters
		for c in $(cat $P/cases); do
			if [ -w /sys/kernel/debug/clear_warn_once ]; then
				echo 1 > /sys/kernel/debug/clear_warn_once
			fi
			echo "$c" > $P/run || rc=1
		done
		rmmod @MODULE@ || rc=1
	else
		say "insmod failed"
		rc=1
	fi
fi
if [ -x /nsboot/test.sh ]; then
	say "running /nsboot/test.sh"
	/nsboot/test.sh || rc=1
fi
say "end rc=$rc"
reboot -f
# Only if the reboot failed: init exits, the kernel panics, panic=-1 reboots.
exit 1
'''


EXERCISE_BIN_DIR = 'nsboot/bin'


def build_exercise_bin(src: str, build_dir: str) -> Tuple[str, str]:
	"""Build the exerciser program src (one .c file) static with the host's
	gcc, in build_dir/exercise-bin; (its path in the initramfs, the binary).
	The guest runs the host's architecture (x86_64), so no cross compiler."""
	if not src.endswith('.c') or not os.path.isfile(src):
		raise BuildError(f'{src}: not a C file')
	name = os.path.basename(src)[:-2]
	out_dir = os.path.join(build_dir, 'exercise-bin')
	os.makedirs(out_dir, exist_ok=True)
	out = os.path.join(out_dir, name)
	# the program and the headers beside it (a header shared by two programs)
	deps = [src] + [os.path.join(os.path.dirname(src), h) for h in os.listdir(os.path.dirname(src) or '.')
			if h.endswith('.h')]
	if not (os.path.isfile(out) and os.path.getmtime(out) >= max(os.path.getmtime(d) for d in deps)):
		cmd = ['gcc', '-static', '-O2', '-Wall', '-Werror', '-pthread', '-o', out + '.tmp', src]
		rv = subprocess.run(cmd, capture_output=True, text=True)
		if rv.returncode != 0:
			raise BuildError(f'{src}: gcc failed: ' + (rv.stderr.strip().splitlines() or ['?'])[-1])
		os.replace(out + '.tmp', out)
	return f'{EXERCISE_BIN_DIR}/{name}', out


def make_initramfs(out_path: str, module_ko: Optional[str] = None,
		   test_script: Optional[str] = None, busybox: str = BUSYBOX,
		   extra_files: Sequence[Tuple[str, str]] = ()) -> int:
	"""Write the busybox-static initramfs (gzip'd newc cpio); return its size.

	Contents: /bin/busybox and applet links, /init (INIT_SCRIPT), in
	/nsboot the test module and an optional test.sh, and extra_files
	[(path in the archive, file to copy)], e.g. the kernel's own modules
	from LinuxSourceTree.tree_modules(), with their directories.
	"""
	if not os.path.isfile(busybox):
		raise BootError(f'{busybox} not found (apt-get install busybox-static)')
	if not is_static_elf(busybox):
		raise BootError(f'{busybox} is not statically linked (apt-get install busybox-static)')
	raw = io.BytesIO()
	w = CpioWriter(raw)
	for d in INITRAMFS_DIRS:
		w.directory(d, 0o1777 if d == 'tmp' else 0o755)
	w.chardev('dev/console', 5, 1)
	w.chardev('dev/null', 1, 3, 0o666)
	with open(busybox, 'rb') as f:
		w.file('bin/busybox', f.read(), 0o755)
	for applet in BUSYBOX_APPLETS:
		w.symlink('bin/' + applet, 'busybox')
	w.file('init', INIT_SCRIPT.replace('@MODULE@', MODULE_NAME).encode(), 0o755)
	if module_ko:
		with open(module_ko, 'rb') as f:
			w.file(f'nsboot/{MODULE_NAME}.ko', f.read(), 0o644)
	if test_script:
		with open(test_script, 'rb') as f:
			w.file('nsboot/test.sh', f.read(), 0o755)
	dirs = set(INITRAMFS_DIRS)
	if extra_files:
		# the kernel's request_module() runs CONFIG_MODPROBE_PATH, /sbin/modprobe
		# (crypto_register_alg() warns when it cannot load cryptomgr)
		w.symlink('sbin/modprobe', '/bin/busybox')
	for name, src in extra_files:
		parts = name.split('/')
		for i in range(1, len(parts)):
			d = '/'.join(parts[:i])
			if d not in dirs:
				dirs.add(d)
				w.directory(d)
		with open(src, 'rb') as f:
			w.file(name, f.read(), 0o755 if name.startswith(EXERCISE_BIN_DIR + '/') else 0o644)
	w.trailer()
	tmp = out_path + '.tmp'
	with open(tmp, 'wb') as f:
		with gzip.GzipFile(filename='', fileobj=f, mode='wb', mtime=0, compresslevel=6) as gz:
			gz.write(raw.getvalue())
	os.replace(tmp, out_path)
	return os.path.getsize(out_path)


# ---------------------------------------------------------------------------
# QEMU

@dataclass
class ExecOutcome:
	"""How the QEMU run ended."""
	log_path: str
	elapsed: float
	exit_code: Optional[int]
	timed_out: bool
	killed_after_end: bool
	accel: str


def qemu_binary(arch: QemuArchParams) -> str:
	"""The QEMU binary's path; BootError if it is not installed."""
	name = 'qemu-system-' + arch.qemu_arch
	path = shutil.which(name)
	if not path:
		raise BootError(f'{name} not found (apt-get install qemu-system-x86)')
	return path


def qemu_command(arch: QemuArchParams, kernel: str, initrd: Optional[str], append: str,
		 accel: str = 'tcg', memory: int = 512, smp: int = 2) -> List[str]:
	"""The QEMU command line: small, deterministic, always ends.

	-nodefaults -nographic -serial stdio -no-reboot; panic=-1 and
	reboot -f make the guest exit QEMU.
	"""
	cmd = [qemu_binary(arch), '-accel', accel]
	if accel == 'kvm':
		cmd += ['-cpu', 'host']
	# One socket per CPU: without ACPI the kernel finds CPUs in SeaBIOS's MP
	# table, which lists one CPU per socket ('-smp 2' alone boots 1 CPU).
	cmd += ['-nodefaults', '-nographic', '-serial', 'stdio', '-no-reboot',
		'-m', str(memory), '-smp', f'{smp},sockets={smp}', '-kernel', kernel]
	if initrd:
		cmd += ['-initrd', initrd]
	cmd += ['-append', ' '.join(x for x in (arch.kernel_command_line, append) if x)]
	return cmd + list(arch.extra_qemu_params)


def run_qemu(cmd: Sequence[str], log_path: str, timeout: float,
	     on_line: Callable[[str], bool], end_grace: float = 20.0, accel: str = 'tcg',
	     echo: bool = False) -> ExecOutcome:
	"""Run QEMU, tee its console to log_path, and hand each line to on_line.

	on_line returns True once the guest printed its end marker; QEMU then
	has end_grace seconds to exit by itself.  After timeout seconds QEMU is
	killed (a hung boot).  Never raises for a guest problem.
	"""
	print_cmd(cmd)
	start = time.monotonic()
	try:
		proc = subprocess.Popen(list(cmd), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
					stderr=subprocess.STDOUT, start_new_session=True)
	except OSError as e:
		raise BootError(f'cannot run {cmd[0]}: {e.strerror}') from None
	assert proc.stdout is not None
	lines: 'queue.Queue[Optional[bytes]]' = queue.Queue()

	def reader() -> None:
		assert proc.stdout is not None
		for raw in iter(proc.stdout.readline, b''):
			lines.put(raw)
		lines.put(None)

	t = threading.Thread(target=reader, daemon=True)
	t.start()
	deadline = start + timeout
	end_deadline: Optional[float] = None
	timed_out = killed_after_end = False
	with open(log_path, 'wb') as log:
		eof = False
		while not eof:
			now = time.monotonic()
			limit = min(deadline, end_deadline) if end_deadline else deadline
			try:
				raw = lines.get(timeout=max(0.05, limit - now))
			except queue.Empty:
				if time.monotonic() >= limit:
					if end_deadline and time.monotonic() >= end_deadline:
						killed_after_end = True
					else:
						timed_out = True
					_kill(proc)
					break
				continue
			if raw is None:
				eof = True
				break
			log.write(raw)
			log.flush()
			line = raw.decode('utf-8', 'replace')
			if echo:
				print(line.rstrip('\r\n'), flush=True)
			if on_line(line) and end_deadline is None:
				end_deadline = time.monotonic() + end_grace
		# Drain what the reader still holds after a kill.
		drain_until = time.monotonic() + 2
		while not eof and time.monotonic() < drain_until:
			try:
				raw = lines.get(timeout=0.2)
			except queue.Empty:
				continue
			if raw is None:
				break
			log.write(raw)
			line = raw.decode('utf-8', 'replace')
			if echo:
				print(line.rstrip('\r\n'), flush=True)
			on_line(line)
	try:
		code: Optional[int] = proc.wait(timeout=10)
	except subprocess.TimeoutExpired:
		_kill(proc)
		code = None
	t.join(timeout=2)
	if not t.is_alive():
		proc.stdout.close()
	return ExecOutcome(log_path, time.monotonic() - start, code, timed_out, killed_after_end, accel)


def _kill(proc: 'subprocess.Popen[bytes]') -> None:
	"""Kill the process we started, and its process group (it leads one)."""
	try:
		os.killpg(proc.pid, signal.SIGKILL)
	except (ProcessLookupError, PermissionError):
		proc.kill()


def kvm_probe(arch: QemuArchParams, kernel: str, timeout: float = 15.0) -> Tuple[bool, str]:
	"""Does a KVM guest boot here?  Boot the kernel with no initramfs.

	The kernel panics at once for lack of a root file system, and panic=-1
	with -no-reboot ends QEMU.  A guest that prints nothing within timeout
	seconds (as seen on hosts where /dev/kvm exists but guests hang) means
	no.  The answer is cached per QEMU binary and host kernel.
	"""
	if not os.access('/dev/kvm', os.R_OK | os.W_OK):
		return False, '/dev/kvm is not usable'
	qemu = qemu_binary(arch)
	key = f'{qemu}:{os.path.getmtime(qemu)}:{os.uname().release}'
	cache = os.path.join(cache_root(), 'kvm-probe.json')
	try:
		with open(cache) as f:
			known = json.load(f)
		if known.get('key') == key:
			return bool(known['ok']), known['why'] + ' (cached)'
	except (OSError, ValueError, KeyError):
		pass
	cmd = qemu_command(arch, kernel, None, 'panic=-1', accel='kvm', memory=256, smp=1)
	seen: List[str] = []

	def on_line(line: str) -> bool:
		seen.append(line)
		return 'Kernel panic' in line

	log = os.path.join(cache_root(), 'kvm-probe.log')
	os.makedirs(cache_root(), exist_ok=True)
	out = run_qemu(cmd, log, timeout, on_line, end_grace=5, accel='kvm')
	text = ''.join(seen)
	ok = 'Linux version' in text and not out.timed_out
	why = 'a KVM guest booted' if ok else \
		f'a KVM guest {"hung" if out.timed_out else "failed"} (no boot within {timeout:.0f} s)'
	with open(cache, 'w') as f:
		json.dump({'key': key, 'ok': ok, 'why': why}, f)
	return ok, why
