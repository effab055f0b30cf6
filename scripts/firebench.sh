#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Instructions per firing of the bench's programs on the host (tools/oxtrace/src/bin/
# oxt-firebench.rs): callgrind counts two runs of different lengths and the difference is
# divided by the extra firings, so start-up and compilation cancel out. Counts do not
# depend on the machine's load, unlike any timing here. Prints one line per pair.
#
#   scripts/firebench.sh [PAIR...]      (default: empty count sum trace hist ten)
set -euo pipefail
cd "$(dirname "$0")/.."
command -v valgrind >/dev/null || { echo "firebench: valgrind is not installed" >&2; exit 2; }
# Built as the module builds its Rust: -Copt-level=2 with overflow checks (Kbuild), and
# without jump tables (the kernel's IBT build, arch/x86/Makefile), so that a match compiles
# to the same tree of compares; in a target directory of its own, since other RUSTFLAGS
# would rebuild the workspace's. The module is one crate, core's code and its callers
# inlined into each other: LTO does the same across the tool's crates.
export CARGO_TARGET_DIR=target/firebench
RUSTFLAGS="-Cjump-tables=n" CARGO_PROFILE_RELEASE_OPT_LEVEL=2 \
	CARGO_PROFILE_RELEASE_OVERFLOW_CHECKS=true CARGO_PROFILE_RELEASE_LTO=fat \
	CARGO_PROFILE_RELEASE_CODEGEN_UNITS=1 cargo build -q --release --bin oxt-firebench
bin=$CARGO_TARGET_DIR/release/oxt-firebench
n1=2000
n2=12000
# Instructions and conditional branches (under TCG each branch ends a translated block).
count() {
	valgrind --tool=callgrind --branch-sim=yes --callgrind-out-file=/dev/null \
		"$bin" "$1" "$2" 2>&1 >/dev/null |
		sed -n 's/.*Collected : \([0-9]*\) \([0-9]*\).*/\1 \2/p'
}
pairs=("$@")
[ ${#pairs[@]} -gt 0 ] || pairs=(empty count sum trace hist ten)
for p in "${pairs[@]}"; do
	read -r ia ba < <(count "$p" $n1)
	read -r ib bb < <(count "$p" $n2)
	echo "$p $(( (ib - ia) / (n2 - n1) )) instructions $(( (bb - ba) / (n2 - n1) )) branches per firing"
done
