#!/bin/sh
# The guest's side of scripts/steptrace.sh: prints the module's symbols (KSYM lines, then
# KSYMEND), then for each tool named (ox, bt, none) READY TOOL, the bench's read loop
# under the tool's program, and DONE TOOL. The host's gdb stops the guest inside the
# loop, steps one read() and lets it go on.
B=/extra/oxt_bench
# Reads in the loop (argument N=...): enough for gdb to attach and let its SKIP hits go
# first.
N=400000
OX='fbt::ksys_read:entry { self->ts = timestamp; }
fbt::ksys_read:return /self->ts/ { @ = quantize(timestamp - self->ts); self->ts = 0; }'
BT='kprobe:ksys_read { @start[tid] = nsecs; }
kretprobe:ksys_read /@start[tid]/ { @ = hist(nsecs - @start[tid]); delete(@start[tid]); }'
[ ! -f /extra/oxprog ] || OX=$(cat /extra/oxprog)
[ ! -f /extra/btprog ] || BT=$(cat /extra/btprog)

# mount_host and H: bpftrace runs from the host's root filesystem in a chroot.
. /extra/hostroot.sh

grep '\[oxtrace\]' /proc/kallsyms | sed 's/^/KSYM /'
echo KSYMEND
for t in "$@"; do
	case $t in
	N=*)
		N=${t#N=}
		continue
		;;
	ox)
		echo "READY ox"
		oxtrace -q -e "$OX" -c "$B read 1 $N 1" >/dev/null 2>&1
		;;
	none)
		echo "READY none"
		$B read 1 $N 1 >/dev/null
		;;
	bt)
		mount_host || {
			echo "steptrace: the host's root did not mount"
			exit 1
		}
		chroot $H /usr/bin/bpftrace -e "BEGIN { printf(\"OXB-READY\\n\"); } $BT" \
			>$H/tmp/bt.out 2>&1 &
		bt=$!
		# Until BEGIN ran (its codegen takes ~20 s under TCG) or bpftrace is gone.
		while ! grep -q OXB-READY $H/tmp/bt.out 2>/dev/null; do
			kill -0 $bt 2>/dev/null || {
				echo "steptrace: bpftrace did not start: $(head -c 400 $H/tmp/bt.out)"
				exit 1
			}
			sleep 1
		done
		# BPF programs' symbols, now that they exist.
		grep '\[bpf\]' /proc/kallsyms | sed 's/^/BPFSYM /'
		echo "READY bt"
		$B read 1 $N 1 >/dev/null
		kill -INT $bt
		wait $bt
		;;
	esac
	echo "DONE $t"
done
