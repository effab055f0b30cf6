#!/usr/bin/env bash
# Run a command as root in a fresh guest with oxtrace loaded.
#
#   scripts/vm.sh [--files DIR] [--timeout SEC] [--no-build] [--mem SIZE] [--hostroot]
#                 [--forward HOSTPORT:GUESTPORT]... -- CMD...
#
# The guest is QEMU with 4 vCPUs (single-threaded TCG; KVM only if a short
# probe boot works), booting the cached test kernel with an initramfs of
# busybox, oxtrace.ko, the tool (/usr/bin/oxtrace), the selftests (/selftests)
# and DIR (/extra).  CMD's output is streamed; the exit status is CMD's.  The
# kernel log is scanned afterwards and any splat fails the run (exit 120), as
# does a timeout (121) or a guest that died before CMD finished (122).  A fatal
# splat (Oops, BUG, panic, lockup, RCU stall, hung task) on the console stops
# the guest at once: 120.
#
# --mem sets the guest memory (default 1G); --hostroot exports the host's root
# filesystem read-only over 9p (mount tag "hostroot"), for make bench's bpftrace.
# --forward gives the guest a network card (eth0, 10.0.2.15) on QEMU's user network,
# restricted (the guest reaches nothing outside), and forwards 127.0.0.1:HOSTPORT on the
# host to GUESTPORT in the guest; without it the guest has no network card at all.
# KFLAVOR=bench boots the bench kernel and builds the module against it.
# OXT_TCG_THREAD=single|multi (default single) and OXT_TCG_CPU=MODEL (default max)
# choose how TCG runs the guest.
# OXT_VM_APPEND adds to the guest kernel's command line (e.g. slub_debug=FZPU).
# OXT_ICOUNT=SHIFT runs the guest under -icount: its clock counts the instructions it
# executes, 2^SHIFT ns each (make bench's second boot). OXT_QEMU_ARGS adds QEMU options,
# split at blanks (e.g. -s: a gdbstub on localhost:1234).
set -euo pipefail
. "$(dirname "$0")/lib.sh"

files=
timeout=${VM_TIMEOUT:-900}
build=1
mem=1G
virtfs=()
forwards=
while [ $# -gt 0 ]; do
	case $1 in
	--files) files=$2; shift 2 ;;
	--timeout) timeout=$2; shift 2 ;;
	--no-build) build=0; shift ;;
	--mem) mem=$2; shift 2 ;;
	--hostroot)
		virtfs=(-virtfs local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap)
		shift
		;;
	--forward)
		[[ $2 =~ ^[0-9]+:[0-9]+$ ]] || die "--forward takes HOSTPORT:GUESTPORT"
		forwards+=",hostfwd=tcp:127.0.0.1:${2%%:*}-:${2##*:}"
		shift 2
		;;
	--) shift; break ;;
	*) break ;;
	esac
done
[ $# -gt 0 ] || die "usage: scripts/vm.sh [--files DIR] [--timeout SEC] -- CMD..."
cmd="$*"

export KDIR=${KDIR:-$("$OXT_ROOT/scripts/kernel.sh" "${KFLAVOR:-test}")}
[ $build = 0 ] || "$OXT_ROOT/scripts/build.sh" all
BUILD=$OXT_ROOT/build
run=$BUILD/vm
rm -rf "$run"
mkdir -p "$run/root"/{bin,dev,proc,sys,tmp,usr/bin,lib/modules,selftests,extra}

# initramfs
root=$run/root
cp /bin/busybox "$root/bin/busybox"
cp "$OXT_ROOT/scripts/guest/init" "$root/init"
chmod +x "$root/init"
cp "$BUILD/oxtrace.ko" "$root/lib/modules/"
cp "$BUILD/oxtrace" "$root/usr/bin/"
cp -r "$BUILD/selftests/." "$root/selftests/"
if [ -n "$files" ]; then
	[ -d "$files" ] || die "VM_FILES=$files is not a directory"
	cp -r "$files/." "$root/extra/"
fi
printf '%s\n' "$cmd" >"$root/cmd"
(cd "$root" && find . | LC_ALL=C sort | cpio -o -H newc --quiet | gzip -1) >"$run/initramfs.gz"

bzimage=$KDIR/arch/x86/boot/bzImage
[ -f "$bzimage" ] || die "no bzImage in $KDIR"

# KVM only where a short probe boot really works (PVM here hangs a stock kernel).
# The probe's result (line 1: kvm|tcg, line 2: why) is cached per kernel image.
accel=${OXT_ACCEL:-auto}
why=
if [ "$accel" = auto ]; then
	accel=tcg
	if [ ! -e /dev/kvm ]; then
		why="no /dev/kvm (no KVM in this host's kernel, or a VM without nested virtualisation)"
	elif [ ! -w /dev/kvm ]; then
		why="/dev/kvm is not writable by $(id -un) (join the group that owns it: $(stat -c %G /dev/kvm))"
	else
		probe=$OXT_CACHE/kvm-probe-$(sha256sum "$bzimage" | cut -c1-12)
		if [ ! -f "$probe" ]; then
			say "probing KVM (once per kernel)"
			mkdir -p "$run/probe/bin"
			cp /bin/busybox "$run/probe/bin/"
			printf '#!/bin/busybox sh\n/bin/busybox echo OXTRACE-KVM-OK\n/bin/busybox reboot -f\n' >"$run/probe/init"
			chmod +x "$run/probe/init"
			(cd "$run/probe" && find . | cpio -o -H newc --quiet | gzip -1) >"$run/probe.gz"
			if timeout 40 qemu-system-x86_64 -accel kvm -cpu host -smp 2 -m 512M \
				-kernel "$bzimage" -initrd "$run/probe.gz" -append "console=ttyS0 panic=-1" \
				-display none -monitor none -serial stdio -no-reboot </dev/null 2>"$run/probe.err" |
				grep -q OXTRACE-KVM-OK; then
				echo kvm >"$probe"
			else
				err=$(grep -m1 . "$run/probe.err" || true)
				printf 'tcg\nthe KVM probe boot failed (%s)\n' \
					"${err:-the guest did not say OXTRACE-KVM-OK within 40 s}" >"$probe"
			fi
		fi
		accel=$(head -n 1 "$probe")
		if [ "$accel" != kvm ]; then
			why=$(sed -n 2p "$probe")
			why="${why:-the KVM probe boot failed} ($(date -r "$probe" '+%F %T'), cached in $probe: delete it to probe again)"
		fi
	fi
fi
[ -z "$why" ] || say "not using KVM: $why; running under TCG (slower; OXT_ACCEL=kvm forces KVM)"
# Single-threaded TCG: QEMU 7.2's multi-threaded TCG can keep running a stale
# translation of code the guest rewrote, which breaks the kernel's text_poke_bp
# (guest panics arming kprobes on hot functions; Documentation/testing.rst).
# Measured cost on a 2-CPU host shared with other jobs: none, the full guest
# suite took 92-101 s single vs 99-121 s multi (multi gains only with idle CPUs).
tcg_thread=${OXT_TCG_THREAD:-single}
tcg_cpu=${OXT_TCG_CPU:-max}
case $tcg_thread in single | multi) ;; *) die "OXT_TCG_THREAD must be single or multi" ;; esac
case $accel in
kvm) accel_args=(-accel kvm -cpu host) ;;
tcg) accel_args=(-accel "tcg,thread=$tcg_thread" -cpu "$tcg_cpu") ;;
*) die "OXT_ACCEL must be auto, kvm or tcg" ;;
esac
icount=${OXT_ICOUNT:-}
if [ -n "$icount" ]; then
	case $icount in [0-9]) ;; *) die "OXT_ICOUNT must be a shift from 0 to 9" ;; esac
	[ "$accel" = tcg ] && [ "$tcg_thread" = single ] ||
		die "OXT_ICOUNT needs single-threaded TCG (OXT_ACCEL=tcg, OXT_TCG_THREAD=single)"
	accel_args+=(-icount "shift=$icount,sleep=on")
fi

# A saturated host starves the guest at boot (Documentation/testing.rst, "The guest's
# clock"). The guest's TSC counts at the host's rate under TCG; give the guest that rate
# rather than let it calibrate against the emulated PIT, which then comes out up to 20 times
# too low: the guest's clock, sched_clock() and the lockup detectors then run that much fast
# (false soft lockups, hang guards that end 20 times early). And no_timer_check, as KVM
# guests have: the boot's check that the timer ticks 4 times within about 60 ms of TSC time
# panics a guest whose emulator thread did not run meanwhile.
tsc_args=
if [ -n "$icount" ]; then
	# Under -icount the guest's TSC is QEMU's virtual clock, one tick a nanosecond.
	tsc_args=" no_timer_check tsc_early_khz=1000000"
elif [ "$accel" = tcg ]; then
	tsc_args=" no_timer_check"
	tsc_bin=$BUILD/tsc_khz
	if [ ! -x "$tsc_bin" ] || [ "$OXT_ROOT/scripts/tsc_khz.c" -nt "$tsc_bin" ]; then
		cc -O2 -o "$tsc_bin" "$OXT_ROOT/scripts/tsc_khz.c" 2>/dev/null || rm -f "$tsc_bin"
	fi
	khz=$([ -x "$tsc_bin" ] && "$tsc_bin" || true)
	case $khz in
	'' | *[!0-9]*) say "could not measure the host's TSC rate: the guest calibrates its own" ;;
	*) tsc_args="$tsc_args tsc_early_khz=$khz" ;;
	esac
fi

: >"$run/console.log"
: >"$run/out.log"
: >"$run/dmesg.log"
say "booting guest (${accel_args[*]}, 4 vCPUs): $cmd"
net_args=(-nic none)
if [ -n "$forwards" ]; then
	net_args=(-netdev "user,id=n0,restrict=on$forwards" -device virtio-net-pci,netdev=n0)
fi
read -r -a extra_args <<<"${OXT_QEMU_ARGS:-}"
timeout -k 10 "$timeout" qemu-system-x86_64 "${accel_args[@]}" "${extra_args[@]}" -smp 4 -m "$mem" "${virtfs[@]}" "${net_args[@]}" \
	-kernel "$bzimage" -initrd "$run/initramfs.gz" \
	-append "console=ttyS0 loglevel=6 panic=-1 log_buf_len=4M printk.devkmsg=on rdinit=/init$tsc_args${OXT_VM_APPEND:+ $OXT_VM_APPEND}" \
	-display none -monitor none -no-reboot \
	-serial file:"$run/console.log" -serial file:"$run/out.log" -serial file:"$run/dmesg.log" \
	</dev/null >"$run/qemu.log" 2>&1 &
qemu=$!
# Stream the command's output while the guest runs; tail ends with qemu.
tail -n +1 -s 0.2 -f --pid=$qemu "$run/out.log" 2>/dev/null |
	sed -u -e 's/\r$//' -e '/^OXTRACE-EXIT=/d' &
streamer=$!
# Fail fast: a guest that oopsed or locked up may hang until the timeout.
rm -f "$run/fatal"
(
	"$OXT_ROOT/scripts/logscan.sh" --follow $qemu "$run/console.log" && exit 0
	: >"$run/fatal"
	# Let the rest of the report reach the console: until it is quiet for 2 s (at most 30 s).
	prev=-1 quiet=0
	for _ in $(seq 150); do
		kill -0 $qemu 2>/dev/null || exit 0
		size=$(stat -c %s "$run/console.log")
		if [ "$size" = "$prev" ]; then quiet=$((quiet + 1)); else quiet=0; fi
		[ $quiet -lt 10 ] || break
		prev=$size
		sleep 0.2
	done
	kill $qemu 2>/dev/null
	exit 0
) &
watcher=$!
set +e
wait $qemu
qrc=$?
wait $streamer
wait $watcher
set -e

rc=$(tr -d '\r' <"$run/out.log" | sed -n 's/^OXTRACE-EXIT=//p' | tail -n 1)
status=0
if [ -f "$run/fatal" ] || ! "$OXT_ROOT/scripts/logscan.sh" --fatal "$run/console.log" >/dev/null; then
	what="fatal kernel error on the guest console"
	[ ! -f "$run/fatal" ] || what="$what: guest stopped"
	echo "vm: $what (console: $run/console.log)" >&2
	tail -n 40 "$run/console.log" | tr -d '\r' >&2
	status=120
elif [ "$qrc" = 124 ] || [ "$qrc" = 137 ]; then
	echo "vm: guest timed out after ${timeout}s (console: $run/console.log)" >&2
	tail -n 30 "$run/console.log" | tr -d '\r' >&2
	status=121
elif [ -z "$rc" ]; then
	echo "vm: guest died before the command finished (qemu exit $qrc; console: $run/console.log)" >&2
	tail -n 40 "$run/console.log" | tr -d '\r' >&2
	status=122
fi
if ! grep -q OXTRACE-DMESG-END "$run/dmesg.log" && [ $status = 0 ]; then
	echo "vm: the guest's kernel log was not captured" >&2
	status=122
fi
if ! "$OXT_ROOT/scripts/logscan.sh" "$run/console.log" "$run/dmesg.log" >"$run/splats.txt"; then
	echo "vm: kernel log has splats:" >&2
	cat "$run/splats.txt" >&2
	[ $status != 0 ] || status=120
fi
if [ $status = 0 ]; then
	status=$rc
fi
exit "$status"
