#!/usr/bin/env bash
# make install / make uninstall: lay oxtrace out like an out-of-tree module tool.
#
#   scripts/install.sh install|uninstall|man
#
# DESTDIR (a staging root, default none), PREFIX (default /usr/local), KDIR (the
# kernel tree the module is built and installed for: default the cached test
# kernel; /lib/modules/$(uname -r)/build for the running one), MODULE=0 to leave
# the module out (DKMS installs it instead).
#
#   PREFIX/sbin/oxtrace                              the tool (needs root: sbin)
#   PREFIX/share/man/man8/oxtrace.8                  from Documentation/oxtrace.8.rst
#   PREFIX/share/bash-completion/completions/oxtrace
#   PREFIX/share/zsh/site-functions/_oxtrace
#   PREFIX/share/fish/vendor_completions.d/oxtrace.fish
#   PREFIX/include/linux/oxtrace.h                   the UAPI header
#   PREFIX/share/doc/oxtrace/html/                   Documentation/, if sphinx-build exists
#   DESTDIR/lib/modules/KVER/updates/oxtrace.ko      through the kernel's modules_install
#   DESTDIR/etc/udev/rules.d/60-oxtrace.rules        the node's group (udev reads no PREFIX)
set -euo pipefail
. "$(dirname "$0")/lib.sh"

action=${1:-}
DESTDIR=${DESTDIR:-}
PREFIX=${PREFIX:-/usr/local}
MODULE=${MODULE:-1}
case $PREFIX in /*) ;; *) die "PREFIX must be an absolute path, not '$PREFIX'" ;; esac
[ -z "$DESTDIR" ] || DESTDIR=$(realpath -m "$DESTDIR")
root=$DESTDIR$PREFIX
BUILD=$OXT_ROOT/build

# Each installed file: "destination source" (source relative to the repo or build/).
files=(
	"sbin/oxtrace build/oxtrace"
	"share/man/man8/oxtrace.8 build/man/oxtrace.8"
	"share/bash-completion/completions/oxtrace build/completions/oxtrace.bash"
	"share/zsh/site-functions/_oxtrace build/completions/_oxtrace"
	"share/fish/vendor_completions.d/oxtrace.fish build/completions/oxtrace.fish"
	"include/linux/oxtrace.h include/uapi/linux/oxtrace.h"
)
docdir=share/doc/oxtrace
# udev only reads /etc and /lib (/usr/lib): the rule goes there whatever PREFIX is.
udevrule=$DESTDIR/etc/udev/rules.d/60-oxtrace.rules

kdir() {
	if [ -z "${KDIR:-}" ]; then
		KDIR=$("$OXT_ROOT/scripts/kernel.sh" "${KFLAVOR:-test}")
	fi
	export KDIR
	[ -f "$KDIR/include/config/kernel.release" ] || die "KDIR=$KDIR is not a configured kernel tree"
}
kmake() {
	local flags=("${KMAKE_FLAGS[@]}")
	[ -z "${OXT_KMAKE_FLAGS:-}" ] || read -r -a flags <<<"$OXT_KMAKE_FLAGS"
	make -s -C "$KDIR" M="$OXT_ROOT" "${flags[@]}" "$@"
}

# The HTML documentation, only where sphinx-build is installed (no conf.py: -C).
build_html() {
	command -v sphinx-build >/dev/null || return 1
	rm -rf "$BUILD/doc"
	mkdir -p "$BUILD/doc"
	sphinx-build -q -C -b html -D project=oxtrace -D master_doc=index -D html_theme=alabaster \
		-D html_copy_source=0 "$OXT_ROOT/Documentation" "$BUILD/doc/html" >"$BUILD/doc/sphinx.log" 2>&1 ||
		die "sphinx-build failed (log: $BUILD/doc/sphinx.log)"
	if grep -qE 'WARNING|ERROR' "$BUILD/doc/sphinx.log"; then
		say "HTML documentation built with $(grep -cE 'WARNING|ERROR' "$BUILD/doc/sphinx.log") warnings ($BUILD/doc/sphinx.log)"
	fi
}

# build/man/oxtrace.8 from the reStructuredText source.
build_man() {
	command -v rst2man >/dev/null || die "rst2man is missing (Debian: apt-get install python3-docutils)"
	mkdir -p "$BUILD/man"
	rst2man --strict "$OXT_ROOT/Documentation/oxtrace.8.rst" >"$BUILD/man/oxtrace.8"
}

do_install() {
	build_man
	# `make tool` then `sudo make install` is usual, and root's PATH may have no cargo.
	if command -v cargo >/dev/null; then
		"$OXT_ROOT/scripts/build.sh" tool
	else
		[ -x "$BUILD/oxtrace" ] && [ -d "$BUILD/completions" ] ||
			die "cargo is not on PATH: run 'make tool' first as the user who has it"
		say "no cargo on PATH: installing the tool built before ($BUILD/oxtrace)"
	fi
	local f dst src mode
	for f in "${files[@]}"; do
		read -r dst src <<<"$f"
		mode=0644
		[ "${dst%%/*}" != sbin ] || mode=0755
		install -D -m "$mode" "$OXT_ROOT/$src" "$root/$dst"
		echo "  INSTALL $root/$dst"
	done
	install -D -m 0644 "$OXT_ROOT/scripts/udev/60-oxtrace.rules" "$udevrule"
	echo "  INSTALL $udevrule"
	if ! getent group oxtrace >/dev/null; then
		say "group 'oxtrace' does not exist: create it (groupadd --system oxtrace) and add the users"
	fi
	if build_html; then
		rm -rf "${root:?}/$docdir"
		mkdir -p "$root/$docdir"
		cp -r "$BUILD/doc/html" "$root/$docdir/html"
		echo "  INSTALL $root/$docdir/html/"
	fi
	if [ "$MODULE" != 0 ]; then
		kdir
		"$OXT_ROOT/scripts/build.sh" module
		kmake INSTALL_MOD_PATH="$DESTDIR" modules_install
		echo "  INSTALL $DESTDIR/lib/modules/$(cat "$KDIR/include/config/kernel.release")/updates/oxtrace.ko"
	fi
}

# prune DIR: remove DIR and its parents while empty, not above the install root.
prune() {
	local d=$1 top=$2
	while [ "$d" != "$top" ] && [ "${d#"$top"/}" != "$d" ] && rmdir "$d" 2>/dev/null; do
		d=$(dirname "$d")
	done
}

do_uninstall() {
	local f dst src
	for f in "${files[@]}"; do
		read -r dst src <<<"$f"
		if [ -e "$root/$dst" ]; then
			rm -f "$root/$dst"
			echo "  REMOVE  $root/$dst"
		fi
		[ -z "$DESTDIR" ] || prune "$(dirname "$root/$dst")" "$DESTDIR"
	done
	if [ -e "$udevrule" ]; then
		rm -f "$udevrule"
		echo "  REMOVE  $udevrule"
		[ -z "$DESTDIR" ] || prune "$(dirname "$udevrule")" "$DESTDIR"
	fi
	if [ -d "$root/$docdir" ]; then
		rm -rf "${root:?}/$docdir"
		echo "  REMOVE  $root/$docdir/"
		[ -z "$DESTDIR" ] || prune "$(dirname "$root/$docdir")" "$DESTDIR"
	fi
	[ "$MODULE" != 0 ] || return 0
	kdir
	local kver mods ko
	kver=$(cat "$KDIR/include/config/kernel.release")
	mods=$DESTDIR/lib/modules/$kver
	ko=$(find "$mods/updates" -maxdepth 1 -name 'oxtrace.ko*' 2>/dev/null | head -n 1)
	[ -n "$ko" ] || return 0
	rm -f "$ko"
	echo "  REMOVE  $ko"
	if find "$mods" -name '*.ko*' | grep -q .; then
		depmod -a ${DESTDIR:+-b "$DESTDIR"} "$kver"
	else
		# Only depmod's indexes from our modules_install are left: remove them too.
		rm -f "$mods"/modules.*
		[ -z "$DESTDIR" ] || prune "$mods/updates" "$DESTDIR"
	fi
}

case $action in
install) do_install ;;
uninstall) do_uninstall ;;
man) build_man ;;
*) die "usage: scripts/install.sh install|uninstall|man" ;;
esac
