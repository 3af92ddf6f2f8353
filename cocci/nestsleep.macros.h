// SPDX-License-Identifier: GPL-2.0-only
// Parsing hints for spatch (--macro-file cocci/nestsleep.macros.h).
// spatch 1.1.1 does not know the cleanup.h guards (6.5+): without these,
// `scoped_guard(mutex, &l) { ... }` is a parse error and the whole function
// is dropped.  The guard body is kept as an ordinary block.
#define scoped_guard(_name, args...) if (1)
#define scoped_cond_guard(_name, _fail, args...) if (1)
