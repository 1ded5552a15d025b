#!/usr/bin/python3
"""A certificate reload seen by TLS clients: one connection opened before SIGHUP, one after.

usage: tls_reload_probe.py --url https://HOST:PORT --ca CA.pem --pid PID --metrics URL

Connection A (Python's http.client and ssl: HTTP/1.1 with keep-alive over TLS, verified against
CA) asks /healthz; then SIGHUP goes to
PID and /metrics (at URL, cleartext) is polled, at most 100 times 20 ms apart, until
pushgate_config_reloads_total{result="success"} counts it; then a new connection B asks
/healthz, and A asks again on the same socket. Each answer carries the SHA-256 of the
certificate its connection was served. (httpx over HTTP/2 does not expose its TLS socket.)

prints {before: {status, httpVersion, fingerprint}, reloadPolls, reloads, after: {...},
again: {...}, sameConnection}
"""

import argparse
import hashlib
import http.client
import os
import re
import signal
import ssl
import time
import urllib.parse

import httpx

from pgcommon import emit, fail, hard_timeout


def connect(url, context):
    parsed = urllib.parse.urlsplit(url)
    return http.client.HTTPSConnection(parsed.hostname, parsed.port, context=context, timeout=10)


def ask(connection):
    connection.request("GET", "/healthz")
    response = connection.getresponse()
    response.read()
    certificate = connection.sock.getpeercert(binary_form=True)
    return {"status": response.status, "httpVersion": f"HTTP/{response.version / 10:.1f}", "fingerprint": hashlib.sha256(certificate).hexdigest()}


def reloads(metrics):
    text = httpx.get(metrics + "/metrics").text
    found = re.search(r'pushgate_config_reloads_total\{result="success"\} (\d+)', text)
    return int(found.group(1)) if found else 0


def main():
    hard_timeout(30, "tls_reload_probe.py")
    parser = argparse.ArgumentParser()
    parser.add_argument("--url", required=True)
    parser.add_argument("--ca", required=True)
    parser.add_argument("--pid", type=int, required=True)
    parser.add_argument("--metrics", required=True)
    args = parser.parse_args()

    context = ssl.create_default_context(cafile=args.ca)
    context.set_alpn_protocols(["http/1.1"])
    result = {}
    first = connect(args.url, context)
    result["before"] = ask(first)
    socket_before = first.sock
    if reloads(args.metrics) != 0:
        fail("a reload was counted before SIGHUP")
    os.kill(args.pid, signal.SIGHUP)
    polls = 0
    while polls < 100:
        polls += 1
        if reloads(args.metrics) >= 1:
            break
        time.sleep(0.02)
    result["reloadPolls"] = polls
    result["reloads"] = reloads(args.metrics)
    second = connect(args.url, context)
    result["after"] = ask(second)
    second.close()
    result["again"] = ask(first)
    result["sameConnection"] = first.sock is socket_before
    first.close()
    emit(result)


if __name__ == "__main__":
    main()
