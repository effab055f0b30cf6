#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# The exporter (--listen) under attack while it traces: oxt_netadv floods it with 1000
# connections, trickles endless headers, sends a 100 MiB request line and random bytes,
# while oxt_workload makes 8000 reads. The exporter keeps answering scrapes, the tool's
# peak resident memory (VmHWM) stays within a bound, and the trace loses nothing (the
# count is exact, in the scrape and at the end). Then --listen's address forms and
# --web-config's refusals. Every wait is for a condition: TAP.
cd "$(dirname "$0")" || exit 1
. ./tap.sh
PORT=9920

echo "TAP version 13"
plan 8

ifconfig lo 127.0.0.1 up 2>/dev/null
hwm() { awk '/^VmHWM:/ { print $2 }' "/proc/$1/status"; }

: >/tmp/err
oxtrace -q -v --listen "$PORT" -x aggrate=100ms \
	-e 'fbt::ksys_read:entry /execname == "oxt_workload"/ { @reads = count(); }' \
	>/tmp/out 2>/tmp/err &
p=$!
wait_for /tmp/err 'probes enabled' $p
before=$(hwm $p)

./oxt_netadv $PORT >/tmp/adv 2>&1 &
a=$!
./oxt_workload read 4 2000
wait $a
arc=$?
for phase in flood slow long garbage; do
	line=$(grep "^$phase " /tmp/adv)
	case $line in
	"$phase ok "*) ok "exporter under attack: ${line#"$phase ok "}" ;;
	*) nok "exporter under attack: $phase" "exit $arc" "$(cat /tmp/adv)" ;;
	esac
done

# The exporter still answers, and the scrape has every read (the guard only ends a hang).
scrape_until http://127.0.0.1:$PORT/metrics '^oxtrace_reads_total 8000$' $p
after=$(hwm $p)
kill -INT $p
wait $p
if grep -q '^oxtrace_reads_total 8000$' /tmp/metrics && [ "$(tr -d ' \n' </tmp/out)" = 8000 ]; then
	ok "the trace lost nothing: 8000 reads scraped and printed"
else
	nok "the trace lost nothing" "scrape: $(cat /tmp/metrics)" "printed: $(cat /tmp/out)" "$(cat /tmp/err)"
fi
# 100 MiB sent at it: the old exporter grew by as much. 16 MiB is room for the runtime,
# 64 connections' buffers and the allocator's slack.
grown=$((after - before))
if [ "$grown" -lt 16384 ]; then
	ok "memory bounded: VmHWM ${before} kB before, ${after} kB after the attack"
else
	nok "memory bounded" "VmHWM ${before} kB before, ${after} kB after the attack"
fi

# A bare port listens on loopback only; ADDR:PORT elsewhere is explicit.
: >/tmp/err
oxtrace -q --listen :$PORT -e 'BEGIN { }' 2>/tmp/err &
p=$!
wait_for /tmp/err 'serving the aggregations' $p
kill -INT $p
wait $p
expect "--listen :PORT serves on 127.0.0.1" \
	"oxtrace: serving the aggregations on http://127.0.0.1:$PORT/metrics" \
	"$(grep serving /tmp/err)"

printf 'basic_auth_users:\n  alice: secret\n' >/tmp/web.yml
run 'BEGIN { exit(0); }' --listen 0 --web-config /tmp/web.yml
expect_fail "--web-config refuses a bad file with its line" "/tmp/web.yml:2:10: not a bcrypt hash"

tap_exit
