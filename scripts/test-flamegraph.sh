#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# --oformat flamegraph in a real browser: the host test renders a known stack aggregation
# to SVG (tools/oxtrace/tests/flamegraph.rs) and writes what it implies; headless Chromium
# (Debian's chromium, installed by scripts/setup-toolchain.sh) loads the SVG, runs its
# script and dumps the DOM, and takes a screenshot; scripts/flamecheck.py checks both:
# the frame count, the widest frame's text, each frame's colour and width in pixels.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dir=$root/build/flamegraph
rm -rf "$dir"
mkdir -p "$dir"
browser=$(command -v chromium || command -v chromium-browser) || {
	echo "chromium is missing (Debian: apt-get install chromium; scripts/setup-toolchain.sh installs it)" >&2
	exit 1
}
(cd "$root" && OXT_FLAME_OUT=$dir cargo test --quiet --locked -p oxtrace --test flamegraph) \
	>"$dir/cargo.log" 2>&1 || {
	cat "$dir/cargo.log" >&2
	exit 1
}
[ -s "$dir/known.svg" ] && [ -s "$dir/known.expect" ] || {
	echo "the host test wrote no SVG" >&2
	exit 1
}
# A profile of its own (no user's settings, no first-run dialogs), no sandbox (root).
run_browser() {
	"$browser" --headless --no-sandbox --disable-gpu --no-first-run --hide-scrollbars \
		--user-data-dir="$dir/profile" --force-device-scale-factor=1 "$@" \
		"file://$dir/known.svg" 2>>"$dir/chromium.log"
}
height=$(sed -n 's/.*<svg [^>]*height="\([0-9]*\)".*/\1/p' "$dir/known.svg" | head -n 1)
run_browser --dump-dom >"$dir/dom.svg" || {
	tail -n 20 "$dir/chromium.log" >&2
	exit 1
}
run_browser --window-size="1200,${height:-600}" --screenshot="$dir/known.png" >/dev/null || {
	tail -n 20 "$dir/chromium.log" >&2
	exit 1
}
python3 "$root/scripts/flamecheck.py" "$dir/known.expect" "$dir/dom.svg" "$dir/known.png"
