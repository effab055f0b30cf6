#!/usr/bin/env bash
# make bench: oxtrace against bpftrace in one bench-guest run.
#
#   scripts/bench.sh [NAME=VALUE...]     (passed to the guest runner: ROUNDS=5 N1=...)
#
# Boots the bench kernel (scripts/kconfig/bench.config: no debug options, BPF, 9p)
# with 2 GiB and the host's root filesystem read-only over 9p, runs
# scripts/guest/bench-run.sh there (bpftrace from the host root in a chroot), and
# writes build/bench/results.{md,json} plus the raw log.  It prints figures; it
# never fails on a ratio.  A splat in the guest's kernel log is reported (and
# makes the exit status non-zero), the figures are still written.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

"$OXT_ROOT/scripts/setup-bench.sh"
KFLAVOR=bench
KDIR=$("$OXT_ROOT/scripts/kernel.sh" bench)
export KFLAVOR KDIR

out=$OXT_ROOT/build/bench
rm -rf "$out"
mkdir -p "$out/files"
# The guest's sections (ONLY) and o2 pairs (VARIANT), for the builds only they need.
only=
variant=unset
for a in "$@"; do
	case $a in
	ONLY=*) only=${a#ONLY=} ;;
	VARIANT=*) variant=${a#VARIANT=} ;;
	esac
done
wants() { [ -z "$only" ] || [[ " $only " == *" $1 "* ]]; }
# The module as shipped (Kbuild: -Copt-level=2), the tool and the selftests against
# the bench kernel; and a second build with KRUSTFLAGS=-Copt-level=2, the same code
# since the module ships at -O2, kept as a measure of run-to-run noise.
# BENCH_VARIANT_KO=path takes that module for the variant instead (a before/after pair in
# one guest boot, e.g. main's module built with KFLAVOR=bench).
# Neither when no pair runs it (VARIANT='' or ONLY without pairs).
if [ -z "${BENCH_VARIANT_KO:-}" ] && [ -n "$variant" ] && wants pairs; then
	KRUSTFLAGS="-Copt-level=2" "$OXT_ROOT/scripts/build.sh" module
	cp "$OXT_ROOT/build/oxtrace.ko" "$out/files/oxtrace-o2.ko"
fi
# The profile's build: interrupts left on in the probe handler (shim/shim.c).
if wants profile; then
	KCFLAGS="-DOXT_PROFILE_IRQS_ON" "$OXT_ROOT/scripts/build.sh" module
	cp "$OXT_ROOT/build/oxtrace.ko" "$out/files/oxtrace-prof.ko"
fi
"$OXT_ROOT/scripts/build.sh" all
# After the builds: the first module build of a clone runs kbuild's clean, which deletes
# every .ko under the tree, a variant copied into build/bench/files before it included.
if [ -n "${BENCH_VARIANT_KO:-}" ]; then
	cp "$BENCH_VARIANT_KO" "$out/files/oxtrace-o2.ko"
fi
say "building the bench workload"
${CC:-gcc} -O2 -Wall -Wextra -Werror -static -pthread -D_GNU_SOURCE \
	"$OXT_ROOT/tools/bench/oxt_bench.c" -o "$out/files/oxt_bench"
cp "$OXT_ROOT/scripts/guest/bench-run.sh" "$OXT_ROOT/scripts/guest/hostroot.sh" "$out/files/"
cp "$OXT_ROOT/target/x86_64-unknown-linux-gnu/release/oxt-aggbench" "$out/files/"

set +e
"$OXT_ROOT/scripts/vm.sh" --no-build --files "$out/files" --mem 2G --hostroot \
	--timeout "${BENCH_TIMEOUT:-5400}" -- sh /extra/bench-run.sh ${*@Q} | tee "$out/raw.log"
status=${PIPESTATUS[0]}
set -e
cp "$OXT_ROOT/build/vm/console.log" "$OXT_ROOT/build/vm/dmesg.log" "$out/" 2>/dev/null || true
if ! "$OXT_ROOT/scripts/logscan.sh" "$out/console.log" "$out/dmesg.log" >"$out/splats.txt"; then
	echo "bench: the bench guest's kernel log has splats (build/bench/splats.txt):" >&2
	cat "$out/splats.txt" >&2
fi

OXT_BENCH_VARIANT=$(basename "${BENCH_VARIANT_KO:-}") \
	python3 "$OXT_ROOT/scripts/bench-report.py" "$out/raw.log" "$out/splats.txt" \
	"$out/results.md" "$out/results.json"
# The pairs, the snapshot + merge and the scale section again in a second boot under
# -icount, where the guest's clock counts its instructions: figures that do not move with
# the host's load (two rounds, which agree to a fraction of a percent). The one-thread loops only: four
# vCPUs take turns on one host thread, and a thread's clock would count the others'
# instructions. All pairs but profile (a CPU-bound loop on four CPUs), unless PAIRS says.
# The snapshot + merge's timed figure prices every page it touches first at the emulator's
# cost, which moves with the host (80-200 ms on a quiet one); its instructions do not.
# ICOUNT=0 skips it.
isect=
for sec in pairs keys scale; do
	if [ -z "$only" ] || [[ " $only " == *" $sec "* ]]; then
		isect+="${isect:+ }$sec"
	fi
done
if [ "${ICOUNT:-1}" != 0 ] && [ -n "$isect" ]; then
	say "counting the guest's instructions: $isect again under -icount"
	set +e
	iargs=(PAIRS="empty count hist sum trace ten sysread" "$@" ONLY="$isect" ROUNDS=2 SCALE_ROUNDS=1
		WLS="1t lat")
	OXT_ICOUNT=0 "$OXT_ROOT/scripts/vm.sh" --no-build --files "$out/files" --mem 2G --hostroot \
		--timeout "${BENCH_TIMEOUT:-5400}" -- sh /extra/bench-run.sh ${iargs[*]@Q} |
		tee "$out/icount-raw.log"
	istatus=${PIPESTATUS[0]}
	set -e
	cp "$OXT_ROOT/build/vm/console.log" "$out/icount-console.log" 2>/dev/null || true
	cp "$OXT_ROOT/build/vm/dmesg.log" "$out/icount-dmesg.log" 2>/dev/null || true
	if ! "$OXT_ROOT/scripts/logscan.sh" "$out/icount-console.log" "$out/icount-dmesg.log" \
		>"$out/icount-splats.txt"; then
		echo "bench: the -icount guest's kernel log has splats (build/bench/icount-splats.txt):" >&2
		cat "$out/icount-splats.txt" >&2
	fi
	[ "$status" != 0 ] || status=$istatus
	OXT_BENCH_ICOUNT=1 OXT_BENCH_VARIANT=$(basename "${BENCH_VARIANT_KO:-}") \
		python3 "$OXT_ROOT/scripts/bench-report.py" "$out/icount-raw.log" \
		"$out/icount-splats.txt" "$out/icount.md" "$out/icount.json"
	{
		echo
		cat "$out/icount.md"
	} >>"$out/results.md"
fi
# The fire path's instructions per firing, counted on the host (independent of the load,
# unlike the guest's figures): after the guest, so that it does not share the CPUs.
if [ "${FIREBENCH:-1}" != 0 ]; then
	say "counting the fire path's instructions on the host"
	{
		printf '\n## Fire path on the host (scripts/firebench.sh)\n\n'
		printf 'Per firing, callgrind; the hist pair is one entry and one return firing.\n\n```\n'
		"$OXT_ROOT/scripts/firebench.sh" || echo "firebench failed"
		printf '```\n'
	} >>"$out/results.md"
fi
cat "$out/results.md"
say "results: build/bench/results.md, build/bench/results.json$([ ! -f "$out/icount.json" ] ||
	echo ", build/bench/icount.json") (guest exit $status)"
exit "$status"
