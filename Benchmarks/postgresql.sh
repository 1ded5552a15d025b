#!/usr/bin/env bash
# PostgreSQL store benchmark (release build): the gateway on PostgreSQL beside the gateway on
# SQLite, and pgbench running the same statements as the floor, on this machine.
#
#   bash Benchmarks/postgresql.sh            (needs postgresql-15: apt-get install postgresql-15)
#
# A PostgreSQL 15 server is started for the run as a plain process (initdb into the scratch
# directory, as the postgres user when run as root; fsync and synchronous_commit on: every 200
# waits for the WAL flush), on 127.0.0.1 beside the gateway and the load generator: the same 2
# cores for all three.
# 1. Flat out, RUNS times each, alternating: `pushgate bench` (1,000 devices acking at once,
#    200,000 pushes over 8 provider connections) against the gateway on SQLite and on a fresh
#    PostgreSQL database. Durable accepted pushes/s; the gateway's CPU-seconds per 100k pushes
#    (the bench reads it from /proc over the pushes); PostgreSQL's CPU-seconds per 100k (every
#    server process: the postmaster with the children it reaped, and the live ones, over the whole
#    bench run, device creation included); pushes and batches per commit (the gateway's
#    pushgate_store_commit_pushes and _batches histograms).
# 2. The floor: pgbench (one client, as the gateway's one writer connection, prepared statements,
#    pipelined) running the gateway's statements in transactions of the group size the gateway
#    reached in (1): per transaction G push inserts, each followed by the delete of the push
#    inserted G before it (its ack), in one pipeline. Transactions/s × G = pushes/s, and
#    PostgreSQL's CPU-seconds per 100k pushes.
# 3. Delivery latency at 2,000 pushes/s with 1,000 devices (2 provider connections, acks after
#    50 ms), on SQLite and on PostgreSQL: delivery p50/p99.
# Then the issue's targets: the gateway's CPU per push on PostgreSQL <= 1.2x on SQLite,
# PostgreSQL's CPU per push <= 1.5x pgbench's, throughput >= 50% of the floor, delivery p99 at
# 2,000/s <= 10 ms.
source "$(dirname "$0")/common.sh"
RUNS=${RUNS:-3}
# GROUP=N skips the flat-out runs (a rerun of the floor and the latency at a known group size).
source "$(dirname "$0")/postgres-server.sh"
# The gateway's histograms: "pushes-per-commit batches-per-commit".
commit_shape() {
    curl -s "$url/metrics" | awk '
        /^pushgate_store_commit_pushes_sum/ {ps = $2} /^pushgate_store_commit_pushes_count/ {pc = $2}
        /^pushgate_store_commit_batches_sum/ {bs = $2} /^pushgate_store_commit_batches_count/ {bc = $2}
        END {printf "%.1f %.1f\n", ps / pc, bs / bc}'
}

# One flat-out bench against a fresh gateway (`serve` flags in "$@"); prints
# "pushes/s gateway-CPU-per-100k pg-CPU-per-100k pushes-per-commit batches-per-commit".
flat_out() {
    start_server "$@"
    local before after out
    before=$(pg_ticks)
    out=$("$BIN" bench --server "$url" --devices 1000 --server-pid "$server" --providers 8 --in-flight 256 \
        --pushes 200000 2>"$work/bench.err" | tail -1)
    after=$(pg_ticks)
    bench_clean <<<"$out" || { echo "not clean: $out" >&2; stop_server; exit 1; }
    local shape
    shape=$(commit_shape)
    stop_server
    python3 -c "
import json; r = json.loads('''$out''')
print(r['acceptedPerSecond'], r['serverCPUPer100k'], ($after - $before) / $ticks / 2, '$shape')"
}

median() { python3 -c "import statistics, sys; print(statistics.median(float(x) for x in sys.argv[1:]))" "$@"; }
column() { local n=$1; shift; for line in "$@"; do echo "$line" | awk -v n="$n" '{print $n}'; done; }
if [ -z "${GROUP:-}" ]; then
    echo "== flat out: 1,000 devices acking at once, 200,000 pushes; $RUNS runs each, alternating"
    sqlite_runs=()
    pg_runs=()
    for run in $(seq "$RUNS"); do
        result=$(flat_out)
        sqlite_runs+=("$result")
        echo "sqlite     run $run: $result"
        result=$(flat_out --database-url "$(new_database)")
        pg_runs+=("$result")
        echo "postgresql run $run: $result"
    done
    echo "(columns: durable pushes/s, gateway CPU-s per 100k pushes, PostgreSQL CPU-s per 100k pushes, pushes per commit, batches per commit)"
    sqlite_rate=$(median $(column 1 "${sqlite_runs[@]}"))
    sqlite_cpu=$(median $(column 2 "${sqlite_runs[@]}"))
    pg_rate=$(median $(column 1 "${pg_runs[@]}"))
    pg_gateway_cpu=$(median $(column 2 "${pg_runs[@]}"))
    pg_server_cpu=$(median $(column 3 "${pg_runs[@]}"))
    group=$(python3 -c "print(max(1, round($(median $(column 4 "${pg_runs[@]}")))))")

else
    # A rerun of the floor and the latency alone, at a group size measured before.
    group=$GROUP sqlite_rate=0 sqlite_cpu=1 pg_rate=0 pg_gateway_cpu=1 pg_server_cpu=1
fi

echo "== floor: pgbench, one client, transactions of $group push inserts each followed by an ack's delete"
floor_url=$(new_database)
start_server --database-url "$floor_url"  # makes the schema
stop_server
payload=$(python3 -c "print('\\\\x' + bytes(122).hex())")
{
    echo '\startpipeline'
    echo 'BEGIN;'
    for _ in $(seq "$group"); do
        echo '\set device random(1, 1000)'
        # The gateway's enqueue and its ack's delete, as it sends them (prepared, binary ids);
        # the ids come from a sequence here, the push G inserts back is the one acked.
        echo "INSERT INTO notifications (acceptance_id, device_id, token, topic, apns_id, push_type, priority, collapse_id, payload, accepted_at, expires_at, seq) VALUES (nextval('bench_ids'), 'device-' || :device, repeat('a', 64), 'com.example.bench', '00000000-0000-0000-0000-000000000000', 'alert', 10, NULL, '$payload'::bytea, 1, 2, 1);"
        # (A scalar subquery, evaluated once: currval() itself is volatile, and compared row by
        # row it would make every delete a scan of the table.)
        echo "DELETE FROM notifications WHERE acceptance_id = (SELECT currval('bench_ids') - $group);"
    done
    echo 'COMMIT;'
    echo '\endpipeline'
} > "$work/floor.sql"
database=${floor_url##*/}
psql_run -d "$database" -c "CREATE SEQUENCE bench_ids" >/dev/null
servers=$(pgrep -P "$postmaster" | wc -l)  # the server's own processes, without a session
before=$(pg_ticks)
floor_out=$(PGPASSWORD=$pg_password "$pg_bin/pgbench" -n -M prepared -c 1 -j 1 -T 20 -f "$work/floor.sql" \
    -h 127.0.0.1 -p "$pg_port" -U postgres "$database" 2>&1)
# An exiting backend's CPU shows in neither its own /proc entry nor the postmaster's reaped
# children's until it is reaped: wait for that.
while [ "$(pgrep -P "$postmaster" | wc -l)" -gt "$servers" ]; do sleep 0.05; done
after=$(pg_ticks)
tps=$(sed -n 's/^tps = \([0-9.]*\) .*/\1/p' <<<"$floor_out" | head -1)
transactions=$(sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p' <<<"$floor_out")
floor_rate=$(python3 -c "print($tps * $group)")
floor_cpu=$(python3 -c "print(($after - $before) / $ticks / ($transactions * $group / 100000))")
echo "pgbench: $tps transactions/s of $group pushes = $floor_rate pushes/s; PostgreSQL $floor_cpu CPU-s per 100k pushes"

echo "== latency: 1,000 devices at 2,000 pushes/s, acks after 50 ms (40,000 pushes); $RUNS runs each"
latency() {
    start_server "$@"
    [ -n "$url" ] || { echo "the gateway did not start:" >&2; cat "$work/serve.out" >&2; stop_server; exit 1; }
    local out
    out=$("$BIN" bench --server "$url" --devices 1000 --providers 2 --rate 2000 --ack-delay 50 --pushes 40000 \
        2>"$work/bench.err" | tail -1)
    bench_clean <<<"$out" || { echo "not clean: $out" >&2; stop_server; exit 1; }
    stop_server
    python3 -c "import json; r = json.loads('''$out'''); print(r['deliveryP50Ms'], r['deliveryP99Ms'])"
}
sqlite_p99=()
pg_p99=()
for run in $(seq "$RUNS"); do
    result=$(latency); echo "sqlite     run $run: delivery p50/p99 ms $result"; sqlite_p99+=("$(echo "$result" | awk '{print $2}')")
    result=$(latency --database-url "$(new_database)"); echo "postgresql run $run: delivery p50/p99 ms $result"; pg_p99+=("$(echo "$result" | awk '{print $2}')")
done

python3 - "$sqlite_rate" "$sqlite_cpu" "$pg_rate" "$pg_gateway_cpu" "$pg_server_cpu" "$floor_rate" "$floor_cpu" \
    "$(median "${sqlite_p99[@]}")" "$(median "${pg_p99[@]}")" <<'PY'
import sys
(sr, sc, pr, pgc, psc, fr, fc, sp, pp) = map(float, sys.argv[1:])
print("== medians and the targets")
print(f"SQLite:     {sr:.0f} pushes/s, gateway {sc:.2f} CPU-s per 100k, delivery p99 at 2,000/s {sp:.2f} ms")
print(f"PostgreSQL: {pr:.0f} pushes/s, gateway {pgc:.2f} CPU-s per 100k, PostgreSQL {psc:.2f} CPU-s per 100k, delivery p99 {pp:.2f} ms")
print(f"pgbench floor: {fr:.0f} pushes/s, PostgreSQL {fc:.2f} CPU-s per 100k")
def verdict(ok): return "met" if ok else "NOT met"
print(f"gateway CPU per push, PostgreSQL / SQLite: {pgc / sc:.2f} (target <= 1.2: {verdict(pgc / sc <= 1.2)})")
print(f"PostgreSQL CPU per push, gateway / pgbench: {psc / fc:.2f} (target <= 1.5: {verdict(psc / fc <= 1.5)})")
print(f"throughput / floor: {pr / fr:.2f} (target >= 0.5: {verdict(pr / fr >= 0.5)})")
print(f"delivery p99 at 2,000/s on PostgreSQL: {pp:.2f} ms (target <= 10: {verdict(pp <= 10)})")
PY
