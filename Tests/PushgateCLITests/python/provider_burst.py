#!/usr/bin/python3
"""A burst of concurrent APNs pushes, each with its own apns-id, over HTTP/2 (httpx, h2c).

usage: provider_burst.py --url URL --token TOKEN --topic TOPIC --count N [--concurrency C]
                         [--payload-bytes B] [--kill-pid PID --kill-after K]
                         [--run-after K --run JSON_ARGV]

With --kill-pid, the script sends SIGKILL to PID as soon as K pushes have been answered 200,
while the rest are still in flight, and keeps collecting what happens to them.

With --run, the script starts the command JSON_ARGV (a JSON array) as soon as K pushes have been
answered 200, while the rest are still in flight, and waits for it at the end.

prints one JSON object:
  ok:        apns-ids answered 200 (each must survive a crash: the 200 means "on disk")
  rejected:  [{apnsId, status, reason, retryAfter, apnsIdEcho}] answered with an error status (must never be delivered)
  unknown:   [{apnsId, error}] no answer (connection died): may or may not have been stored
  dispositions: {pushgate-disposition: count} over the 200s
  badEcho:   200s whose apns-id header did not echo the request's
  httpVersions, killedAfter (number of 200s seen when the kill was sent, or null)
  run:       with --run: {okBefore: apns-ids answered 200 before the command started,
             okWhenDone: number of 200s when it exited, status, stdout, stderr}
"""

import argparse
import asyncio
import json
import os
import signal
from collections import Counter

import httpx

from pgcommon import alert_body, alert_headers, emit, fail, h2c_async_client, hard_timeout, new_apns_id


async def burst(args):
    ids = [new_apns_id() for _ in range(args.count)]
    ok, rejected, unknown, bad_echo = [], [], [], []
    dispositions = Counter()
    versions = Counter()
    state = {"killed_after": None, "run": None}
    gate = asyncio.Semaphore(args.concurrency)

    def maybe_kill():
        if args.kill_pid and state["killed_after"] is None and len(ok) >= args.kill_after:
            state["killed_after"] = len(ok)
            os.kill(args.kill_pid, signal.SIGKILL)

    async def run_command(command):
        process = await asyncio.create_subprocess_exec(*command, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        stdout, stderr = await process.communicate()
        return {"okWhenDone": len(ok), "status": process.returncode, "stdout": stdout.decode(), "stderr": stderr.decode()}

    def maybe_run():
        if args.run and state["run"] is None and len(ok) >= args.run_after:
            # Taken before the command starts: every one of these 200s came before it.
            state["ok_before_run"] = list(ok)
            state["run"] = asyncio.create_task(run_command(json.loads(args.run)))

    async with h2c_async_client(args.url, timeout=20.0, max_connections=1) as client:
        # Open the connection first, so the burst multiplexes on one established HTTP/2 connection.
        warm = await client.get("/healthz")
        if warm.http_version != "HTTP/2" or warm.status_code != 200:
            fail(f"GET /healthz: expected HTTP/2 200, got {warm.http_version} {warm.status_code}")

        async def one(index, apns_id):
            async with gate:
                try:
                    response = await client.post(
                        f"/3/device/{args.token}",
                        headers=alert_headers(args.topic, apns_id),
                        json=alert_body(f"burst {index}", padding=args.payload_bytes),
                    )
                except httpx.HTTPError as error:
                    unknown.append({"apnsId": apns_id, "error": f"{type(error).__name__}: {error}"})
                    return
            versions[response.http_version] += 1
            if response.status_code == 200:
                ok.append(apns_id)
                dispositions[response.headers.get("pushgate-disposition", "<missing>")] += 1
                if response.headers.get("apns-id") != apns_id:
                    bad_echo.append({"sent": apns_id, "got": response.headers.get("apns-id")})
                maybe_kill()
                maybe_run()
            else:
                try:
                    reason = response.json().get("reason")
                except ValueError:
                    reason = response.text[:200]
                rejected.append(
                    {
                        "apnsId": apns_id,
                        "status": response.status_code,
                        "reason": reason,
                        "retryAfter": response.headers.get("retry-after"),
                        "apnsIdEcho": response.headers.get("apns-id"),
                    }
                )

        await asyncio.gather(*(one(i, apns_id) for i, apns_id in enumerate(ids)))

    if args.kill_pid and state["killed_after"] is None:
        # Fewer 200s than --kill-after: kill anyway so the test always gets a crash.
        state["killed_after"] = len(ok)
        os.kill(args.kill_pid, signal.SIGKILL)

    run = None
    if state["run"] is not None:
        run = await state["run"]
        run["okBefore"] = state["ok_before_run"]
    elif args.run:
        fail(f"--run: only {len(ok)} pushes were answered 200, fewer than --run-after {args.run_after}")

    emit(
        {
            "token": args.token,
            "topic": args.topic,
            "sent": ids,
            "ok": ok,
            "rejected": rejected,
            "unknown": unknown,
            "dispositions": dict(dispositions),
            "badEcho": bad_echo,
            "httpVersions": dict(versions),
            "killedAfter": state["killed_after"],
            "run": run,
        }
    )


def main():
    hard_timeout(90, "provider_burst.py")
    parser = argparse.ArgumentParser()
    parser.add_argument("--url", required=True)
    parser.add_argument("--token", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--count", type=int, required=True)
    parser.add_argument("--concurrency", type=int, default=100)
    parser.add_argument("--payload-bytes", type=int, default=0)
    parser.add_argument("--kill-pid", type=int, default=0)
    parser.add_argument("--kill-after", type=int, default=0)
    parser.add_argument("--run-after", type=int, default=0)
    parser.add_argument("--run", default="")
    args = parser.parse_args()
    asyncio.run(burst(args))


if __name__ == "__main__":
    main()
