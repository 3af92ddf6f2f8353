# SPDX-License-Identifier: GPL-2.0-only
"""The checker: from a kernel tree to findings.

The phases of scripts/README.md, one module each: scan (the tree and its per-file facts),
waiters (wait primitives by macro expansion), match (spatch on the wait
sites), resolve (calls to their definitions), summarize (chains down to a
sleeping primitive, with the argument values they need), sameguard (a
condition tested twice) and report (findings and the output modes).  The
pipeline module runs them in order; start reading at pipeline.analyse().
"""
