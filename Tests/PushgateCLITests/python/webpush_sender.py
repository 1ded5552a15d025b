#!/usr/bin/python3
"""Web Push application servers nobody here wrote, against `pushgate serve`'s endpoints.

pywebpush 2.5.0 (HTTP/1.1 through requests; py-vapid 1.9.6 signs VAPID, http_ece 1.2.1
encrypts), unchanged; requests for pushes pywebpush would never send (no TTL, a bad Urgency);
httpx over HTTP/2 with http_ece and py-vapid, as an HTTP/2 sender. `.ci/run` installs them.

usage:
  webpush_sender.py vapid-key PEM          writes a new VAPID key; prints {"k": <base64url>}
  webpush_sender.py send SUBSCRIPTION [--data TEXT | --size N] [--ttl N] [--urgency U]
                    [--topic T] [--vapid PEM [--aud ORIGIN] [--exp-hours H]]
  webpush_sender.py raw ENDPOINT [--header "Name: value"]... [--body TEXT]
  webpush_sender.py h2 SUBSCRIPTION --data TEXT [--ttl N] [--vapid PEM]
SUBSCRIPTION is the W3C PushSubscription JSON the agent printed. Each send prints
{"status", "ttl", "location", "disposition", "reason", "retryAfter", "httpVersion"}.
"""

import argparse
import base64
import json
import time

from pgcommon import emit, fail, hard_timeout

try:
    import http_ece
    import httpx
    import requests
    from cryptography.hazmat.primitives.asymmetric import ec
    from py_vapid import Vapid02
    from pywebpush import WebPushException, webpush
except ImportError as error:  # pragma: no cover - a setup problem, reported clearly
    fail(
        f"cannot import the Web Push clients ({error}); .ci/run installs them: "
        "pip install --no-deps pywebpush==2.5.0 py-vapid==1.9.6 http-ece==1.2.1, "
        "apt-get install python3-aiohttp python3-requests python3-cryptography",
        4,
    )


def b64url(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def unb64url(text):
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def answer(response, version=None):
    body = response.text
    reason = None
    if body:
        try:
            reason = json.loads(body).get("reason")
        except ValueError:
            reason = body[:200]
    emit(
        {
            "status": response.status_code,
            "ttl": response.headers.get("ttl"),
            "location": response.headers.get("location"),
            "disposition": response.headers.get("pushgate-disposition"),
            "reason": reason,
            "retryAfter": response.headers.get("retry-after"),
            "httpVersion": version,
        }
    )


def claims(args):
    result = {"sub": "mailto:ops@example.com"}
    if args.aud:
        result["aud"] = args.aud
    if args.exp_hours is not None:
        result["exp"] = int(time.time() + args.exp_hours * 3600)
    return result


def send(args):
    subscription = json.loads(args.subscription)
    data = "x" * args.size if args.size is not None else args.data
    headers = {}
    if args.urgency:
        headers["Urgency"] = args.urgency
    if args.topic:
        headers["Topic"] = args.topic
    vapid = Vapid02.from_file(args.vapid) if args.vapid else None
    try:
        response = webpush(
            subscription,
            data,
            vapid_private_key=vapid,
            vapid_claims=claims(args) if vapid else None,
            ttl=args.ttl,
            headers=headers,
            timeout=15,
        )
    except WebPushException as error:
        if error.response is None:
            fail(f"pywebpush: {error}")
        response = error.response
    answer(response, "HTTP/1.1")


def raw(args):
    headers = {}
    for header in args.header:
        name, _, value = header.partition(":")
        headers[name.strip()] = value.strip()
    answer(requests.post(args.endpoint, data=args.body.encode(), headers=headers, timeout=15), "HTTP/1.1")


def h2(args):
    subscription = json.loads(args.subscription)
    receiver = ec.EllipticCurvePublicKey.from_encoded_point(ec.SECP256R1(), unb64url(subscription["keys"]["p256dh"]))
    body = http_ece.encrypt(
        args.data.encode(),
        private_key=ec.generate_private_key(ec.SECP256R1()),
        dh=receiver,
        auth_secret=unb64url(subscription["keys"]["auth"]),
        version="aes128gcm",
    )
    headers = {"TTL": str(args.ttl), "Content-Encoding": "aes128gcm"}
    if args.vapid:
        endpoint = httpx.URL(subscription["endpoint"])
        origin = f"{endpoint.scheme}://{endpoint.netloc.decode()}"
        headers.update(Vapid02.from_file(args.vapid).sign({"aud": origin, "sub": "mailto:ops@example.com"}))
    with httpx.Client(http1=False, http2=True, timeout=15) as client:
        response = client.post(subscription["endpoint"], content=body, headers=headers)
    answer(response, response.http_version)


def vapid_key(args):
    key = Vapid02()
    key.generate_keys()
    key.save_key(args.path)
    emit({"k": b64url(key.public_key.public_bytes(*_raw_point()))})


def _raw_point():
    from cryptography.hazmat.primitives import serialization

    return serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint


def main():
    hard_timeout(60, "webpush_sender.py")
    parser = argparse.ArgumentParser()
    commands = parser.add_subparsers(dest="command", required=True)
    key = commands.add_parser("vapid-key")
    key.add_argument("path")
    pusher = commands.add_parser("send")
    pusher.add_argument("subscription")
    pusher.add_argument("--data", default=None)
    pusher.add_argument("--size", type=int)
    pusher.add_argument("--ttl", type=int, default=60)
    pusher.add_argument("--urgency")
    pusher.add_argument("--topic")
    pusher.add_argument("--vapid")
    pusher.add_argument("--aud")
    pusher.add_argument("--exp-hours", type=float)
    plain = commands.add_parser("raw")
    plain.add_argument("endpoint")
    plain.add_argument("--header", action="append", default=[])
    plain.add_argument("--body", default="")
    http2 = commands.add_parser("h2")
    http2.add_argument("subscription")
    http2.add_argument("--data", required=True)
    http2.add_argument("--ttl", type=int, default=60)
    http2.add_argument("--vapid")
    args = parser.parse_args()
    {"vapid-key": vapid_key, "send": send, "raw": raw, "h2": h2}[args.command](args)


if __name__ == "__main__":
    main()
