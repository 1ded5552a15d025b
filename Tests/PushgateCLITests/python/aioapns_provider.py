#!/usr/bin/python3
"""aioapns (a real APNs provider library, from PyPI) against `pushgate serve` over TLS with token
authentication. Only its host, port and trusted CA change: the library itself is used unchanged.

usage: aioapns_provider.py HOST PORT CAFILE KEYFILE KEY_ID TEAM_ID TOPIC TOKEN UNREGISTERED_TOKEN
prints: {"alert": {...}, "background": {...}, "unknown": {...}, "unregistered": {...},
         "hundredth": {...}, "during": {...}}
        each {"status", "description", "timestamp", "id"} as aioapns reports it ("exception" and
        the exception when the call raised). "hundredth" is the 100th refused push in a row, sent
        together with a good one ("during"): the gateway ends the connection after it.
"""

import asyncio
import json
import ssl
import sys

from pgcommon import fail, hard_timeout

try:
    import aioapns
    from aioapns import APNs, NotificationRequest, PushType
    from aioapns import connection as aioapns_connection
except ImportError as error:  # pragma: no cover - a setup problem, reported clearly
    fail(
        f"cannot import aioapns ({error}); .ci/run installs it "
        "(apt-get install python3-pip python3-openssl python3-jwt python3-h2; "
        "python3 -m pip install --break-system-packages --no-deps aioapns==4.0)"
    )


def result(response):
    return {
        "status": str(response.status),
        "description": response.description,
        "timestamp": response.timestamp,
        "id": response.notification_id,
    }


async def run(host, port, cafile, keyfile, key_id, team_id, topic, token, gone):
    # The one change an operator makes: the host and port (aioapns keeps them on its protocol
    # classes) and the CA that signed the gateway's certificate.
    for protocol in (aioapns_connection.APNsProductionClientProtocol, aioapns_connection.APNsDevelopmentClientProtocol):
        protocol.APNS_SERVER = host
        protocol.APNS_PORT = port
    context = ssl.create_default_context(cafile=cafile)
    with open(keyfile) as f:
        key = f.read()
    client = APNs(key=key, key_id=key_id, team_id=team_id, topic=topic, ssl_context=context, max_connection_attempts=1)
    out = {}
    out["alert"] = result(
        await client.send_notification(
            NotificationRequest(device_token=token, message={"aps": {"alert": "hello from aioapns"}}, push_type=PushType.ALERT)
        )
    )
    out["background"] = result(
        await client.send_notification(
            NotificationRequest(
                device_token=token,
                message={"aps": {"content-available": 1}, "sync": True},
                priority=5,
                push_type=PushType.BACKGROUND,
            )
        )
    )
    out["unknown"] = result(
        await client.send_notification(
            NotificationRequest(device_token="ab" * 32, message={"aps": {"alert": "nobody"}}, push_type=PushType.ALERT)
        )
    )
    out["unregistered"] = result(
        await client.send_notification(
            NotificationRequest(device_token=gone, message={"aps": {"alert": "gone"}}, push_type=PushType.ALERT)
        )
    )
    # 100 refused in a row end the connection (as APNs does); the GOAWAY must come after every
    # answer, or h2 (aioapns' HTTP/2) loses those after it and aioapns sends the push again.
    for _ in range(98):
        await client.send_notification(
            NotificationRequest(device_token="ab" * 32, message={"aps": {"alert": "nobody"}}, push_type=PushType.ALERT)
        )

    async def outcome(request):
        try:
            return result(await client.send_notification(request))
        except Exception as error:  # noqa: BLE001 - reported for the test to judge
            return {"status": "exception", "description": repr(error), "timestamp": None, "id": None}

    out["during"], out["hundredth"] = await asyncio.gather(
        outcome(NotificationRequest(device_token=token, message={"aps": {"alert": "while refused"}}, push_type=PushType.ALERT)),
        outcome(NotificationRequest(device_token="ab" * 32, message={"aps": {"alert": "nobody"}}, push_type=PushType.ALERT)),
    )
    client.pool.close()
    return out


def main():
    hard_timeout(60, "aioapns_provider.py")
    if len(sys.argv) != 10:
        fail("usage: aioapns_provider.py HOST PORT CAFILE KEYFILE KEY_ID TEAM_ID TOPIC TOKEN UNREGISTERED_TOKEN")
    host, port, cafile, keyfile, key_id, team_id, topic, token, gone = sys.argv[1:]
    out = asyncio.run(run(host, int(port), cafile, keyfile, key_id, team_id, topic, token, gone))
    out["aioapns"] = getattr(aioapns, "__version__", "unknown")
    print(json.dumps(out))


if __name__ == "__main__":
    main()
