# The host's root filesystem in the bench guest (sourced by bench-run.sh and
# steptrace-run.sh): mounted read-only over 9p at $H, with the pseudo-filesystems bpftrace
# and perf need inside a chroot there.
# shellcheck shell=sh
H=/host

mount_host() {
	mkdir -p $H
	mount -t 9p -o trans=virtio,version=9p2000.L,ro,msize=262144 hostroot $H || return 1
	mount -t proc proc $H/proc
	mount -t sysfs sys $H/sys
	mount -t devtmpfs dev $H/dev
	mount -t tmpfs tmp $H/tmp
	mount -t debugfs debugfs $H/sys/kernel/debug
	mount -t tracefs tracefs $H/sys/kernel/tracing
	mount -t tmpfs run $H/run 2>/dev/null
	# The bench's files (its workload) where bpftrace's uprobe: and usdt: name them: the
	# same inodes, so that the probes are those of the binary the workloads run.
	mount -o bind /extra $H/mnt
}
