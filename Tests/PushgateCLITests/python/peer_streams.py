#!/usr/bin/python3
"""The stream limit a node's connection gets, before and after a request proves the cluster's secret.

usage: peer_streams.py --url http://HOST:PORT --secret SECRET [--streams N]

Over one h2c connection (h2, no client library queueing on our behalf): reads the server's
SETTINGS; sends POST /internal/v1/release (a release of a device no node has: answered 204)
with the secret; then opens N such streams at once, which h2 refuses to do beyond the server's
SETTINGS_MAX_CONCURRENT_STREAMS.

prints one JSON object: before (the limit at first), after (once the secret was proven), statuses
(of the N concurrent requests); or fails when the server refused a stream.
"""

import argparse
import json
import socket
from urllib.parse import urlsplit

import h2.config
import h2.connection
import h2.events
import h2.exceptions

from pgcommon import emit, fail, hard_timeout


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--url", required=True)
    parser.add_argument("--secret", required=True)
    parser.add_argument("--streams", type=int, default=8)
    args = parser.parse_args()
    hard_timeout(30, "peer_streams.py")
    where = urlsplit(args.url)
    sock = socket.create_connection((where.hostname, where.port), timeout=20)
    connection = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
    connection.initiate_connection()
    sock.sendall(connection.data_to_send())
    statuses, ended, state = {}, set(), {"settings": False}

    def pump(until):
        while not until():
            data = sock.recv(65536)
            if not data:
                fail("the server closed the connection")
            for event in connection.receive_data(data):
                if isinstance(event, h2.events.RemoteSettingsChanged):
                    state["settings"] = True
                elif isinstance(event, h2.events.ResponseReceived):
                    statuses[event.stream_id] = int(dict(event.headers)[b":status"])
                elif isinstance(event, h2.events.StreamEnded):
                    ended.add(event.stream_id)
                elif isinstance(event, h2.events.StreamReset):
                    fail(f"stream {event.stream_id} reset by the server: error {event.error_code}")
            sock.sendall(connection.data_to_send())

    def release():
        stream = connection.get_next_available_stream_id()
        body = json.dumps({"deviceId": "no-such-device", "epoch": 1}).encode()
        connection.send_headers(
            stream,
            [
                (":method", "POST"),
                (":path", "/internal/v1/release"),
                (":scheme", "http"),
                (":authority", where.netloc),
                ("pushgate-cluster", args.secret),
                ("content-type", "application/json"),
                ("content-length", str(len(body))),
            ],
        )
        connection.send_data(stream, body, end_stream=True)
        return stream

    pump(lambda: state["settings"])
    before = connection.remote_settings.max_concurrent_streams
    first = release()
    sock.sendall(connection.data_to_send())
    pump(lambda: first in ended)
    after = connection.remote_settings.max_concurrent_streams
    try:
        streams = [release() for _ in range(args.streams)]
    except h2.exceptions.TooManyStreamsError:
        fail(f"h2 may open only {after} streams at once after the secret was proven")
    sock.sendall(connection.data_to_send())
    pump(lambda: all(stream in ended for stream in streams))
    emit({"before": before, "after": after, "first": statuses[first], "statuses": [statuses[s] for s in streams]})


if __name__ == "__main__":
    main()
