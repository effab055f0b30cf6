#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# The oxtrace tool against the module: TAP.
cd "$(dirname "$0")" || exit 1
. ./tap.sh
echo "TAP version 13"
plan 12
check "version talks to the module" sh -c 'oxtrace version | grep -qE "^ABI +1\.[0-9]+ \(tool 1\.[0-9]+\)"'
check "version --json" sh -c 'oxtrace version --json | grep -q "\"abi\":\"1\."'
check "status shows an idle consumer" sh -c 'oxtrace status | grep -q "^state *idle"'
check "status --json" sh -c 'oxtrace status --json | grep -q "\"consumers_open\":1"'
check "missing device node: clear error, exit 1" sh -c \
	'! oxtrace --device /dev/nonexistent status 2>/tmp/err &&
	grep -q "the oxtrace module is loaded but /dev/nonexistent is missing" /tmp/err'
# Without the module: what to do and the tool's version, exit 1; the module back after.
rmmod oxtrace
oxtrace -e 'BEGIN { exit(0); }' >/tmp/out 2>/tmp/err
rc=$?
insmod /lib/modules/oxtrace.ko
if [ $rc = 1 ] && grep -q "the oxtrace module is not loaded: load it with .modprobe oxtrace." /tmp/err &&
	grep -q "oxtrace tool [0-9.]*, ABI 1\.[0-9]*" /tmp/err && [ -e /dev/oxtrace ]; then
	ok "no module: modprobe oxtrace and the tool's version, exit 1"
else
	nok "no module: modprobe oxtrace and the tool's version, exit 1" "rc=$rc" "$(cat /tmp/err)"
fi
# A device that does not answer VERSION as this ABI does (another ABI's module, or not
# oxtrace at all): refused before LOAD, with both versions.
check "another ABI: refused with both versions, exit 1" sh -c \
	'! oxtrace --device /dev/null -e "BEGIN { exit(0); }" 2>/tmp/err &&
	grep -q "does not answer this tool.s VERSION request" /tmp/err &&
	grep -q "module .*oxtrace tool [0-9.]*, ABI 1\.[0-9]*" /tmp/err &&
	grep -q "rmmod oxtrace; modprobe oxtrace" /tmp/err || { cat /tmp/err; false; }'
check "not permitted: clear error" sh -c \
	'! ./dropcaps oxtrace status 2>/tmp/err && grep -q "Operation not permitted.*CAP_PERFMON or CAP_SYS_ADMIN" /tmp/err'
# Refusals are the tool's words, never a bare errno: a limit is refused by the
# compiler before the device is opened, a missing function by LOAD.
check "bufsize=1g: refused by the tool, naming the limit" sh -c \
	'! oxtrace -x bufsize=1g -e "BEGIN { exit(0); }" 2>/tmp/err &&
	grep -q "option bufsize=1g exceeds the largest buffer, 64m" /tmp/err && ! grep -q "os error" /tmp/err'
check "missing function: LOAD refusal names the probe" sh -c \
	'! oxtrace -e "fbt::no_such_function_oxt:entry { }" 2>/tmp/err &&
	grep -q "failed to enable probe fbt::no_such_function_oxt:entry at function no_such_function_oxt: " /tmp/err &&
	! grep -q "os error" /tmp/err || { cat /tmp/err; false; }'
# LOAD's memory is checked against the budget before anything is allocated:
# no OOM kill, no allocation-failure warning (the runner also scans the log).
nosplat='! dmesg | grep -qE "page allocation failure|vmalloc error|invoked oom-killer"'
check "bufsize=64m aggsize=64m: over the memory budget, in words" sh -c \
	'! oxtrace -x bufsize=64m -x aggsize=64m -e "BEGIN { @ = count(); exit(0); }" 2>/tmp/err &&
	grep -q "bufsize 64m × [0-9]* CPUs × 2 halves = [0-9]*m (.* in all) exceeds oxtrace.s memory budget per consumer of [0-9]*m (module parameter consumer_mem_pct)" /tmp/err &&
	! grep -q "os error" /tmp/err && '"$nosplat"' || { cat /tmp/err; false; }'
check "dynvarsize=1g: over the memory budget, in words" sh -c \
	'! oxtrace -x dynvarsize=1g -e "BEGIN { a[1] = 1; exit(0); }" 2>/tmp/err &&
	grep -q "dynvarsize 1g (.* in all) exceeds oxtrace.s memory budget" /tmp/err &&
	! grep -q "os error" /tmp/err && '"$nosplat"' || { cat /tmp/err; false; }'
tap_exit
