#!/usr/bin/env bash
# Web Push's push resource beside the APNs provider endpoint, in the same run (release build):
#
#   bash Benchmarks/webpush.sh [ROUNDS]
#
# Each round starts one gateway (durability fsync, the default) with 1,000 offline devices, each
# with an APNs registration and a Web Push subscription, and runs h2load, 100,000 POSTs each:
#   - apns: the provider endpoint (/3/device/<token>), the bench's 122-byte alert, 8 connections
#     x 256 streams (provider.sh's reference command);
#   - webpush h2: the devices' endpoints (/webpush/<token>), a 225-byte aes128gcm body (122
#     bytes of plaintext encrypted by http_ece), TTL and Urgency, no VAPID, the same connections;
#   - webpush h2 vapid: the same with a VAPID authorization (py-vapid; one token, as senders
#     reuse one for hours: verified once per connection);
#   - webpush h1: the same as webpush h2 over HTTP/1.1 (as pywebpush and web-push send), 64
#     connections, one request at a time each.
# Every request must be answered 200 (APNs) or 201 (Web Push). Prints each run's requests/s and
# CPU-seconds per 100k requests (the gateway's utime+stime from /proc), per round and as
# medians, with Web Push's CPU per request as a ratio to APNs' in the same round. h2load shares
# the machine's cores with the gateway.
source "$(dirname "$0")/common.sh"
rounds=${1:-3}
provider_h2load_setup
python3 -c 'import http_ece, py_vapid' 2>/dev/null || /usr/bin/python3 -c 'import http_ece, py_vapid' \
    || { echo "needs http_ece and py_vapid (.ci/run installs them)" >&2; exit 1; }

# webpush_urls: a Web Push subscription on each of the 1,000 devices offline_device_urls made
# (their ids and secrets are in $work/devices), the endpoint of each in $work/webpush-urls.
webpush_urls() {
    printf '{"name":"bench"}' > "$work/subscription.json"
    python3 -c '
import json, sys
url, body = sys.argv[1], sys.argv[3]
for line in open(sys.argv[2]):
    d = json.loads(line)
    device, secret = d["deviceId"], d["secret"]
    print(f"next\nurl = \"{url}/v1/devices/{device}/subscriptions\"\nheader = \"authorization: bearer {secret}\"\ndata = \"@{body}\"")
' "$url" "$work/devices" "$work/subscription.json" | tail -n +2 > "$work/subscribe.curl"
    curl -s --http2-prior-knowledge -K "$work/subscribe.curl" | json_objects \
        | python3 -c 'import json, sys; [print(json.loads(l)["endpoint"]) for l in sys.stdin]' > "$work/webpush-urls"
    [ "$(wc -l < "$work/webpush-urls")" -eq 1000 ] || { echo "could not subscribe 1,000 devices" >&2; return 1; }
}

# The message body: 122 bytes of plaintext encrypted for a subscription's keys (the gateway
# never decrypts: any subscription's body is as good), and a VAPID header for this origin.
/usr/bin/python3 - "$work" <<'PY'
import os, sys, time
import http_ece
from cryptography.hazmat.primitives.asymmetric import ec
from py_vapid import Vapid02
work = sys.argv[1]
receiver = ec.generate_private_key(ec.SECP256R1()).public_key()
body = http_ece.encrypt(b"x" * 122, private_key=ec.generate_private_key(ec.SECP256R1()), dh=receiver,
                        auth_secret=os.urandom(16), version="aes128gcm")
open(f"{work}/webpush-body", "wb").write(body)
key = Vapid02()
key.generate_keys()
key.save_key(f"{work}/vapid.pem")
PY

# One h2load run against the gateway: "requests/s CPU-s-per-100k"; every answer must be 2xx.
run_cpu() {
    local before after rate
    before=$(cpu_ticks "$server")
    rate=$(h2load_rate "$@")
    after=$(cpu_ticks "$server")
    python3 -c "print($rate, ($after-$before)/$(getconf CLK_TCK)/($REQUESTS/100000))"
}

rows=()
for round in $(seq "$rounds"); do
    start_server
    offline_device_urls
    webpush_urls
    origin=${url%/}
    vapid=$(/usr/bin/python3 -c 'import sys, time
from py_vapid import Vapid02
print(Vapid02.from_file(sys.argv[1]).sign({"aud": sys.argv[2], "exp": int(time.time()) + 12 * 3600, "sub": "mailto:bench@example.com"})["Authorization"])' "$work/vapid.pem" "$origin")
    webpush=(-n "$REQUESTS" -d "$work/webpush-body" -H 'ttl: 86400' -H 'content-encoding: aes128gcm' -H 'urgency: normal')
    row="$(run_cpu "${H2LOAD[@]}" $(cat "$work/urls"))"
    row+=" $(run_cpu "${webpush[@]}" -c 8 -m 256 -t 1 $(cat "$work/webpush-urls"))"
    row+=" $(run_cpu "${webpush[@]}" -c 8 -m 256 -t 1 -H "authorization: $vapid" $(cat "$work/webpush-urls"))"
    row+=" $(run_cpu "${webpush[@]}" -c 64 -m 1 -t 1 --h1 $(cat "$work/webpush-urls"))"
    stop_server
    echo "round $round (requests/s CPU-s per 100k): apns, webpush h2, webpush h2 vapid, webpush h1: $row"
    rows+=("$row")
done

python3 - "${rows[@]}" <<'PY'
import statistics, sys
rows = [list(map(float, r.split())) for r in sys.argv[1:]]
med = statistics.median
names = ["apns (h2)", "webpush (h2)", "webpush (h2, vapid)", "webpush (http/1.1)"]
for i, name in enumerate(names):
    rates = [r[2 * i] for r in rows]
    cpus = [r[2 * i + 1] for r in rows]
    ratio = "" if i == 0 else f"; CPU per request {med(r[2 * i + 1] / r[1] for r in rows):.2f}x apns' (median of rounds)"
    print(f"{name:22} {med(rates):8.0f} req/s, {med(cpus):.2f} CPU-s per 100k (median){ratio}")
PY
