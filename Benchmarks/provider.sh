#!/usr/bin/env bash
# The provider request path alone against nghttpd (release build):
#
#   bash Benchmarks/provider.sh [ROUNDS]
#
# Each round runs the same h2load command (100,000 POSTs of the bench's 122-byte alert, 8
# connections × 256 streams, one h2load thread) against, in turn:
#   - pushgate's provider endpoint for 1,000 offline devices, durability fsync (the default): a
#     push is parsed, validated, routed, stored with an fsync'd commit, then answered;
#   - the same with --durability interval: the commit leaves the request's path, so this is the
#     request path itself (parsing, validation, routing, response) plus commits once a second;
#   - nghttpd serving a static file (2 threads), the HTTP/2 stack doing no work of its own.
# With BASELINE_BIN=path, each round also runs that build's two gateway runs (an A/B in one
# session, alternating). Prints each server's requests/s and CPU-seconds per 100k requests
# (utime+stime from /proc), the ratios to nghttpd's in the same round, and the medians over the
# rounds. h2load shares the machine's cores with the server.
source "$(dirname "$0")/common.sh"
rounds=${1:-3}
provider_h2load_setup

# One gateway run of binary $1 (start_server runs $BIN): prints "requests/s CPU-s-per-100k" of
# its h2load run.
gateway_run() {
    local BIN=$1
    shift
    start_server "$@"
    offline_device_urls
    h2load_cpu "$server" $(cat "$work/urls")
    stop_server
}

baseline=${BASELINE_BIN:-}
if [ -n "$baseline" ] && [ "$(id -u)" = 0 ]; then install -m 755 "$baseline" "$work/baseline"; baseline=$work/baseline; fi
# One row per round: nghttpd's figures, then each gateway run's (requests/s CPU-s-per-100k).
rows=()
for round in $(seq "$rounds"); do
    row="$(gateway_run "$BIN") $(gateway_run "$BIN" --durability interval)"
    [ -z "$baseline" ] || row+=" $(gateway_run "$baseline") $(gateway_run "$baseline" --durability interval)"
    start_nghttpd
    row="$(h2load_cpu "$ng" "http://127.0.0.1:$ng_port/static") $row"
    kill "$ng"; wait "$ng" 2>/dev/null || true
    echo "round $round (requests/s CPU-s per 100k): nghttpd, fsync, interval${baseline:+, baseline fsync, baseline interval}: $row"
    rows+=("$row")
done

python3 - "${rows[@]}" <<'PY'
import statistics, sys
rows = [list(map(float, r.split())) for r in sys.argv[1:]]
names = ["pushgate, fsync", "pushgate, interval", "baseline, fsync", "baseline, interval"]
print(f"{'nghttpd':20} {statistics.median(r[0] for r in rows):8.0f} req/s, "
      f"{statistics.median(r[1] for r in rows):.2f} CPU-s per 100k (median)")
for i in range(1, len(rows[0]) // 2):
    rates = [r[2 * i] for r in rows]
    cpus = [r[2 * i + 1] for r in rows]
    ratios = [r[2 * i + 1] / r[1] for r in rows]
    print(f"{names[i - 1]:20} {statistics.median(rates):8.0f} req/s, {statistics.median(cpus):.2f} CPU-s per 100k "
          f"(median); CPU per request {min(ratios):.1f}-{max(ratios):.1f}x nghttpd's in its round "
          f"(median {statistics.median(ratios):.1f}x)")
PY
