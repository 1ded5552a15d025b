#!/usr/bin/env bash
# The dashboard screenshot of the documentation (docs/operators.md shows it): a gateway with some
# traffic (a device with delivered and held pushes, one in lowPower, one offline with stored
# pushes), the dashboard driven in headless Chromium by the operator tests' own script
# (Tests/PushgateCLITests/python/dashboard_check.py: selenium, /usr/bin/chromedriver), which
# checks the page against /v1/admin/stats, opens a device's view and saves the page at 1280 px.
#
#   bash Tests/docs/dashboard-screenshot.sh [OUTPUT]      (docs/img/dashboard.png by default)
#   PUSHGATE_BIN=.build/release/pushgate bash Tests/docs/dashboard-screenshot.sh
#
# Needs chromium, chromium-driver and python3-selenium (.ci/run installs them). As root, every
# pushgate process runs as `nobody`, as the tests run them. Fails, with the check's and the
# gateway's output, when the page does not come up live or does not agree with the admin API.
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
output=${1:-$repo/docs/img/dashboard.png}
binary=${PUSHGATE_BIN:-$repo/.build/debug/pushgate}
check_script=$repo/Tests/PushgateCLITests/python/dashboard_check.py
[[ -x $binary ]] || { echo "FAIL: no pushgate binary at $binary (swift build first, or set PUSHGATE_BIN)" >&2; exit 1; }

work=$(mktemp -d /tmp/pushgate-screenshot-XXXXXX)
pids=()
cleanup() {
    local pid
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
    rm -rf "$work"
}
trap cleanup EXIT
# A copy the unprivileged user can run (a clone under root's home is out of its reach).
cp "$binary" "$work/pushgate"
chmod 0755 "$work" "$work/pushgate"
mkdir "$work/run"
pushgate=("$work/pushgate")
if [[ $(id -u) -eq 0 ]]; then
    chown nobody:nogroup "$work/run"
    pushgate=(setpriv --reuid=nobody --regid=nogroup --clear-groups "$work/pushgate")
fi

fail() {
    echo "FAIL: $*" >&2
    local log
    for log in "$work"/run/*.log; do [[ -f $log ]] && { echo "--- $log" >&2; tail -n 20 "$log" >&2; }; done
    exit 1
}

# Waits up to 15 s for a line matching $1 in file $2.
wait_for() {
    local i
    for ((i = 0; i < 150; i++)); do
        grep -q -- "$1" "$2" 2>/dev/null && return 0
        sleep 0.1
    done
    fail "no line matching $1 in $2 within 15 s"
}

"${pushgate[@]}" serve --listen 127.0.0.1:0 --data-dir "$work/run/data" >"$work/run/serve.out" 2>"$work/run/serve.log" &
pids+=($!)
wait_for '^listening http://127.0.0.1:' "$work/run/serve.out"
url=$(sed -n 's/^listening \(http:\/\/127\.0\.0\.1:[0-9]*\)$/\1/p' "$work/run/serve.out" | head -n 1)

# agent NAME [agent flags...]: a device agent in the background, its output in NAME.log.
agent() {
    local name=$1
    shift
    "${pushgate[@]}" agent --server "$url" --identity "$work/run/$name.json" "$@" >"$work/run/$name.log" 2>&1 &
    pids+=($!)
    wait_for '"type":"connected"' "$work/run/$name.log"
}
token_of() { sed -n "s/.*\"topic\":\"$2\",\"token\":\"\\([0-9a-f]*\\)\".*/\\1/p" "$work/run/$1.log" | head -n 1; }
send() { "${pushgate[@]}" send --server "$url" "$@" >/dev/null || fail "pushgate send $*"; }
silent=(--push-type background --priority 5 '{"aps":{"content-available":1}}')

agent phone --topic com.example.news --topic com.example.chat
agent tablet --topic com.example.news --power lowPower
agent laptop --topic com.example.chat
phone_news=$(token_of phone com.example.news)
phone_chat=$(token_of phone com.example.chat)
tablet_news=$(token_of tablet com.example.news)
laptop_chat=$(token_of laptop com.example.chat)
phone_id=$(sed -n 's/.*"deviceId":"\([0-9a-f]*\)".*/\1/p' "$work/run/phone.json")

# The laptop goes offline: its pushes are stored.
kill "${pids[-1]}"
wait "${pids[-1]}" 2>/dev/null || true
for ((i = 0; i < 150; i++)); do
    curl -s "$url/metrics" | grep -q '^pushgate_connected_devices 2' && break
    sleep 0.1
done

for i in 1 2 3; do send --token "$phone_chat" --topic com.example.chat "{\"aps\":{\"alert\":\"message $i\"}}"; done
for i in 1 2 3 4 5; do send --token "$phone_news" --topic com.example.news "${silent[@]}"; done
for i in 1 2; do send --token "$tablet_news" --topic com.example.news "${silent[@]}"; done
for i in 1 2 3; do send --token "$laptop_chat" --topic com.example.chat "{\"aps\":{\"alert\":\"offline $i\"}}"; done

# The dashboard, live; then more pushes while it watches, and the phone's view with its reasons.
coproc CHECK {
    exec /usr/bin/python3 -B "$check_script" --url "$url/admin" --screenshot "$work/dashboard.png" --timeout 30 2>"$work/run/check.log"
}
pids+=("$CHECK_PID")
read -r -t 150 line <&"${CHECK[0]}" || fail "the dashboard check said nothing within 150 s"
[[ $line == READY* ]] || fail "the dashboard check: $line"
for i in 1 2; do send --token "$phone_news" --topic com.example.news "${silent[@]}"; done
send --token "$phone_chat" --topic com.example.chat --priority 1 '{"aps":{"alert":"later"}}'
echo "SENT 3 $phone_id" >&"${CHECK[1]}"
read -r -t 150 line <&"${CHECK[0]}" || fail "the dashboard check gave no verdict within 150 s"
[[ $line == OK* ]] || fail "the dashboard check: $line"

mkdir -p "$(dirname "$output")"
cp "$work/dashboard.png" "$output"
echo "dashboard screenshot: $output"
