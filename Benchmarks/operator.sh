#!/usr/bin/env bash
# Operator benchmark (release build): how long a scrape takes with a large population.
#
#   bash Benchmarks/operator.sh [DEVICES]      (default 100,000)
#
# Seeds a store with DEVICES devices, each with a registration, one stored notification and one
# held silent push (so every device is in the shards' queued set and the scheduler holds
# DEVICES pushes: the walks a scrape does are as long as they get for that population), restarts
# the gateway on it, then times 50 sequential `GET /metrics` and 20 `GET /v1/admin/stats` with
# curl (time_total: request to last byte, on loopback) and reports the median and the maximum.
# Also: while curl scrapes in a loop, an h2load of `GET /healthz` (one connection, so one event
# loop) measures the longest request time the scrapes cause there, against the same h2load without
# scrapes: a scrape that stalled an event loop would show there; the same while the admin overview
# (/v1/admin/stats, which the dashboard asks for every 10 s) is asked for nonstop.
source "$(dirname "$0")/common.sh"
devices=${1:-100000}

start_server
stop_server
echo "== seeding $devices devices (a registration, a stored and a held notification each)"
/usr/bin/python3 - "$work/data/pushgate.sqlite" "$devices" <<'PY'
import os, sqlite3, sys, time
path, count = sys.argv[1], int(sys.argv[2])
db = sqlite3.connect(path)
now = int(time.time() * 1000)
expires = now + 30 * 86_400_000
payload_alert = b'{"aps":{"alert":"stored"}}'
payload_silent = b'{"aps":{"content-available":1}}'
devices, registrations, notifications = [], [], []
for i in range(count):
    device = os.urandom(16).hex()
    token = device[:2] + os.urandom(31).hex()  # a token starts with its device's shard byte
    devices.append((device, os.urandom(32), now, 1))
    registrations.append((token, device, "com.example.bench", now))
    notifications.append((2 * i + 1, device, token, "com.example.bench", "00000000-0000-4000-8000-%012x" % (2 * i + 1), "alert", 10, None, payload_alert, now, expires, 1))
    notifications.append((2 * i + 2, device, token, "com.example.bench", "00000000-0000-4000-8000-%012x" % (2 * i + 2), "background", 5, None, payload_silent, now, expires, None))
db.executemany("INSERT INTO devices (id, secret_hash, created_at, last_seq) VALUES (?, ?, ?, ?)", devices)
db.executemany("INSERT INTO registrations (token, device_id, topic, created_at) VALUES (?, ?, ?, ?)", registrations)
db.executemany("INSERT INTO notifications VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", notifications)
db.execute("UPDATE meta SET value = ? WHERE key = 'max_acceptance_id'", (2 * count,))
db.commit()
PY
chown -R nobody:nogroup "$work/data" 2>/dev/null || true

"${as_gateway[@]}" "$BIN" serve --listen 127.0.0.1:0 --data-dir "$work/data" --log-level error > "$work/serve.out" 2>&1 &
server=$!
for _ in $(seq 1200); do grep -q listening "$work/serve.out" 2>/dev/null && break; sleep 0.05; done
url=$(sed -n 's/^listening //p' "$work/serve.out" | head -1)
echo "gateway restored: $(curl -s "$url/v1/admin/stats" | python3 -c 'import json,sys; s=json.load(sys.stdin); print(s["devices"], "devices,", s["held"], "held,", s["stored"], "stored")')"
echo "RSS: $(awk '/VmRSS/ {print $2}' "/proc/$server/status") KiB"

time_requests() {  # PATH COUNT: median and max time_total in ms
    for _ in $(seq "$2"); do curl -s -o /dev/null -w '%{time_total}\n' "$url$1"; done |
        python3 -c 'import statistics,sys; t=[float(x)*1000 for x in sys.stdin]; print("median %.1f ms, max %.1f ms over %d" % (statistics.median(t), max(t), len(t)))'
}
curl -s -o "$work/metrics.txt" "$url/metrics"
echo "exposition: $(wc -c < "$work/metrics.txt") bytes, $(grep -vc '^#' "$work/metrics.txt") samples"
echo "== GET /metrics:         $(time_requests /metrics 50)"
echo "== GET /v1/admin/stats:  $(time_requests /v1/admin/stats 20)"

need_nghttp2_tools
probe() {  # h2load of /healthz on one connection: its slowest request
    h2load -n 20000 -c 1 -m 1 "$url/healthz" 2>/dev/null | awk '/time for request:/ {print "max " $5 ", mean " $6}'
}
probe_while() {  # PATH: the probe while curl asks for PATH nonstop
    ( while :; do curl -s -o /dev/null "$url$1"; done ) &
    local asker=$!
    probe
    kill "$asker"; wait "$asker" 2>/dev/null || true
}
echo "== /healthz on one connection, no scrapes:                 $(probe)"
echo "== /healthz on one connection, /metrics nonstop:           $(probe_while /metrics)"
echo "== /healthz on one connection, /v1/admin/stats nonstop:    $(probe_while /v1/admin/stats)"
stop_server
