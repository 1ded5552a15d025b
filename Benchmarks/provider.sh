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
#   - nghttpd serving a static file (2 threads), the HTTP/2 stack doing no work of its own;
#   - nghttpd again with the very URLs the gateway got (a 3-byte file at each
#     /3/device/<token> of the round's last gateway run): the same 1,000 distinct :paths to
#     decode, which its one-URL run never has (h2load indexes each path, and 1,000 of them churn
#     the HPACK table), and a file to open per request, which the gateway never has.
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
# One row per round: nghttpd's figures, each gateway run's, then nghttpd's with the same URLs
# (requests/s CPU-s-per-100k each).
rows=()
for round in $(seq "$rounds"); do
    row="$(gateway_run "$BIN") $(gateway_run "$BIN" --durability interval)"
    [ -z "$baseline" ] || row+=" $(gateway_run "$baseline") $(gateway_run "$baseline" --durability interval)"
    start_nghttpd
    row="$(h2load_cpu "$ng" "http://127.0.0.1:$ng_port/static") $row"
    # The same URLs, on nghttpd's port: its document root gets a file at each of them.
    sed "s|^http://[^/]*/|http://127.0.0.1:$ng_port/|" "$work/urls" > "$work/ng-urls"
    sed 's|^http://[^/]*/||' "$work/urls" | while read -r path; do mkdir -p "$work/$(dirname "$path")"; printf 'ok\n' > "$work/$path"; done
    same=$(h2load_cpu "$ng" $(cat "$work/ng-urls"))
    kill "$ng"; wait "$ng" 2>/dev/null || true
    row+=" $same"
    echo "round $round (requests/s CPU-s per 100k): nghttpd, fsync, interval${baseline:+, baseline fsync, baseline interval}, nghttpd same URLs: $row"
    rows+=("$row")
done

python3 - "${rows[@]}" <<'PY'
import statistics, sys
rows = [list(map(float, r.split())) for r in sys.argv[1:]]
names = ["pushgate, fsync", "pushgate, interval", "baseline, fsync", "baseline, interval"]
med = statistics.median
print(f"{'nghttpd':20} {med(r[0] for r in rows):8.0f} req/s, {med(r[1] for r in rows):.2f} CPU-s per 100k (median)")
print(f"{'nghttpd, same URLs':20} {med(r[-2] for r in rows):8.0f} req/s, {med(r[-1] for r in rows):.2f} CPU-s per 100k (median)")
for i in range(1, len(rows[0]) // 2 - 1):
    rates = [r[2 * i] for r in rows]
    cpus = [r[2 * i + 1] for r in rows]
    ratios = [r[2 * i + 1] / r[1] for r in rows]
    same = [r[2 * i + 1] / r[-1] for r in rows]
    print(f"{names[i - 1]:20} {med(rates):8.0f} req/s, {med(cpus):.2f} CPU-s per 100k (median); CPU per request "
          f"{min(ratios):.1f}-{max(ratios):.1f}x nghttpd's in its round (median {med(ratios):.1f}x), "
          f"{min(same):.1f}-{max(same):.1f}x with the same URLs (median {med(same):.1f}x)")
PY
