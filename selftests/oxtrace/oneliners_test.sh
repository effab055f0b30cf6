#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# The user-space and stable-provider one-liners DTrace users type most, in their original
# form, against workloads whose counts are known: oxt_pid's malloc loop (malloc(12345),
# free() and getppid() N times through the C library). TAP.
cd "$(dirname "$0")" || exit 1
. ./tap.sh

echo "TAP version 13"
plan 5

N=7
W="./oxt_pid malloc $N"

run 'pid$target::malloc:entry { @ = quantize(arg0); }' -c "$W"
# 12345 lies in the power-of-two bucket of 8192; the C library's own allocations do not.
expect "pid\$target::malloc:entry { @ = quantize(arg0); }" "$N" \
	"$(echo "$out" | awk '$1 == 8192 { print $NF }')"

run 'pid$target:libc.so.6::entry { @[probefunc] = count(); }' -c "$W"
got=$(echo "$out" | awk '$1 == "getppid" { g = $2 } $1 == "malloc" { m = $2 }
	END { print g, (m >= '"$N"') }')
expect "pid\$target:libc.so.6::entry { @[probefunc] = count(); }: getppid $N, malloc >= $N" \
	"$N 1" "$got"

run 'proc:::exec-success { trace(curpsinfo->pr_psargs); }' -c "sh -c 'exec $W'"
expect "proc:::exec-success { trace(curpsinfo->pr_psargs); }" "1" \
	"$(echo "$out" | grep -c "oxt_pid malloc $N\$")"

run 'sched:::on-cpu /pid == $target/ { @[execname] = count(); }' -c "$W"
got=$(echo "$out" | awk '$1 == "oxt_pid" && $2 >= 1 { print "yes" }')
expect "sched:::on-cpu: the target went on a CPU" "yes" "$got"

run 'pid$target::malloc:entry { @ = quantize(arg0); }' -p 999999
expect_fail "-p of a process that does not exist" "999999"

tap_exit
