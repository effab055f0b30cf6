#!/bin/sh
# make run: the tool driving the module in the guest.
set -e
cd /selftests
echo "### oxtrace version"
oxtrace version
echo
echo "### count the ksys_* calls of a command, by function (-c: probes on before it starts)"
oxtrace -e 'fbt::ksys_*:entry /pid == $target/ { @calls[probefunc] = count(); }' \
	-c './oxt_workload read 4 500'
echo
echo "### printf from entry and return probes, predicates on arguments"
oxtrace -q -e 'fbt::ksys_read:entry /pid == $target && arg2 > 6/ { printf("%-14s pid %d cpu %d asks %d bytes\n", execname, pid, cpu, arg2); }
	fbt::ksys_read:return /pid == $target && arg1 > 7/ { printf("%-14s got %d\n", execname, arg1); }' \
	-c './oxt_workload read 2 16'
echo
echo "### read(2) latency with self->ts and quantize (/extra/latency.d)"
oxtrace -s /extra/latency.d -c './oxt_workload read 4 300'
