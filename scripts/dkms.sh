#!/usr/bin/env bash
# The module as a DKMS package (dkms.conf at the root).
#
#   scripts/dkms.sh stage DIR   copy the module's sources to DIR/oxtrace-VERSION
#   scripts/dkms.sh install     stage into $DESTDIR/usr/src, then dkms add, build and
#                               install for KVER (default: the running kernel)
#   scripts/dkms.sh uninstall   dkms remove (all kernels) and the staged sources
#   scripts/dkms.sh check       dkms build against $KDIR (default: the test kernel) in a
#                               throwaway dkms tree: /var/lib/dkms and /usr/src stay untouched
set -euo pipefail
. "$(dirname "$0")/lib.sh"

conf() { sed -n "s/^$1=\"\\(.*\\)\"\$/\\1/p" "$OXT_ROOT/dkms.conf"; }
name=$(conf PACKAGE_NAME)
[ "$(conf PACKAGE_VERSION)" = "#MODULE_VERSION#" ] || die "dkms.conf's PACKAGE_VERSION must be #MODULE_VERSION#"
ver=$(oxt_version)
[ -n "$ver" ] || die "no version in Cargo.toml's [workspace.package]"

need_dkms() {
	command -v dkms >/dev/null || die "dkms is not installed (Debian: apt-get install dkms)"
}

# stage DIR: the module's sources without build products or host-only tests.
stage() {
	local dst=$1/$name-$ver
	rm -rf "$dst"
	mkdir -p "$dst"
	(cd "$OXT_ROOT" && tar -c --exclude='*.o' --exclude='*.ko' --exclude='*.mod' \
		--exclude='*.mod.c' --exclude='.*.cmd' --exclude='.*.d' --exclude='*.rmeta' \
		--exclude=rust/core/tests --exclude=proptest-regressions --exclude=modules.order --exclude=Module.symvers \
		dkms.conf Kbuild rust shim include scripts/lib.sh scripts/dkms-make.sh) |
		tar -x -C "$dst"
	sed -i "s/#MODULE_VERSION#/$ver/" "$dst/dkms.conf"
	echo "$dst"
}

case ${1:-} in
stage)
	[ -n "${2:-}" ] || die "usage: scripts/dkms.sh stage DIR"
	stage "$2" >/dev/null
	;;
install)
	need_dkms
	kver=${KVER:-$(uname -r)}
	src=$(stage "${DESTDIR:-}/usr/src")
	say "staged $src"
	if [ -n "${DESTDIR:-}" ]; then
		say "DESTDIR is set: not registering with dkms (run dkms add/build/install on the target)"
		exit 0
	fi
	dkms remove "$name/$ver" --all >/dev/null 2>&1 || true
	dkms add "$name/$ver"
	dkms build "$name/$ver" -k "$kver"
	dkms install "$name/$ver" -k "$kver"
	;;
uninstall)
	if [ -z "${DESTDIR:-}" ] && command -v dkms >/dev/null; then
		dkms remove "$name/$ver" --all || true
	fi
	rm -rf "${DESTDIR:-}/usr/src/$name-$ver"
	[ -z "${DESTDIR:-}" ] || rmdir "$DESTDIR/usr/src" "$DESTDIR/usr" 2>/dev/null || true
	;;
check)
	need_dkms
	if [ -z "${KDIR:-}" ]; then
		KDIR=$("$OXT_ROOT/scripts/kernel.sh" "${KFLAVOR:-test}")
	fi
	kver=$(cat "$KDIR/include/config/kernel.release")
	tmp=$(mktemp -d "${TMPDIR:-/tmp}/oxtrace-dkms.XXXXXX")
	trap '[ -n "${OXT_KEEP:-}" ] || rm -rf "$tmp"' EXIT
	mkdir -p "$tmp/src" "$tmp/tree" "$tmp/install"
	stage "$tmp/src" >/dev/null
	dk=(dkms --sourcetree "$tmp/src" --dkmstree "$tmp/tree" --installtree "$tmp/install")
	"${dk[@]}" add "$name/$ver"
	rc=0
	"${dk[@]}" build "$name/$ver" -k "$kver" --kernelsourcedir "$KDIR" || rc=$?
	# dkms keeps the build's output to itself: show it (make check keeps it in its log).
	find "$tmp/tree" -name make.log -exec cat {} + >&2
	[ $rc = 0 ] || die "dkms build failed (exit $rc)"
	ko=$(find "$tmp/tree/$name/$ver/$kver" -name "$name.ko*" | head -n 1)
	[ -n "$ko" ] || die "dkms build left no $name.ko"
	modinfo -F vermagic "$ko" | grep -q "^$kver " || die "$ko is not built for $kver"
	say "dkms build ok: $name $ver for $kver ($(basename "$ko"))"
	;;
*) die "usage: scripts/dkms.sh stage DIR | install | uninstall | check" ;;
esac
