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
# The workload's arguments, '$N' standing for N (default: the 1-byte read loop).
WL='read 1 $N 1'
[ ! -f /extra/workload ] || WL=$(cat /extra/workload)

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
		oxtrace -q -e "$OX" -c "$B $(echo "$WL" | sed "s/\\\$N/$N/")" >/dev/null 2>/tmp/ox.err ||
			sed 's/^/steptrace: oxtrace: /' /tmp/ox.err | head -n 5
		;;
	none)
		echo "READY none"
		$B $(echo "$WL" | sed "s/\\\$N/$N/") >/dev/null
		;;
	bt)
		mount_host || {
			echo "steptrace: the host's root did not mount"
			exit 1
		}
		# Its output through a FIFO read here until BEGIN ran (its codegen takes ~20 s
		# under TCG) or it ended, then drained to a file.
		rm -f /tmp/bt.fifo
		mkfifo /tmp/bt.fifo
		chroot $H /usr/bin/bpftrace -e "BEGIN { printf(\"OXB-READY\\n\"); } $BT" \
			>/tmp/bt.fifo 2>&1 &
		bt=$!
		exec 3</tmp/bt.fifo
		ready=
		while IFS= read -r l <&3; do
			echo "$l" >>/tmp/bt.out
			[ "$l" != OXB-READY ] || {
				ready=1
				break
			}
		done
		[ -n "$ready" ] || {
			echo "steptrace: bpftrace did not start: $(head -c 400 /tmp/bt.out)"
			exit 1
		}
		cat <&3 >>/tmp/bt.out &
		exec 3<&-
		# BPF programs' symbols, now that they exist.
		grep '\[bpf\]' /proc/kallsyms | sed 's/^/BPFSYM /'
		echo "READY bt"
		$B $(echo "$WL" | sed "s/\\\$N/$N/") >/dev/null
		kill -INT $bt
		wait $bt
		;;
	esac
	echo "DONE $t"
done
