#!/usr/bin/env bash
# Scan kernel logs for splats.  Prints each offending line with its file and
# exits 1 if there is one, 0 if the logs are clean.
#
#   scripts/logscan.sh LOG...               every kind of splat
#   scripts/logscan.sh --fatal LOG...       only those that leave the kernel dead or stuck
#   scripts/logscan.sh --follow PID LOG     wait for a fatal line in LOG while PID lives:
#                                           exit 1 at the first one, 0 when PID has ended
set -uo pipefail

# Fatal: the kernel died or is stuck (oopses, panics, BUG, lockups, RCU stalls, hung
# tasks); scripts/vm.sh stops the guest at the first one instead of waiting for its timeout.
fatal='BUG:|kernel BUG at|Oops|general protection fault|Kernel panic|soft lockup|hard LOCKUP|detected stalls|blocked for more than|double fault|Unable to handle kernel|unable to handle page fault|stack-protector|rust_panic|panicked at'
# Not fatal, still a failure: WARNING and lockdep (WARNING: possible ..., INFO: ...),
# atomic sleep, KASAN / UBSAN / KFENCE reports, stack dumps.
other='WARNING:|INFO: |sleeping function called from invalid context|KASAN|UBSAN|KFENCE|Call Trace:'
pattern="($fatal|$other)"

if [ "${1:-}" = --follow ]; then
	pid=$2 log=$3
	# tail ends with PID; grep at the first fatal line (tail is not waited for).
	if grep -m1 -qE "($fatal)" < <(tail -n +1 -s 0.2 -F --pid="$pid" "$log" 2>/dev/null); then
		exit 1
	fi
	exit 0
fi
if [ "${1:-}" = --fatal ]; then
	pattern="($fatal)"
	shift
fi

status=0
for log in "$@"; do
	[ -f "$log" ] || continue
	if tr -d '\r' <"$log" | grep -nE "$pattern" | sed "s|^|$log:|" | head -n 40 | grep .; then
		status=1
	fi
done
exit $status
