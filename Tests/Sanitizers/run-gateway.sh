#!/usr/bin/env bash
# Runs `pushgate serve` built with AddressSanitizer (LeakSanitizer included on Linux) or
# ThreadSanitizer and drives it with h2load (including runs killed mid-flight), with clients that
# drop connections at every stage (abuse.py) and with `pushgate bench` (providers, devices, acks,
# keep-alives, held pushes), stops it with SIGTERM and fails on any sanitizer report, the
# gateway's or its bench clients'.
#
#   bash Tests/Sanitizers/run-gateway.sh address|thread [ROUNDS]
#
# PUSHGATE_SANITIZED_BIN names a `pushgate` built with that sanitizer already (CI passes the ASan
# one Tests/Fuzz/run.sh built). Without it the package's own modules are built with the
# sanitizer (PUSHGATE_SANITIZE, Package.swift) in .build-<sanitizer>; PUSHGATE_SANITIZE_SCRATCH
# names another scratch path (CI gives .build, where the dependencies are built already).
set -euo pipefail
cd "$(dirname "$0")/../.."
SANITIZER=${1:?address or thread}
ROUNDS=${2:-30}
case $SANITIZER in
    address) runtime=__asan_init; report='ERROR: (AddressSanitizer|LeakSanitizer)' ;;
    thread) runtime=__tsan_init; report='WARNING: ThreadSanitizer' ;;
    *) echo "the sanitizer is address or thread, not $SANITIZER" >&2; exit 2 ;;
esac

BIN=${PUSHGATE_SANITIZED_BIN:-}
if [[ -z $BIN ]]; then
    scratch=${PUSHGATE_SANITIZE_SCRATCH:-.build-$SANITIZER}
    PUSHGATE_SANITIZE=$SANITIZER swift build --scratch-path "$scratch" --product pushgate >/dev/null
    BIN=$scratch/debug/pushgate
fi
nm "$BIN" | grep " $runtime\$" >/dev/null || { echo "$BIN is not built with the $SANITIZER sanitizer" >&2; exit 1; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# exitcode 23: a report makes the process exit 23 when it ends (TSan's default is 66, ASan's 1).
export ASAN_OPTIONS=detect_leaks=1:halt_on_error=0:exitcode=23
export LSAN_OPTIONS=suppressions=$PWD/Tests/Sanitizers/lsan.supp
export TSAN_OPTIONS="halt_on_error=0 exitcode=23 suppressions=$PWD/Tests/Sanitizers/tsan.supp"
"$BIN" serve --listen 127.0.0.1:0 --tls-listen 127.0.0.1:0 --data-dir "$work/data" \
    --tls-cert Tests/Fixtures/tls/server.pem --tls-key Tests/Fixtures/tls/server-key.pem \
    --log-level error > "$work/out" 2> "$work/gateway.log" &
pid=$!
for _ in $(seq 600); do [ "$(grep -c listening "$work/out" 2>/dev/null)" = 2 ] && break; sleep 0.1; done
h2c=$(sed -n '1s/.*:\([0-9]*\)$/\1/p' "$work/out")
tls=$(sed -n '2s/.*:\([0-9]*\)$/\1/p' "$work/out")
[[ -n $h2c && -n $tls ]] || { cat "$work/gateway.log" >&2; echo "pushgate ($SANITIZER) did not start" >&2; exit 1; }
echo "pushgate ($SANITIZER) on h2c :$h2c, TLS :$tls"

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
bench_status=0
"$BIN" bench --server "http://127.0.0.1:$h2c" --devices 200 --providers 2 --pushes 5000 --silent-percent 50 \
    >"$work/bench.json" 2>"$work/bench.log" || bench_status=$?
tail -1 "$work/bench.json"
timeout -s KILL 3 "$BIN" bench --server "http://127.0.0.1:$h2c" --devices 100 --providers 2 --pushes 100000 \
    >/dev/null 2>>"$work/bench.log" || true

kill -TERM "$pid"
status=0
wait "$pid" || status=$?
echo "pushgate exit status after SIGTERM: $status (23 = sanitizer report)"
found=0
for log in "$work/gateway.log" "$work/bench.log"; do
    if grep -qE "$report" "$log"; then
        found=1
        echo "--- $(basename "$log" .log):"
        grep -E -A30 "$report" "$log" | head -120
    fi
done
((found == 0)) || exit 1
echo "no $SANITIZER sanitizer report"
((bench_status == 0)) || { echo "pushgate bench failed (exit $bench_status)" >&2; tail -5 "$work/bench.log" >&2; exit 1; }
exit "$status"
