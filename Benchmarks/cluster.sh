#!/usr/bin/env bash
# Cluster benchmark (release build): one gateway node against three on one PostgreSQL, all on
# this machine (the same 2 cores for the nodes, PostgreSQL and the load generator).
#
#   bash Benchmarks/cluster.sh            (needs postgresql-15: apt-get install postgresql-15)
#   RUNS=N (default 3), STORM_DEVICES=N (default 10000)
#
# 1. Flat out, RUNS times each, alternating: `pushgate bench` (1,000 devices acking at once,
#    100,000 pushes over 8 provider connections) against one node, and against three with the
#    devices spread over them and the providers too (two pushes in three cross nodes). Durable
#    accepted pushes/s; the nodes' CPU-seconds per 100k pushes (every node's process, over the
#    bench run); PostgreSQL's likewise.
# 2. 2,000 pushes/s (40,000 pushes, 2 provider connections, acks after 50 ms): one node; three
#    nodes spread as in 1; and three nodes with every device on n1 and the providers on n2 and
#    n3, so that every push crosses nodes. Delivery latency p50/p99/p99.9 (request sent to event
#    received), the CPU figures of 1.
# 3. A reconnect storm: STORM_DEVICES devices created on n2 and n3, two pushes each sent through
#    n1 while they are offline (n1 takes each device over and stores its pushes), then n1 killed
#    -9 and every device opening its stream on n2 or n3, 256 at a time: how long until every
#    stream is open and every stored push delivered. (The devices were never connected to n1:
#    a killed node's devices see their connections reset at once, and reconnect the same way.)
source "$(dirname "$0")/common.sh"
source "$(dirname "$0")/postgres-server.sh"
source "$(dirname "$0")/cluster-nodes.sh"
RUNS=${RUNS:-3}
STORM_DEVICES=${STORM_DEVICES:-10000}

wal_lsn() { psql_run -d postgres -c "SELECT pg_current_wal_lsn() - '0/0'"; }

# run_bench BENCH-FLAGS...: one bench against the running nodes; prints "pushes/s nodes-CPU
# pg-CPU p50 p99 p999 wal" (CPU-seconds per 100k accepted pushes; WAL bytes per accepted push,
# device creation included).
run_bench() {
    local node_before pg_before node_after pg_after wal_before wal_after out
    node_before=$(nodes_ticks)
    pg_before=$(pg_ticks)
    wal_before=$(wal_lsn)
    out=$("$BIN" bench "$@" 2>"$work/bench.err" | tail -1)
    node_after=$(nodes_ticks)
    pg_after=$(pg_ticks)
    wal_after=$(wal_lsn)
    if [ -z "$out" ]; then echo "bench failed:" >&2; tail -5 "$work/bench.err" >&2; return 1; fi
    bench_clean <<<"$out" || { echo "not clean: $out" >&2; return 1; }
    python3 -c "
import json; r = json.loads('''$out''')
per100k = lambda ticks: ticks / $ticks / (r['accepted'] / 100000)
print(r['acceptedPerSecond'], round(per100k($node_after - $node_before), 3), round(per100k($pg_after - $pg_before), 3),
      r['deliveryP50Ms'], r['deliveryP99Ms'], r['deliveryP999Ms'], round(($wal_after - $wal_before) / r['accepted']))"
}

servers() { local url; for url in "$@"; do printf -- '--server %s ' "$url"; done; }
providers() { local url; for url in "$@"; do printf -- '--provider-server %s ' "$url"; done; }

median() { python3 -c "import statistics, sys; print(statistics.median(float(x) for x in sys.argv[1:]))" "$@"; }
column() { local n=$1; shift; for line in "$@"; do echo "$line" | awk -v n="$n" '{print $n}'; done; }
summary() {
    local label=$1
    shift
    printf '%-34s %8.0f pushes/s  nodes %.2f  PostgreSQL %.2f CPU-s/100k  delivery p50 %.2f p99 %.2f p99.9 %.2f ms  WAL %.0f B/push  (range pushes/s %s..%s)\n' \
        "$label" "$(median $(column 1 "$@"))" "$(median $(column 2 "$@"))" "$(median $(column 3 "$@"))" \
        "$(median $(column 4 "$@"))" "$(median $(column 5 "$@"))" "$(median $(column 6 "$@"))" \
        "$(median $(column 7 "$@"))" \
        "$(column 1 "$@" | sort -n | head -1)" "$(column 1 "$@" | sort -n | tail -1)"
}

flat=(--devices 1000 --providers 8 --in-flight 256 --pushes 100000)
paced=(--devices 1000 --providers 2 --rate 2000 --ack-delay 50 --pushes 40000)
one_flat=() three_flat=() one_paced=() three_paced=() cross_paced=()
echo "(columns: durable pushes/s, nodes' CPU-s per 100k, PostgreSQL CPU-s per 100k, delivery p50 p99 p99.9 ms, WAL bytes per push)"
for run in $(seq "$RUNS"); do
    start_nodes 1
    one_flat+=("$(run_bench $(servers "${urls[@]}") "${flat[@]}")")
    one_paced+=("$(run_bench $(servers "${urls[@]}") "${paced[@]}")")
    stop_nodes
    echo "one node    run $run: flat ${one_flat[-1]} | 2,000/s ${one_paced[-1]}"
    start_nodes 3
    three_flat+=("$(run_bench $(servers "${urls[@]}") "${flat[@]}")")
    three_paced+=("$(run_bench $(servers "${urls[@]}") "${paced[@]}")")
    cross_paced+=("$(run_bench --server "${urls[0]}" $(providers "${urls[1]}" "${urls[2]}") "${paced[@]}")")
    stop_nodes
    echo "three nodes run $run: flat ${three_flat[-1]} | 2,000/s ${three_paced[-1]} | cross ${cross_paced[-1]}"
done
echo "== medians of $RUNS runs"
summary "flat out, one node" "${one_flat[@]}"
summary "flat out, three nodes" "${three_flat[@]}"
summary "2,000/s, one node" "${one_paced[@]}"
summary "2,000/s, three nodes" "${three_paced[@]}"
summary "2,000/s, three, every push crosses" "${cross_paced[@]}"

echo "== reconnect storm: $STORM_DEVICES devices off a killed node"
start_nodes 3
out=$("$BIN" bench --backlog $(servers "${urls[1]}" "${urls[2]}") --provider-server "${urls[0]}" \
    --devices "$STORM_DEVICES" --pushes $((STORM_DEVICES * 2)) --providers 4 --drain-seconds 120 \
    --then-run "kill -9 ${nodes[0]}" 2>"$work/bench.err" | tail -1)
nodes=("${nodes[@]:1}")
stop_nodes
[ -n "$out" ] || { echo "bench failed:" >&2; tail -5 "$work/bench.err" >&2; exit 1; }
bench_clean <<<"$out" || { echo "not clean: $out" >&2; exit 1; }
# The database's size per device once every push is delivered and acked: what a device costs
# PostgreSQL at rest (its rows and indexes; free space not yet reused included).
psql_run -d "$database_name" -c "VACUUM" >/dev/null
size=$(psql_run -d postgres -c "SELECT pg_database_size('$database_name')")
empty=$(psql_run -d postgres -c "SELECT pg_database_size('postgres')")
python3 -c "
import json; r = json.loads('''$out''')
print(f\"{r['devices']} devices, {r['accepted']} stored pushes: every stream open after {r['streamsOpenSeconds']:.2f} s, every push delivered after {r['backlogDeliveredSeconds']:.2f} s\")
print(f\"database size {$size / 1e6:.1f} MB: {($size - $empty) / r['devices']:.0f} bytes per device over an empty database's {$empty / 1e6:.1f} MB\")"
