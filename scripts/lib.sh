# Shared settings for oxtrace's scripts (sourced, not run).
# shellcheck shell=bash

OXT_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# The kernel build, initramfs pieces and KVM probe result live outside the repo.
OXT_CACHE=${OXTRACE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/oxtrace}
KRUSTC=${KRUSTC:-/usr/bin/rustc}
KBINDGEN=${KBINDGEN:-${CARGO_HOME:-$HOME/.cargo}/bin/bindgen}
# The kernel's clippy: Debian's, matching $KRUSTC (rustup's, first in PATH, is another rustc).
KCLIPPY=${KCLIPPY:-/usr/bin/clippy-driver}
# Everything the kernel and the module are built with.
KMAKE_FLAGS=(LLVM=1 "RUSTC=$KRUSTC" "BINDGEN=$KBINDGEN")

# The one version of oxtrace (the module, the tool, dkms.conf, the Debian packages): the
# workspace's, in Cargo.toml.
oxt_version() {
	sed -n '/^\[workspace.package\]/,/^\[/s/^version = "\(.*\)"/\1/p' "$OXT_ROOT/Cargo.toml"
}

say() { echo "==> $*" >&2; }
die() {
	echo "error: $*" >&2
	exit 1
}
