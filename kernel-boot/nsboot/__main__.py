# SPDX-License-Identifier: GPL-2.0-only
import sys

from nsboot.main import entry

sys.exit(entry(sys.argv[1:]))
