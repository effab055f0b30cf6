#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# Aggregations in the kernel's per-CPU buffers, snapshotted and merged by the
# tool: exact values for every function against oxt_workload (4 threads on 4
# CPUs, 2000 reads each of 1..8 bytes, so each size 1000 times), drops
# conserved with a tiny aggsize, and the OpenMetrics exporter: TAP.
cd "$(dirname "$0")" || exit 1
. ./tap.sh
W="./oxt_workload read 4 2000"
E='fbt::ksys_read:entry /pid == $target/'
# buckets: the non-zero rows of a histogram as "value count" pairs
buckets() { awk '$2 ~ /^\|/ && $3 != 0 { printf "%s %s ", $1, $3 }'; }

echo "TAP version 13"
plan 10

run "$E { @s = stddev(arg2); @sum = sum(arg2); } END { printa(\"%@d\n\", @s); printa(\"%@d\n\", @sum); }" -c "$W"
expect "stddev and sum (integer arithmetic, as DTrace)" "3
36000" "$out"

run "$E { @l = lquantize(arg2, 0, 10, 2); }" -c "$W"
expect "lquantize buckets exact" "0 1000 2 2000 4 2000 6 2000 8 1000 " "$(echo "$out" | buckets)"

run "$E { @l = lquantize(arg2, 3, 6); }" -c "$W"
expect "lquantize under- and overflow buckets" "< 2000 3 1000 4 1000 5 1000 >= 3000 " \
	"$(echo "$out" | awk '$2 ~ /^\|/ && $3 != 0 { printf "%s %s ", $1, $3 } $3 ~ /^\|/ && $4 != 0 { printf "%s %s ", $1, $4 }')"

run "$E { @l = llquantize(arg2, 2, 0, 3, 2); }" -c "$W"
got=$(echo "$out" | buckets)
total=$(echo "$got" | awk '{ for (i = 2; i <= NF; i += 2) s += $i } END { print s }')
expect "llquantize: every value in a bucket" "8000" "$total"

# Fewer steps than the factor (DTrace: the steps then divide it): order 0 has
# buckets 1, 2, 4, 6, 8 of width 2, so 3 counts in the one labelled 2.
run 'BEGIN { @l = llquantize(3, 10, 0, 6, 5); exit(0); }'
expect "llquantize(3, 10, 0, 6, 5) runs and prints DTrace's histogram" \
"           value  ------------- Distribution ------------- count    
               1 |                                         0        
               2 |@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@ 1        
               4 |                                         0        " \
	"$(echo "$out" | sed -n '/value/,$p')$err"

run "$E { @k[execname, arg2] = count(); } END { printa(\"%s %d %@d\n\", @k); }" -c "$W"
expect "tuple keys of a string and an integer" "oxt_workload 1 1000
oxt_workload 2 1000
oxt_workload 3 1000
oxt_workload 4 1000
oxt_workload 5 1000
oxt_workload 6 1000
oxt_workload 7 1000
oxt_workload 8 1000" "$(echo "$out" | sort)"

# A buffer too small for every data set: what does not fit is counted as a
# drop, and every update is either merged or counted.
run "$E { @c[arg2] = count(); @t[timestamp] = count(); }
     END { printa(\"c %@d\n\", @c); printa(\"t %@d\n\", @t); }" -x aggsize=4k -x aggrate=50ms -c "$W"
merged=$(echo "$out" | awk '{ s += $2 } END { print s + 0 }')
drops=$(echo "$err" | sed -n 's/.* \([0-9]*\) aggregation drops on CPU.*/\1/p' | awk '{ s += $1 } END { print s + 0 }')
if [ "$drops" -gt 0 ] && [ $((merged + drops)) = 16000 ]; then
	ok "tiny aggsize: drops reported, merged + dropped = updates ($merged + $drops)"
else
	nok "tiny aggsize: drops reported, merged + dropped = updates" "merged $merged drops $drops" "$err"
fi

# 8000 distinct keys: far more than the tool's first 64 KiB snapshot buffer, so
# AGGSNAP answers ENOSPC first and the data must still arrive whole.
run "$E { @t[timestamp] = count(); } END { printa(\"%@d\n\", @t); }" -x aggrate=10s -c "$W"
expect "a snapshot bigger than the first buffer arrives whole" "8000 many" \
	"$(echo "$out" | awk '{ s += $1; n++ } END { print s + 0, (n > 2000 ? "many" : n + 0) }')"

run "$E { @c = count(); } END { clear(@c); printa(\"%@d\n\", @c); }" -c "$W"
expect "clear() empties an aggregation" "0" "$out"

# The exporter: scrape /metrics while the program runs.
ifconfig lo 127.0.0.1 up 2>/dev/null
: >/tmp/err # wait_for must not find an earlier run's line
oxtrace -q -v --listen 127.0.0.1:9910 -x aggrate=100ms \
	-e 'fbt::ksys_read:entry /execname == "oxt_workload"/ { @reads = count(); @size = quantize(arg2); }' \
	>/dev/null 2>/tmp/err &
p=$!
wait_for /tmp/err 'probes enabled' $p
./oxt_workload read 4 2000
# Scrape until a snapshot has all of the workload's reads (or the hang guard).
scrape_until http://127.0.0.1:9910/metrics '^oxtrace_reads_total 8000$\|^oxtrace_reads 8000$' $p
kill -INT $p
wait $p
if grep -q '^oxtrace_reads_total 8000$\|^oxtrace_reads 8000$' /tmp/metrics &&
	grep -q '^# EOF' /tmp/metrics && grep -q "le=\"7\"} 7000" /tmp/metrics && grep -q "le=\"+Inf\"} 8000" /tmp/metrics; then
	ok "--listen serves OpenMetrics while tracing"
else
	nok "--listen serves OpenMetrics while tracing" "$(cat /tmp/metrics /tmp/err)"
fi

tap_exit
