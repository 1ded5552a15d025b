#!/usr/bin/python3
"""Which HPACK table the gateway lets a client keep, seen with Python's h2 (which indexes every
header field it may): a device's connection is asked to drop it (SETTINGS_HEADER_TABLE_SIZE 0)
once its first request is routed, and must go on working; a provider's keeps the default.

usage: header_table.py URL TOPIC
prints: {"device": {...}, "provider": {...}}, each with the HEADER_TABLE_SIZE values the gateway
announced ("announced"), the client encoder's table size and entries after the last request, and
the statuses of its requests.
"""

import json
import socket
import sys
from urllib.parse import urlparse

import h2.config
import h2.connection
import h2.events
import h2.settings

from pgcommon import alert_body, alert_headers, emit, fail, hard_timeout, new_apns_id


class Connection:
    """One h2c connection, one request at a time, read until its answer."""

    def __init__(self, host, port):
        self.socket = socket.create_connection((host, port), timeout=15)
        self.authority = f"{host}:{port}"
        self.h2 = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True, header_encoding="utf-8"))
        self.h2.initiate_connection()
        self.announced = []
        self.flush()

    def flush(self):
        self.socket.sendall(self.h2.data_to_send())

    def request(self, method, path, headers=(), body=None, head_only=False):
        """(status, body) of one request; with head_only, returns at the response's head."""
        stream = self.h2.get_next_available_stream_id()
        fields = [(":method", method), (":scheme", "http"), (":authority", self.authority), (":path", path)]
        self.h2.send_headers(stream, fields + list(headers), end_stream=body is None)
        if body is not None:
            self.h2.send_data(stream, body, end_stream=True)
        self.flush()
        status, received = None, b""
        while True:
            data = self.socket.recv(65536)
            if not data:
                fail(f"{method} {path}: the gateway closed the connection")
            for event in self.h2.receive_data(data):
                if isinstance(event, h2.events.RemoteSettingsChanged):
                    size = event.changed_settings.get(h2.settings.SettingCodes.HEADER_TABLE_SIZE)
                    if size is not None:
                        self.announced.append(size.new_value)
                elif isinstance(event, h2.events.ConnectionTerminated):
                    fail(f"{method} {path}: GOAWAY {event.error_code} {event.additional_data!r}")
                elif getattr(event, "stream_id", None) != stream:
                    continue
                elif isinstance(event, h2.events.ResponseReceived):
                    status = int(dict(event.headers)[":status"])
                    if head_only:
                        self.flush()
                        return status, b""
                elif isinstance(event, h2.events.DataReceived):
                    received += event.data
                    self.h2.acknowledge_received_data(event.flow_controlled_length, stream)
                elif isinstance(event, h2.events.StreamReset):
                    fail(f"{method} {path}: stream reset ({event.error_code})")
                elif isinstance(event, h2.events.StreamEnded):
                    self.flush()
                    return status, received
            self.flush()

    def report(self, statuses):
        table = self.h2.encoder.header_table
        return {
            "announced": self.announced,
            "tableSize": table.maxsize,
            "entries": len(table.dynamic_entries),
            "statuses": statuses,
        }


def main():
    hard_timeout(60, "header_table.py")
    if len(sys.argv) != 3:
        fail("usage: header_table.py URL TOPIC")
    url, topic = urlparse(sys.argv[1]), sys.argv[2]

    device = Connection(url.hostname, url.port)
    created_status, created = device.request("POST", "/v1/devices")
    identity = json.loads(created)
    auth = [("authorization", f"bearer {identity['secret']}")]
    base = f"/v1/devices/{identity['deviceId']}"
    registered_status, registered = device.request(
        "POST", base + "/registrations", auth + [("content-type", "application/json")], json.dumps({"topic": topic}).encode()
    )
    token = json.loads(registered)["token"]
    stream_status, _ = device.request("GET", base + "/events", auth + [("accept", "text/event-stream")], head_only=True)
    ack_status, _ = device.request("POST", base + "/ack", auth + [("content-type", "application/json")], b'{"upTo":0}')

    provider = Connection(url.hostname, url.port)
    statuses = []
    for n in range(3):
        headers = list(alert_headers(topic, new_apns_id()).items()) + [("content-type", "application/json")]
        status, _ = provider.request("POST", f"/3/device/{token}", headers, json.dumps(alert_body(f"table {n}")).encode())
        statuses.append(status)

    emit({
        "device": device.report([created_status, registered_status, stream_status, ack_status]),
        "provider": provider.report(statuses),
    })


if __name__ == "__main__":
    main()
