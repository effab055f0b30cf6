#!/usr/bin/env bash
# Install what `make bench` needs on top of scripts/setup-toolchain.sh: Debian's
# bpftrace (and perf for the profile), run inside the bench guest from the host's
# root filesystem over 9p, valgrind for scripts/firebench.sh and gdb for
# scripts/steptrace.sh on the host.
# Kept apart so that `make check` stays lean.  Idempotent and silent when present.
set -euo pipefail
"$(dirname "$0")/setup-toolchain.sh"

BENCH_PKGS=(bpftrace linux-perf valgrind gdb)
SUDO=
[ "$(id -u)" = 0 ] || SUDO=sudo
missing=()
for p in "${BENCH_PKGS[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' ||
		missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
	echo "setup-bench: installing: ${missing[*]}" >&2
	$SUDO apt-get update -qq >/dev/null
	DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends \
		"${missing[@]}" >/dev/null
fi
