#!/usr/bin/python3
"""httpx (HTTP/2, h2c prior knowledge) as an APNs provider: one request per case, answers recorded.

usage: provider_checks.py URL

Creates its own device (registers com.example.pychecks and com.example.pygone, then unregisters
the second), sends the cases below on one HTTP/2 connection, then a concurrent batch, and
prints one JSON object:
  device: {deviceId, secret, token, topic}
  cases: {name: {status, httpVersion, apnsId (header), disposition (header), contentType,
                 body (text), json (parsed body or null), sentApnsId}}
  unregisteredWindow: [ms before DELETE, ms after DELETE]
  concurrent: {count, statuses: {status: n}, dispositions: {...}, echoed: n (apns-id echoed)}
The Swift test judges the answers; this script only fails on transport or setup problems.
"""

import asyncio
import json
import sys
import time
import uuid
from collections import Counter

from pgcommon import (
    alert_body,
    alert_headers,
    create_device,
    device_auth,
    emit,
    fail,
    h2c_async_client,
    h2c_client,
    hard_timeout,
    new_apns_id,
)

TOPIC = "com.example.pychecks"
GONE_TOPIC = "com.example.pygone"


def record(response, sent_apns_id=None):
    try:
        parsed = response.json() if response.content else None
    except ValueError:
        parsed = None
    return {
        "status": response.status_code,
        "httpVersion": response.http_version,
        "apnsId": response.headers.get("apns-id"),
        "disposition": response.headers.get("pushgate-disposition"),
        "contentType": response.headers.get("content-type"),
        "body": response.text,
        "json": parsed,
        "sentApnsId": sent_apns_id,
    }


async def concurrent_batch(url, token, count):
    statuses, dispositions = Counter(), Counter()
    echoed = 0
    async with h2c_async_client(url, max_connections=1) as client:
        ids = [new_apns_id() for _ in range(count)]
        responses = await asyncio.gather(
            *(
                client.post(f"/3/device/{token}", headers=alert_headers(TOPIC, i), json=alert_body(f"concurrent {n}"))
                for n, i in enumerate(ids)
            )
        )
        for sent, response in zip(ids, responses):
            statuses[str(response.status_code)] += 1
            dispositions[response.headers.get("pushgate-disposition", "<missing>")] += 1
            echoed += response.headers.get("apns-id") == sent
    return {"count": count, "statuses": dict(statuses), "dispositions": dict(dispositions), "echoed": echoed}


def main():
    hard_timeout(60, "provider_checks.py")
    if len(sys.argv) != 2:
        fail("usage: provider_checks.py URL")
    url = sys.argv[1]
    cases = {}
    with h2c_client(url) as client:
        device = create_device(client, TOPIC)
        gone = create_device_registration(client, device, GONE_TOPIC)
        token = device["token"]
        path = f"/3/device/{token}"

        def push(name, target=path, headers=None, body=None, content=None):
            sent = (headers or {}).get("apns-id")
            if content is not None:
                response = client.post(target, headers=headers or {}, content=content)
            else:
                response = client.post(target, headers=headers or {}, json=body if body is not None else alert_body(name))
            cases[name] = record(response, sent)

        upper = str(uuid.uuid4()).upper()
        push("accepted", headers=alert_headers(TOPIC, upper))
        push("generatedId", headers=alert_headers(TOPIC))
        push("collapse", headers=alert_headers(TOPIC, new_apns_id(), **{"apns-collapse-id": "score", "apns-priority": "5"}))
        push("expireNowOffline", headers=alert_headers(TOPIC, new_apns_id(), **{"apns-expiration": "0"}))
        push("malformedToken", target="/3/device/not-a-token", headers=alert_headers(TOPIC, new_apns_id()))
        push("unknownToken", target="/3/device/" + "ab" * 32, headers=alert_headers(TOPIC, new_apns_id()))
        push("wrongTopic", headers=alert_headers("com.example.other", new_apns_id()))
        push("missingTopic", headers={"apns-id": new_apns_id(), "apns-push-type": "alert"})
        push(
            "backgroundPriority10",
            headers=alert_headers(TOPIC, new_apns_id(), **{"apns-push-type": "background", "apns-priority": "10"}),
            body={"aps": {"content-available": 1}},
        )
        push("notJSON", headers=alert_headers(TOPIC, new_apns_id()), content=b"{not json")
        push("tooLarge", headers=alert_headers(TOPIC, new_apns_id()), body=alert_body("big", padding=5000))
        push("badApnsId", headers=alert_headers(TOPIC, "not-a-uuid"))

        before = int(time.time() * 1000)
        deleted = client.delete(
            f"/v1/devices/{device['deviceId']}/registrations/{gone}", headers=device_auth(device["secret"])
        )
        after = int(time.time() * 1000)
        if deleted.status_code != 204:
            fail(f"DELETE registration: expected 204, got {deleted.status_code}: {deleted.text}")
        push("unregistered", target=f"/3/device/{gone}", headers=alert_headers(GONE_TOPIC, new_apns_id()))

    concurrent = asyncio.run(concurrent_batch(url, token, 50))
    emit({"device": device, "cases": cases, "unregisteredWindow": [before, after], "concurrent": concurrent})


def create_device_registration(client, device, topic):
    registered = client.post(
        f"/v1/devices/{device['deviceId']}/registrations", json={"topic": topic}, headers=device_auth(device["secret"])
    )
    if registered.status_code != 201:
        fail(f"POST registrations {topic}: expected 201, got {registered.status_code}: {registered.text}")
    return registered.json()["token"]


if __name__ == "__main__":
    main()
