# SPDX-License-Identifier: GPL-2.0-only
"""MODE=patch: rewrite a finding's wait into the wait_woken() pattern
(fixer.Fixer.run) and convert, or refuse on, its task's wakers (wakers)."""
