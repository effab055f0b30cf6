#!/usr/bin/env bash
# Scan kernel logs for splats.  Prints each offending line with its file and
# exits 1 if there is one, 0 if the logs are clean.
#
#   scripts/logscan.sh LOG...
set -uo pipefail

# BUG / WARNING / lockdep (WARNING: possible ..., INFO: ...), atomic-sleep,
# lockups, RCU stalls, hung tasks, KASAN / UBSAN / KFENCE, oopses and panics.
pattern='(BUG:|WARNING:|INFO: |kernel BUG at|Oops|general protection fault|Kernel panic|sleeping function called from invalid context|soft lockup|hard LOCKUP|KASAN|UBSAN|KFENCE|Unable to handle kernel|unable to handle page fault|Call Trace:|blocked for more than|detected stalls|stack-protector|double fault|rust_panic|panicked at)'

status=0
for log in "$@"; do
	[ -f "$log" ] || continue
	if tr -d '\r' <"$log" | grep -nE "$pattern" | sed "s|^|$log:|" | head -n 40 | grep .; then
		status=1
	fi
done
exit $status
