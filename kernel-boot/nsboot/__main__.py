# SPDX-License-Identifier: GPL-2.0-only
import sys

from nsboot.main import main

sys.exit(main(sys.argv[1:]))
