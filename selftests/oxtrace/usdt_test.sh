#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# USDT probes against the real module: oxt_usdt's <sys/sdt.h> probes of provider oxt, one
# guarded by its semaphore (if (OXT_FIRE_ENABLED())): TAP.
cd "$(dirname "$0")" || exit 1
. ./tap.sh

echo "TAP version 13"
plan 9

line() { echo "$out" | grep -v '^guarded=' | awk 'NF' | tr '\n' '|' | sed 's/|$//'; }

expect "untraced, the semaphore is 0: the guarded site never runs" "guarded=0" "$(./oxt_usdt 10)"

run 'oxt$target:::fire { @n = count(); @a = sum(arg0); @b = sum(arg1); }
	END { printa("%@d %@d %@d\n", @n, @a, @b); }' -c "./oxt_usdt 10"
expect "a semaphore-guarded probe fires with its operands" "10 55 165" "$(line)"
expect "while traced the semaphore is set: the guard ran every time" "guarded=10" \
	"$(echo "$out" | grep '^guarded=')"

run 'oxt$target:::always { @n = count(); } END { printa("%@d\n", @n); }' -c "./oxt_usdt 10"
expect "another probe of the provider leaves fire's semaphore at 0" "10|guarded=0" \
	"$(line)|$(echo "$out" | grep '^guarded=')"

run 'oxt$target:::neg { @a = sum(arg0); @b = sum(arg1); } END { printa("%@d %@d\n", @a, @b); }' \
	-c "./oxt_usdt 10"
expect "signed operands are sign-extended" "-55 55" "$(line)"

run 'oxt$target:::fire /!done/ { done = 1;
	printf("%s %s %s %s\n", probeprov, probemod, probefunc, probename); }' -c "./oxt_usdt 3"
if echo "$out" | grep -Eq '^oxt[0-9]+ oxt_usdt main fire$'; then
	ok "probeprov, probemod, probefunc, probename"
else
	nok "probeprov, probemod, probefunc, probename" "$out" "$err"
fi

run 'nope$target:::x { }' -c "./oxt_usdt 1"
expect_fail "an unknown provider names the process's USDT providers" "its USDT providers: oxt"

out=$(guard oxtrace -l -n 'oxt$target:::' -c "./oxt_usdt 1" 2>&1)
expect "-l -c lists the USDT probes" "always|fire|neg" \
	"$(echo "$out" | awk 'NR > 1 { print $5 }' | sort | tr '\n' '|' | sed 's/|$//')"

# -p: the semaphore is set in a running process too, once the probes are on.
rm -f /tmp/usdt_go /tmp/usdt_ready
./oxt_usdt 7 /tmp/usdt_go >/tmp/usdt_ready &
w=$!
wait_for /tmp/usdt_ready ready $w
: >/tmp/usdt_err
guard oxtrace -v -q -p $w -e 'oxt$target:::fire { @n = count(); } END { printa("%@d\n", @n); }' \
	>/tmp/usdt_out 2>/tmp/usdt_err &
t=$!
if wait_for /tmp/usdt_err 'probes enabled' $t; then
	touch /tmp/usdt_go
	wait $t
	wait $w
	expect "-p: the running process's guarded probe, until it exits" "7 guarded=7" \
		"$(awk 'NF' /tmp/usdt_out) $(grep guarded /tmp/usdt_ready)"
else
	nok "-p: the running process's guarded probe, until it exits" "$(cat /tmp/usdt_err)"
	kill $w $t 2>/dev/null
fi
rm -f /tmp/usdt_go

tap_exit
