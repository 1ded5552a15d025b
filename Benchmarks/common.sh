# Shared by the delivery benchmarks (sourced, not run): a release build of pushgate, a scratch
# directory removed on exit, and a gateway started on an ephemeral port.
#
#   start_server [serve flags...]   sets $server (pid) and $url
#   stop_server
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
ulimit -n "$(ulimit -Hn)"  # thousands of connections need as many descriptors on each side

swift build -c release --product pushgate >/dev/null
BIN=$(swift build -c release --show-bin-path)/pushgate
work=$(mktemp -d)
cleanup() { pkill -P $$ 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT

start_server() {
    rm -rf "$work/data"
    "$BIN" serve --listen 127.0.0.1:0 --data-dir "$work/data" --log-level error "$@" > "$work/serve.out" 2>&1 &
    server=$!
    for _ in $(seq 200); do grep -q listening "$work/serve.out" 2>/dev/null && break; sleep 0.05; done
    url=$(sed -n 's/^listening //p' "$work/serve.out" | head -1)
}

stop_server() {
    kill -TERM "$server"
    wait "$server" || true
}
