#!/usr/bin/env bash
# Build the pieces that go into the guest.
#
#   scripts/build.sh module|tool|selftests|all
#
# module: oxtrace.ko against $KDIR (default: the cached test kernel); with
# OXT_CLIPPY=1 the module's Rust goes through the kernel's clippy (CLIPPY=1);
# tool: tools/oxtrace as a static binary; selftests: static TAP programs.
# Outputs are collected in build/.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

what=${1:-all}
BUILD=$OXT_ROOT/build
mkdir -p "$BUILD"

kdir() {
	if [ -z "${KDIR:-}" ]; then
		KDIR=$("$OXT_ROOT/scripts/kernel.sh" "${KFLAVOR:-test}")
	fi
	[ -f "$KDIR/Module.symvers" ] || die "KDIR=$KDIR is not a built kernel tree (no Module.symvers)"
	echo "$KDIR"
}

build_module() {
	local k
	k=$(kdir)
	say "building oxtrace.ko against $k"
	# KMAKE_FLAGS (space-separated) overrides the toolchain for another tree.
	local flags=("${KMAKE_FLAGS[@]}")
	[ -z "${OXT_KMAKE_FLAGS:-}" ] || read -r -a flags <<<"$OXT_KMAKE_FLAGS"
	if [ "${OXT_CLIPPY:-0}" = 1 ]; then
		[ -x "$KCLIPPY" ] || die "no clippy-driver at $KCLIPPY (scripts/setup-toolchain.sh installs it)"
		flags+=(CLIPPY=1 "CLIPPY_DRIVER=$KCLIPPY")
	fi
	local log=$BUILD/module-build.log
	# Objects built against another tree (make bench's kernel, KDIR=) are stale for
	# this one although kbuild may see the same command lines: clean them first.
	local stamp=$BUILD/module-kdir
	if [ "$(cat "$stamp" 2>/dev/null)" != "$k" ]; then
		make -C "$k" M="$OXT_ROOT" "${flags[@]}" clean >/dev/null 2>&1 || true
	fi
	rm -f "$stamp"
	if ! make -C "$k" M="$OXT_ROOT" "${flags[@]}" -j"$(nproc)" modules >"$log" 2>&1; then
		cat "$log" >&2
		die "module build failed"
	fi
	# The module must build without a single compiler (or clippy) warning.
	if grep -E '(^|[^a-z_])warning[:\[]' "$log" >&2; then
		die "module build has warnings (log: $log)"
	fi
	cp "$OXT_ROOT/oxtrace.ko" "$BUILD/oxtrace.ko"
	echo "$k" >"$stamp"
}

build_tool() {
	say "building tools/oxtrace (static)"
	# An explicit --target keeps crt-static off build scripts and proc macros.
	# JSON messages on stdout name the build script's OUT_DIR, where tools/oxtrace/build.rs
	# wrote the shell completions (make install takes them from build/completions).
	(cd "$OXT_ROOT" && RUSTFLAGS="-C target-feature=+crt-static" \
		cargo build --quiet --release --locked -p oxtrace --target x86_64-unknown-linux-gnu \
		--message-format=json-render-diagnostics) >"$BUILD/tool-build.json"
	cp "$OXT_ROOT/target/x86_64-unknown-linux-gnu/release/oxtrace" "$BUILD/oxtrace"
	local out
	out=$(grep '"reason":"build-script-executed"' "$BUILD/tool-build.json" | grep -F '/tools/oxtrace#' |
		grep -o '"out_dir":"[^"]*"' | cut -d'"' -f4 | tail -n 1)
	[ -n "$out" ] && [ -d "$out/completions" ] || die "no completions from tools/oxtrace/build.rs"
	rm -rf "$BUILD/completions"
	cp -r "$out/completions" "$BUILD/completions"
	mkdir -p "$BUILD/selftests"
	cp "$OXT_ROOT/target/x86_64-unknown-linux-gnu/release/oxt-loadtest" "$BUILD/selftests/"
	# The tutorial's examples run in the guest (oxt-doctest), so it never goes stale.
	cp "$OXT_ROOT/target/x86_64-unknown-linux-gnu/release/oxt-doctest" "$BUILD/selftests/"
	cp "$OXT_ROOT/target/x86_64-unknown-linux-gnu/release/oxt-jsoncheck" "$BUILD/selftests/"
	cp "$OXT_ROOT/Documentation/tutorial.rst" "$BUILD/selftests/"
}

build_selftests() {
	local k ksrc
	k=$(kdir)
	ksrc=$k
	[ -e "$k/source" ] && ksrc=$(readlink -f "$k/source")
	say "building selftests"
	make -s -C "$OXT_ROOT/selftests/oxtrace" KSRC="$ksrc" OUTPUT="$BUILD/selftests"
	# A tiny C module whose functions the fbt selftests probe by module; built in a
	# copy under build/ (kbuild writes its objects beside the sources).
	local flags=("${KMAKE_FLAGS[@]}")
	[ -z "${OXT_KMAKE_FLAGS:-}" ] || read -r -a flags <<<"$OXT_KMAKE_FLAGS"
	rm -rf "$BUILD/testmod"
	cp -r "$OXT_ROOT/selftests/oxtrace/testmod" "$BUILD/testmod"
	if ! make -C "$k" M="$BUILD/testmod" "${flags[@]}" modules >"$BUILD/testmod.log" 2>&1; then
		cat "$BUILD/testmod.log" >&2
		die "test module build failed"
	fi
	cp "$BUILD/testmod/oxtmod.ko" "$BUILD/selftests/"
}

case $what in
module) build_module ;;
tool) build_tool ;;
selftests) build_selftests ;;
all)
	build_module
	build_tool
	build_selftests
	;;
*) die "unknown build target '$what'" ;;
esac
