#!/usr/bin/env bash
# The log scanner must flag every kind of splat and pass a clean boot log.
set -uo pipefail
scan=$(dirname "$0")/logscan.sh
# Under the tree's build/, not /tmp: another job's clean-up of /tmp must not pull the
# logs from under the follower.
build=$(cd "$(dirname "$0")/.." && pwd)/build
mkdir -p "$build"
dir=$(mktemp -d "$build/logscan.XXXXXX")
# Only this shell cleans up: a background subshell that ends before it execs its command
# runs the inherited EXIT trap, which removed $dir under the next step.
trap '[ "$BASHPID" = '"$$"' ] && rm -rf "$dir"' EXIT
bad=0

cat >"$dir/clean" <<'LOG'
[    0.000000] Linux version 6.12.117 (root@host) #1 SMP PREEMPT
[    0.120000] Lock dependency validator: Copyright (c) 2006 Red Hat, Inc., Ingo Molnar
[    0.130000] ... MAX_LOCKDEP_SUBCLASSES:  8
[    2.900000] oxtrace: oxtrace 0.1.0 loaded: /dev/oxtrace, ABI 1.0
LOG
"$scan" "$dir/clean" >/dev/null || { echo "clean log flagged"; bad=1; }

# F: fatal (scripts/vm.sh stops the guest at once), -: a failure found after the run.
while read -r kind line; do
	printf '[    1.000000] boot ok\n[    3.000000] %s\n' "$line" >"$dir/splat"
	if "$scan" "$dir/splat" >/dev/null; then
		echo "not flagged: $line"
		bad=1
	fi
	fatal=-
	"$scan" --fatal "$dir/splat" >/dev/null || fatal=F
	if [ "$fatal" != "$kind" ]; then
		echo "fatal should be $kind, is $fatal: $line"
		bad=1
	fi
done <<'SPLATS'
F BUG: sleeping function called from invalid context at kernel/locking/mutex.c:585
F BUG: kernel NULL pointer dereference, address: 0000000000000000
F BUG: KASAN: slab-use-after-free in oxt_fop_ioctl+0x1c/0x30 [oxtrace]
- WARNING: CPU: 1 PID: 80 at rust/kernel/alloc/kbox.rs:100 oxtrace_init+0x10/0x20 [oxtrace]
- WARNING: possible circular locking dependency detected
- WARNING: possible recursive locking detected
- INFO: trying to register non-static key.
F watchdog: BUG: soft lockup - CPU#2 stuck for 22s! [device_test:91]
F NMI watchdog: Watchdog detected hard LOCKUP on cpu 3
F rcu: INFO: rcu_preempt detected stalls on CPUs/tasks:
F INFO: task insmod:77 blocked for more than 120 seconds.
F Oops: general protection fault, probably for non-canonical address 0xdead000000000100: 0000 [#1] PREEMPT SMP
F Kernel panic - not syncing: Fatal exception
F rust_kernel: panicked at rust/oxtrace_main.rs:10:5:
F kernel BUG at mm/slub.c:123!
- Call Trace:
SPLATS

# --follow: returns at the first fatal line while the process lives (the guest's
# QEMU in vm.sh), and 0 once the process has ended without one.  The holder's
# lifetime only bounds a broken follower; nothing here waits for time to pass.
# The holder lives until its input closes. It is ended by closing that pipe, not by a
# signal: a kill that lands between a background job's fork and its exec can be lost (the
# shell's child catches it, then execs), and the follower then waited for a holder that
# never ended (make check hung here on a loaded machine). The follower must not hold the
# pipe open itself.
hold_start() {
	exec {hold_fd}> >(exec cat >/dev/null)
	holder=$!
}
hold_end() {
	exec {hold_fd}>&-
	wait "$holder" 2>/dev/null
}
cp "$dir/clean" "$dir/live"
echo "[    3.000000] WARNING: CPU: 1 PID: 42 at kernel/fake.c:1 x+0x0/0x10" >>"$dir/live"
hold_start
"$scan" --follow "$holder" "$dir/live" {hold_fd}>&- &
follower=$!
hold_end
wait $follower || { echo "--follow flagged a log without a fatal line"; bad=1; }

hold_start
cp "$dir/clean" "$dir/live"
"$scan" --follow "$holder" "$dir/live" {hold_fd}>&- &
follower=$!
echo "[    4.000000] watchdog: BUG: soft lockup - CPU#2 stuck for 22s! [sh:91]" >>"$dir/live"
if wait $follower; then
	echo "--follow missed a fatal line"
	bad=1
fi
hold_end
exit $bad
