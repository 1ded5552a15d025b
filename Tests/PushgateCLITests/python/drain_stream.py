#!/usr/bin/python3
"""Reads a device's whole backlog from its event stream, as an agent would, with httpx over h2c.

usage: drain_stream.py --url URL --device-id ID --secret S --token T --topic TOPIC
                       [--last-event-id N] [--ack-every K] [--ack-final]

Opens `GET /v1/devices/ID/events`, then (on a second connection, as a provider) pushes a marker
notification. Sequence numbers are assigned at acceptance, so every notification stored before
the marker has a lower seq and arrives before it: reading until the marker yields the complete
backlog without waiting on a clock. While reading it acks every K events (cumulatively, on the
same connection), as an agent must to keep the unacked window open; with --ack-final it acks
up to the marker at the end.

prints one JSON object: {status, contentType, httpVersion, marker, markerStatus,
markerDisposition, events: [notification summaries in arrival order], acks: [[upTo, status]],
finalAck: status or null, comments}
"""

import argparse

import httpx

from pgcommon import (
    SSEReader,
    alert_body,
    alert_headers,
    device_auth,
    emit,
    fail,
    h2c_client,
    hard_timeout,
    new_apns_id,
    notification_from,
)


def main():
    hard_timeout(60, "drain_stream.py")
    parser = argparse.ArgumentParser()
    parser.add_argument("--url", required=True)
    parser.add_argument("--device-id", required=True)
    parser.add_argument("--secret", required=True)
    parser.add_argument("--token", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--last-event-id")
    parser.add_argument("--ack-every", type=int, default=0)
    parser.add_argument("--ack-final", action="store_true")
    args = parser.parse_args()

    headers = device_auth(args.secret)
    if args.last_event_id is not None:
        headers["last-event-id"] = args.last_event_id
    marker = new_apns_id()
    result = {"marker": marker, "events": [], "acks": [], "finalAck": None}
    events_path = f"/v1/devices/{args.device_id}/events"
    ack_path = f"/v1/devices/{args.device_id}/ack"
    timeout = httpx.Timeout(15.0, read=30.0)

    with h2c_client(args.url, timeout=timeout) as device, h2c_client(args.url) as provider:
        with device.stream("GET", events_path, headers=headers) as stream:
            result["status"] = stream.status_code
            result["contentType"] = stream.headers.get("content-type")
            result["httpVersion"] = stream.http_version
            if stream.status_code != 200:
                stream.read()
                fail(f"GET {events_path}: expected 200, got {stream.status_code}: {stream.text}")

            pushed = provider.post(
                f"/3/device/{args.token}",
                headers=alert_headers(args.topic, marker),
                json=alert_body("marker"),
            )
            result["markerStatus"] = pushed.status_code
            result["markerDisposition"] = pushed.headers.get("pushgate-disposition")
            if pushed.status_code != 200:
                fail(f"marker push: expected 200, got {pushed.status_code}: {pushed.text}")

            reader = SSEReader(stream.iter_lines())
            unacked = 0
            for event in reader:
                notification = notification_from(event, events_path)
                payload = notification["payload"]
                if isinstance(payload, dict) and isinstance(payload.get("padding"), str):
                    payload["padding"] = len(payload["padding"])  # keep the output small
                result["events"].append(notification)
                unacked += 1
                if notification["apnsId"] == marker:
                    break
                if args.ack_every and unacked >= args.ack_every:
                    ack = device.post(ack_path, json={"upTo": notification["seq"]}, headers=device_auth(args.secret))
                    result["acks"].append([notification["seq"], ack.status_code])
                    unacked = 0
            else:
                fail(f"the event stream ended before the marker {marker} arrived ({len(result['events'])} events)")
            result["comments"] = reader.comments

            if args.ack_final:
                last = result["events"][-1]["seq"]
                ack = device.post(ack_path, json={"upTo": last}, headers=device_auth(args.secret))
                result["finalAck"] = ack.status_code
    emit(result)


if __name__ == "__main__":
    main()
