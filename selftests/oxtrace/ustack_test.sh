#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# ustack(), the symbol functions and --oformat folded against the real module, with oxt_ustack's
# known user stacks (built with frame pointers): TAP.
cd "$(dirname "$0")" || exit 1
. ./tap.sh

echo "TAP version 13"
plan 13

# The frames without their offsets (they change with the build) and the counts, one line.
frames() {
	sed -n 's/^ *\([A-Za-z0-9_.]*`[A-Za-z0-9_.]*\)\(+0x[0-9a-f]*\)\{0,1\}$/\1/p; s/^ *\([0-9][0-9]*\)$/\1/p' | tr '\n' ' ' | sed 's/ $//'
}

# Eight reads, each main -> oxt_zero_mid -> oxt_zero_read, the system call made in
# oxt_zero_read; the workload then waits, alive, until the tool has printed and kills it.
R="./oxt_ustack read 8"
STOP='fbt::ksys_read:entry /pid == $target && n == 8/ { exit(0); }'

run "fbt::ksys_read:entry /pid == \$target/ { @[ustack(3)] = count(); n++; } $STOP" -c "$R"
expect "ustack(3) at the system call: the workload's three functions, all reads one stack" \
	"oxt_ustack\`oxt_zero_read oxt_ustack\`oxt_zero_mid oxt_ustack\`main 8" \
	"$(echo "$out" | frames)"

# DTrace's layout: an empty line, then each frame indented 14 columns, with its offset.
if echo "$out" | grep -Eq '^              oxt_ustack`oxt_zero_read\+0x[0-9a-f]+$'; then
	ok "frames printed as module\`func+0xoff, indented 14 columns"
else
	nok "frames printed as module\`func+0xoff, indented 14 columns" "$out"
fi

# printa's %k: the frames, then the rest of the format.
run "fbt::ksys_read:entry /pid == \$target/ { @[ustack(2)] = count(); n++; } $STOP
	END { printa(\"%k|%@d|\\n\", @); }" -c "$R"
expect "printa %k of a ustack() key" \
	"oxt_ustack\`oxt_zero_read oxt_ustack\`oxt_zero_mid |8|" \
	"$(echo "$out" | frames) $(echo "$out" | tail -n 1)"

# The symbol functions on the user caller and the kernel caller, and the depths.
run "fbt::ksys_read:entry /pid == \$target/ {
	@a[usym(ucaller)] = count(); @b[ufunc(ucaller)] = count(); @c[umod(ucaller)] = count();
	@d[sym(caller)] = count(); @e[func(caller)] = count(); @f[mod(caller)] = count();
	@g[ustackdepth >= 3, stackdepth >= 2] = count(); n++; } $STOP" -c "$R"
expect "usym, ufunc, umod of ucaller; sym, func, mod of caller; the depths" \
	"oxt_ustack\`oxt_zero_mid 8|oxt_ustack\`oxt_zero_mid 8|oxt_ustack 8|vmlinux\`do_syscall_64 8|vmlinux\`do_syscall_64 8|vmlinux 8|1 1 8" \
	"$(echo "$out" | awk 'NF { $1 = $1; print }' | tr '\n' '|' | sed 's/|$//')"

# printf's %A and uaddr(): the user symbol with its offset; trace(ustack()).
run "fbt::ksys_read:entry /pid == \$target && !done/ { done = 1;
	printf(\"%A|\", ucaller); @[uaddr(ucaller)] = count(); trace(ustack(2)); }
	fbt::ksys_read:entry /pid == \$target/ { n++; } $STOP" -c "$R"
if echo "$out" | grep -Eq '^oxt_ustack`oxt_zero_mid\+0x[0-9a-f]+\|' &&
	echo "$out" | grep -Eq '^  oxt_ustack`oxt_zero_mid\+0x[0-9a-f]+ +1$' &&
	[ "$(echo "$out" | frames)" = "oxt_ustack\`oxt_zero_read oxt_ustack\`oxt_zero_mid" ]; then
	ok "printf %A, uaddr() and trace(ustack(2))"
else
	nok "printf %A, uaddr() and trace(ustack(2))" "$out" "$err"
fi

# profile-997 on every CPU while the workload alternates a user-mode loop and reads:
# until 50 samples of each mode, user and kernel stacks, folded for flame graphs.
run 'profile-997 /pid == $target/ { @u[ustack()] = count(); @k[stack()] = count(); }
	profile-997 /pid == $target && arg1/ { u++; }
	profile-997 /pid == $target && arg0/ { k++; }
	profile-997 /u >= 50 && k >= 50/ { exit(0); }' --oformat folded -c "./oxt_ustack spin"
if [ "$rc" = 0 ] && [ -n "$out" ] && ! echo "$out" | grep -Evq '^[^ ]+ [1-9][0-9]*$'; then
	ok "--oformat folded: every line is frame;frame;... count"
else
	nok "--oformat folded: every line is frame;frame;... count" "rc=$rc" "$out" "$err"
fi
X='+0x[0-9a-f]*'
if echo "$out" | grep -q "oxt_ustack\`main$X;oxt_ustack\`oxt_spin_mid$X;oxt_ustack\`oxt_spin_leaf$X [0-9]*$"; then
	ok "profile user stacks: main, oxt_spin_mid, oxt_spin_leaf, root first"
	echo "$out" | grep "oxt_spin_leaf" | head -n 2 | sed 's/^/# /'
else
	nok "profile user stacks: main, oxt_spin_mid, oxt_spin_leaf, root first" "$out"
fi
if echo "$out" | grep -q "oxt_ustack\`main$X;oxt_ustack\`oxt_zero_mid$X;oxt_ustack\`oxt_zero_read$X [0-9]*$"; then
	ok "profile user stacks of kernel samples: main, oxt_zero_mid, oxt_zero_read"
else
	nok "profile user stacks of kernel samples: main, oxt_zero_mid, oxt_zero_read" "$out"
fi
if echo "$out" | grep -q "vmlinux\`do_syscall_64$X;vmlinux\`ksys_read$X;vmlinux\`vfs_read$X"; then
	ok "profile kernel stacks: do_syscall_64, ksys_read, vfs_read, root first"
else
	nok "profile kernel stacks: do_syscall_64, ksys_read, vfs_read, root first" "$out"
fi

# A recursion 60 frames deep: its one read's user stack, whole, past the 25 frames a
# stack had when it was a key string; and ustack()'s default depth of 20 (DTrace's).
D="./oxt_ustack deep 60"
count_deep() {
	grep -c '^ *oxt_ustack`oxt_deep+0x[0-9a-f]*$'
}
run "fbt::ksys_read:entry /pid == \$target/ { @[ustack(100)] = count(); exit(0); }" -c "$D"
nd=$(echo "$out" | count_deep)
if [ "$nd" = 60 ] && [ "$(echo "$out" | frames | sed 's/ .*//')" = "oxt_ustack\`oxt_zero_read" ] &&
	echo "$out" | frames | grep -q "oxt_ustack\`oxt_deep oxt_ustack\`main .*1$"; then
	ok "ustack(100) of a 60-deep recursion: all 60 frames, leaf to main"
else
	nok "ustack(100) of a 60-deep recursion: all 60 frames, leaf to main" "nd=$nd" "$out" "$err"
fi
run "fbt::ksys_read:entry /pid == \$target/ { @[ustack()] = count(); exit(0); }" \
	-x ustackframes=127 -c "$D"
nd=$(echo "$out" | count_deep)
lines=$(echo "$out" | grep -c '^ *[A-Za-z0-9_.]*`\|^ *0x')
if [ "$nd" = 60 ] && [ "$lines" -gt 62 ]; then
	ok "-x ustackframes=127: the same 60 frames and the ones above main ($lines)"
else
	nok "-x ustackframes=127: the same 60 frames and the ones above main" "nd=$nd lines=$lines" "$out" "$err"
fi
run "fbt::ksys_read:entry /pid == \$target/ { @[ustack()] = count(); exit(0); }" -c "$D"
lines=$(echo "$out" | grep -c '^ *[A-Za-z0-9_.]*`')
expect "ustack() takes DTrace's default 20 frames" "20 18" "$lines $(echo "$out" | count_deep)"

run 'BEGIN { @[ustack(0)] = count(); }'
if [ $rc != 0 ] && echo "$err" | grep -q "frame count must be a constant from 1 to 127" &&
	oxtrace -x ustackframes=0 -e 'BEGIN { exit(0); }' 2>&1 | grep -q "a frame count from 1 to 127"; then
	ok "ustack(0) and ustackframes=0 are errors"
else
	nok "ustack(0) and ustackframes=0 are errors" "rc=$rc" "$err"
fi

tap_exit
