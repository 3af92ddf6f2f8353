# SPDX-License-Identifier: GPL-2.0-only
import sys

from nestsleep.cli import main

sys.exit(main())
