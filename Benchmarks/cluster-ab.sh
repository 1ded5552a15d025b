#!/usr/bin/env bash
# A/B of the cluster's crossing path (release builds): two builds alternating round by round,
# each round three nodes of one build on a fresh database of one PostgreSQL (started as
# postgresql.sh starts it), every device on n1 and the providers on n2 and n3, so that every
# push crosses nodes, at RATE pushes/s (default 2,000; 1,000 devices acking 50 ms after each
# event, 40,000 pushes). Prints per run: build, the nodes' CPU-seconds per 100k pushes (over the
# bench run, device creation included), delivery p50 p99 p99.9 ms, lost, duplicated, refused.
#
#   BASELINE_BIN=/path/to/old/pushgate [ROUNDS=3] [RATE=2000] bash Benchmarks/cluster-ab.sh
#
# The reference is the other build in the same rounds: what a change to the forwarding saves.
source "$(dirname "$0")/common.sh"
source "$(dirname "$0")/postgres-server.sh"
source "$(dirname "$0")/cluster-nodes.sh"
: "${BASELINE_BIN:?BASELINE_BIN=path of the build to compare against}"
ROUNDS=${ROUNDS:-3}
RATE=${RATE:-2000}

run() {
    local bin=$1 label=$2 before after out
    NODE_BIN=$bin start_nodes 3
    before=$(nodes_ticks)
    out=$("$bin" bench --server "${urls[0]}" --provider-server "${urls[1]}" --provider-server "${urls[2]}" \
        --devices 1000 --providers 2 --rate "$RATE" --ack-delay 50 --pushes $((RATE * 20)) 2>"$work/bench.err" | tail -1)
    after=$(nodes_ticks)
    stop_nodes
    [ -n "$out" ] || { echo "bench failed:" >&2; tail -5 "$work/bench.err" >&2; exit 1; }
    python3 -c "
import json; r = json.loads('''$out''')
print('$label', round(($after - $before) / $ticks / (r['accepted'] / 100000), 2), r['deliveryP50Ms'], r['deliveryP99Ms'], r['deliveryP999Ms'], r['lost'], r['duplicated'], r['refused'])"
}

echo "(columns: build, nodes' CPU-s per 100k, delivery p50 p99 p99.9 ms, lost, duplicated, refused)"
for _ in $(seq "$ROUNDS"); do
    run "$BASELINE_BIN" baseline
    run "$BIN" this
done
