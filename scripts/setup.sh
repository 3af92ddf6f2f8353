#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only
# Idempotent set-up for nestsleep on Debian 12: install required packages and unpack the kernel tree.
#
# Usage: scripts/setup.sh [--check] [--no-tree] [--tree=VERSION]
#   --check    only report what is missing (exit 1 if anything is, 0 if not); install nothing
#   --no-tree  do not unpack (or, with --check, do not look for) the kernel source tree
#   --tree=V   the Debian linux-source-V package and tree (default 6.1; 6.12 for make check)
# Environment:
#   NESTSLEEP_CACHE  cache directory (default: $HOME/.cache/nestsleep)
#   KSRC_TARBALL     kernel source tarball (default: /usr/src/linux-source-V.tar.xz)
# Output: all on stderr, as make coccicheck runs this before the checker,
# whose stdout is the findings; only --help writes to stdout.
# Exit status: 0 ok, 1 --check found something missing or unpacking failed,
#              2 packages/tools missing and cannot be installed, or bad usage.

set -euo pipefail

PACKAGES=(
	coccinelle sparse qemu-system-x86 busybox-static
	flex bison bc libelf-dev libssl-dev cpio build-essential python3
	python3-jsonschema git universal-ctags xz-utils time
	gcc-powerpc64-linux-gnu gcc-aarch64-linux-gnu
)
# tool -> Debian package that provides it
readonly TOOLS=(
	spatch:coccinelle sparse:sparse qemu-system-x86_64:qemu-system-x86
	/usr/bin/python3:python3 /bin/busybox:busybox-static make:make gcc:gcc
	flex:flex bison:bison bc:bc
)

say() { printf 'nestsleep setup: %s\n' "$*" >&2; }
die() { say "$1"; exit "${2:-1}"; }

usage() { # prints to stdout; callers redirect
	sed -n 's/^# \{0,1\}//; 5,15p' "$0"
}

check_only=0
want_tree=1
version=6.1
for arg in "$@"; do
	case "$arg" in
	--check) check_only=1 ;;
	--no-tree) want_tree=0 ;;
	--tree=6.1 | --tree=6.12) version="${arg#--tree=}" ;;
	-h | --help) usage; exit 0 ;;
	*) say "unknown option: $arg (see --help)"; exit 2 ;;
	esac
done

if [[ -z "${NESTSLEEP_CACHE:-}" ]]; then
	[[ -n "${HOME:-}" ]] || die "HOME is unset; set NESTSLEEP_CACHE" 2
	NESTSLEEP_CACHE="$HOME/.cache/nestsleep"
fi
[[ "$NESTSLEEP_CACHE" == /* ]] || NESTSLEEP_CACHE="$PWD/$NESTSLEEP_CACHE"
NESTSLEEP_CACHE="${NESTSLEEP_CACHE%/}"
readonly TREE_NAME="linux-source-$version"
PACKAGES+=("$TREE_NAME")
readonly PACKAGES
KSRC_TARBALL="${KSRC_TARBALL:-/usr/src/$TREE_NAME.tar.xz}"
tree="$NESTSLEEP_CACHE/$TREE_NAME"

is_root=0
[[ "$(id -u)" -eq 0 ]] && is_root=1

# Prefix for commands we tell a human to run.
sudo_hint() { if ((!is_root)); then printf 'sudo '; fi; }

command -v dpkg-query >/dev/null 2>&1 ||
	die "dpkg-query not found: this script supports Debian 12 only" 2

missing_packages() {
	local pkg status
	for pkg in "${PACKAGES[@]}"; do
		status="$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null || true)"
		[[ "$status" == "install ok installed" ]] || printf '%s\n' "$pkg"
	done
}

# Prints "tool:package" for every tool that cannot be found.
missing_tools() {
	local entry tool
	for entry in "${TOOLS[@]}"; do
		tool="${entry%%:*}"
		if [[ "$tool" == /* ]]; then
			[[ -x "$tool" ]] || printf '%s\n' "$entry"
		else
			command -v "$tool" >/dev/null 2>&1 || printf '%s\n' "$entry"
		fi
	done
}

tree_ok() { [[ -f "$tree/Makefile" ]]; }

# ---- --check: report only -------------------------------------------------
if ((check_only)); then
	problems=0
	mapfile -t miss < <(missing_packages)
	if ((${#miss[@]})); then
		say "missing packages: ${miss[*]}"
		say "run: $(sudo_hint)apt-get install -y ${miss[*]}"
		problems=1
	fi
	mapfile -t tools < <(missing_tools)
	for entry in "${tools[@]}"; do
		say "missing tool ${entry%%:*} (run: $(sudo_hint)apt-get install -y ${entry#*:})"
		problems=1
	done
	if ((want_tree)) && ! tree_ok; then
		if [[ -r "$KSRC_TARBALL" ]]; then
			say "kernel tree not unpacked at $tree (run: $0)"
		else
			say "kernel tree not unpacked at $tree and tarball $KSRC_TARBALL not readable"
		fi
		problems=1
	fi
	if ((problems)); then
		say "check: something is missing"
		exit 1
	fi
	if tree_ok; then
		say "ok (tree at $tree)"
	else
		say "ok (tree not checked: --no-tree)"
	fi
	exit 0
fi

# ---- packages ---------------------------------------------------------------
mapfile -t miss < <(missing_packages)
if ((${#miss[@]})); then
	if ((is_root)); then
		as_root=()
	elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
		as_root=(sudo -n)
	else
		printf 'nestsleep: missing packages: %s\n' "${miss[*]}" >&2
		printf 'run: sudo apt-get install -y %s\n' "${miss[*]}" >&2
		exit 2
	fi
	say "installing missing packages: ${miss[*]}"
	# apt-get writes its progress to stdout: keep it on stderr, where
	# all of set-up goes, so that stdout holds only findings (or the diff)
	"${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update >&2 ||
		die "apt-get update failed" 2
	"${as_root[@]}" env DEBIAN_FRONTEND=noninteractive \
		apt-get install -y --no-install-recommends "${miss[@]}" >&2 ||
		die "apt-get install failed for: ${miss[*]}" 2
fi

mapfile -t tools < <(missing_tools)
if ((${#tools[@]})); then
	for entry in "${tools[@]}"; do
		say "${entry%%:*} still not found; run: $(sudo_hint)apt-get install -y ${entry#*:}"
	done
	exit 2
fi
((${#miss[@]})) || say "all ${#PACKAGES[@]} packages present"

# ---- kernel tree --------------------------------------------------------------
if tree_ok; then
	say "ok (tree at $tree)"
	exit 0
fi
if ((!want_tree)); then
	say "ok (tree not unpacked: --no-tree)"
	exit 0
fi

# Check everything we can before creating anything, so a failure leaves nothing behind.
[[ -f "$KSRC_TARBALL" && -r "$KSRC_TARBALL" ]] ||
	die "kernel tarball $KSRC_TARBALL not found or not readable (set KSRC_TARBALL)"
if [[ -e "$tree" || -L "$tree" ]]; then
	die "$tree exists but has no Makefile (not made by this script); remove it and re-run"
fi

made_cache=0
if [[ ! -d "$NESTSLEEP_CACHE" ]]; then
	mkdir -p "$NESTSLEEP_CACHE" || die "cannot create $NESTSLEEP_CACHE"
	made_cache=1
fi
tmp=""
cleanup() {
	local rc=$?
	[[ -n "$tmp" ]] && rm -rf -- "$tmp"
	# Only removes the cache dir if we created it and it is still empty.
	((rc == 0 || !made_cache)) || rmdir -- "$NESTSLEEP_CACHE" 2>/dev/null || true
	return "$rc"
}
trap cleanup EXIT
trap 'say "interrupted"; exit 130' INT
trap 'say "terminated"; exit 143' TERM HUP
tmp="$(mktemp -d "$NESTSLEEP_CACHE/.unpack.XXXXXX")" || die "cannot create temp dir in $NESTSLEEP_CACHE"

say "unpacking $KSRC_TARBALL into $tree ..."
start_ns="$(date +%s%N)"
tar -C "$tmp" --no-same-owner -xf "$KSRC_TARBALL" ||
	die "failed to unpack $KSRC_TARBALL"
[[ -f "$tmp/$TREE_NAME/Makefile" ]] ||
	die "$KSRC_TARBALL does not contain $TREE_NAME/Makefile"
# rename(2) within one file system: the tree appears complete or not at all.
# -T: never move into an existing directory (e.g. one a concurrent run just made).
if ! mv -T -- "$tmp/$TREE_NAME" "$tree" 2>/dev/null; then
	tree_ok || die "cannot move unpacked tree to $tree"
	say "another run unpacked $tree concurrently; using it"
fi
end_ns="$(date +%s%N)"
elapsed_ms=$(((end_ns - start_ns) / 1000000))
say "unpacked in $((elapsed_ms / 1000)).$(printf '%03d' $((elapsed_ms % 1000))) s"
say "ok (tree at $tree)"
