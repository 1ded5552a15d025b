#!/usr/bin/python3
"""The first half of a drain, seen from outside: SIGTERM, then /readyz and pushes during the grace.

usage: drain_probe.py --url URL --pid PID --token T --topic TOPIC [--pushes N]

Opens a provider connection (h2c, httpx) and checks that /readyz answers 200; sends SIGTERM to
PID; polls /readyz (at most 50 times, 20 ms apart) until it answers 503; then pushes N alerts on
the connection opened before the signal and one on a new connection. The gateway must still
answer them 200: it serves everything during its grace period.

prints {readyBefore, readyzPolls, readyzStatus, readyzAfterMs, pushes: [{apnsId, status,
newConnection}], pushedAfterMs}
"""

import argparse
import os
import signal
import time

from pgcommon import alert_body, alert_headers, emit, fail, h2c_client, hard_timeout, new_apns_id


def main():
    hard_timeout(30, "drain_probe.py")
    parser = argparse.ArgumentParser()
    parser.add_argument("--url", required=True)
    parser.add_argument("--pid", type=int, required=True)
    parser.add_argument("--token", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--pushes", type=int, default=3)
    args = parser.parse_args()

    result = {"pushes": []}
    with h2c_client(args.url) as provider, h2c_client(args.url) as operator:
        result["readyBefore"] = operator.get("/readyz").status_code
        if result["readyBefore"] != 200:
            fail(f"/readyz before SIGTERM: {result['readyBefore']}")
        # The provider connection is open before the signal: it must be served through the grace.
        warm = provider.get("/healthz")
        if warm.status_code != 200:
            fail(f"/healthz: {warm.status_code}")

        os.kill(args.pid, signal.SIGTERM)
        signalled = time.monotonic()
        polls = 0
        status = None
        while polls < 50:
            polls += 1
            status = operator.get("/readyz").status_code
            if status == 503:
                break
            time.sleep(0.02)
        result["readyzPolls"] = polls
        result["readyzStatus"] = status
        result["readyzAfterMs"] = int((time.monotonic() - signalled) * 1000)

        for index in range(args.pushes):
            apns_id = new_apns_id()
            response = provider.post(
                f"/3/device/{args.token}", headers=alert_headers(args.topic, apns_id), json=alert_body(f"grace {index}")
            )
            result["pushes"].append({"apnsId": apns_id, "status": response.status_code, "newConnection": False})
        with h2c_client(args.url) as fresh:
            apns_id = new_apns_id()
            response = fresh.post(f"/3/device/{args.token}", headers=alert_headers(args.topic, apns_id), json=alert_body("grace new"))
            result["pushes"].append({"apnsId": apns_id, "status": response.status_code, "newConnection": True})
        result["pushedAfterMs"] = int((time.monotonic() - signalled) * 1000)
    emit(result)


if __name__ == "__main__":
    main()
