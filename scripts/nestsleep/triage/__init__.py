# SPDX-License-Identifier: GPL-2.0-only
"""'make triage': maintainer reports and SARIF (reports.build); hand labels
carried across trees and re-keyed across versions (carry_labels, rekey);
the tree's identity (treeid)."""
