#!/usr/bin/python3
"""Writes the seeds that are not plain text: provider tokens signed with the fixture key
(Tests/Fuzz/Corpus/provider-token/), HTTP/2 client connections made by Python's h2
(Tests/Fuzz/Corpus/http2-server/) and notifications in the event-stream target's binary layout
(Tests/Fuzz/Corpus/event-stream/). The names, ids and times match the harnesses
(ProviderTokenFuzzer.swift, FuzzGateway.swift). Debian: python3-jwt, python3-h2.

    /usr/bin/python3 Tests/Fuzz/make-seeds.py
"""
import json
import pathlib

import h2.config
import h2.connection
import jwt

HERE = pathlib.Path(__file__).resolve().parent
FIXTURES = HERE.parent / "Fixtures" / "tls"
KEY = (FIXTURES / "client-key.pem").read_text()
OTHER_KEY = (FIXTURES / "other-ca-key.pem").read_text()
NOW = 1_700_000_000  # the harnesses' clock, in seconds

# FuzzGateway.swift's device, registration and provider key.
DEVICE_ID = "00112233445566778899aabbccddeeff"
DEVICE_SECRET = "fuzz-device-secret"
TOKEN = "00" + "0123456789abcdef" * 3 + "0123456789abcd"
TOPIC = "com.example.app"


def token(kid="KEY0000001", iss="TEAM000001", iat=NOW, key=KEY, typ=True):
    headers = {"kid": kid} if typ else {"kid": kid, "typ": None}
    return jwt.encode({"iss": iss, "iat": iat}, key, algorithm="ES256", headers=headers)


def write(directory, name, data):
    path = HERE / "Corpus" / directory / name
    path.write_bytes(data if isinstance(data, bytes) else data.encode())


def token_seeds():
    # First byte even: an authorization header value as sent.
    write("provider-token", "valid", b"\0bearer " + token().encode())
    write("provider-token", "valid-no-typ", b"\0Bearer " + token(typ=False).encode())
    write("provider-token", "other-team-key", b"\0bearer " + token("KEY0000002", "TEAM000002", key=OTHER_KEY).encode())
    write("provider-token", "expired", b"\0bearer " + token(iat=NOW - 7200).encode())
    write("provider-token", "wrong-iss", b"\0bearer " + token(iss="TEAM000002").encode())
    # First byte odd: header and claims, signed by the harness.
    signed = {
        "signed-valid": ('{"alg":"ES256","kid":"KEY0000001"}', '{"iss":"TEAM000001","iat":1700000000}'),
        "signed-escaped": ('{"alg":"ES256","k\\u0069d":"KEY0000001","typ":"JWT"}', '{"iss":"TEAM000001","iat":1.7e9,"exp":null}'),
        "signed-duplicate": ('{"alg":"ES256","kid":"KEY0000001","kid":"KEY0000002"}', '{"iss":"TEAM000001","iat":1700000000}'),
        "signed-crit": ('{"alg":"ES256","kid":"KEY0000001","crit":["exp"]}', '{"iss":"TEAM000001","iat":1699999999.5}'),
        "signed-nested": ('{"alg":"ES256","kid":"KEY0000001","x":[[{"y":"\\ud83d\\ude00"}],-0.0e+1,true,false,null]}', '{"iss":"TEAM000001","iat":1700000000}'),
    }
    for name, (header, claims) in signed.items():
        write("provider-token", name, b"\1" + header.encode() + b"\n" + claims.encode())


def connection(requests, chunk_size=0):
    """HTTP2ServerFuzzer.swift's layout: a chunk size byte (0: all at once), then the client's
    bytes after the preface: SETTINGS, each request (headers, body split into DATA frames of at
    most 7 bytes so that bodies arrive in pieces), a PING."""
    conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True, header_encoding="utf-8"))
    conn.initiate_connection()
    conn.update_settings({h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: 1 << 20})
    for method, path, headers, body in requests:
        stream = conn.get_next_available_stream_id()
        fields = [(":method", method), (":scheme", "http"), (":authority", "localhost"), (":path", path)] + headers
        conn.send_headers(stream, fields, end_stream=body is None)
        if body is not None:
            data = body.encode()
            for start in range(0, len(data), 7):
                conn.send_data(stream, data[start:start + 7])
            conn.end_stream(stream)
    conn.ping(b"fuzzping")
    data = conn.data_to_send()
    assert data.startswith(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
    return bytes([chunk_size]) + data[24:]


def http2_seeds():
    device = [("authorization", "bearer " + DEVICE_SECRET)]
    provider = [("authorization", "bearer " + token()), ("apns-topic", TOPIC)]
    base = "/v1/devices/" + DEVICE_ID
    write("http2-server", "push", connection([
        ("POST", "/3/device/" + TOKEN, provider + [("apns-push-type", "alert"), ("apns-id", "123e4567-e89b-12d3-a456-4266554400a0")], '{"aps":{"alert":"hi"}}'),
    ]))
    write("http2-server", "stream-and-pushes", connection([
        ("GET", base + "/events", device + [("last-event-id", "0")], None),
        ("POST", "/3/device/" + TOKEN, provider + [("apns-push-type", "alert"), ("apns-collapse-id", "c")], '{"aps":{"alert":"hi"}}'),
        ("POST", "/3/device/" + TOKEN, provider + [("apns-push-type", "background"), ("apns-priority", "5")], '{"aps":{"content-available":1}}'),
        ("POST", base + "/ack", device, '{"upTo":1}'),
    ], chunk_size=5))
    write("http2-server", "device-requests", connection([
        ("POST", base + "/registrations", device, '{"topic":"com.example.other"}'),
        ("PUT", base + "/state", device, '{"power":"lowPower","apps":{"com.example.app":"background"},"fetchIntervals":{"com.example.app":900}}'),
        ("POST", base + "/keepalive", device, None),
        ("POST", base + "/fetch-results", device, '{"results":[{"seq":1,"result":"newData"}]}'),
        ("DELETE", base + "/registrations/" + TOKEN, device, None),
        ("POST", "/v1/devices", [], None),
    ], chunk_size=9))
    write("http2-server", "refusals", connection([
        ("POST", "/3/device/" + TOKEN, [("apns-topic", TOPIC)], '{"aps":{"alert":"hi"}}'),
        ("GET", "/nope?x", [], None),
        ("DELETE", base, device, None),
    ], chunk_size=9))


def event_stream_seeds():
    """EventStreamFuzzer.swift's layout: a count byte, then per notification its fields (see
    readNotification and FuzzReader: strings and payloads length-prefixed, integers 8 bytes
    big-endian, options a flag byte first), a chunk size byte, then arbitrary bytes."""
    def text(value):
        data = value.encode() if isinstance(value, str) else value
        return bytes([len(data)]) + data

    def u64(value):
        return (value % (1 << 64)).to_bytes(8, "big")

    def notification(seq, apns_id, token, topic, push_type, priority, collapse, payload, accepted_at, delivery, carrier, window):
        out = (b"\1" + u64(seq)) if seq is not None else b"\0"
        out += text(apns_id) + text(token) + text(topic) + bytes([push_type, priority])
        out += (b"\1" + text(collapse)) if collapse is not None else b"\0"
        out += text(payload) + u64(accepted_at) + bytes([delivery])
        out += (b"\1" + text(carrier)) if carrier is not None else b"\0"
        out += (b"\1" + u64(window)) if window is not None else b"\0"
        return out

    plain = notification(42, "123e4567-e89b-12d3-a456-4266554400a0", TOKEN, TOPIC, 0, 2, None,
                         '{"aps":{"alert":"hi"}}', 1_700_000_000_123, 0, None, None)
    stream = b"id: 1\nevent: notification\ndata: {\"seq\":1}\n\n: heartbeat\n\nretry: 1000\nevent: shutdown\ndata: {}\n\n"
    write("event-stream", "one", b"\0" + plain + bytes([7]) + stream)
    tricky = [
        notification(None, 'q"b\\s\x01\x1f\x7f', "tok\r\nen", "t\u2028opic \U0001F600", 1, 1, "c\tid",
                     ' \r\n{"aps":\r{"content-available":1},\n"x":"\\u2028\\n"}\t', -1, 4, "carrier\n\"x\"", 30),
        notification((1 << 64) - 1, "", "", "", 10, 0, "", "{}", -(1 << 63), 3, "", -5),
        notification(0, "\u00e9", "a", "b", 5, 1, None, '{"a":[1,-2.5e+3,true,false,null,{"b":"\\ud83d\\ude00"}]}', 0, 6, None, 0),
    ]
    write("event-stream", "tricky", b"\2" + b"".join(tricky) + bytes([1]) + b"data: a\r\ndata: b\rid: 7\r\n\r\nevent: x\ndata\n\n:c\n\xef\xbb\xbfdata: bom\n\n")


if __name__ == "__main__":
    token_seeds()
    http2_seeds()
    event_stream_seeds()
