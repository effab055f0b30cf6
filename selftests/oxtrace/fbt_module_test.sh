#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# fbt on a loadable module's functions, as DTrace's module field and bpftrace's
# kprobe:MODULE:FUNC name them: oxtmod.ko (selftests/oxtrace/testmod), whose
# /proc/oxtmod calls oxtmod_hit(n) once per read: TAP.
cd "$(dirname "$0")" || exit 1
. ./tap.sh
echo "TAP version 13"
plan 6
insmod ./oxtmod.ko || echo "# insmod oxtmod.ko failed"

oxtrace -l 'fbt:oxtmod::' >/tmp/l 2>&1
if grep -Eq '^ *[0-9]+ +fbt +oxtmod +oxtmod_hit entry$' /tmp/l &&
	grep -Eq '^ *[0-9]+ +fbt +oxtmod +oxtmod_hit return$' /tmp/l &&
	[ "$(grep -c ' fbt ' /tmp/l)" = "$(grep -c ' fbt  *oxtmod ' /tmp/l)" ]; then
	ok "-l 'fbt:oxtmod::' lists the module's functions, in its module"
else
	nok "-l 'fbt:oxtmod::' lists the module's functions, in its module" "$(cat /tmp/l)"
fi

# The first read since insmod: oxtmod_hit(1), which returns 2.
run 'fbt:oxtmod:oxtmod_hit:entry /pid == $target/ { printf("hit %d\n", arg0); }
	fbt:oxtmod:oxtmod_hit:return /pid == $target/ { printf("ret %d\n", arg1); }' \
	-c 'cat /proc/oxtmod'
if [ "$rc" = 0 ] && echo "$out" | grep -qx 'hit 1' && echo "$out" | grep -qx 'ret 2' &&
	echo "$out" | grep -qx '1 2'; then
	ok "fbt:oxtmod:oxtmod_hit:entry and :return fire with the argument and value"
else
	nok "fbt:oxtmod:oxtmod_hit:entry and :return fire with the argument and value" "rc=$rc" "$out" "$err"
fi

run 'kprobe:oxtmod:oxtmod_hit /pid == $target/ { printf("kprobe %d\n", arg0); }' \
	-c 'cat /proc/oxtmod'
if [ "$rc" = 0 ] && echo "$out" | grep -qx 'kprobe 2'; then
	ok "bpftrace's kprobe:oxtmod:oxtmod_hit"
else
	nok "bpftrace's kprobe:oxtmod:oxtmod_hit" "rc=$rc" "$out" "$err"
fi

# A glob in the module field's module: as many probes as -l lists there.
want=$(grep -c ' oxtmod .* entry$' /tmp/l)
guard oxtrace -e 'fbt:oxtmod::entry { } BEGIN { exit(0); }' >/tmp/out 2>/tmp/err
if grep -q "description 'fbt:oxtmod::entry' matched $want probes" /tmp/err; then
	ok "fbt:oxtmod::entry matches the module's $want functions"
else
	nok "fbt:oxtmod::entry matches the module's $want functions" "$(cat /tmp/err)"
fi

run 'fbt:vmlinux:oxtmod_hit:entry { }'
expect_fail "a module's function is not in vmlinux" \
	"function oxtmod_hit is not in module vmlinux (its module: oxtmod)"
run 'fbt:oxtmod:vfs_read:entry { }'
expect_fail "a kernel function is not in oxtmod" \
	"function vfs_read is not in module oxtmod (its module: kernel)"

rmmod oxtmod || echo "# rmmod oxtmod failed"
tap_exit
