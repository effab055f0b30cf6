#!/usr/bin/env bash
# The host fuzzers at length (make stress): the compiler and the tool's readers of
# untrusted input (tools/oxtrace/tests/fuzz.rs), OXT_FUZZ_CASES inputs each (default
# 100,000), in a release build. `cargo test` runs the same fuzzers briefly.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
cd "$OXT_ROOT"

export OXT_FUZZ_CASES=${OXT_FUZZ_CASES:-100000}
# A release build: 10 s bounds a runaway input even on a saturated host.
export OXT_FUZZ_INPUT_MS=${OXT_FUZZ_INPUT_MS:-10000}
say "host fuzzers: $OXT_FUZZ_CASES inputs each"
t0=$(date +%s)
cargo test --release --locked -p oxtrace --test fuzz -- --nocapture fuzz_ 2>&1 |
	grep -E '^fuzz |^test |panicked|^thread|Test failed|minimal failing|^test result'
rc=${PIPESTATUS[0]}
echo "host fuzzers took $(($(date +%s) - t0)) s"
exit "$rc"
