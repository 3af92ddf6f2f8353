# SPDX-License-Identifier: GPL-2.0-only
# nestsleep: find and fix nested sleeps in Linux kernel wait loops.
#
#   make coccicheck [MODE=report|patch|context|org] [KDIR=] [M=] [COCCI=] [J=] [V=1]
#                   [SPFLAGS=] [DEBUG_FILE=] [CONFIDENCE=high|medium|low]
#   make check      run the whole test suite
#   make setup      install the Debian packages and unpack the 6.1 and 6.12 trees
#
# The knobs mean what they mean for the kernel's own 'make coccicheck'.
# CONFIDENCE= is nestsleep's own: MODE=patch rewrites only the fixes of that
# confidence or better (high by default), as make fixes selects them.

PYTHON      := /usr/bin/python3
# the product is the package scripts/nestsleep/ (and the boot harness
# kernel-boot/nsboot/): python3 -m nestsleep <command>
export PYTHONPATH := $(CURDIR)/scripts:$(CURDIR)/kernel-boot
NS          := $(PYTHON) -m nestsleep
NESTSLEEP_CACHE ?= $(HOME)/.cache/nestsleep
export NESTSLEEP_CACHE
KDIR        ?= $(NESTSLEEP_CACHE)/linux-source-6.1
MODE        ?= report
M           ?=
COCCI       ?=
J           ?= $(shell nproc 2>/dev/null || echo 1)
V           ?= 0
SPFLAGS     ?=
DEBUG_FILE  ?=
TIMEOUT     ?= 200
OUT         ?=
SIGNOFF     ?=
CONFIDENCE  ?= high
LABELS      ?=
BUILD       ?= 1
BASELINE    ?=
HELDOUT_BASE ?=
NESTSLEEP_VERSION ?=
PATCHES     ?=
ONLY        ?=
ROUNDS      ?= 10000
BENCH_ALSO  ?= $(NESTSLEEP_CACHE)/linux-source-6.12

# the C tokenizer of the facts (scripts/nstok.c), a host program named by
# the digest of its source, so that a binary of another source is never run
NESTSLEEP_BIN ?= $(NESTSLEEP_CACHE)/bin
export NESTSLEEP_BIN
NSTOK       := $(NESTSLEEP_BIN)/nstok-$(shell sha1sum scripts/nstok.c | cut -c1-12)

# Set-up is skipped for a user-supplied KDIR only as far as the tree goes.
ifeq ($(origin KDIR),file)
SETUP_FLAGS :=
else
SETUP_FLAGS := --no-tree
endif

.PHONY: all help setup first-use nstok coccicheck check test-fast bench clean-cache fixes triage boottest runtime-proof stress

all: help

help:
	@echo 'nestsleep targets:'
	@echo '  coccicheck  - find nested sleeps (MODE=report|patch|context|org, KDIR=, M=, COCCI=, J=, V=1, SPFLAGS=,'
	@echo '                DEBUG_FILE=, CONFIDENCE=). MODE=patch prints the diff of the fixes of CONFIDENCE= (high,'
	@echo '                the default; medium or low select more) and names each finding it left out on stderr.'
	@echo '  check       - run the test suite (fixtures, unit tests, real-tree checks)'
	@echo '  bench       - time whole-tree runs (cold, warm, incremental, M=drivers/md) against the kernel'"'"'s call_kern.cocci, on KDIR and BENCH_ALSO (6.12)'
	@echo '  fixes       - write patch series per MAINTAINERS section to OUT= (KDIR=, M=, SIGNOFF=, CONFIDENCE=, BUILD=)'
	@echo '                with hand labels for the tree only findings labelled true get a patch; without,'
	@echo '                only fixes of CONFIDENCE= (high, the default; medium or low select more).'
	@echo '                No Signed-off-by unless SIGNOFF=1 (your git identity) or SIGNOFF="Name <mail>".'
	@echo '                BUILD=1 (default) builds the touched objects after each patch, in series order.'
	@echo '  triage      - write maintainer reports to OUT= (default reports/<tree-id>; BASELINE=, M=,'
	@echo '                HELDOUT_BASE= the earlier tree of the held-out precision, default the cached 6.1,'
	@echo '                NESTSLEEP_VERSION= the version the reports name, default 0.1+<commit>)'
	@echo '  boottest    - build and boot every patch of PATCHES=<dir from make fixes> in QEMU'
	@echo '  runtime-proof - boot the test module, before and after forms (ROUNDS=)'
	@echo '  stress      - the runtime proof with ROUNDS=100000'
	@echo '  setup       - install Debian packages and unpack linux-source-6.1 and -6.12 into $(NESTSLEEP_CACHE)'
	@echo '  clean-cache - drop the cached knowledge (not the kernel tree)'
	@echo 'SOURCE_DATE_EPOCH=s (fixes, triage): every date written is that time (UTC), so that two runs'
	@echo '                give byte-identical outputs; unset, the time of the run.'

# set-up writes to stderr only: stdout is the findings (or the diff).
# 'make setup' (and 'make check') also install the 6.12 tree, whose hand
# labels make check tests; the commands need only 6.1 (first-use).
setup:
	@bash scripts/setup.sh $(SETUP_FLAGS) >&2
	@bash scripts/setup.sh --tree=6.12 >&2
	@$(MAKE) -s --no-print-directory nstok

first-use:
	@bash scripts/setup.sh $(SETUP_FLAGS) >&2
	@$(MAKE) -s --no-print-directory nstok

# after set-up, which installs the compiler
nstok: $(NSTOK)

$(NSTOK): scripts/nstok.c
	@mkdir -p "$(@D)"
	@$(CC) -O2 -o "$@.tmp" $< && mv "$@.tmp" "$@" || \
		{ echo "nestsleep: cannot build scripts/nstok.c with $(CC) (make setup installs gcc)" >&2; exit 2; }

coccicheck: first-use
	@$(NS) coccicheck --kdir="$(KDIR)" --mode="$(MODE)" --m="$(M)" \
		--cocci="$(COCCI)" --spflags="$(SPFLAGS)" --debug-file="$(DEBUG_FILE)" \
		--jobs="$(J)" --verbose="$(V)" --timeout="$(TIMEOUT)" --confidence="$(CONFIDENCE)"

check:
	@bash scripts/setup.sh >&2
	@bash scripts/setup.sh --tree=6.12 >&2
	@$(MAKE) -s --no-print-directory nstok
	@$(PYTHON) scripts/dev/run_tests.py

fixes: first-use
	@$(NS) fixes --kdir="$(KDIR)" --m="$(M)" --out="$(OUT)" --signoff="$(SIGNOFF)" \
		--confidence="$(CONFIDENCE)" --labels="$(LABELS)" $(if $(filter 1,$(BUILD)),--build,) \
		--jobs="$(J)" --verbose="$(V)"

triage: first-use
	@$(NS) triage --kdir="$(KDIR)" --m="$(M)" --out="$(OUT)" --baseline="$(BASELINE)" --heldout-base="$(HELDOUT_BASE)" \
		--nestsleep-version="$(NESTSLEEP_VERSION)" --jobs="$(J)"

boottest: first-use
	@$(NS) boottest --patches="$(PATCHES)" --kdir="$(KDIR)" --only="$(ONLY)"

runtime-proof: first-use
	@$(NS) runtime-proof --kdir="$(KDIR)" --rounds="$(ROUNDS)"

stress: first-use
	@$(NS) runtime-proof --kdir="$(KDIR)" --rounds 100000

bench: first-use
	@$(NS) bench --kdir="$(KDIR)" --also="$(BENCH_ALSO)" --jobs="$(J)"

test-fast:
	@$(MAKE) -s --no-print-directory nstok
	@$(PYTHON) scripts/dev/run_tests.py --fast

clean-cache:
	rm -rf "$(NESTSLEEP_CACHE)/index" "$(NESTSLEEP_CACHE)"/facts-* "$(NESTSLEEP_CACHE)/match"
