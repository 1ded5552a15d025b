# Gateway nodes on the PostgreSQL server of postgres-server.sh, for the cluster benchmarks
# (sourced after common.sh and postgres-server.sh).

# start_nodes N [serve flags...]: N nodes of NODE_BIN (default BIN) on a fresh database, each a
# member of the cluster when it returns; sets nodes (pids), urls and database_name.
start_nodes() {
    local count=$1 database index
    shift
    database=$(new_database)
    database_name=${database##*/}
    nodes=() urls=()
    for index in $(seq "$count"); do
        "${as_gateway[@]}" "${NODE_BIN:-$BIN}" serve --listen 127.0.0.1:0 --database-url "$database" --node-name "n$index" \
            --log-level error "$@" > "$work/node$index.out" 2>&1 &
        nodes+=($!)
        for _ in $(seq 200); do grep -q listening "$work/node$index.out" 2>/dev/null && break; sleep 0.05; done
        grep -q listening "$work/node$index.out" 2>/dev/null || {
            echo "node n$index did not start within 10 s:" >&2
            cat "$work/node$index.out" >&2
            exit 1
        }
        urls+=("$(sed -n 's/^listening //p' "$work/node$index.out" | head -1)")
    done
    # Every node a member, each counting them all.
    for url in "${urls[@]}"; do
        for _ in $(seq 200); do
            [ "$(curl -s "$url/v1/admin/nodes" | python3 -c 'import json,sys
try: print(len(json.load(sys.stdin)["nodes"]))
except Exception: print(0)')" = "$count" ] && break
            sleep 0.05
        done
    done
}
stop_nodes() {
    local pid
    for pid in "${nodes[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
    for pid in "${nodes[@]}"; do wait "$pid" 2>/dev/null || true; done
}
nodes_ticks() {
    local total=0 pid
    for pid in "${nodes[@]}"; do total=$((total + $(cpu_ticks "$pid"))); done
    echo "$total"
}
