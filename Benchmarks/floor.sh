#!/usr/bin/env bash
# The floor under the delivery benchmark's CPU figure: what the parts of a delivered, acked push
# cost when done by C references on this machine, with no Pushgate code involved.
#
#   bash Benchmarks/floor.sh [GROUP] [ACKS_PER_PUSH] [RATE]
#
# A push acked at once costs a gateway at least:
# - its provider request, among many in flight on a few connections: nghttpd answering h2load
#   POSTs, 8 connections x 256 streams (as delivery.sh's reference);
# - its share of acks, each a request alone on its device's connection: nghttpd answering
#   h2load with 1,000 connections of one request each, times ACKS_PER_PUSH (`pushgate bench`
#   reports acks; 0.45-0.47 per push flat out);
# - its durable write and the delete of its ack: Benchmarks/store-floor.c, SQLite from C with
#   the store's settings and statements, GROUP pushes per fsync'd commit (flat out the gateway
#   commits 25-30 pushes per fsync: `perf stat -e syscalls:sys_enter_fdatasync`);
# - the write of its event to its device's connection: Benchmarks/write-floor.c, one write(2)
#   of 452 bytes (a bench event as curl reads it, 443 bytes, and its DATA frame header) to each
#   of 1,000 loopback connections in turn, no HTTP/2 framing.
# Each part is a lower bound of its own: no parsing, no validation, no routing, no state. The
# references run on the same cores, one at a time.
#
# With RATE (pushes per second), the floor at that moderate load instead of flat out, in the shape
# of ../shared/bench's latency phase (1,000 devices, one provider connection): the provider
# requests come on one connection at RATE per second, and the acks as lone requests from 1,000
# connections at ACKS_PER_PUSH x RATE / 1,000 per second each (h2load --rps, 20 s), so that every
# request pays its own wake-ups as it does at that rate; the store's commits of GROUP pushes and
# the event writes, in bursts of GROUP, are paced at RATE as well (store-floor.c and write-floor.c
# sleep between bursts, as the gateway's writer and loops do). At 2,000/s, 3 pushes per commit and an ack
# per push (`bash Benchmarks/floor.sh 3 1 2000`) is the 2,000/s cell of issue 25.
# Prints each part in CPU-seconds per 100k pushes and their sum, to set beside delivery.sh's
# figure: issue 25 asks for the gateway within 1.5x of this floor flat out.
PUSHGATE_BUILD=0  # no Pushgate code runs here
source "$(dirname "$0")/common.sh"
need_nghttp2_tools
GROUP=${1:-25}
ACKS=${2:-0.45}
RATE=${3:-}
if [ -n "$RATE" ]; then
    [[ $RATE =~ ^[1-9][0-9]*$ ]] || { echo "floor.sh: RATE must be a whole number of pushes per second, got $RATE" >&2; exit 1; }
    # h2load --rps takes whole requests per second per connection: each device's is ACKS x RATE / 1,000.
    per_device=$(python3 -c "import sys; r = float(sys.argv[1]) * int(sys.argv[2]) / 1000; print(round(r) if r >= 0 and abs(r - round(r)) < 1e-9 else '')" "$ACKS" "$RATE")
    [ -n "$per_device" ] || { echo "floor.sh: ACKS_PER_PUSH x RATE / 1000 must be a whole number of acks per second per device (h2load --rps), got $ACKS x $RATE / 1000" >&2; exit 1; }
fi

cc -O2 -o "$work/store-floor" Benchmarks/store-floor.c -lsqlite3
# At RATE, the store's groups and the event writes are paced too (20 s of each): they sleep
# between bursts and pay the wake-ups the gateway's writer and loops pay at that rate.
paced=()
count=200000
if [ -n "$RATE" ]; then paced=("$RATE") count=$((RATE * 20)); fi
store() {
    rm -rf "$work/sf" && mkdir "$work/sf"
    "$work/store-floor" "$work/sf" "$count" "$GROUP" "$1" "${paced[@]}" | cpu_and_switches
}
# "CPU-s per 100k, context switches per push" from a floor program's line.
cpu_and_switches() { awk '{for (i = 2; i <= NF; i++) if ($i == "context") print $1, $(i - 1)}'; }
read -r store_acked store_acked_sw <<<"$(store "$ACKS")"
read -r store_unacked store_unacked_sw <<<"$(store 0)"
cc -O2 -o "$work/write-floor" Benchmarks/write-floor.c
read -r event_write event_write_sw <<<"$("$work/write-floor" 1000 "$count" 452 ${RATE:+"$RATE" "$GROUP"} | cpu_and_switches)"

write_alert_payload "$work/payload"
start_nghttpd
# nghttpd's context switches so far, all its threads.
nghttpd_switches() { cat /proc/"$ng"/task/*/status | awk '/ctxt_switches/ {n += $2} END {print n}'; }
# nghttpd's CPU-seconds per 100k requests and context switches per request, for one h2load run
# with the given flags (a count of requests, or a duration at a rate).
nghttpd_cpu() {
    local before after switched out completed
    before=$(cpu_ticks "$ng")
    switched=$(nghttpd_switches)
    out=$(h2load_checked -t 1 "$@" "http://127.0.0.1:$ng_port/static")
    after=$(cpu_ticks "$ng")
    switched=$(($(nghttpd_switches) - switched))
    completed=$(sed -n 's/^requests: .* \([0-9]*\) done,.*/\1/p' <<<"$out")
    python3 -c "print(($after - $before) / $(getconf CLK_TCK) / ($completed / 100000), $switched / $completed)"
}
if [ -n "$RATE" ]; then
    read -r pipelined pipelined_sw <<<"$(nghttpd_cpu -D 20 -c 1 -m 64 --rps "$RATE" -d "$work/payload")"
    lone=0 lone_sw=0
    [ "$per_device" = 0 ] || read -r lone lone_sw <<<"$(nghttpd_cpu -D 20 -c 1000 -m 1 --rps "$per_device" -d "$work/payload")"
else
    read -r pipelined pipelined_sw <<<"$(nghttpd_cpu -n 200000 -c 8 -m 256 -d "$work/payload")"
    read -r lone lone_sw <<<"$(nghttpd_cpu -n 200000 -c 1000 -m 1 -d "$work/payload")"
fi
kill "$ng"; wait "$ng" 2>/dev/null || true

python3 - "$pipelined" "$lone" "$ACKS" "$store_acked" "$store_unacked" "$event_write" "$GROUP" "${RATE:-}" \
    "$pipelined_sw" "$lone_sw" "$store_acked_sw" "$store_unacked_sw" "$event_write_sw" <<'EOF'
import sys
pipelined, lone, acks, store_acked, store_unacked, event_write = map(float, sys.argv[1:7])
group, rate = sys.argv[7], sys.argv[8]
pipelined_sw, lone_sw, store_acked_sw, store_unacked_sw, event_write_sw = map(float, sys.argv[9:14])
if rate:
    print(f"at {rate} pushes/s:")
    provider = f"provider request (nghttpd, 1 connection, {rate}/s)"
    acking = f"acks, {acks} per push (nghttpd, 1,000 connections, lone requests at that rate)"
else:
    provider = "provider request (nghttpd, 8 connections x 256 in flight)"
    acking = f"acks, {acks} per push (nghttpd, 1,000 connections x 1)"
rows = [
    (provider, pipelined, pipelined_sw, ""),
    (acking, acks * lone, acks * lone_sw, f"{lone:.2f} per 100k requests"),
    (f"store (SQLite from C, {group} pushes per commit{', paced' if rate else ''}, acked)", store_acked, store_acked_sw,
     f"{store_unacked:.2f} and {store_unacked_sw:.2f} without acks"),
    (f"event write to the device (write(2), 1,000 connections{f', {group} at a time, paced' if rate else ''})", event_write,
     event_write_sw, ""),
    ("lower bound, devices acking", pipelined + acks * lone + store_acked + event_write,
     pipelined_sw + acks * lone_sw + store_acked_sw + event_write_sw, ""),
    ("lower bound, no acks", pipelined + store_unacked + event_write, pipelined_sw + store_unacked_sw + event_write_sw, ""),
]
# Context switches per push, each part's own: the parts run one at a time as separate programs, so
# their sum is what such programs pay; one process doing them all could share some wake-ups.
for name, value, switches, note in rows:
    print(f"{name:<60} {value:5.2f} CPU-s per 100k, {switches:5.2f} context switches per push" + (f" ({note})" if note else ""))
EOF
