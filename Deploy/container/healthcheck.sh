#!/bin/bash
# HEALTHCHECK for the image: GET /healthz over HTTP/1.1 on the loopback admin listener, with
# bash's /dev/tcp, so the runtime image needs no curl. Healthy only on a 200 status line.
set -u
port=${PUSHGATE_HEALTHCHECK_PORT:-9197}
exec 3<>"/dev/tcp/127.0.0.1/$port" || exit 1
printf 'GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n' >&3
# Bounded: a gateway that accepts but never answers is unhealthy, not a hung check.
IFS= read -r -t 4 status <&3 || exit 1
case $status in
    "HTTP/1.1 200 "*) exit 0 ;;
    *) echo "healthz: ${status%$'\r'}" >&2; exit 1 ;;
esac
