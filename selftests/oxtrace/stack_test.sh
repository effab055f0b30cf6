#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# stack(): kernel stacks as aggregation keys, symbolized from /proc/kallsyms, against the
# real module with oxt_workload's known reads: TAP.
cd "$(dirname "$0")" || exit 1
. ./tap.sh
W="./oxt_workload read 4 2000"

echo "TAP version 13"
plan 9

# The frames without their offsets (they change with the build), one line: "a b c N".
frames() {
	sed -n 's/^ *\([a-z0-9_]*`[A-Za-z0-9_.]*\)\(+0x[0-9a-f]*\)\{0,1\}$/\1/p; s/^ *\([0-9][0-9]*\)$/\1/p' | tr '\n' ' ' | sed 's/ $//'
}

# ksys_read's caller: __x64_sys_read tail-calls it, so the return address is in
# do_syscall_64 (x64_sys_call inlined), reached from the syscall entry.
run 'fbt::ksys_read:entry /pid == $target/ { @[stack()] = count(); }' -c "$W"
expect "fbt::ksys_read:entry stack() with the syscall path, all reads one stack" \
	"vmlinux\`do_syscall_64 vmlinux\`entry_SYSCALL_64_after_hwframe 8000" "$(echo "$out" | frames)"

# DTrace's layout: an empty line, then each frame indented 14 columns, with its offset.
if echo "$out" | grep -Eq '^              vmlinux`do_syscall_64\+0x[0-9a-f]+$'; then
	ok "frames printed as vmlinux\`func+0xoff, indented 14 columns"
else
	nok "frames printed as vmlinux\`func+0xoff, indented 14 columns" "$out"
fi

# The workload reads on its 4 threads, none of them the main one.
run 'fbt::ksys_read:entry /pid == $target/ { @[stack(1), tid == pid] = count(); }' -c "$W"
expect "stack(1) keeps one frame, beside another key" \
	"vmlinux\`do_syscall_64 0 8000" \
	"$(echo "$out" | sed 's/^ *\([01]\) *\([0-9]*\)$/\1 \2/' | sed -n 's/^ *\(vmlinux`[a-z0-9_]*\).*/\1/p; /^[01] /p' | tr '\n' ' ' | sed 's/ $//')"

# A deeper path: vfs_read from ksys_read.
run 'fbt::vfs_read:entry /pid == $target/ { @[stack(2)] = count(); }' -c "$W"
expect "fbt::vfs_read:entry stack(2): ksys_read, then do_syscall_64" \
	"vmlinux\`ksys_read vmlinux\`do_syscall_64 8000" "$(echo "$out" | frames)"

# A return probe: the caller returned to first, the same stack as at the entry (DTrace's
# order; the registers' PC there is the return address).
run 'fbt::ksys_read:return /pid == $target/ { @[stack(2)] = count(); }' -c "$W"
expect "fbt::ksys_read:return stack(2): the caller returned to first" \
	"vmlinux\`do_syscall_64 vmlinux\`entry_SYSCALL_64_after_hwframe 8000" "$(echo "$out" | frames)"

# trace(stack()) prints the frames after the probe's line; one thread reads, so the flag
# lets exactly one read through.
run 'fbt::ksys_read:entry /pid == $target && !done/ { done = 1; trace(stack(2)); }' \
	-c "./oxt_workload read 1 10"
expect "trace(stack(2))" "vmlinux\`do_syscall_64 vmlinux\`entry_SYSCALL_64_after_hwframe" \
	"$(echo "$out" | frames)"

# The whole stack at the deepest count, as a key beside the user stack of the same firing
# (the recursion of oxt_ustack deep): all frames, one firing.
run 'fbt::vfs_read:entry /pid == $target/ { @[stack(127), ustack(127)] = count(); exit(0); }' \
	-c "./oxt_ustack deep 40"
k=$(echo "$out" | frames | sed 's/ oxt_ustack.*//')
u=$(echo "$out" | grep -c '^ *oxt_ustack`oxt_deep+0x[0-9a-f]*$')
expect "stack(127) and ustack(127) in one key" \
	"vmlinux\`ksys_read vmlinux\`do_syscall_64 vmlinux\`entry_SYSCALL_64_after_hwframe 40" "$k $u"

# A profile sample that caught the thread in user mode (arg1, the user PC, set) has no
# kernel stack; one in the kernel (arg0 set) has its frames. Until 50 of each are seen.
run 'profile-997 /pid == $target && arg1/ { @u[stackdepth] = count(); u++; }
	profile-997 /pid == $target && arg0/ { @k[stackdepth > 0] = count(); k++; }
	profile-997 /u >= 50 && k >= 50/ { exit(0); }
	END { printa("user %d %@d\n", @u); printa("kernel %d %@d\n", @k); }' -c "./oxt_ustack spin"
ud=$(echo "$out" | sed -n 's/^user \([0-9]*\) [0-9]*$/\1/p' | tr '\n' ' ' | sed 's/ $//')
kd=$(echo "$out" | sed -n 's/^kernel \([0-9]*\) [0-9]*$/\1/p' | tr '\n' ' ' | sed 's/ $//')
expect "profile in user mode: no kernel stack; in the kernel: its frames" "0 / 1" "$ud / $kd"

run 'BEGIN { @[stack(0)] = count(); }'
if [ $rc != 0 ] && echo "$err" | grep -q "frame count must be a constant from 1 to 127"; then
	ok "stack(0) is a compile error"
else
	nok "stack(0) is a compile error" "rc=$rc" "$err"
fi

tap_exit
