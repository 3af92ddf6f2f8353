# SPDX-License-Identifier: GPL-2.0-only
"""'make fixes': the findings' patches as git format-patch series, one per
MAINTAINERS section (series.build, where a reader starts: series.py's
docstring names the module of each part), and their re-test
(records.retest)."""
