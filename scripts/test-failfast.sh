#!/usr/bin/env bash
# vm.sh must stop a guest whose console shows a fatal splat instead of waiting for
# its timeout: a fake BUG line, then a command that would hang.  The run must end
# with 120 and the "guest stopped" notice, before the command's end marker.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

out=$(mktemp)
trap 'rm -f "$out"' EXIT
set +e
# tail -f /dev/null stands for a hung guest (it never ends); the timeout only bounds a
# broken runner (121).
"$OXT_ROOT/scripts/vm.sh" --no-build --timeout 600 -- \
	'echo "BUG: oxtrace fail-fast test" >/dev/kmsg; tail -f /dev/null; echo FAILFAST-END' >"$out" 2>&1
rc=$?
set -e
cat "$out"
bad=0
[ $rc = 120 ] || { echo "test-failfast: exit $rc, want 120" >&2; bad=1; }
grep -q 'guest stopped' "$out" || { echo "test-failfast: the guest was not stopped by the runner" >&2; bad=1; }
grep -q 'BUG: oxtrace fail-fast test' "$out" || { echo "test-failfast: the fatal line was not shown" >&2; bad=1; }
! grep -qx FAILFAST-END "$out" || { echo "test-failfast: the command ran to its end" >&2; bad=1; }
exit $bad
