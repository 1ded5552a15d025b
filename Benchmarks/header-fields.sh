#!/usr/bin/env bash
# What a provider request with many header fields costs: h2load POSTs of the bench's alert to
# 1,000 offline devices (--durability interval), each request carrying FIELDS extra fields of
# distinct names (`x-h1: 1` ...; 700 fit in the 32 KiB header list a request may have), beside
# the same POSTs without them. Release build, the gateway unprivileged. With BASELINE_BIN=path,
# that build runs the same two cases after this one, twice (an A/B in one session).
#
#   bash Benchmarks/header-fields.sh [FIELDS]     (700 by default)
#
# Prints requests/s and CPU-seconds per 100k requests for each run. Every field of a request is
# read once whatever their number: the cost should grow with the fields' bytes, not with their
# square.
source "$(dirname "$0")/common.sh"
fields=${1:-700}
provider_h2load_setup
extra=()
for i in $(seq "$fields"); do extra+=(-H "x-h$i: 1"); done
REQUESTS=5000
plain=(-n "$REQUESTS" -c 4 -m 16 -t 1 -d "$work/payload" -H 'apns-topic: com.example.bench' -H 'apns-push-type: alert')

baseline=${BASELINE_BIN:-}
if [ -n "$baseline" ] && [ "$(id -u)" = 0 ]; then install -m 755 "$baseline" "$work/baseline"; baseline=$work/baseline; fi
run() {
    local BIN=$1 name=$2
    start_server --durability interval
    offline_device_urls
    H2LOAD=("${plain[@]}")
    echo "$name, no extra fields (requests/s CPU-s per 100k): $(h2load_cpu "$server" $(cat "$work/urls"))"
    H2LOAD=("${plain[@]}" "${extra[@]}")
    echo "$name, $fields extra fields (requests/s CPU-s per 100k): $(h2load_cpu "$server" $(cat "$work/urls"))"
    stop_server
}
for round in 1 2; do
    run "$BIN" "this build"
    [ -z "$baseline" ] || run "$baseline" "baseline"
done
