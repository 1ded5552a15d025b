#!/usr/bin/env bash
# What the security review's two memory attacks cost the gateway (release build, run as its own
# user on loopback), as resident memory before and during each:
#   1. bodies without credentials: CONNECTIONS connections each open a stream on /3/device/...
#      without a provider token and send up to BODY bytes of body without ending it
#      (Benchmarks/attack_bodies.py), and hold it all open;
#   2. one app floods one offline device: PUSHES pushes of 4,000-byte payloads for app A with
#      apns-expiration 2^63-1 (h2load), then one push for app B to the same device.
#
#   bash Benchmarks/attack-memory.sh [CONNECTIONS] [BODY] [PUSHES]
#   BIN=/path/to/other/pushgate PUSHGATE_BUILD=0 bash Benchmarks/attack-memory.sh   # another build
source "$(dirname "$0")/common.sh"
need_nghttp2_tools
connections=${1:-1000}
body=${2:-1048576}
pushes=${3:-10000}
rss_kib() { awk '/^VmRSS/ {print $2}' "/proc/$server/status"; }
port_of() { echo "${url##*:}"; }

# Provider keys make the gateway gate unauthenticated connections to one stream, as in production.
openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$work/AuthKey.p8" 2>/dev/null
gateway_owns "$work/AuthKey.p8"
start_server --provider-key "TEAM123456:KEY1234567:$work/AuthKey.p8:com.example.victim"
before=$(rss_kib)
mkfifo "$work/hold"
/usr/bin/python3 Benchmarks/attack_bodies.py 127.0.0.1 "$(port_of)" "$connections" "$body" < "$work/hold" > "$work/attack1.out" &
attacker=$!
exec 9> "$work/hold"
for _ in $(seq 1200); do [ -s "$work/attack1.out" ] && break; sleep 0.1; done
during=$(rss_kib)
echo "attack 1: $(cat "$work/attack1.out")"
echo "attack 1: gateway RSS $((before / 1024)) MiB before, $((during / 1024)) MiB while the $connections connections hold their bodies"
exec 9>&-
wait "$attacker" || true
stop_server

start_server
before=$(rss_kib)
created=$(curl -s --http2-prior-knowledge -X POST "$url/v1/devices")
id=$(python3 -c 'import json,sys; print(json.load(sys.stdin)["deviceId"])' <<< "$created")
secret=$(python3 -c 'import json,sys; print(json.load(sys.stdin)["secret"])' <<< "$created")
register() {
    curl -s --http2-prior-knowledge -H "authorization: bearer $secret" -H 'content-type: application/json' \
        -d "{\"topic\":\"$1\"}" "$url/v1/devices/$id/registrations" | python3 -c 'import json,sys; print(json.load(sys.stdin)["token"])'
}
token_a=$(register com.example.a)
token_b=$(register com.example.b)
python3 -c 'import json; print(json.dumps({"aps": {"alert": "x" * 3980}}), end="")' > "$work/payload"
h2load -n "$pushes" -c 1 -m 50 -d "$work/payload" -H 'apns-topic: com.example.a' \
    -H 'apns-expiration: 9223372036854775807' "$url/3/device/$token_a" > "$work/flood.out"
status_b=$(curl -s -o /dev/null -w '%{http_code}' --http2-prior-knowledge -H 'apns-topic: com.example.b' \
    -d '{"aps":{"alert":"from app B"}}' "$url/3/device/$token_b")
during=$(rss_kib)
echo "attack 2: app A's $pushes pushes: $(grep -E '^status codes' "$work/flood.out")"
echo "attack 2: app B's push to the same device then: HTTP $status_b"
echo "attack 2: gateway RSS $((before / 1024)) MiB before, $((during / 1024)) MiB after the flood"
stop_server
