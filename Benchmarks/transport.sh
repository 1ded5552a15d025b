#!/usr/bin/env bash
# Transport benchmark: the same h2load command against `pushgate serve` (release build) and
# against nghttpd (nghttp2's own server) in one run, h2c and TLS, and the ratio of requests/s.
#
#   bash Benchmarks/transport.sh            # both servers with 1 and with 2 event-loop threads
#   DURATION=20 THREADS="1" bash Benchmarks/transport.sh
#
# Both servers answer GET /healthz with the same 3-byte body ("ok\n"; nghttpd serves it as a
# static file). h2load runs on the same machine, so client and server share the cores.
source "$(dirname "$0")/common.sh"

DURATION=${DURATION:-10}
WARMUP=${WARMUP:-2}
THREADS=${THREADS:-"1 2"}
H2LOAD_ARGS=(-c 16 -m 100 -t 1 -D "$DURATION" --warm-up-time "$WARMUP")

need_nghttp2_tools
printf 'ok\n' > "$work/healthz"
cp Tests/Fixtures/tls/server.pem Tests/Fixtures/tls/server-key.pem "$work/"
CERT=$work/server.pem
KEY=$work/server-key.pem
gateway_owns "$KEY"

measure() { h2load_rate "${H2LOAD_ARGS[@]}" "$1"; }

printf '%-8s %-5s %14s %14s %7s\n' threads proto pushgate_req/s nghttpd_req/s ratio
for threads in $THREADS; do
    for proto in h2c tls; do
        pg_port=$(free_port)
        if [ "$proto" = h2c ]; then
            gateway_owns "$work/data-$threads-$proto"
            "${as_gateway[@]}" "$BIN" serve --listen "127.0.0.1:$pg_port" --data-dir "$work/data-$threads-$proto" --threads "$threads" --log-level error >/dev/null &
            url_pg="http://127.0.0.1:$pg_port/healthz"
        else
            gateway_owns "$work/data-$threads-$proto"
            "${as_gateway[@]}" "$BIN" serve --tls-listen "127.0.0.1:$pg_port" --data-dir "$work/data-$threads-$proto" --tls-cert "$CERT" --tls-key "$KEY" \
                --threads "$threads" --log-level error >/dev/null &
            url_pg="https://127.0.0.1:$pg_port/healthz"
        fi
        pg_pid=$!
        wait_port "$pg_port"
        pg=$(measure "$url_pg")
        kill -TERM "$pg_pid"; wait "$pg_pid" || true

        ng_port=$(free_port)
        if [ "$proto" = h2c ]; then
            /usr/sbin/nghttpd --no-tls -n "$threads" -d "$work" "$ng_port" >/dev/null 2>&1 &
            url_ng="http://127.0.0.1:$ng_port/healthz"
        else
            /usr/sbin/nghttpd -n "$threads" -d "$work" "$ng_port" "$KEY" "$CERT" >/dev/null 2>&1 &
            url_ng="https://127.0.0.1:$ng_port/healthz"
        fi
        ng_pid=$!
        wait_port "$ng_port"
        ng=$(measure "$url_ng")
        kill "$ng_pid"; wait "$ng_pid" 2>/dev/null || true

        ratio=$(python3 -c "print(f'{$pg/$ng:.2f}')")
        printf '%-8s %-5s %14.0f %14.0f %7s\n' "$threads" "$proto" "$pg" "$ng" "$ratio"
    done
done
echo "h2load ${H2LOAD_ARGS[*]} <url>; pushgate $(git rev-parse --short HEAD 2>/dev/null || echo '?'), $(nproc) cores"
