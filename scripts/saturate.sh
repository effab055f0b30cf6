#!/usr/bin/env bash
# Run a command while every CPU of the host is busy: N busy loops (default: one
# per CPU) at the command's priority, started before it and stopped after it.
# The exit status is the command's.  Tests must pass like this: they wait for
# conditions, never for time.
#
#   scripts/saturate.sh [-n N] -- CMD...
set -euo pipefail

n=$(nproc)
while [ $# -gt 0 ]; do
	case $1 in
	-n) n=$2; shift 2 ;;
	--) shift; break ;;
	*) break ;;
	esac
done
[ $# -gt 0 ] || { echo "usage: scripts/saturate.sh [-n N] -- CMD..." >&2; exit 2; }
case $n in '' | *[!0-9]*) echo "saturate: -n takes a number" >&2; exit 2 ;; esac

pids=()
stop() {
	[ ${#pids[@]} = 0 ] || kill "${pids[@]}" 2>/dev/null
	wait "${pids[@]}" 2>/dev/null || true
}
trap stop EXIT
trap 'exit 130' INT TERM
for _ in $(seq "$n"); do
	(while :; do :; done) &
	pids+=($!)
done
echo "saturate: $n busy loops on $(nproc) CPUs: $*" >&2
set +e
"$@"
rc=$?
set -e
exit $rc
