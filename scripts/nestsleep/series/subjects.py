# SPDX-License-Identifier: GPL-2.0-only
"""The subject of each patch: its prefix ("media: saa7164:") from the
table, the file's git history or its path, and the words after it
("fix nested sleep in f()")."""

import collections
import os
import re
import subprocess


# ---------------------------------------------------------------------------
# Subject prefixes

# Most specific first.  The seeds' prefixes, and the custom of the
# subsystems the 6.1 findings fall in.
PREFIXES = [
	("net/bluetooth/hidp/", "Bluetooth: hidp:"),
	("net/bluetooth/cmtp/", "Bluetooth: cmtp:"),
	("net/bluetooth/bnep/", "Bluetooth: bnep:"),
	("net/bluetooth/rfcomm/", "Bluetooth: RFCOMM:"),
	("net/bluetooth/", "Bluetooth:"),
	("drivers/bluetooth/btmrvl", "Bluetooth: btmrvl:"),
	("drivers/md/raid5", "md/raid5:"),
	("drivers/md/raid10", "md/raid10:"),
	("drivers/md/raid1", "md/raid1:"),
	("drivers/md/bcache/", "bcache:"),
	("drivers/md/", "md:"),
	("fs/ceph/", "ceph:"),
	("fs/bcachefs/", "bcachefs:"),
	("drivers/iio/", "iio:"),
	("drivers/vfio/", "vfio:"),
	("drivers/virtio/virtio_balloon.c", "virtio-balloon:"),
	("drivers/virtio/", "virtio:"),
	("drivers/gpu/drm/scheduler/", "drm/scheduler:"),
	("drivers/acpi/", "ACPI:"),
	("drivers/block/drbd/", "drbd:"),
	("drivers/cdx/", "cdx:"),
	("drivers/char/tpm/tpm_tis", "tpm: tpm_tis:"),
	("drivers/char/tpm/", "tpm:"),
	("drivers/char/hpet.c", "char: hpet:"),
	("drivers/nvme/host/", "nvme:"),
	("drivers/rpmsg/virtio_rpmsg_bus.c", "rpmsg: virtio:"),
	("drivers/rpmsg/", "rpmsg:"),
	("drivers/mtd/spi-nor/", "mtd: spi-nor:"),
	("drivers/mtd/", "mtd:"),
	("drivers/net/xen-netfront.c", "xen-netfront:"),
	("drivers/net/ethernet/netronome/nfp/", "nfp:"),
	("drivers/net/wireless/mediatek/mt76/", "wifi: mt76:"),
	("net/wireless/", "wifi: cfg80211:"),
	("net/mac80211/", "wifi: mac80211:"),
	("net/ieee802154/", "ieee802154:"),
	("drivers/mailbox/mailbox-test.c", "mailbox: mailbox-test:"),
	("drivers/mailbox/", "mailbox:"),
	("drivers/misc/ocxl/", "ocxl:"),
	("drivers/misc/ibmvmc.c", "misc: ibmvmc:"),
	("drivers/macintosh/via-pmu.c", "macintosh: via-pmu:"),
	("drivers/macintosh/", "macintosh:"),
	("drivers/media/pci/saa7164/", "media: saa7164:"),
	("drivers/media/radio/radio-cadet.c", "media: radio-cadet:"),
	("drivers/media/usb/pvrusb2/", "media: pvrusb2:"),
	("drivers/staging/pi433/", "staging: pi433:"),
	("drivers/tty/tty_port.c", "tty: tty_port:"),
	("drivers/video/fbdev/ps3fb.c", "fbdev: ps3fb:"),
	("io_uring/", "io_uring:"),
	("kernel/bpf/", "bpf:"),
	("kernel/trace/", "tracing:"),
	("arch/x86/kernel/apm_32.c", "x86/apm_32:"),
	("drivers/block/pktcdvd.c", "pktcdvd:"),
	("fs/dlm/", "dlm:"),
	("fs/ubifs/", "ubifs:"),
	("net/sctp/", "sctp:"),
	("net/vmw_vsock/", "vsock:"),
	("io_uring/", "io_uring:"),
	("sound/", "ALSA:"),
]


def table_prefix(rel):
	"""The subject prefix for a file from the table, or None."""
	for p, pre in PREFIXES:
		if rel.startswith(p):
			return pre
	return None


def path_prefix(rel):
	"""The subject prefix for a file from the table, or a guess from its
	directory in the common kernel form ("media: saa7164:", "staging:
	pi433:", "net: tap:")."""
	pre = table_prefix(rel)
	if pre:
		return pre
	parts = rel.split("/")
	stem = os.path.splitext(parts[-1])[0]
	if len(parts) >= 3 and parts[0] == "drivers" and parts[1] in ("media", "staging", "usb", "net", "scsi",
								     "crypto", "video", "input", "hid", "gpu"):
		top = {"video": "fbdev", "gpu": "drm"}.get(parts[1], parts[1])
		if parts[1] == "video" and len(parts) > 3:
			return "fbdev: %s:" % stem
		leaf = parts[-2] if len(parts) > 3 else stem
		return "%s: %s:" % (top, leaf)
	if parts[0] in ("drivers", "fs") and len(parts) >= 3:
		return "%s:" % parts[-2] if len(parts) > 3 else "%s:" % parts[1]
	if parts[0] == "net" and len(parts) >= 2:
		return "net: %s:" % parts[1]
	if parts[0] in ("kernel", "mm", "block", "lib"):
		return "%s:" % (parts[1] if len(parts) > 2 else parts[0])
	return "%s:" % stem


def git_prefix(kdir, rel):
	"""The most common prefix of the file's history, when KDIR is git."""
	if not os.path.isdir(os.path.join(kdir, ".git")):
		return None
	r = subprocess.run(["git", "-C", kdir, "log", "--no-merges", "-n", "200", "--format=%s", "--", rel],
			   capture_output=True, text=True)
	if r.returncode != 0:
		return None
	counts = collections.Counter()
	for s in r.stdout.splitlines():
		s = re.sub(r"^\s*(Revert\s+\")", "", s)
		m = re.match(r"^(.*):\s+\S", s)
		if m and len(m.group(1)) < 40:
			counts[m.group(1) + ":"] += 1
	if not counts:
		return None
	return counts.most_common(1)[0][0]


def subject_core(prefix, group):
	funcs = []
	for name, fs in group:
		if fs[0]["function"] not in funcs:
			funcs.append(fs[0]["function"])
	if len(funcs) == 1:
		fs0 = [f for n, fs in group for f in fs]
		if all(f.get("fix", {}).get("kind") in ("restore", "restore_call") for f in fs0) and \
				len(set(f["call"] for f in fs0)) == 1:
			# the call runs after the loop, not in it: say what the
			# patch does, not 'nested sleep'
			return "%s set TASK_RUNNING before %s() in %s()" % (prefix, fs0[0]["call"], funcs[0])
		if all(f.get("fix", {}).get("kind") == "finish_wait" for f in fs0) and len(set(f["call"] for f in fs0)) == 1:
			return "%s finish the wait before %s() in %s()" % (prefix, fs0[0]["call"], funcs[0])
		what = "missed wakeup" if all(f.get("kind") == "missed_wakeup" for f in fs0) else "nested sleep"
		return "%s fix %s in %s()" % (prefix, what, funcs[0])
	two = "%s fix nested sleeps in %s() and %s()" % (prefix, funcs[0], funcs[1])
	if len(funcs) == 2 and len(two) <= 70:
		return two
	# too many names for a subject: say what the waits are, not "and N more"
	fs = [f for name, x in group for f in x]
	prims = set(f["primitive"] for f in fs)
	if len(prims) == 1 and all(f["shape"] == "wait_event" and f.get("role") != "cmd" for f in fs):
		what = "%d %s() conditions" % (len(fs), fs[0]["primitive"])
	elif len(prims) == 1:
		what = "%d %s() waits" % (len(fs), fs[0]["primitive"])
	else:
		what = "%d waits of %s" % (len(fs), os.path.basename(fs[0]["file"]))
	return "%s fix nested sleeps in %s" % (prefix, what)


SUBJECT_MAX = 75	# checkpatch's commit-log width; a subject line is read in it too


def series_subjects(prefixes, groups):
	"""The subjects of one series' patches, in order: two patches with the
	same subject (one function name in two files) say their file, as
	"... in fops_read() of saa7164-vbi.c", or only the file when that is
	longer than SUBJECT_MAX."""
	subs = [subject_core(p, g) for p, g in zip(prefixes, groups)]
	count = collections.Counter(subs)
	out = []
	for sub, p, g in zip(subs, prefixes, groups):
		if count[sub] > 1:
			base = os.path.basename(g[0][1][0]["file"])
			sub = "%s of %s" % (sub, base) if len(sub) + 4 + len(base) <= SUBJECT_MAX else \
				"%s fix nested sleep%s in %s" % (p, "s" if len(g) > 1 else "", base)
		out.append(sub)
	return out
