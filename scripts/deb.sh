#!/usr/bin/env bash
# The Debian packages oxtrace and oxtrace-dkms, built from debian/ with debhelper.
#
#   scripts/deb.sh build   make deb: build/deb/oxtrace_VERSION_amd64.deb and
#                          oxtrace-dkms_VERSION_amd64.deb (dpkg-buildpackage -b in the work
#                          tree: the tool is `make tool`'s), and the source package
#                          oxtrace_VERSION.dsc (of the files git tracks or would)
#   scripts/deb.sh lint    lintian on both: fails on an error, lists the rest
#   scripts/deb.sh check   make check's: build, lint, apt-get install both on this machine,
#                          dkms build against the test kernel, oxtrace --version, purge,
#                          and nothing left behind (root; Documentation/install.rst)
#
# VERSION is the workspace's (Cargo.toml): debian/changelog is written from it here.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
cd "$OXT_ROOT"

ver=$(oxt_version)
[ -n "$ver" ] || die "no version in Cargo.toml's [workspace.package]"
arch=amd64
out=$OXT_ROOT/build/deb
SUDO=
[ "$(id -u)" = 0 ] || SUDO=sudo
t0=$(date +%s)
# step MESSAGE: what was done, with the seconds since the start.
step() { say "$* ($(($(date +%s) - t0)) s)"; }

need() {
	local p
	for p in "$@"; do
		command -v "$p" >/dev/null ||
			die "$p is missing: scripts/setup-toolchain.sh installs it (debhelper, dh-dkms, lintian)"
	done
}

# debian/changelog (not in git): one entry, the workspace version, dated by the last commit.
write_changelog() {
	local maint when rev
	maint=$(sed -n 's/^Maintainer: //p' debian/control)
	when=$(date -R -u -d "@$(git log -1 --format=%ct 2>/dev/null || date +%s)")
	rev=$(git describe --always --dirty 2>/dev/null || echo unknown)
	cat >debian/changelog <<EOF
oxtrace ($ver) unstable; urgency=medium

  * Built by make deb from the oxtrace sources, git $rev.

 -- $maint  $when
EOF
}

do_build() {
	need dpkg-buildpackage dh dh_dkms rst2man cargo
	rm -rf "$out"
	mkdir -p "$out"
	write_changelog
	# Binary packages, in place so that cargo reuses target/. dh_builddeb and the .changes
	# and .buildinfo files go to build/deb, not to the work tree's parent.
	OXT_DEB_DIR=$out dpkg-buildpackage -b --no-sign \
		--buildinfo-option="-u$out" --changes-option="-u$out" \
		--buildinfo-file="$out/oxtrace_${ver}_$arch.buildinfo" \
		--changes-file="$out/oxtrace_${ver}_$arch.changes"
	debian/rules clean >/dev/null
	# The source package: a copy of what git tracks (and untracked files it does not
	# ignore), so that no build product gets in.
	local tmp
	tmp=$(mktemp -d "${TMPDIR:-/tmp}/oxtrace-deb.XXXXXX")
	mkdir "$tmp/oxtrace-$ver"
	git ls-files -z -co --exclude-standard | while IFS= read -r -d '' f; do
		[ -e "$f" ] && printf '%s\0' "$f"
	done | tar -c --null -T - | tar -x -C "$tmp/oxtrace-$ver"
	cp debian/changelog "$tmp/oxtrace-$ver/debian/changelog"
	(cd "$tmp" && dpkg-source -q -b "oxtrace-$ver")
	mv "$tmp/oxtrace_$ver.dsc" "$tmp/oxtrace_$ver.tar.xz" "$out/"
	rm -rf "$tmp"
	step "built: $(cd "$out" && echo *.deb *.dsc)"
}

do_lint() {
	need lintian
	local log=$out/lintian.log rc=0
	# --fail-on error: a warning is listed (and each is explained in install.rst), not fatal.
	lintian --fail-on error --display-info --info "$out/oxtrace_${ver}_$arch.changes" \
		"$out/oxtrace_$ver.dsc" >"$log" 2>&1 || rc=$?
	grep -E '^[EWIP]: ' "$log" || true
	[ $rc = 0 ] || die "lintian found errors (exit $rc; $log)"
	step "lintian: $(grep -c '^E: ' "$log") errors, $(grep -c '^W: ' "$log") warnings, $(grep -c '^I: ' "$log") infos"
}

# State the check must leave as it found it.
pkgs=(oxtrace oxtrace-dkms)
installed() { dpkg-query -W -f='${db:Status-Status}\n' "$1" 2>/dev/null | grep -qvx 'not-installed'; }
apt_get() {
	DEBIAN_FRONTEND=noninteractive $SUDO apt-get -y -q -o DPkg::Lock::Timeout=600 \
		--no-install-recommends "$@"
}

do_check() {
	need dkms apt-get
	local kdir kver logd=$out/check
	kdir=$("$OXT_ROOT/scripts/kernel.sh" test)
	kver=$(cat "$kdir/include/config/kernel.release")

	do_build
	do_lint
	mkdir -p "$logd"

	# One install at a time on this machine (other clones run make check too).
	local lock=/run/lock/oxtrace-deb-check.lock
	[ -d /run/lock ] || lock=/tmp/oxtrace-deb-check.lock
	exec 9>"$lock"
	flock -w 1800 9 || die "another make check holds $lock"
	local p
	for p in "${pkgs[@]}"; do
		! installed "$p" || die "package $p is installed on this machine: the check would replace it (apt-get purge ${pkgs[*]})"
	done
	# make dkms-install's copy is not ours to replace: dkms remove --all on install would remove it.
	[ ! -e "/usr/src/oxtrace-$ver" ] && [ ! -e /var/lib/dkms/oxtrace ] ||
		die "/usr/src/oxtrace-$ver or /var/lib/dkms/oxtrace exists (make dkms-install?): make dkms-uninstall first"
	local group_before
	group_before=$(getent group oxtrace || true)

	trap 'apt_get purge "${pkgs[@]}" >/dev/null 2>&1 || true' EXIT
	step "apt-get install ./oxtrace_${ver}_$arch.deb ./oxtrace-dkms_${ver}_$arch.deb: starting"
	(cd "$out" && apt_get install "./oxtrace_${ver}_$arch.deb" "./oxtrace-dkms_${ver}_$arch.deb") \
		>"$logd/install.log" 2>&1 || {
		cat "$logd/install.log" >&2
		die "apt-get install failed"
	}
	step "installed"
	# oxtrace-dkms.postinst's lines: one per kernel, and where the sources are.
	awk '/^oxtrace-dkms: /{p=1; print "   " $0; next} p && /^  /{print "   " $0; next} {p=0}' \
		"$logd/install.log"
	for p in "${pkgs[@]}"; do
		dpkg-query -W -f='${db:Status-Abbrev}' "$p" | grep -q '^ii' || die "$p is not installed"
	done
	# A kernel without Rust is skipped with a message, and the install succeeds.
	local running
	running=$(uname -r)
	if ! zcat -f "/lib/modules/$running/build/.config" "/boot/config-$running" /proc/config.gz \
		2>/dev/null | grep -qx 'CONFIG_RUST=y'; then
		grep -q "kernel $running .*CONFIG_RUST\|kernel $running has no build tree" "$logd/install.log" ||
			die "no message about the running kernel $running, which has no CONFIG_RUST=y"
	fi

	local v
	v=$(/usr/sbin/oxtrace --version)
	step "/usr/sbin/oxtrace --version: $v"
	[ "$v" = "oxtrace $ver" ] || die "oxtrace --version says '$v', not 'oxtrace $ver'"
	for f in /usr/share/man/man8/oxtrace.8.gz /usr/share/bash-completion/completions/oxtrace \
		/usr/share/zsh/vendor-completions/_oxtrace /usr/share/fish/vendor_completions.d/oxtrace.fish \
		/lib/udev/rules.d/60-oxtrace.rules /usr/include/linux/oxtrace.h "/usr/src/oxtrace-$ver/dkms.conf"; do
		[ -f "$f" ] || die "$f is not installed"
	done
	grep -qx "PACKAGE_VERSION=\"$ver\"" "/usr/src/oxtrace-$ver/dkms.conf" || die "dkms.conf's version is not $ver"

	# The installed package's DKMS source builds against the test kernel.
	$SUDO dkms status -m oxtrace -v "$ver" | grep -q "oxtrace/$ver" || die "dkms does not know oxtrace/$ver"
	local rc=0
	$SUDO dkms build -m oxtrace -v "$ver" -k "$kver" --kernelsourcedir "$kdir" >"$logd/dkms-build.log" 2>&1 || rc=$?
	cat "/var/lib/dkms/oxtrace/$ver/build/make.log" >>"$logd/dkms-build.log" 2>/dev/null || true
	[ $rc = 0 ] || {
		tail -n 40 "$logd/dkms-build.log" >&2
		die "dkms build oxtrace/$ver -k $kver failed (exit $rc)"
	}
	local ko
	ko=$(find "/var/lib/dkms/oxtrace/$ver/$kver" -name 'oxtrace.ko*' | head -n 1)
	[ -n "$ko" ] || die "dkms build left no oxtrace.ko"
	modinfo -F vermagic "$ko" | grep -q "^$kver " || die "$ko is not built for $kver"
	step "dkms build of the installed oxtrace-dkms: $ko"

	# Purge, and nothing is left.
	local files
	step "purging"
	files=$(dpkg -L "${pkgs[@]}" | sort -u)
	apt_get purge "${pkgs[@]}" >"$logd/purge.log" 2>&1 || {
		cat "$logd/purge.log" >&2
		die "apt-get purge failed"
	}
	trap - EXIT
	local left=() f
	for p in "${pkgs[@]}"; do
		! installed "$p" || left+=("package $p")
	done
	while IFS= read -r f; do
		[ -n "$f" ] || continue
		# Directories the packages share with others (/usr/sbin ...) stay.
		if [ -e "$f" ] && ! [ -d "$f" ]; then left+=("$f"); fi
	done <<<"$files"
	for f in "/usr/src/oxtrace-$ver" /var/lib/dkms/oxtrace /usr/share/doc/oxtrace \
		/usr/share/doc/oxtrace-dkms /var/lib/oxtrace; do
		[ ! -e "$f" ] || left+=("$f")
	done
	[ "$(getent group oxtrace || true)" = "$group_before" ] || left+=("group oxtrace")
	[ ${#left[@]} = 0 ] || die "left behind after apt-get purge: ${left[*]}"
	step "installed, built by DKMS for $kver, ran, purged: nothing left"
}

case ${1:-} in
build) do_build ;;
lint) do_lint ;;
check) do_check ;;
*) die "usage: scripts/deb.sh build | lint | check" ;;
esac
