# SPDX-License-Identifier: GPL-2.0-only
"""'make fixes': the findings' patches as git format-patch series, one per
MAINTAINERS section (series.build), and their re-test (series.retest)."""
