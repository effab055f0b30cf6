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
# Built as the module builds its Rust: -Copt-level=2 with overflow checks (Kbuild).
CARGO_PROFILE_RELEASE_OPT_LEVEL=2 CARGO_PROFILE_RELEASE_OVERFLOW_CHECKS=true \
	cargo build -q --release --bin oxt-firebench
bin=target/release/oxt-firebench
n1=2000
n2=12000
count() {
	valgrind --tool=callgrind --callgrind-out-file=/dev/null "$bin" "$1" "$2" 2>&1 >/dev/null |
		sed -n 's/.*Collected : \([0-9]*\).*/\1/p'
}
pairs=("$@")
[ ${#pairs[@]} -gt 0 ] || pairs=(empty count sum trace hist ten)
for p in "${pairs[@]}"; do
	a=$(count "$p" $n1)
	b=$(count "$p" $n2)
	echo "$p $(( (b - a) / (n2 - n1) )) instructions per firing"
done
