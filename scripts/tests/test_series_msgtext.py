# SPDX-License-Identifier: GPL-2.0-only
"""The changelog text of make fixes: the state a loop sets, read from its
source even when the call spans lines; the one line on how a patch was
found and tested; the details that go below '---'; subjects that name
the file when two patches of a series would share one."""

import os
import shutil
import tempfile
import unittest

from nestsleep.series import series as fixes


def tree(files):
	"""A one-file-per-entry tree with include/linux/sched.h's states."""
	d = tempfile.mkdtemp(prefix="ns-msgtext-")
	files = dict(files)
	files.setdefault("include/linux/sched.h", "#define TASK_INTERRUPTIBLE\t\t0x0001\n"
			 "#define TASK_UNINTERRUPTIBLE\t\t0x0002\n#define TASK_WAKEKILL\t\t\t0x0100\n"
			 "#define TASK_KILLABLE\t\t\t(TASK_WAKEKILL | TASK_UNINTERRUPTIBLE)\n")
	for rel, text in files.items():
		p = os.path.join(d, rel)
		os.makedirs(os.path.dirname(p), exist_ok=True)
		with open(p, "w") as f:
			f.write(text)
	return d


class LoopStateTest(unittest.TestCase):
	def setUp(self):
		self.kdir = tree({"drivers/x/x.c": (
			"static ssize_t x_read(void)\n{\n\tfor (;;) {\n"
			"\t\tprepare_to_wait(&ctx->events_wq, &event_wait,\n"
			"\t\t\t\tTASK_INTERRUPTIBLE);\n"
			"\t\tif (x_pending(ctx))\n\t\t\tbreak;\n\t\tschedule();\n\t}\n"
			"\tset_current_state(\n\t\tTASK_KILLABLE);\n}\n")})
		self.addCleanup(shutil.rmtree, self.kdir)

	def test_call_across_lines(self):
		f = {"file": "drivers/x/x.c", "line": 4, "primitive": "prepare_to_wait"}
		self.assertEqual(fixes.finding_state(self.kdir, f, {}), ("TASK_INTERRUPTIBLE", "1"))
		f = {"file": "drivers/x/x.c", "line": 10, "primitive": "set_current_state"}
		self.assertEqual(fixes.finding_state(self.kdir, f, {}), ("TASK_KILLABLE", "102"))

	def test_unknown_state_prints_no_placeholder(self):
		f = {"file": "drivers/x/x.c", "line": 6, "primitive": "prepare_to_wait"}
		self.assertEqual(fixes.finding_state(self.kdir, f, {}), (None, None))
		t = " ".join(fixes.effect_paragraphs([{"shape": "prepare_to_wait", "how": "warns", "state": None,
							"fingerprints": ["fp"]}], {}))
		self.assertNotIn("state=?", t)
		self.assertIn("CONFIG_DEBUG_ATOMIC_SLEEP=y", t)


class SameSubjectTest(unittest.TestCase):
	@staticmethod
	def group(func, file):
		return [("%s:%s" % (file, func), [{"function": func, "primitive": "wait_event_interruptible",
						   "shape": "wait_event", "role": "cond", "file": file}])]

	def test_same_function_in_two_files(self):
		gs = [self.group("fops_read", "drivers/media/pci/saa7164/saa7164-encoder.c"),
		      self.group("fops_read", "drivers/media/pci/saa7164/saa7164-vbi.c"),
		      self.group("other_read", "drivers/media/pci/saa7164/saa7164-vbi.c")]
		subs = fixes.series_subjects(["media: saa7164:"] * 3, gs)
		self.assertEqual(subs, ["media: saa7164: fix nested sleep in fops_read() of saa7164-encoder.c",
					"media: saa7164: fix nested sleep in fops_read() of saa7164-vbi.c",
					"media: saa7164: fix nested sleep in other_read()"])
		self.assertTrue(all(len(x) <= 75 for x in subs))

	def test_too_long_names_the_file_only(self):
		f = "drivers/x/long_driver_file.c"
		gs = [self.group("a_rather_long_read_function_name", f), self.group("a_rather_long_read_function_name", f)]
		subs = fixes.series_subjects(["staging: something:"] * 2, gs)
		self.assertEqual(subs, ["staging: something: fix nested sleep in long_driver_file.c"] * 2)


if __name__ == "__main__":
	unittest.main()
