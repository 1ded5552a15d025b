#!/usr/bin/env bash
# Builds `pushgate` with AddressSanitizer (LeakSanitizer included on Linux), then drives it with
# h2load (including runs killed mid-flight), with clients that drop connections at every stage
# (abuse.py) and with `pushgate bench` (providers, devices, acks, keep-alives, held pushes),
# stops it with SIGTERM and reports what the sanitizers found.
#
#   bash Tests/Sanitizers/run-asan.sh [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")/../.."
ROUNDS=${1:-30}

# AddressSanitizer brings its own malloc: build without jemalloc (see Package.swift).
PUSHGATE_SYSTEM_MALLOC=1 swift build --sanitize=address --scratch-path .build-asan --product pushgate >/dev/null
BIN=.build-asan/debug/pushgate
log=$(mktemp)
trap 'rm -rf "$log" "$log.data"' EXIT

export ASAN_OPTIONS=detect_leaks=1:halt_on_error=0:exitcode=23
"$BIN" serve --listen 127.0.0.1:0 --tls-listen 127.0.0.1:0 --data-dir "$log.data" \
    --tls-cert Tests/Fixtures/tls/server.pem --tls-key Tests/Fixtures/tls/server-key.pem \
    --log-level error > "$log.out" 2> "$log" &
pid=$!
for _ in $(seq 200); do [ "$(grep -c listening "$log.out" 2>/dev/null)" = 2 ] && break; sleep 0.1; done
h2c=$(sed -n '1s/.*:\([0-9]*\)$/\1/p' "$log.out")
tls=$(sed -n '2s/.*:\([0-9]*\)$/\1/p' "$log.out")
echo "pushgate (ASan) on h2c :$h2c, TLS :$tls"

h2load -n 50000 -c 16 -m 100 "http://127.0.0.1:$h2c/healthz" | grep -E "^requests:"
h2load -n 10000 -c 8 -m 50 "https://127.0.0.1:$tls/healthz" | grep -E "^requests:"
for _ in 1 2 3; do
    # Killed mid-run: every connection vanishes with streams in flight.
    timeout -s KILL 1 h2load -n 10000000 -c 32 -m 100 "http://127.0.0.1:$h2c/healthz" >/dev/null 2>&1 || true
    timeout -s KILL 1 h2load -n 10000000 -c 8 -m 100 "https://127.0.0.1:$tls/healthz" >/dev/null 2>&1 || true
done
python3 Tests/Sanitizers/abuse.py 127.0.0.1 "$h2c" "$tls" "$ROUNDS"
# The provider, device and scheduler paths: devices holding streams and acking, alert and
# silent pushes (held, piggybacked, released by keep-alives), then a run killed mid-flight.
"$BIN" bench --server "http://127.0.0.1:$h2c" --devices 200 --providers 2 --pushes 5000 --silent-percent 50 2>/dev/null | tail -1
timeout -s KILL 3 "$BIN" bench --server "http://127.0.0.1:$h2c" --devices 100 --providers 2 --pushes 100000 >/dev/null 2>&1 || true

kill -TERM "$pid"
status=0
wait "$pid" || status=$?
echo "pushgate exit status after SIGTERM: $status (23 = sanitizer report)"
if grep -qE "ERROR: (AddressSanitizer|LeakSanitizer)" "$log"; then
    grep -E -A30 "ERROR: (AddressSanitizer|LeakSanitizer)" "$log" | head -80
    exit 1
fi
echo "no AddressSanitizer or LeakSanitizer report"
rm -f "$log.out"
exit "$status"
