#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# attach_test: many entry probes attached, fired and detached, round after round, with
# no splat (the runner scans the log) and exact bookkeeping; prints how long attaching
# and detaching took (a figure, never asserted: timing is the bench's business).
#
# make check: 1,000 functions, 2 rounds.  make stress (OXT_STRESS=1): 5,000 functions,
# 20 rounds.  The functions are every safe one (oxtrace -l without "unsafe:") under a set
# of four-letter prefixes, taken in order until there are enough.
cd "$(dirname "$0")" || exit 1
. ./tap.sh
echo "TAP version 13"

if [ -n "${OXT_STRESS:-}" ]; then want=5000 rounds=20; else want=1000 rounds=2; fi
workload=$(pwd)/oxt_workload

# Centiseconds since boot.
now_cs() {
	read -r up _ </proc/uptime
	echo "${up%.*}${up#*.}"
}

oxtrace -l 'fbt:::entry' | awk 'NR > 1 && $5 == "entry" && NF == 5 { print $4 }' >/tmp/att.safe
prefixes=$(awk -v want="$((want + want / 10))" '
	{ p = substr($1, 1, 4); n[p]++; if (!(p in seen)) { seen[p] = 1; order[++k] = p } }
	END { t = 0; for (i = 1; i <= k && t < want; i++) { printf "%s ", order[i]; t += n[order[i]] } }
' /tmp/att.safe)
desc=""
for p in $prefixes; do
	desc="$desc${desc:+, }fbt::$p*:entry"
done
# Without debugfs the tool can't read the kprobe blacklist, so the kernel refuses some of
# these functions at LOAD (skipped and counted); a prefix it refuses whole would fail the
# program: leave such prefixes out. The count of the first clean LOAD is the expected one.
listed=$(for p in $prefixes; do grep "^$p" /tmp/att.safe; done | sort -u | wc -l)
tries=0
while :; do
	guard oxtrace -e "$desc { @n = count(); } BEGIN { exit(0); }" >/dev/null 2>/tmp/att.err
	gone=$(sed -n 's/^oxtrace: probe description fbt::\([^*]*\)\*:entry does not match any probes$/\1/p' /tmp/att.err)
	tries=$((tries + 1))
	[ -n "$gone" ] && [ $tries -lt 20 ] || break
	prefixes=$(for p in $prefixes; do [ "$p" = "$gone" ] || printf '%s ' "$p"; done)
	desc=""
	for p in $prefixes; do
		desc="$desc${desc:+, }fbt::$p*:entry"
	done
done
expected=$(sed -n 's/^oxtrace: attached \([0-9]*\) probes in [0-9]* ms$/\1/p' /tmp/att.err)
skipped=$(sed -n 's/^oxtrace: \([0-9]*\) matching functions could not be probed.*/\1/p' /tmp/att.err)
if [ -n "$expected" ] && [ "$expected" -ge "$want" ]; then
	ok "$expected functions under $(echo $prefixes | wc -w) prefixes (${skipped:-0} refused by the kernel)"
else
	nok "$want functions to probe" "${expected:-no} probes of $listed listed" "$(tail -3 /tmp/att.err)"
fi

r=0
bad=""
while [ $r -lt $rounds ]; do
	r=$((r + 1))
	t0=$(now_cs)
	guard oxtrace -v -e "$desc { @n = count(); }" -c "$workload read 1 100" \
		>/tmp/att.out 2>/tmp/att.err
	rc=$?
	t1=$(now_cs)
	enabled=$(sed -n 's/^oxtrace: \([0-9]*\) probes enabled$/\1/p' /tmp/att.err)
	ms=$(sed -n 's/^oxtrace: attached [0-9]* probes in \([0-9]*\) ms$/\1/p' /tmp/att.err)
	fired=$(awk 'NF == 1 && $1 ~ /^[0-9]+$/ { v = $1 } END { print v + 0 }' /tmp/att.out)
	echo "# round $r: $enabled probes, LOAD ${ms:-?} ms, whole run $(((t1 - t0) * 10)) ms, $fired hits"
	# -v counts every attach entry, those the kernel refused (fired 0) included.
	if [ $rc != 0 ] || [ "$enabled" != "$((expected + ${skipped:-0}))" ] || [ "$fired" -lt 100 ]; then
		bad="round $r: rc $rc, $enabled probes enabled of $expected + ${skipped:-0}, $fired hits"
		break
	fi
done
if [ -z "$bad" ]; then
	ok "$rounds rounds of $expected probes attached, fired and detached"
else
	nok "$rounds rounds of $expected probes attached, fired and detached" "$bad" \
		"$(tail -5 /tmp/att.err)"
fi
tap_exit
