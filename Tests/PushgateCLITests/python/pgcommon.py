"""Shared helpers for the Python clients the PushgateCLITests run against `pushgate serve`.

Everything here uses Debian's python3-httpx and python3-h2 (`.ci/run` installs them); run the
scripts with /usr/bin/python3. Every script:
  - arms a hard timeout (SIGALRM) so it can never hang CI,
  - prints JSON on stdout (one object per line) for the Swift test to parse,
  - exits non-zero with a message on stderr when something went wrong that the test cannot judge.
"""

import json
import os
import signal
import sys
import uuid

try:
    import httpx
except ImportError as error:  # pragma: no cover - a setup problem, reported clearly
    sys.stderr.write(
        f"cannot import httpx ({error}); install Debian's python3-httpx and python3-h2 "
        f"(apt-get install python3-httpx python3-h2) and run with /usr/bin/python3, not {sys.executable}\n"
    )
    sys.exit(4)
try:
    import h2  # noqa: F401  (httpx needs it for http2=True)
except ImportError as error:  # pragma: no cover
    sys.stderr.write(f"cannot import h2 ({error}); apt-get install python3-h2\n")
    sys.exit(4)


def hard_timeout(seconds, what):
    """Kills this process (exit 3) after `seconds`, whatever it is doing."""

    def on_alarm(signum, frame):
        sys.stderr.write(f"{what}: hard timeout after {seconds} s; giving up\n")
        sys.stderr.flush()
        sys.stdout.flush()
        os._exit(3)

    signal.signal(signal.SIGALRM, on_alarm)
    signal.alarm(int(seconds))


def fail(message, code=2):
    sys.stderr.write(message.rstrip() + "\n")
    sys.stderr.flush()
    sys.exit(code)


def emit(obj):
    """One JSON object per line on stdout, flushed at once (the test may be waiting for it)."""
    sys.stdout.write(json.dumps(obj, sort_keys=True) + "\n")
    sys.stdout.flush()


def h2c_client(base_url, timeout=15.0):
    """An httpx client speaking HTTP/2 with prior knowledge (h2c) to an http:// URL."""
    return httpx.Client(base_url=base_url, http1=False, http2=True, timeout=timeout)


def h2c_async_client(base_url, timeout=15.0, max_connections=4):
    return httpx.AsyncClient(
        base_url=base_url,
        http1=False,
        http2=True,
        timeout=timeout,
        limits=httpx.Limits(max_connections=max_connections, max_keepalive_connections=max_connections),
    )


def new_apns_id():
    return str(uuid.uuid4())


def require_h2(response, what):
    if response.http_version != "HTTP/2":
        fail(f"{what}: expected HTTP/2, httpx used {response.http_version}")


def create_device(client, topic):
    """POST /v1/devices, then register `topic`. Returns deviceId, secret, token, topic."""
    created = client.post("/v1/devices")
    require_h2(created, "POST /v1/devices")
    if created.status_code != 201:
        fail(f"POST /v1/devices: expected 201, got {created.status_code}: {created.text}")
    device = created.json()
    for key in ("deviceId", "secret"):
        if not isinstance(device.get(key), str) or not device[key]:
            fail(f"POST /v1/devices: no {key} in {created.text}")
    registered = client.post(
        f"/v1/devices/{device['deviceId']}/registrations",
        json={"topic": topic},
        headers=device_auth(device["secret"]),
    )
    if registered.status_code != 201:
        fail(f"POST registrations: expected 201, got {registered.status_code}: {registered.text}")
    registration = registered.json()
    if registration.get("topic") != topic or not isinstance(registration.get("token"), str):
        fail(f"POST registrations: unexpected body {registered.text}")
    return {
        "deviceId": device["deviceId"],
        "secret": device["secret"],
        "token": registration["token"],
        "topic": topic,
    }


def device_auth(secret):
    return {"authorization": f"bearer {secret}"}


def alert_headers(topic, apns_id=None, **extra):
    headers = {"apns-topic": topic, "apns-push-type": "alert"}
    if apns_id is not None:
        headers["apns-id"] = apns_id
    headers.update(extra)
    return headers


def alert_body(label, padding=0):
    body = {"aps": {"alert": {"title": "pushgate test", "body": label}}, "label": label}
    if padding:
        body["padding"] = "x" * padding
    return body


class SSEReader:
    """Parses `text/event-stream` lines (from httpx's iter_lines) into events.

    Yields dicts {"id", "event", "data"}; comments (": heartbeat") are counted, not yielded.
    """

    def __init__(self, lines):
        self.lines = lines
        self.comments = 0

    def __iter__(self):
        fields = {}
        data = []
        for raw in self.lines:
            line = raw.rstrip("\r\n") if isinstance(raw, str) else raw
            if line == "":
                if data or fields:
                    yield {"id": fields.get("id"), "event": fields.get("event", "message"), "data": "\n".join(data)}
                fields = {}
                data = []
                continue
            if line.startswith(":"):
                self.comments += 1
                continue
            name, sep, value = line.partition(":")
            if sep and value.startswith(" "):
                value = value[1:]
            if name == "data":
                data.append(value)
            elif name in ("id", "event", "retry"):
                fields[name] = value
            # Unknown fields are ignored, as the SSE spec says.


def notification_from(event, where):
    """Checks one SSE event is a Pushgate notification and returns a summary of it."""
    if event["event"] != "notification":
        fail(f"{where}: event type {event['event']!r}, expected 'notification': {event}")
    try:
        data = json.loads(event["data"])
    except ValueError as error:
        fail(f"{where}: data is not JSON ({error}): {event['data'][:200]!r}")
    if not isinstance(data, dict):
        fail(f"{where}: data is not a JSON object: {event['data'][:200]!r}")
    return {
        "sseId": event["id"],
        "seq": data.get("seq"),
        "apnsId": data.get("apnsId"),
        "token": data.get("token"),
        "topic": data.get("topic"),
        "pushType": data.get("pushType"),
        "priority": data.get("priority"),
        "collapseId": data.get("collapseId"),
        "payload": data.get("payload"),
        "acceptedAt": data.get("acceptedAt"),
        "delivery": data.get("delivery"),
        "keys": sorted(data.keys()),
    }
