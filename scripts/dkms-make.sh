#!/usr/bin/env bash
# DKMS's build command (dkms.conf): oxtrace.ko for one kernel with the toolchain
# flags of `make module` (scripts/lib.sh; OXT_KMAKE_FLAGS overrides them).
#
#   scripts/dkms-make.sh KERNEL_SOURCE_DIR KERNELVER [clean] [VAR=VALUE...]
#
# dkms appends variables of its own (CC=clang LD=ld.lld for a clang-built kernel):
# they are passed on to make.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

[ $# -ge 2 ] || die "usage: dkms-make.sh KERNEL_SOURCE_DIR KERNELVER [clean] [VAR=VALUE...]"
ksrc=$1
kver=$2
shift 2
target=modules
extra=()
for a in "$@"; do
	case $a in
	clean) target=clean ;;
	*=*) extra+=("$a") ;;
	*) die "dkms-make.sh: unexpected argument '$a'" ;;
	esac
done

# dkms runs from a kernel's postinst with a minimal environment: fall back to a
# bindgen on PATH when rustup's is not where lib.sh expects it.
if [ ! -x "$KBINDGEN" ] && command -v bindgen >/dev/null; then
	KMAKE_FLAGS=(LLVM=1 "RUSTC=$KRUSTC" "BINDGEN=$(command -v bindgen)")
fi
flags=("${KMAKE_FLAGS[@]}")
[ -z "${OXT_KMAKE_FLAGS:-}" ] || read -r -a flags <<<"$OXT_KMAKE_FLAGS"

if [ "$target" = modules ]; then
	grep -q '^CONFIG_RUST=y' "$ksrc/.config" 2>/dev/null ||
		die "kernel $kver ($ksrc) is not built with CONFIG_RUST=y: oxtrace needs a Rust-enabled kernel"
	[ -f "$ksrc/Module.symvers" ] || die "$ksrc has no Module.symvers: not a built kernel tree"
	say "building oxtrace.ko for $kver with ${flags[*]}"
fi
exec make -C "$ksrc" M="$OXT_ROOT" "${flags[@]}" "${extra[@]}" -j"$(nproc)" "$target"
