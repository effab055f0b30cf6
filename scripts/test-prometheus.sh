#!/usr/bin/env bash
# End to end: a real Prometheus server on the host scrapes `oxtrace --listen` in the
# guest, and its HTTP API must answer the values the tool printed when the run ended.
#
#   scripts/test-prometheus.sh     (make check runs it; needs Debian's prometheus)
#
# The guest traces a fixed workload (4 threads x 500 reads of 7 bytes), serves the
# aggregations on guest port 9100 (forwarded to a free host port on 127.0.0.1), and then
# waits on guest port 9101 until this script has seen Prometheus store the final values;
# the connection to 9101 ends the workload command, and the tool prints the same
# aggregations as OpenMetrics text. A second tool traces the same workload behind TLS and
# basic authentication (--web-config, guest port 9102; its certificate made here, now, with
# openssl), and Prometheus must store the same count from it through an https scrape job.
# Every wait is for a condition; the bound is a guard.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

command -v prometheus >/dev/null || die "prometheus is not installed (scripts/setup-toolchain.sh)"
work=$(mktemp -d)
prom_pid=
vm_pid=
cleanup() {
	[ -z "$prom_pid" ] || kill "$prom_pid" 2>/dev/null || true
	[ -z "$vm_pid" ] || kill "$vm_pid" 2>/dev/null || true
	wait 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT

free_port() {
	python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
exp_port=$(free_port)
tls_port=$(free_port)
rel_port=$(free_port)
prom_port=$(free_port)

mkdir -p "$work/guest"
# A throwaway certificate for "localhost" and a test user (password oxtrace-test; bcrypt
# cost 4, the least, since the guest is emulated): nothing secret is committed.
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 \
	-subj /CN=localhost -addext subjectAltName=DNS:localhost \
	-keyout "$work/guest/oxtrace.key" -out "$work/guest/oxtrace.crt" 2>/dev/null
cat >"$work/guest/web.yml" <<'EOF'
tls_server_config:
  cert_file: oxtrace.crt
  key_file: oxtrace.key
basic_auth_users:
  prometheus: $2b$04$cIt0Lj453FsgwIg/OkjzMeBkmuL33BH2sgPqN9dVIs7rqc24AF4CC
EOF
cat >"$work/guest/work.sh" <<'EOF'
/selftests/oxt_workload read 4 500
# Held until the host has seen Prometheus store the final values.
nc -l -p 9101 </dev/null >/dev/null
EOF
cat >"$work/guest/run.sh" <<'EOF'
P='fbt::ksys_read:entry /execname == "oxt_workload"/ { @reads = count(); @size = quantize(arg2); }'
oxtrace -q -v --listen 0.0.0.0:9102 --web-config /extra/web.yml -x aggrate=100ms -e "$P" \
	>/tmp/tls.out 2>/tmp/tls.err &
tls=$!
# Its probes are enabled before the workload starts, so that it sees every read.
. /selftests/tap.sh
wait_for /tmp/tls.err 'probes enabled' $tls || { cat /tmp/tls.err; exit 1; }
oxtrace -q --oformat openmetrics --listen 0.0.0.0:9100 -x aggrate=100ms \
	-e 'fbt::ksys_read:entry /execname == "oxt_workload"/ { @reads = count(); @size = quantize(arg2); }' \
	-c 'sh /extra/work.sh'
rc=$?
kill -INT $tls
wait $tls
exit $rc
EOF

say "guest: oxtrace --listen, forwarded to 127.0.0.1:$exp_port"
"$OXT_ROOT/scripts/vm.sh" --files "$work/guest" --timeout 900 \
	--forward "$exp_port:9100" --forward "$tls_port:9102" --forward "$rel_port:9101" -- sh /extra/run.sh >"$work/vm.out" 2>&1 &
vm_pid=$!

cat >"$work/prometheus.yml" <<EOF
global:
  scrape_interval: 1s
  scrape_timeout: 1s
scrape_configs:
  - job_name: oxtrace
    static_configs:
      - targets: ['127.0.0.1:$exp_port']
  - job_name: oxtrace-tls
    scheme: https
    basic_auth:
      username: prometheus
      password: oxtrace-test
    tls_config:
      ca_file: $work/guest/oxtrace.crt
      server_name: localhost
    static_configs:
      - targets: ['127.0.0.1:$tls_port']
EOF
promtool check config "$work/prometheus.yml" >/dev/null
prometheus --config.file="$work/prometheus.yml" --storage.tsdb.path="$work/tsdb" \
	--web.listen-address="127.0.0.1:$prom_port" >"$work/prometheus.log" 2>&1 &
prom_pid=$!

# query EXPR: the value of an instant vector with one sample, or nothing.
query() {
	curl -sf --get "http://127.0.0.1:$prom_port/api/v1/query" --data-urlencode "query=$1" |
		python3 -c 'import json,sys; r=json.load(sys.stdin)["data"]["result"]; print(r[0]["value"][1] if len(r)==1 else "")' 2>/dev/null || true
}

# of JOB SERIES: SERIES (METRIC or METRIC{LABELS}) restricted to scrape job JOB.
of() {
	case $2 in
	*'}') echo "${2%\}},job=\"$1\"}" ;;
	*) echo "$2{job=\"$1\"}" ;;
	esac
}

# The guest boots, traces and serves; Prometheus scrapes every second. Wait until it has
# stored the workload's last read from both tools (the guard only ends a hung run).
deadline=$((SECONDS + 800))
while [ "$(query "$(of oxtrace oxtrace_reads_total)")" != 2000 ] ||
	[ "$(query "$(of oxtrace-tls oxtrace_reads_total)")" != 2000 ]; do
	if ! kill -0 "$vm_pid" 2>/dev/null; then
		cat "$work/vm.out" >&2
		die "the guest ended before Prometheus saw the final count"
	fi
	[ $SECONDS -lt $deadline ] || die "Prometheus never stored oxtrace_reads_total 2000 (last: '$(query "$(of oxtrace oxtrace_reads_total)")', over TLS: '$(query "$(of oxtrace-tls oxtrace_reads_total)")')"
	sleep 0.5
done
declare -A prom
for m in oxtrace_reads_total oxtrace_size_count oxtrace_size_sum \
	'oxtrace_size_bucket{le="7"}' 'oxtrace_size_bucket{le="+Inf"}'; do
	prom[$m]=$(query "$(of oxtrace "$m")")
done
# Over TLS with basic authentication: the same count, and a request without the
# password is refused.
tls_size=$(query "$(of oxtrace-tls oxtrace_size_count)")
noauth=$(curl -s -o /dev/null -w '%{http_code}' --cacert "$work/guest/oxtrace.crt" \
	--resolve "localhost:$tls_port:127.0.0.1" "https://localhost:$tls_port/metrics" || true)

# Release the guest's workload: the tool ends and prints its aggregations.
python3 -c "import socket; socket.create_connection(('127.0.0.1', $rel_port), 60).close()"
rc=0
wait "$vm_pid" || rc=$?
vm_pid=
[ $rc = 0 ] || { cat "$work/vm.out" >&2; die "guest run failed (exit $rc)"; }

fails=0
if [ "$tls_size" = 2000 ] && [ "$noauth" = 401 ]; then
	echo "ok: scraped over TLS with basic auth: oxtrace_size_count = 2000; without the password: 401"
else
	echo "FAIL: over TLS with basic auth: oxtrace_size_count '$tls_size', without the password: '$noauth'" >&2
	fails=$((fails + 1))
fi
for m in "${!prom[@]}"; do
	printed=$(tr -d '\r' <"$work/vm.out" | awk -v m="$m" '$1 == m { print $2 }')
	if [ -n "$printed" ] && [ "${prom[$m]}" = "$printed" ]; then
		echo "ok: $m = $printed (Prometheus = tool)"
	else
		echo "FAIL: $m: Prometheus '${prom[$m]}', tool printed '$printed'" >&2
		fails=$((fails + 1))
	fi
done
if [ $fails != 0 ]; then
	cat "$work/vm.out" >&2
	exit 1
fi
echo "prometheus: 5 series scraped from the guest agree with the tool; the scrape over TLS with basic auth too"
