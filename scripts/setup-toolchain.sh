#!/usr/bin/env bash
# Install what oxtrace needs on a bare Debian bookworm machine.
# Idempotent and silent when everything is present.
#
# The kernel's Rust is built with Debian's rustc-web (/usr/bin/rustc) and its
# matching library source; the userspace tool and host tests use rustup's cargo.
set -euo pipefail

RUST_WEB_VERSION=${RUST_WEB_VERSION:-1.85.0+dfsg3-1~deb12u3}
BINDGEN_VERSION=${BINDGEN_VERSION:-0.69.5}

APT_PKGS=(linux-source-6.12 clang libclang-dev lld llvm qemu-system-x86
	busybox-static cpio flex bison bc libelf-dev libssl-dev kmod xz-utils
	make gcc python3 rsync libipt-dev
	# <sys/sdt.h>, for the USDT selftests and the tool's USDT tests
	systemtap-sdt-dev
	# pahole, for the test kernel's BTF (CONFIG_DEBUG_INFO_BTF)
	dwarves
	prometheus curl
	# rst2man for make install's man page; make check builds the module through dkms
	python3-docutils dkms
	# make deb (debian/) and make check's install of the packages
	debhelper dh-dkms lintian

	# headless Chromium: make check loads a flame graph's SVG in a real browser
	chromium)
RUST_PKGS=(rustc-web rust-web-src rust-web-clippy libstd-rust-web-dev libstd-rust-web-1.85)

log() { echo "setup-toolchain: $*" >&2; }
SUDO=
[ "$(id -u)" = 0 ] || SUDO=sudo

missing=()
for p in "${APT_PKGS[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' ||
		missing+=("$p")
done
for p in "${RUST_PKGS[@]}"; do
	v=$(dpkg-query -W -f='${Version}' "$p" 2>/dev/null || true)
	[ "$v" = "$RUST_WEB_VERSION" ] || missing+=("$p=$RUST_WEB_VERSION")
done

if [ ${#missing[@]} -gt 0 ]; then
	log "installing: ${missing[*]}"
	$SUDO apt-get update -qq >/dev/null
	for p in "${RUST_PKGS[@]}"; do
		if ! apt-cache madison "$p" | grep -qF " $RUST_WEB_VERSION "; then
			log "error: $p version $RUST_WEB_VERSION is not available from apt."
			log "The kernel's Rust needs rustc-web and rust-web-src at the same exact"
			log "version (override with RUST_WEB_VERSION=... if another pair is known to work)."
			exit 1
		fi
	done
	DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends \
		--allow-downgrades "${missing[@]}" >/dev/null
fi

if [ "$(/usr/bin/rustc --version | awk '{print $2}')" != "${RUST_WEB_VERSION%%+*}" ]; then
	log "error: /usr/bin/rustc is not ${RUST_WEB_VERSION%%+*}"
	exit 1
fi

# CONFIG_DEBUG_INFO_BTF with CONFIG_RUST needs pahole's --lang_exclude (1.24), else Kconfig
# silently drops BTF or Rust.
pahole_v=$(pahole --version | tr -d v)
if [ "$(printf '%s\n' 1.24 "$pahole_v" | sort -V | head -n1)" != 1.24 ]; then
	log "error: pahole $pahole_v is older than 1.24 (package dwarves)"
	exit 1
fi

bindgen_bin=${CARGO_HOME:-$HOME/.cargo}/bin/bindgen
if ! { [ -x "$bindgen_bin" ] && "$bindgen_bin" --version 2>/dev/null | grep -qF " $BINDGEN_VERSION"; }; then
	log "installing bindgen-cli $BINDGEN_VERSION"
	cargo install --quiet --locked --force bindgen-cli --version "$BINDGEN_VERSION" >/dev/null
fi
