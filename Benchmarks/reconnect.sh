#!/usr/bin/env bash
# Reconnect storm (issue 25): DEVICES devices, each with PER stored pushes sent while it was
# offline, reconnect at once after a gateway restart. `pushgate bench --backlog` creates the
# devices, sends the pushes (stored: no stream is open), runs the restart (SIGTERM, then `serve`
# again on the same port and data directory, as its own user), then opens every event stream,
# WIDTH at a time, and reports how long until every stream is open and every stored push
# delivered (each device acks what it gets), and lost/duplicated. Also the restarted gateway's
# CPU-seconds from its start to the end (recovery, the storm and the streams' closing), and over
# the storm alone, per connection (`--server-pid-file`: from the first stream opened until every
# stored push is delivered), the figure to set beside Nchan's CPU per new subscriber. Release
# build, one machine.
#
#   bash Benchmarks/reconnect.sh [DEVICES [PER [WIDTH]]]     (10,000, 5 and 1,000 by default)
source "$(dirname "$0")/common.sh"
devices=${1:-10000}
per=${2:-5}
width=${3:-1000}
port=$(free_port)
gateway_owns "$work/data"
serve=("${as_gateway[@]}" "$BIN" serve --listen "127.0.0.1:$port" --data-dir "$work/data" --log-level error)
"${serve[@]}" > "$work/serve1.out" 2>&1 &
echo $! > "$work/server.pid"
wait_port "$port"

# Run by the bench between the pushes and the storm: the first gateway stops (its stored pushes
# are on disk), a second starts on the same port and data.
cat > "$work/restart.sh" <<EOF
#!/usr/bin/env bash
set -e
old=\$(cat "$work/server.pid")
kill -TERM "\$old"
# Exited: gone, or a zombie until this script's parent, busy running the bench, reaps it.
while [ -e /proc/\$old ] && [ "\$(awk '{print \$3}' /proc/\$old/stat 2>/dev/null)" != Z ]; do sleep 0.02; done
$(printf '%q ' "${serve[@]}") > "$work/serve2.out" 2>&1 &
echo \$! > "$work/server.pid"
for _ in \$(seq 500); do grep -q listening "$work/serve2.out" 2>/dev/null && exit 0; sleep 0.02; done
echo "the restarted gateway did not listen" >&2; exit 1
EOF
"$BIN" bench --server "http://127.0.0.1:$port" --devices "$devices" --pushes $((devices * per)) --providers 4 \
    --backlog --then-run "bash $work/restart.sh" --server-pid-file "$work/server.pid" --concurrent-connects "$width" \
    --drain-seconds 60 > "$work/bench.out"
server=$(cat "$work/server.pid")
ticks=$(cpu_ticks "$server")
cat "$work/bench.out"
awk -v t="$ticks" -v hz="$(getconf CLK_TCK)" 'BEGIN { printf "restarted gateway CPU, start to end: %.2f s\n", t / hz }'
# Not this shell's child (restart.sh started it): stop_server's wait cannot wait for it.
kill -TERM "$server"
while kill -0 "$server" 2>/dev/null; do sleep 0.05; done
bench_clean < <(tail -1 "$work/bench.out")
