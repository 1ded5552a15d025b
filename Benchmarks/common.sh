# Shared by the benchmarks (sourced, not run): a release build of pushgate (skipped when the
# caller sets PUSHGATE_BUILD=0 before sourcing), a scratch directory removed on exit, and a
# gateway started on an ephemeral port.
#
#   start_server [serve flags...]   sets $server (pid) and $url; the gateway runs unprivileged
#   as_gateway, gateway_owns PATH...   for scripts that start the gateway themselves
#   stop_server
#   need_nghttp2_tools              installs h2load and nghttpd when missing
#   start_nghttpd                   nghttpd (2 threads, h2c) serving $work/static ("ok"): sets $ng, $ng_port
#   free_port, wait_port PORT       for servers started on a chosen port (nghttpd)
#   cpu_ticks PID                   the process's utime + stime so far, in clock ticks
#   received                        pushes the gateway at $url has accepted so far (its metrics)
#   write_alert_payload FILE        the h2load references' push: the bench's alert, 122 bytes
#   h2load_rate ARGS...             requests/s of one h2load run that must fully succeed
#   offline_device_urls, provider_h2load_setup, h2load_cpu   the provider-endpoint reference
#   bench_json, bench_clean, bench_rate, compare_medians   reading `pushgate bench` results
set -Eeuo pipefail
# A failing command stops the benchmark: say where, rather than end silently.
trap 'echo "${BASH_SOURCE[0]}: line $LINENO: a command failed (status $?)" >&2' ERR
cd "$(dirname "${BASH_SOURCE[0]}")/.."
ulimit -n "$(ulimit -Hn)"  # thousands of connections need as many descriptors on each side

if [ "${PUSHGATE_BUILD:-1}" != 0 ]; then
    if ! build_log=$(swift build -c release --product pushgate 2>&1); then echo "$build_log" >&2; exit 1; fi
    BIN=$(swift build -c release --show-bin-path)/pushgate
fi
work=$(mktemp -d)
cleanup() { pkill -P $$ 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT

# The gateway runs as production runs it, as its own user: run as root, this script starts it
# as nobody ("${as_gateway[@]}" "$BIN" serve ...), from a copy in $work (a clone under root's
# home is out of nobody's reach), with what it must write or read privately given to it
# (gateway_owns PATH...: directories are created).
as_gateway=()
gateway_owns() { for path in "$@"; do [ -e "$path" ] || mkdir -p "$path"; done; }
if [ "$(id -u)" = 0 ]; then
    chmod 755 "$work"
    as_gateway=(setpriv --reuid=nobody --regid=nogroup --clear-groups)
    gateway_owns() { for path in "$@"; do [ -e "$path" ] || mkdir -p "$path"; chown nobody:nogroup "$path"; done; }
    if [ -n "${BIN:-}" ]; then install -m 755 "$BIN" "$work/pushgate"; BIN=$work/pushgate; fi
fi

start_server() {
    rm -rf "$work/data"
    gateway_owns "$work/data"
    "${as_gateway[@]}" "$BIN" serve --listen 127.0.0.1:0 --data-dir "$work/data" --log-level error "$@" > "$work/serve.out" 2>&1 &
    server=$!
    for _ in $(seq 200); do grep -q listening "$work/serve.out" 2>/dev/null && break; sleep 0.05; done
    url=$(sed -n 's/^listening //p' "$work/serve.out" | head -1)
}

stop_server() {
    kill -TERM "$server"
    wait "$server" || true
}

need_nghttp2_tools() {
    if ! command -v h2load >/dev/null || [ ! -x /usr/sbin/nghttpd ]; then
        apt-get install -y --no-install-recommends nghttp2-client nghttp2-server >/dev/null
    fi
}

start_nghttpd() {
    printf 'ok\n' > "$work/static"
    ng_port=$(free_port)
    /usr/sbin/nghttpd --no-tls -n 2 -d "$work" "$ng_port" >/dev/null 2>&1 &
    ng=$!
    wait_port "$ng_port"
}

# received: pushes the running gateway ($url) has accepted so far, from its metrics.
received() { curl -s "$url/metrics" | awk '$1 ~ /^pushgate_notifications_received_total/ {s += $2} END {print int(s)}'; }

cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

write_alert_payload() { printf '{"aps":{"alert":"bench"},"pad":"%s"}' "$(head -c 88 /dev/zero | tr '\0' x)" > "$1"; }

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

wait_port() { for _ in $(seq 100); do (echo >/dev/tcp/127.0.0.1/"$1") 2>/dev/null && return 0; sleep 0.05; done; return 1; }

# h2load_checked H2LOAD_ARGS...: the output of one h2load run; fails, showing it, when any
# request failed or was answered with a 4xx or 5xx.
h2load_checked() {
    local out
    out=$(h2load "$@")
    if ! grep -q " 0 failed, 0 errored, 0 timeout" <<<"$out" || ! grep -q ", 0 4xx, 0 5xx" <<<"$out"; then
        echo "h2load reported failures:" >&2
        echo "$out" >&2
        return 1
    fi
    printf '%s\n' "$out"
}

# h2load_rate H2LOAD_ARGS...: requests/s of one h2load run that must fully succeed.
h2load_rate() {
    local out
    out=$(h2load_checked "$@")
    sed -n 's/^finished in .*, \([0-9.]*\) req\/s.*/\1/p' <<<"$out"
}

# offline_device_urls: on the running gateway ($url), creates 1,000 devices, each with one
# registration for com.example.bench, through two curl processes (create, then register), and
# writes the provider URL (/3/device/<token>) of each to $work/urls, one per line (and each
# device's creation answer, {"deviceId", "secret"}, to $work/devices).
offline_device_urls() {
    printf '{"topic":"com.example.bench"}' > "$work/topic.json"
    # A curl config: one block per request, "next" between them (not after the last). Only the
    # first block gets --http2-prior-knowledge (the command line's); the others reuse its HTTP/2
    # connection. (curl 7.88 fails a later block that names prior knowledge again: exit 16.)
    for _ in $(seq 1000); do printf 'next\nurl = "%s/v1/devices"\nrequest = "POST"\n' "$url"; done | tail -n +2 > "$work/create.curl"
    curl -s --http2-prior-knowledge -K "$work/create.curl" | json_objects | tee "$work/devices" | python3 -c '
import json, sys
url, body = sys.argv[1], sys.argv[2]
for line in sys.stdin:
    d = json.loads(line)
    device, secret = d["deviceId"], d["secret"]
    print(f"next\nurl = \"{url}/v1/devices/{device}/registrations\"\nheader = \"authorization: bearer {secret}\"\ndata = \"@{body}\"")
' "$url" "$work/topic.json" | tail -n +2 > "$work/register.curl"
    curl -s --http2-prior-knowledge -K "$work/register.curl" | json_objects \
        | python3 -c 'import json, sys; [print(sys.argv[1] + "/3/device/" + json.loads(l)["token"]) for l in sys.stdin]' "$url" > "$work/urls"
    [ "$(wc -l < "$work/urls")" -eq 1000 ] || { echo "could not register 1,000 devices" >&2; return 1; }
}

# json_objects: curl prints the answers back to back; one JSON object per line.
json_objects() { python3 -c 'import json, sys; d = json.JSONDecoder(); s = sys.stdin.read(); i = 0
while i < len(s): o, i = d.raw_decode(s, i); print(json.dumps(o))'; }

# provider_h2load_setup: the provider-endpoint reference's h2load command in $H2LOAD (100,000
# POSTs of the bench's alert, 8 connections, 256 streams each) and h2load_cpu PID URL...,
# which runs it and prints "requests/s CPU-s-per-100k" of that process, or fails when any request
# did not succeed.
provider_h2load_setup() {
    need_nghttp2_tools
    write_alert_payload "$work/payload"
    REQUESTS=100000
    H2LOAD=(-n "$REQUESTS" -c 8 -m 256 -t 1 -d "$work/payload" -H 'apns-topic: com.example.bench' -H 'apns-push-type: alert')
}
h2load_cpu() {
    local pid=$1 before after rate
    shift
    before=$(cpu_ticks "$pid")
    rate=$(h2load_rate "${H2LOAD[@]}" "$@")
    after=$(cpu_ticks "$pid")
    python3 -c "print($rate, ($after-$before)/$(getconf CLK_TCK)/($REQUESTS/100000))"
}

# bench_json FIELD: that field of the bench's result (its last output line) read on stdin.
bench_json() { python3 -c "import json,sys; print(json.loads(sys.stdin.read().strip().splitlines()[-1])['$1'])"; }

# Reads the bench's output on stdin; fails (status 1), saying what, when the run lost, duplicated
# or refused a push or lost an event stream.
bench_clean() {
    python3 -c "
import json, sys
r = json.loads(sys.stdin.read().strip().splitlines()[-1])
bad = {k: r[k] for k in ('lost', 'duplicated', 'refused', 'streamsLost') if r[k]}
if bad: print('NOT CLEAN:', bad, file=sys.stderr); sys.exit(1)"
}

# Runs `pushgate bench` against $url with the given flags; prints its durable accepted pushes/s,
# or fails (status 1) when the bench failed or its run was not clean.
bench_rate() {
    "$BIN" bench --server "$url" "$@" 2>"$work/bench.err" | tail -1 > "$work/result.json"
    if [ ! -s "$work/result.json" ]; then echo "bench failed:" >&2; tail -5 "$work/bench.err" >&2; return 1; fi
    bench_clean < "$work/result.json" || return 1
    bench_json acceptedPerSecond < "$work/result.json"
}

# compare_medians "LABEL A" "RATES A" "LABEL B" "RATES B": the medians and B/A.
compare_medians() {
    python3 - "$@" <<'PY'
import statistics, sys
a_label, a, b_label, b = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
ma = statistics.median(float(x) for x in a.split())
mb = statistics.median(float(x) for x in b.split())
print(f"median {a_label} {ma:.0f}/s, {b_label} {mb:.0f}/s: ratio {mb/ma:.3f}")
PY
}
