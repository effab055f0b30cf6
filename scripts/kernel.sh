#!/usr/bin/env bash
# Build (or reuse) the guest kernel and print its build directory (KDIR).
#
#   scripts/kernel.sh [test|bench]
#
# The tree is the Debian linux-source-6.12 tarball, configured as tinyconfig
# plus scripts/kconfig/base.config and <flavor>.config, built with LLVM and
# Debian's rustc.  The build is cached in $OXTRACE_CACHE/kernel/<flavor>-<key>,
# key = kernel version + hash of the config fragments and toolchain versions,
# and reused while none of them change.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

flavor=${1:-test}
[ -f "$OXT_ROOT/scripts/kconfig/$flavor.config" ] || die "unknown kernel flavor '$flavor'"

"$OXT_ROOT/scripts/setup-toolchain.sh"

tarball=/usr/src/linux-source-6.12.tar.xz
[ -f "$tarball" ] || die "$tarball missing (package linux-source-6.12)"
kver=$(dpkg-query -W -f='${Version}' linux-source-6.12)
fragments=("$OXT_ROOT/scripts/kconfig/base.config" "$OXT_ROOT/scripts/kconfig/$flavor.config")
key=$( {
	echo "$kver"
	cat "${fragments[@]}"
	"$KRUSTC" --version
	"$KBINDGEN" --version
	clang --version | head -n1
	# pahole writes the BTF; only flavors with BTF depend on it, so others keep their key.
	if grep -qx 'CONFIG_DEBUG_INFO_BTF=y' "${fragments[@]}"; then pahole --version; fi
} | sha256sum | cut -c1-12)

src=$OXT_CACHE/src/linux-$kver
out=$OXT_CACHE/kernel/$flavor-$key
if [ -f "$out/.oxtrace-done" ]; then
	touch "$out" # most recently used: the pruning below keeps it
	echo "$out"
	exit 0
fi

mkdir -p "$OXT_CACHE/src" "$OXT_CACHE/kernel"
if [ ! -f "$src/.oxtrace-extracted" ]; then
	say "extracting linux-source $kver"
	rm -rf "$src" "$src.tmp"
	mkdir -p "$src.tmp"
	tar -xJf "$tarball" -C "$src.tmp" --strip-components=1
	touch "$src.tmp/.oxtrace-extracted"
	mv "$src.tmp" "$src"
fi

# Besides the new build, the most recently used other build of the flavor is kept, so a
# check of another branch (or one already running on it) is not pulled from under it.
for old in $(ls -dt "$OXT_CACHE/kernel/$flavor"-* 2>/dev/null | grep -vxF "$out" | tail -n +2); do
	rm -rf "$old"
done
mkdir -p "$out"
km() { make -s -C "$src" O="$out" "${KMAKE_FLAGS[@]}" "$@"; }

say "configuring $flavor kernel $kver in $out"
km rustavailable >/dev/null || die "the kernel does not accept the Rust toolchain (make rustavailable)"
km tinyconfig >/dev/null
cat "${fragments[@]}" >>"$out/.config"
km olddefconfig >"$out/config.log" 2>&1 || { cat "$out/config.log" >&2; die "olddefconfig failed"; }
# olddefconfig drops silently what it can't satisfy (CONFIG_RUST when the
# toolchain is not found, for one): every requested option must survive.
lost=0
while IFS= read -r line; do
	case "$line" in CONFIG_*=*) ;; *) continue ;; esac
	if ! grep -qxF "$line" "$out/.config"; then
		echo "error: $line did not survive olddefconfig" >&2
		lost=1
	fi
done < <(cat "${fragments[@]}")
[ $lost = 0 ] || die "kernel config incomplete"

# progress START LOG: every 20 s, the elapsed time and the latest target of the build
# log (kbuild's "  CC      kernel/fork.o" lines), so a long first build is not silent.
progress() {
	local t0=$1 log=$2 last n el
	while sleep 20; do
		last=$(tail -n 200 "$log" 2>/dev/null | grep -E '^  [A-Z][A-Z0-9_]* ' | tail -n 1 |
			sed -e 's/^ *//' -e 's/  */ /g')
		n=$(grep -cE '^  (CC|RUSTC[A-Z ]*|AS|LD)[ ]' "$log" 2>/dev/null || true)
		el=$(($(date +%s) - t0))
		say "kernel build $((el / 60))m$((el % 60))s, ${n:-0} objects: ${last:-starting}"
	done
}

say "building $flavor kernel (first time only; ~8 minutes on 2 cores; log: $out/build.log)"
start=$(date +%s)
# stdout is the KDIR callers capture: the ticker (and its sleep) must not hold it open.
progress "$start" "$out/build.log" >&2 &
ticker=$!
trap 'kill $ticker 2>/dev/null || true' EXIT
# The default target also writes Module.symvers, which external modules need.
# Not km's -s: the progress lines come from kbuild's short "CC foo.o" log.
make -C "$src" O="$out" "${KMAKE_FLAGS[@]}" -j"$(nproc)" all >"$out/build.log" 2>&1 || {
	tail -n 40 "$out/build.log" >&2
	die "kernel build failed (log: $out/build.log)"
}
kill $ticker 2>/dev/null || true
touch "$out/.oxtrace-done"
say "kernel built in $(($(date +%s) - start)) s"
echo "$out"
