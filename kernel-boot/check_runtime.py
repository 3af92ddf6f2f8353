#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-only
"""make check's runtime proof (run by scripts/dev/run_tests.py).

Runs 'python3 -m nestsleep runtime-proof' (the 'make runtime-proof'
command line: build the tiny debug kernel once, cached; boot the
test module's before form and the after form that nestsleep MODE=patch
generates; compare) and prints one KTAP result line per proof check.
With --fast it only generates the after form: no kernel build, no boot.

  NSBOOT_ROUNDS   stress rounds per case (default 10000)
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

from nestsleep.boot import proof, use_cache
import nsboot
from nsboot import kernel as nsboot_kernel


def emit(n, name, ok, detail="", skip=None):
	line = "%s %d - %s" % ("ok" if ok or skip else "not ok", n, name)
	if skip:
		line += " # SKIP " + skip
	if detail and not ok and not skip:
		print("# " + detail.replace("\n", "\n# "))
	print(line, flush=True)


def main(argv):
	ap = argparse.ArgumentParser()
	ap.add_argument("--fast", action="store_true")
	ap.add_argument("--only", default="")
	a = ap.parse_args(argv)
	use_cache()
	if a.only and not ("runtime/".startswith(a.only) or a.only.startswith("runtime")):
		return 0
	n = 0
	if a.fast:
		tmp = tempfile.mkdtemp(prefix="check-runtime-")
		try:
			der = proof.derive_after(tmp, nsboot_kernel.default_kdir())
			n += 1
			checks = proof.compare(der, {}, {})
			ok = checks[0][1]
			emit(n, "after/generated", ok, checks[0][2])
			for name, ok, detail in checks:
				if name.startswith("rule/"):
					n += 1
					emit(n, name, ok, detail)
		except proof.ProofError as e:
			n += 1
			emit(n, "after/generated", False, str(e))
		finally:
			shutil.rmtree(tmp, ignore_errors=True)
		n += 1
		emit(n, "boot", True, skip="--fast: no kernel build or boot")
		return 0
	for tool in ("qemu-system-x86_64", "busybox"):
		if shutil.which(tool) is None and not os.path.exists("/bin/" + tool):
			emit(1, "proof", False, "%s not installed; run make setup" % tool)
			return 0
	out = os.path.join(nsboot.cache_root(), "proof-check")
	if os.path.isdir(out):
		shutil.rmtree(out)
	rounds = os.environ.get("NSBOOT_ROUNDS", "10000")
	cmd = ["/usr/bin/python3", "-m", "nestsleep", "runtime-proof", "--rounds", rounds, "--out", out,
	       "--timeout", "900"]
	print("# $ " + " ".join(cmd), flush=True)
	r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
	pj = os.path.join(out, "proof.json")
	if not os.path.exists(pj):
		print("# " + r.stdout[-3000:].replace("\n", "\n# "))
		emit(1, "proof", False, "runtime-proof wrote no proof.json (exit %d)" % r.returncode)
		return 0
	with open(pj) as f:
		res = json.load(f)
	if r.returncode != 0:
		print("# " + r.stdout[-4000:].replace("\n", "\n# "))
	for c in res["checks"]:
		n += 1
		emit(n, c["name"], c["ok"], c["detail"])
	print("# splats: before %s, after %s; boot times %s" % (
		res.get("splats", {}).get("before"), res.get("splats", {}).get("after"), res.get("times_s")))
	return 0


if __name__ == "__main__":
	sys.exit(main(sys.argv[1:]))
