#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# Options through the real module: the buffer policies (switch, fill, ring) with their
# output and drops, setopt()'s runtime errors, argref, -b and unknown -x options (TAP).
# Every check is a condition on the output; tick-1ms fires on one CPU only, so its records
# are in one principal buffer.
cd "$(dirname "$0")" || exit 1
. ./tap.sh

echo "TAP version 13"
plan 14

# consecutive FIRST LAST: stdin's lines are the integers FIRST..LAST, one each.
consecutive() {
	awk -v a="$1" -v b="$2" 'NF { if ($1 != a + n) bad = 1; n++ }
		END { exit !(bad == 0 && n == b - a + 1) }'
}

# switch (the default): a 4k buffer read only at exit keeps the oldest records; the
# others are dropped and counted in dtrace's words.
ticks='tick-1ms /i < 300/ { printf("%d\n", i++); } tick-1ms /i == 300/ { exit(0); }'
run "$ticks" -x bufsize=4k -x switchrate=60s
cnt=$(echo "$out" | grep -c .)
last=$(echo "$out" | tail -n 1)
if [ "$rc" = 0 ] && [ "$cnt" -gt 0 ] && [ "$cnt" -lt 300 ] &&
	echo "$out" | consecutive 0 "$last"; then
	ok "switch keeps the oldest records (0..$last)"
else
	nok "switch keeps the oldest records" "rc=$rc cnt=$cnt" "$out" "$err"
fi
if echo "$err" | grep -Eq "^oxtrace: [0-9]+ drops? on CPU [0-9]+$"; then
	ok "switch reports its drops per CPU"
else
	nok "switch reports its drops per CPU" "$err"
fi
run "$ticks" -x bufsize=4k -x switchrate=60s -x bufpolicy=switch
if [ "$rc" = 0 ] && [ "$(echo "$out" | tail -n 1)" = "$last" ]; then
	ok "bufpolicy=switch is the default"
else
	nok "bufpolicy=switch is the default" "rc=$rc" "$out"
fi

# ring: the same program keeps the newest records, printed at exit.
run "#pragma D option bufpolicy=ring
$ticks" -x bufsize=4k
first=$(echo "$out" | head -n 1)
cnt=$(echo "$out" | grep -c .)
if [ "$rc" = 0 ] && [ "$cnt" -gt 0 ] && [ "$first" -gt 0 ] &&
	echo "$out" | consecutive "$first" 299; then
	ok "ring keeps the newest records ($first..299)"
else
	nok "ring keeps the newest records" "rc=$rc cnt=$cnt" "$out" "$err"
fi
if ! echo "$err" | grep -q "drop"; then
	ok "ring overwrites without drops"
else
	nok "ring overwrites without drops" "$err"
fi

# fill: tracing ends by itself once the buffer is full; END's record still fits (the
# room kept for it), and the record that did not fit is a drop.
run 'tick-1ms { printf("%d\n", i++); }
tick-1ms /i > 100000/ { exit(1); }
END { printf("end %d\n", i); }' -x bufpolicy=fill -b 16k
cnt=$(echo "$out" | grep -c '^[0-9]')
if [ "$rc" = 0 ] && [ "$cnt" -gt 0 ] && [ "$cnt" -lt 400 ] &&
	echo "$out" | grep '^[0-9]' | consecutive 0 $((cnt - 1)); then
	ok "fill records 0..$((cnt - 1)) and stops tracing"
else
	nok "fill records from the start and stops tracing" "rc=$rc cnt=$cnt" "$out" "$err"
fi
if echo "$out" | tail -n 1 | grep -Eq '^end [0-9]+$'; then
	ok "fill keeps room for END's record"
else
	nok "fill keeps room for END's record" "$out"
fi
if echo "$err" | grep -Eq "^oxtrace: [0-9]+ drops? on CPU [0-9]+$"; then
	ok "fill reports the drops of its full buffer"
else
	nok "fill reports the drops of its full buffer" "$err"
fi
run 'BEGIN { exit(0); } END { trace(execname); trace(execname); }' -x bufpolicy=fill -b 4k
expect_fail "fill refuses END records larger than the buffer" \
	"END enablings exceed size of principal buffer"

# setopt(): unknown options, options fixed while tracing and bad values are runtime
# errors of the clause, in dtrace's words; the clause goes on.
run 'BEGIN {
	setopt("Nixon");
	setopt("bufsize", "1m");
	setopt("quiet", "um, no");
	setopt("aggrate", "0.5hz");
	printf("on\n");
	exit(0);
}'
want='couldn'"'"'t set option "Nixon" to "1": Invalid option name
couldn'"'"'t set option "bufsize" to "1m": Operation illegal when tracing is active
couldn'"'"'t set option "quiet" to "um, no": Invalid value for specified option
couldn'"'"'t set option "aggrate" to "0.5hz": Invalid value for specified option'
got=$(echo "$err" | sed -n 's/^oxtrace: error on enabled probe ID 1 (ID 1: dtrace:::BEGIN): //p')
expect "setopt() errors at run time" "$want
on rc=0" "$got
$out rc=$rc"

# argref: an argument the program does not use is an error unless argref is set.
run 'BEGIN { exit(0); }' 1234
expect_fail "an unreferenced argument is an error" "[D_MACRO_UNUSED] macro argument \$1 is not referenced"
run 'BEGIN { exit(0); }' -x argref 1234
expect "-x argref accepts it" "rc=0" "rc=$rc"

# -b is bufsize, rounded up to the smallest buffer; -x of an unknown option is refused.
run 'BEGIN { printf("b\n"); exit(0); }' -b 59
expect "-b 59 runs with the smallest buffer" "b rc=0" "$out rc=$rc"
run 'BEGIN { exit(0); }' -x nixon=1
expect_fail "-x of an unknown option is refused" "unknown option 'nixon'"

tap_exit
