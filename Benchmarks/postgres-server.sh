# Shared by the PostgreSQL benchmarks (sourced after common.sh, not run): a PostgreSQL 15 server
# started for the run as a plain process in the scratch directory (initdb, as the postgres user
# when run as root; fsync and synchronous_commit on: every 200 waits for the WAL flush), on
# 127.0.0.1, stopped on exit.
#
#   psql_run ARGS...    psql as the superuser
#   new_database        a fresh database's URL
#   pg_ticks            every server process's CPU so far, in clock ticks ($ticks a second)
pg_bin=${PUSHGATE_POSTGRES_BIN:-/usr/lib/postgresql/15/bin}
for tool in initdb pg_ctl psql pgbench; do
    [ -x "$pg_bin/$tool" ] || { echo "no $pg_bin/$tool: install postgresql-15 (apt-get install postgresql-15)" >&2; exit 1; }
done

# The server, as a plain process in the scratch directory.
pg_dir=$work/pg
mkdir -p "$pg_dir/socket"
pg_password=bench-$RANDOM$RANDOM
echo "$pg_password" > "$pg_dir/pwfile"
as_postgres=()
if [ "$(id -u)" = 0 ]; then
    chown -R postgres:postgres "$pg_dir"
    as_postgres=(runuser -u postgres --)
fi
pg() { (cd /tmp && "${as_postgres[@]}" "$pg_bin/$1" "${@:2}"); }
pg initdb -D "$pg_dir/data" -U postgres --pwfile "$pg_dir/pwfile" -E UTF8 --auth-local=trust \
    --auth-host=scram-sha-256 >/dev/null
pg_port=$(free_port)
cat >> "$pg_dir/data/postgresql.conf" <<EOF
fsync = on
synchronous_commit = on
listen_addresses = '127.0.0.1'
port = $pg_port
unix_socket_directories = '$pg_dir/socket'
EOF
pg pg_ctl -D "$pg_dir/data" -l "$pg_dir/log" -w start >/dev/null
postmaster=$(head -1 "$pg_dir/data/postmaster.pid")
trap 'pg pg_ctl -D "$pg_dir/data" -m immediate stop >/dev/null 2>&1 || true; cleanup' EXIT
psql_run() { PGPASSWORD=$pg_password "$pg_bin/psql" -X -q -A -t -h "$pg_dir/socket" -p "$pg_port" -U postgres "$@"; }
# A fresh database's URL (called in a subshell: the name cannot come from a counter).
new_database() {
    local name
    name=bench_$(date +%s%N)
    psql_run -d postgres -c "CREATE DATABASE $name" >/dev/null
    echo "postgresql://postgres:$pg_password@127.0.0.1:$pg_port/$name"
}
# Every server process's CPU so far, in clock ticks: the postmaster's own and its reaped
# children's (fields 14-17), and each live child's.
pg_ticks() {
    local total
    total=$(awk '{print $14 + $15 + $16 + $17}' "/proc/$postmaster/stat")
    for child in $(pgrep -P "$postmaster"); do
        total=$((total + $(awk '{print $14 + $15}' "/proc/$child/stat" 2>/dev/null || echo 0)))
    done
    echo "$total"
}
ticks=$(getconf CLK_TCK)
