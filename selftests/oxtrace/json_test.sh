#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# --oformat json: every line of a mixed run (trace of signed and unsigned integers and of
# escaped strings, printf, printa, exit, keyed and histogram aggregations) is one JSON
# object parsed strictly by oxt-jsoncheck (serde_json), nothing else is on stdout, and
# the values are typed: TAP.
cd "$(dirname "$0")" || exit 1
. ./tap.sh

echo "TAP version 13"
plan 6

prog='BEGIN { trace(-5); trace((uint8_t)255); trace("say \"hi\"\\\n\t."); printf("%s=%d\n", "x", -7); }
fbt::ksys_read:entry /pid == $target/ { @reads[execname, arg2 > 4] = count(); @size = quantize(arg2); @n = count(); }
END { printa(@n); exit(3); }'
guard oxtrace --oformat json -e "$prog" -c './oxt_workload read 2 10' >/tmp/json.out 2>/tmp/json.err
rc=$?
expect "exit() status kept with --oformat json" 3 "$rc"
if summary=$(./oxt-jsoncheck </tmp/json.out 2>&1); then
	ok "every stdout line is one strict JSON object ($summary)"
else
	nok "every stdout line is one strict JSON object" "$summary" "$(cat /tmp/json.out)"
fi
if grep -q '"type":"trace",.*"value":-5}$' /tmp/json.out &&
	grep -q '"type":"trace",.*"value":255}$' /tmp/json.out; then
	ok "integers are JSON numbers, signed by their D type"
else
	nok "integers are JSON numbers, signed by their D type" "$(cat /tmp/json.out)"
fi
if grep -qF '"value":"say \"hi\"\\\n\t."}' /tmp/json.out &&
	grep -qF '"type":"printf",' /tmp/json.out && grep -qF '"text":"x=-7\n"}' /tmp/json.out; then
	ok "strings escaped, printf text"
else
	nok "strings escaped, printf text" "$(cat /tmp/json.out)"
fi
if grep -qF '"keys":["execname","arg2 > 4"],"entries":[' /tmp/json.out &&
	grep -qF '{"key":{"execname":"oxt_workload","arg2 > 4":1},"value":8}' /tmp/json.out &&
	grep -qF '{"key":{"execname":"oxt_workload","arg2 > 4":0},"value":12}' /tmp/json.out; then
	ok "aggregation keys named by their D expression"
else
	nok "aggregation keys named by their D expression" "$(cat /tmp/json.out)"
fi
# printa(@n) in END, then @n again with every aggregation at the end.
if [ "$(grep -c '"type":"aggregation","name":"n",.*"value":20}' /tmp/json.out)" = 2 ] &&
	grep -q '"type":"exit",.*"status":3}$' /tmp/json.out; then
	ok "printa and exit as lines"
else
	nok "printa and exit as lines" "$(cat /tmp/json.out)"
fi
tap_exit
