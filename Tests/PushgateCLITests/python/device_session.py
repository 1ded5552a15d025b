#!/usr/bin/python3
"""httpx (HTTP/2, h2c prior knowledge) as a device agent, driven step by step by the Swift test.

usage: device_session.py --url URL --topic TOPIC --pushes ID,ID,... --ack-through ID
                         --marker1 ID --marker2 ID

Prints one JSON line per step (the test waits for them and sends pushes with curl meanwhile):
  {"step": "registered", deviceId, secret, token, topic}
  {"step": "open", stream: 1, status, contentType, httpVersion}     -> test pushes --pushes
  {"step": "event", stream: 1, ...notification}                    (one per event)
  {"step": "acked", upTo, status}         cumulative ack through the --ack-through push, via httpx
  {"step": "open", stream: 2, ...}        reconnected without last-event-id -> test pushes marker1
  {"step": "event", stream: 2, ...}       until marker1
  {"step": "open", stream: 3, lastEventId, ...}  reconnected with last-event-id: seq of the last
                                           of --pushes -> test pushes marker2
  {"step": "event", stream: 3, ...}       until marker2
  {"step": "done", comments}
Every stream is one HTTP/2 stream on the same connection as the acks. Stream 1 is read until all
--pushes have arrived. The script fails (non-zero) only on transport problems or an unexpected
status; the test judges the events.
"""

import argparse

import httpx

from pgcommon import (
    SSEReader,
    create_device,
    device_auth,
    emit,
    fail,
    h2c_client,
    hard_timeout,
    notification_from,
)


def main():
    hard_timeout(60, "device_session.py")
    parser = argparse.ArgumentParser()
    parser.add_argument("--url", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--pushes", required=True)
    parser.add_argument("--ack-through", required=True)
    parser.add_argument("--marker1", required=True)
    parser.add_argument("--marker2", required=True)
    args = parser.parse_args()
    pushes = args.pushes.split(",")
    comments = 0

    with h2c_client(args.url, timeout=httpx.Timeout(15.0, read=30.0)) as client:
        device = create_device(client, args.topic)
        emit({"step": "registered", **device})
        auth = device_auth(device["secret"])
        events_path = f"/v1/devices/{device['deviceId']}/events"

        def read_stream(number, until, extra_headers=None):
            """Opens the event stream, reads until every apns-id in `until` has arrived, closes it."""
            nonlocal comments
            seen = {}
            headers = dict(auth, **(extra_headers or {}))
            with client.stream("GET", events_path, headers=headers) as stream:
                opened = {
                    "step": "open",
                    "stream": number,
                    "status": stream.status_code,
                    "contentType": stream.headers.get("content-type"),
                    "httpVersion": stream.http_version,
                    "lastEventId": headers.get("last-event-id"),
                }
                if stream.status_code != 200:
                    stream.read()
                    fail(f"GET {events_path} (stream {number}): expected 200, got {stream.status_code}: {stream.text}")
                emit(opened)
                reader = SSEReader(stream.iter_lines())
                for event in reader:
                    notification = notification_from(event, f"{events_path} (stream {number})")
                    emit({"step": "event", "stream": number, **notification})
                    seen[notification["apnsId"]] = notification
                    if all(apns_id in seen for apns_id in until):
                        break
                else:
                    fail(f"stream {number} ended before {sorted(set(until) - set(seen))} arrived")
                comments += reader.comments
            # Leaving the block closes the response: httpx resets the HTTP/2 stream (RST_STREAM);
            # the connection stays open for what follows.
            return seen

        first = read_stream(1, pushes)

        through = first[args.ack_through]["seq"]
        ack = client.post(f"/v1/devices/{device['deviceId']}/ack", json={"upTo": through}, headers=auth)
        emit({"step": "acked", "upTo": through, "status": ack.status_code, "httpVersion": ack.http_version})
        if ack.status_code != 204:
            fail(f"POST ack: expected 204, got {ack.status_code}: {ack.text}")

        read_stream(2, [args.marker1])

        last_push_seq = first[pushes[-1]]["seq"]
        read_stream(3, [args.marker2], {"last-event-id": str(last_push_seq)})

    emit({"step": "done", "comments": comments})


if __name__ == "__main__":
    main()
