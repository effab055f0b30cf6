#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# fbt at scale: a glob of a thousand functions (oxtmod.ko's oxtmod_f000 ..
# oxtmod_f999, each called once per read of /proc/oxtmod_many) attached by entry and
# by entry and return; every call counted, each function's entry and return paired,
# one ftrace_ops per function while attached, nothing left in ftrace after: TAP.
cd "$(dirname "$0")" || exit 1
. ./tap.sh
echo "TAP version 13"
plan 6
insmod ./oxtmod.ko || echo "# insmod oxtmod.ko failed"
ef=/sys/kernel/tracing/enabled_functions
reads=3

# The traced child: three reads, then what ftrace has enabled while the probes are on.
cat >/tmp/scale.sh <<EOF
i=0
while [ \$i -lt $reads ]; do cat /proc/oxtmod_many >/dev/null; i=\$((i + 1)); done
grep 'oxtmod_f' $ef >/tmp/scale.ef
EOF

run 'fbt:oxtmod:oxtmod_f*:entry { @e = count(); @f[probefunc] = count(); }
	END { printa("e %@d\n", @e); printa("f %s %@d\n", @f); }' -c 'sh /tmp/scale.sh'
nf=$(echo "$out" | grep -c '^f oxtmod_f[0-9]* '"$reads"'$')
if [ "$rc" = 0 ] && echo "$out" | grep -qx "e $((1000 * reads))" && [ "$nf" = 1000 ]; then
	ok "1,000 entry probes: every call counted, $reads per function"
else
	nok "1,000 entry probes: every call counted, $reads per function" "rc=$rc" \
		"$(echo "$out" | grep '^e')" "$nf functions with $reads" "$err"
fi
n1=$(grep -c ' (1) ' /tmp/scale.ef)
if [ "$(wc -l </tmp/scale.ef)" = 1000 ] && [ "$n1" = 1000 ]; then
	ok "the 1,000 functions are enabled in ftrace, one ops each"
else
	nok "the 1,000 functions are enabled in ftrace, one ops each" \
		"$(wc -l </tmp/scale.ef) enabled, $n1 with one ops" "$(head -3 /tmp/scale.ef)"
fi

run 'fbt:oxtmod:oxtmod_f*:entry { @e = count(); @f[probefunc] = count(); }
	fbt:oxtmod:oxtmod_f*:return { @r = count(); @f[probefunc] = count(); }
	END { printa("e %@d\n", @e); printa("r %@d\n", @r); printa("f %s %@d\n", @f); }' \
	-c 'sh /tmp/scale.sh'
nf=$(echo "$out" | grep -c '^f oxtmod_f[0-9]* '"$((2 * reads))"'$')
if [ "$rc" = 0 ] && echo "$out" | grep -qx "e $((1000 * reads))" &&
	echo "$out" | grep -qx "r $((1000 * reads))" && [ "$nf" = 1000 ]; then
	ok "1,000 entry and return probes: every call and return counted, in pairs"
else
	nok "1,000 entry and return probes: every call and return counted, in pairs" "rc=$rc" \
		"$(echo "$out" | grep '^[er] ')" "$nf functions with $((2 * reads))" "$err"
fi
# One ops each: with CONFIG_FPROBE the consumer's fprobe (fprobe_handler), else the
# kretprobe's kprobe with the entry probe aggregated on it.
n1=$(grep -c ' (1) ' /tmp/scale.ef)
nf=1000
grep -qw register_fprobe_ips /proc/kallsyms && nf=$(grep -c 'fprobe_handler' /tmp/scale.ef)
if [ "$(wc -l </tmp/scale.ef)" = 1000 ] && [ "$n1" = 1000 ] && [ "$nf" = 1000 ]; then
	ok "entry and return on 1,000 functions: one ops each"
else
	nok "entry and return on 1,000 functions: one ops each" \
		"$(wc -l </tmp/scale.ef) enabled, $n1 with one ops, $nf through fprobe" \
		"$(head -3 /tmp/scale.ef)"
fi

# The return value through the set's exit handler: oxtmod_f000(x) returns x + 1, and the
# reads chain them, so oxtmod_f999 returns 1000 on every read.
run 'fbt:oxtmod:oxtmod_f999:return { @[arg1] = count(); }
	fbt:oxtmod:oxtmod_f5*:entry { @a[arg0 >= 500 && arg0 < 600] = count(); }
	END { printa("r %d %@d\n", @); printa("a %d %@d\n", @a); }' -c 'sh /tmp/scale.sh'
if [ "$rc" = 0 ] && echo "$out" | grep -qx "r 1000 $reads" &&
	echo "$out" | grep -qx "a 1 $((100 * reads))" && [ "$(echo "$out" | wc -l)" = 2 ]; then
	ok "arguments at entry and the return value at return"
else
	nok "arguments at entry and the return value at return" "rc=$rc" "$out" "$err"
fi

if [ -z "$(grep oxtmod_f $ef)" ]; then
	ok "nothing of the probes is left in $ef after detach"
else
	nok "nothing of the probes is left in $ef after detach" "$(grep -c oxtmod_f $ef) functions"
fi

rmmod oxtmod || echo "# rmmod oxtmod failed"
tap_exit
