#!/usr/bin/python3
"""Crash-loop soak (issue 24, item 4): `pushgate serve` is SIGKILLed at a random moment of mixed
load, restarted on the same data directory, again and again; then everything it answered is
checked against the product's rules (history.py says which).

usage: crash_loop.py --pushgate PATH [--cycles 20] [--seed N] [--devices 6] [--max-load-seconds 3]
                     [--user nobody] [--work-dir DIR] [--keep] [--serve-arg ARG ...]

Load, all at once: two provider connections (httpx, HTTP/2, ES256 provider tokens from PyJWT)
pushing alerts at priorities 10, 5 and 1 and silent pushes, some with apns-collapse-id, some
with apns-expiration (in a few seconds, 0, or past); per device (h2client.py) an event stream
that is read for a while, acked or not, ended and resumed with or without Last-Event-ID, and
beside it keep-alives, power and app state reports (lowPower, terminated...), and now and then an
app unregistered and registered again. Each cycle the kill comes at a moment drawn uniformly from
the first --max-load-seconds of load, whatever is in flight then.

After each kill: the store's copy passes PRAGMA integrity_check; the gateway starts again and,
before any device connects, its admin view of every device is read (what the store kept, the
silent budgets). After the last cycle every device connects awake and reads until a marker push
sent after it connected; then SIGTERM (exit 0 expected) and PRAGMA integrity_check on the store.

The seed decides every random choice (kill moments, and each load task's sequence of actions);
how they interleave with the gateway's timing is not reproducible. It is printed first, on
stderr. Prints one JSON object (the summary) as the last line of stdout; exits 1 when a rule
was broken, 2 when the soak itself could not run.
"""

import argparse
import asyncio
import dataclasses
import json
import os
import pwd
import random
import shutil
import signal
import sqlite3
import sys
import tempfile
import time
import uuid

try:
    import httpx
    import jwt
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec
except ImportError as error:
    sys.stderr.write(f"crash_loop.py needs httpx, h2, PyJWT and cryptography ({error}): apt-get install python3-httpx python3-h2 python3-jwt python3-cryptography; run with /usr/bin/python3\n")
    sys.exit(2)

from h2client import Connection, ConnectionLost, SSEParser, StreamReset
from history import (
    Ack,
    Channel,
    Checker,
    History,
    Policy,
    Push,
    Reading,
    Receipt,
    Registration,
    StateReport,
    Unregistration,
)

TEAM_ID = "SOAKTEAM01"
KEY_ID = "SOAKKEY001"
NEWS = "com.example.soak.news"
PRECISE = "com.example.soak.precise"
CHAT = "com.example.soak.chat"
TOPICS = (NEWS, PRECISE, CHAT)
REQUEST_TIMEOUT = 15.0

# News: the global policy, refilling fast enough for budget releases within a cycle. Precise:
# a bucket that refills one token an hour, so a restart's level is known to a token.
# maxHeldPerApp is high so that no held push is dropped for the cap (not modelled here).
POLICY = Policy(
    app_burst={NEWS: 3, CHAT: 3, PRECISE: 4},
    app_refill_per_hour={NEWS: 1800, CHAT: 1800, PRECISE: 1},
    device_burst=6,
    device_refill_per_hour=3600,
    max_held_per_app=1000,
)
SCHEDULER = {
    "appBurst": 3,
    "appRefillPerHour": 1800,
    "deviceBurst": 6,
    "deviceRefillPerHour": 3600,
    "maxHeldPerApp": 1000,
    "maxDeferralSeconds": 5,
    "topics": {PRECISE: {"appBurst": 4, "appRefillPerHour": 1}},
}

# Per topic: (kind, weight).
KINDS = {
    NEWS: (("alert10", 3), ("alert5", 2), ("alert1", 1), ("silent", 5)),
    PRECISE: (("silent", 8), ("alert10", 2)),
    CHAT: (("alert10", 5), ("alert5", 3), ("alert1", 2)),
}


def now_ms():
    return time.time_ns() // 1_000_000


def pick(rng, weighted):
    items, weights = zip(*weighted)
    return rng.choices(items, weights=weights)[0]


class Soak:
    def __init__(self, args):
        self.args = args
        self.seed = args.seed
        self.history = History()
        self.devices = []
        self.alive = False
        self.cycle = 0
        self.channel_ids = 0
        self.gateway = None
        self.port = None
        self.log_lines = []
        self.integrity_checks = 0
        self.warm = []

    def rng(self, *path):
        """The random source of one task: the seed and the task's name, so that each task's
        choices replay whatever the interleaving."""
        return random.Random(f"{self.seed}/" + "/".join(str(p) for p in path))

    def note_error(self, what, error):
        """A request that got no answer. After the kill that is expected; before it, a fault."""
        if self.alive:
            self.history.violation("transport", f"cycle {self.cycle}: {what}: {type(error).__name__}: {error}")

    def new_channel(self, kind, device, last_event_id=None):
        self.channel_ids += 1
        channel = Channel(self.channel_ids, kind, device.id, self.cycle, now_ms(), last_event_id=last_event_id)
        self.history.channels[channel.id] = channel
        return channel

    # MARK: The gateway process

    def prepare(self):
        args = self.args
        self.work = args.work_dir or tempfile.mkdtemp(prefix="pushgate-soak-")
        os.makedirs(self.work, exist_ok=True)
        os.chmod(self.work, 0o755)
        self.data = os.path.join(self.work, "data")
        os.makedirs(self.data, exist_ok=True)
        key = ec.generate_private_key(ec.SECP256R1())
        self.signing_key = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
        key_file = os.path.join(self.work, f"AuthKey_{KEY_ID}.p8")
        with open(key_file, "wb") as handle:
            handle.write(self.signing_key)
        os.chmod(key_file, 0o600)
        self.config = os.path.join(self.work, "pushgate.json")
        with open(self.config, "w") as handle:
            json.dump({
                "providerKeys": [{"teamId": TEAM_ID, "keyId": KEY_ID, "privateKeyFile": key_file, "topics": list(TOPICS)}],
                "scheduler": SCHEDULER,
            }, handle, indent=1)
        os.chmod(self.config, 0o644)
        self.prefix = [args.pushgate]
        if args.user:
            entry = pwd.getpwnam(args.user)
            for path in (self.data, key_file):
                os.chown(path, entry.pw_uid, entry.pw_gid)
            self.prefix = ["setpriv", f"--reuid={entry.pw_uid}", f"--regid={entry.pw_gid}", "--clear-groups", args.pushgate]
        self.provider_token = jwt.encode({"iss": TEAM_ID, "iat": int(time.time())}, self.signing_key, algorithm="ES256", headers={"kid": KEY_ID})

    def log_path(self):
        return os.path.join(self.work, f"gateway-{self.incarnation:02d}.log")

    def log_end(self):
        """The last lines of the running (or last) gateway's log: a trap's message, if any."""
        with open(self.log_path(), errors="replace") as handle:
            return f"the end of {self.log_path()}: {handle.read()[-2000:]!r}"

    async def start_gateway(self, incarnation):
        self.incarnation = incarnation
        log = open(self.log_path(), "wb")
        self.gateway = await asyncio.create_subprocess_exec(
            *self.prefix, "serve", "--listen", "127.0.0.1:0", "--data-dir", self.data, "--config", self.config,
            "--log-level", "warning", "--drain-grace-seconds", "0", *self.args.serve_arg,
            stdout=asyncio.subprocess.PIPE, stderr=log,
            # A trap ends the process at once: Swift's backtracer can hang here (as the
            # unprivileged user), leaving a stopped gateway that holds its connections until the
            # soak's hard timeout, and no summary. A failed precondition still writes its
            # "Fatal error" line to the log; an overflow check leaves only the status (SIGILL, -4).
            env=dict(os.environ, SWIFT_BACKTRACE="enable=no"),
        )
        log.close()
        line = await asyncio.wait_for(self.gateway.stdout.readline(), 60)
        text = line.decode().strip()
        if not text.startswith("listening http://127.0.0.1:"):
            raise SoakBroken(f"pushgate serve (incarnation {incarnation}) did not start: {text!r}; see {log.name}")
        self.port = int(text.rsplit(":", 1)[1])
        self.base = f"http://127.0.0.1:{self.port}"
        self.stdout_task = asyncio.create_task(self.gateway.stdout.read())

    async def kill_gateway(self):
        self.history.kills.append((self.cycle, now_ms()))
        self.alive = False
        for event in self.warm:
            event.set()
        try:
            os.kill(self.gateway.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass  # it ended on its own and was reaped: its status says how
        status = await self.gateway.wait()
        if status != -signal.SIGKILL:
            self.history.violation("gateway", f"cycle {self.cycle}: pushgate serve ended with {status} before its kill; {self.log_end()}")

    def check_store(self, when):
        """PRAGMA integrity_check on a copy of the store (database and WAL): opening the real
        one would recover its WAL and checkpoint it, doing the restart's work for it."""
        copy = tempfile.mkdtemp(prefix="store-", dir=self.work)
        try:
            for suffix in ("", "-wal"):
                source = os.path.join(self.data, "pushgate.sqlite" + suffix)
                if os.path.exists(source):
                    shutil.copyfile(source, os.path.join(copy, "pushgate.sqlite" + suffix))
            self.integrity(os.path.join(copy, "pushgate.sqlite"), when)
        finally:
            shutil.rmtree(copy, ignore_errors=True)

    def integrity(self, path, when):
        connection = sqlite3.connect(path)
        try:
            result = [row[0] for row in connection.execute("PRAGMA integrity_check")]
        finally:
            connection.close()
        self.integrity_checks += 1
        if result != ["ok"]:
            self.history.violation("integrity", f"{when}: PRAGMA integrity_check: {result[:10]}")

    # MARK: Devices

    async def setup_devices(self):
        connection = Connection("127.0.0.1", self.port)
        await connection.open()
        try:
            for index in range(self.args.devices):
                status, _, body = await connection.call("POST", "/v1/devices", body=b"")
                if status != 201:
                    raise SoakBroken(f"POST /v1/devices: {status} {body[:200]!r}")
                created = json.loads(body)
                device = Device(created["deviceId"], created["secret"], index)
                for topic in TOPICS:
                    registration = Registration(device.id, topic, 0, now_ms())
                    status, _, body = await connection.call(
                        "POST", f"/v1/devices/{device.id}/registrations", device.auth(), json.dumps({"topic": topic}).encode())
                    registration.status, registration.answered = status, now_ms()
                    if status != 201:
                        raise SoakBroken(f"POST registrations: {status} {body[:200]!r}")
                    registration.token = json.loads(body)["token"]
                    self.history.registrations.append(registration)
                    device.tokens[topic] = registration.token
                    device.apps[topic] = "foreground"
                self.devices.append(device)
        finally:
            await connection.close()

    async def device_call(self, connection, device, method, path, body=None, extra=()):
        """(status, body) of one device request; Down when it got no answer."""
        data = None if body is None else json.dumps(body).encode()
        headers = device.auth() + list(extra) + ([("content-type", "application/json")] if data is not None else [])
        try:
            status, _, content = await connection.call(method, path, headers, data, timeout=REQUEST_TIMEOUT)
            return status, content
        except (ConnectionLost, StreamReset, asyncio.TimeoutError, OSError) as error:
            self.note_error(f"device {device.index} {method} {path.rsplit('/', 1)[-1]}", error)
            raise Down() from error

    def unexpected(self, device, what, status, content):
        if self.alive:
            self.history.violation("device_answer", f"cycle {self.cycle}: device {device.index} {what}: {status} {content[:200]!r}")
        raise Down()

    async def report_state(self, connection, device, power=None, apps=None):
        body = {}
        if power is not None:
            body["power"] = power
        if apps:
            body["apps"] = apps
        report = StateReport(device.id, self.cycle, now_ms(), power, dict(apps or {}))
        self.history.states.append(report)
        status, content = await self.device_call(connection, device, "PUT", f"/v1/devices/{device.id}/state", body)
        report.status, report.answered = status, now_ms()
        if status != 200:
            self.unexpected(device, "PUT state", status, content)
            return
        # The answer is what is in force: each reported app's state, or terminated kept over a
        # reported background.
        try:
            applied = json.loads(content)
            wrong = [
                topic for topic, state in (apps or {}).items()
                if applied["apps"][topic]["state"] not in (state, "terminated" if state == "background" else state)
            ]
        except (ValueError, KeyError, TypeError):
            wrong = ["(not the state answer)"]
        if wrong or (power is not None and applied.get("power") != power):
            self.unexpected(device, f"PUT state answered for {wrong or 'power'}", status, content)

    async def unregister(self, connection, device, token, topic):
        unregistration = Unregistration(device.id, token, topic, self.cycle, now_ms())
        self.history.unregistrations.append(unregistration)
        if (token, topic) not in device.pending_unregister:
            device.pending_unregister.append((token, topic))
        status, content = await self.device_call(connection, device, "DELETE", f"/v1/devices/{device.id}/registrations/{token}")
        unregistration.status, unregistration.answered = status, now_ms()
        # 404 only for a repeat of one whose answer was lost: it was done then.
        retried = sum(1 for u in self.history.unregistrations if u.token == token) > 1
        if status == 204 or (status == 404 and retried):
            device.pending_unregister.remove((token, topic))
        else:
            self.unexpected(device, "DELETE registration", status, content)

    async def register(self, connection, device, topic):
        registration = Registration(device.id, topic, self.cycle, now_ms())
        self.history.registrations.append(registration)
        device.pending_register.add(topic)
        status, content = await self.device_call(connection, device, "POST", f"/v1/devices/{device.id}/registrations", {"topic": topic})
        registration.status, registration.answered = status, now_ms()
        if status != 201:
            self.unexpected(device, "POST registrations", status, content)
        token = json.loads(content)["token"]
        registration.token = token
        if token in device.old_tokens:
            self.history.violation("device_answer", f"cycle {self.cycle}: device {device.index} registered {topic} again and got back the unregistered token {token[:12]}…")
        device.pending_register.discard(topic)
        device.tokens[topic] = token
        device.apps[topic] = "foreground"

    async def device_session(self, device, final=False):
        """One device's connection for the current cycle: its state first (as an agent does on
        every connect; it also proves the device, lifting the gateway's one-stream limit), what
        the last kill left unanswered, then the stream and the side actions until the kill."""
        connection = Connection("127.0.0.1", self.port)
        try:
            try:
                await connection.open()
            except (OSError, asyncio.TimeoutError, ConnectionLost) as error:
                self.note_error(f"device {device.index} connect", error)
                return
            registered = {t: s for t, s in device.apps.items() if device.tokens.get(t)}
            if final:
                registered = {t: "foreground" for t in registered}
                device.power = "awake"
            await self.report_state(connection, device, device.power, registered)
            for token, topic in list(device.pending_unregister):
                await self.unregister(connection, device, token, topic)
            for topic in sorted(device.pending_register):
                await self.register(connection, device, topic)
            if final:
                await self.drain_device(connection, device)
                return
            # Both end when either does: once the gateway is gone, neither has anything to do.
            loops = [asyncio.create_task(self.stream_loop(connection, device)), asyncio.create_task(self.side_loop(connection, device))]
            try:
                await asyncio.wait(loops, return_when=asyncio.FIRST_EXCEPTION)
            finally:
                for loop in loops:
                    loop.cancel()
                outcomes = await asyncio.gather(*loops, return_exceptions=True)
            for outcome in outcomes:
                if isinstance(outcome, Exception) and not isinstance(outcome, Down):
                    raise outcome
        except Down:
            pass
        finally:
            for task in device.tasks:
                task.cancel()
            await asyncio.gather(*device.tasks, return_exceptions=True)
            device.tasks = []
            await connection.close()

    async def open_stream(self, connection, device, last_event_id):
        channel = self.new_channel("stream", device, last_event_id)
        ack = None
        extra = []
        if last_event_id is not None:
            extra = [("last-event-id", str(last_event_id))]
            ack = Ack(device.id, last_event_id, "last-event-id", self.cycle, channel.requested, channel=channel.id)
            self.history.acks.append(ack)
        try:
            stream = await connection.request("GET", f"/v1/devices/{device.id}/events", device.auth() + extra)
            status, headers = await stream.response_head(REQUEST_TIMEOUT)
        except (ConnectionLost, StreamReset, asyncio.TimeoutError, OSError) as error:
            self.note_error(f"device {device.index} GET events", error)
            raise Down() from error
        channel.head_at, channel.status = now_ms(), status
        if ack is not None:
            ack.answered, ack.status = channel.head_at, status
        if status != 200 or not headers.get("content-type", "").startswith("text/event-stream"):
            stream.reset()
            self.unexpected(device, "GET events", status, headers.get("content-type", "").encode())
        return stream, channel

    def receive(self, device, channel, data, sse_id=None):
        seq = data.get("seq")
        if sse_id is not None and sse_id != str(seq):
            self.history.violation("order", f"stream {channel.id}: SSE id {sse_id} for seq {seq}")
        self.history.receipts.append(Receipt(
            data.get("apnsId"), device.id, seq, channel.id, self.cycle, now_ms(), data.get("delivery"), data.get("acceptedAt"), data))
        return seq

    def read_events(self, device, channel, parser, chunk):
        """(apns-id, seq) of each notification in `chunk`."""
        read = []
        for event in parser.feed(chunk):
            if event["event"] != "notification":
                self.history.violation("device_answer", f"stream {channel.id}: event {event['event']!r}: {event['data'][:200]}")
                continue
            data = json.loads(event["data"])
            read.append((data.get("apnsId"), self.receive(device, channel, data, event["id"])))
        return read

    async def stream_loop(self, connection, device):
        rng = device.rng
        while self.alive:
            resume = device.last_seq if device.last_seq is not None and rng.random() < 0.5 else None
            stream, channel = await self.open_stream(connection, device, resume)
            lifetime = rng.uniform(0.2, 2.0)
            lazy = rng.random() < 0.25  # acks nothing on this stream: its events stay unacked
            ack_every = rng.choice((1, 4, 16))
            deadline = time.monotonic() + lifetime
            parser = SSEParser()
            newest = None
            unacked = 0
            try:
                while self.alive:
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        break
                    try:
                        chunk = await stream.next_chunk(remaining)
                    except asyncio.TimeoutError:
                        break
                    except (ConnectionLost, StreamReset) as error:
                        self.note_error(f"device {device.index} reading events", error)
                        raise Down() from error
                    if chunk == b"":
                        if self.alive:
                            self.history.violation("device_answer", f"cycle {self.cycle}: stream {channel.id} of device {device.index} ended by the gateway")
                        raise Down()
                    for _, seq in self.read_events(device, channel, parser, chunk):
                        newest = seq
                        device.last_seq = seq
                        unacked += 1
                    if not lazy and newest is not None and unacked >= ack_every and not device.ack_busy:
                        unacked = 0
                        device.tasks.append(asyncio.create_task(self.ack(connection, device, newest)))
                if not lazy and newest is not None and rng.random() < 0.5:
                    await self.ack(connection, device, newest, wait=True)
            finally:
                stream.reset()
            await asyncio.sleep(rng.uniform(0, 0.3))

    async def ack(self, connection, device, up_to, wait=False):
        """A cumulative ack up to the newest seq of the current stream, one in flight at a time
        (as the agent does); `wait`: after the one in flight rather than instead of it."""
        if device.ack_busy and not wait:
            return
        async with device.ack_lock:
            device.ack_busy = True
            try:
                ack = Ack(device.id, up_to, "post", self.cycle, now_ms())
                self.history.acks.append(ack)
                try:
                    status, content = await self.device_call(connection, device, "POST", f"/v1/devices/{device.id}/ack", {"upTo": up_to})
                except Down:
                    if wait:
                        raise
                    return
                ack.status, ack.answered = status, now_ms()
                if status != 204 and self.alive:
                    self.history.violation("device_answer", f"cycle {self.cycle}: device {device.index} ack upTo {up_to}: {status} {content[:200]!r}")
            finally:
                device.ack_busy = False

    async def side_loop(self, connection, device):
        rng = device.side_rng
        while self.alive:
            await asyncio.sleep(rng.uniform(0.05, 0.5))
            if not self.alive:
                return
            action = rng.random()
            if action < 0.30:
                await self.keepalive(connection, device)
            elif action < 0.55:
                device.power = pick(rng, (("awake", 4), ("idle", 3), ("lowPower", 3)))
                await self.report_state(connection, device, power=device.power)
            elif action < 0.70:
                topic = rng.choice(TOPICS)
                state = pick(rng, (("foreground", 5), ("background", 3), ("terminated", 2)))
                if device.tokens.get(topic):
                    device.apps[topic] = state
                    await self.report_state(connection, device, apps={topic: state})
            elif action < 0.74:
                topic = rng.choice(TOPICS)
                token = device.tokens.get(topic)
                if token:
                    device.tokens[topic] = None
                    device.old_tokens.append(token)
                    device.pending_register.add(topic)
                    await self.unregister(connection, device, token, topic)
                    await self.register(connection, device, topic)

    async def keepalive(self, connection, device):
        channel = self.new_channel("keepalive", device)
        status, content = await self.device_call(connection, device, "POST", f"/v1/devices/{device.id}/keepalive")
        channel.head_at, channel.status = now_ms(), status
        if status != 200:
            self.unexpected(device, "POST keepalive", status, content)
        for notification in json.loads(content)["notifications"]:
            self.receive(device, channel, notification)

    async def drain_device(self, connection, device):
        """The end: the stream open (a wake: everything held comes), a marker push sent after
        it, everything read and acked up to the marker."""
        stream, channel = await self.open_stream(connection, device, None)
        topic = next(t for t in TOPICS if device.tokens.get(t))
        marker = self.make_push(str(uuid.uuid4()), device, topic, device.tokens[topic], "alert10", None, "none", None, f"marker {device.index}", 0)
        parser = SSEParser()
        newest = None
        marker_seq = None
        async with self.provider_client() as client:
            await self.send_push(client, marker)
        if marker.status != 200:
            # Judged with the other answers; without its marker the device cannot be drained.
            stream.reset()
            return
        try:
            while marker_seq is None:
                try:
                    chunk = await stream.next_chunk(60)
                except (ConnectionLost, StreamReset, asyncio.TimeoutError) as error:
                    raise SoakBroken(f"device {device.index}: the final stream failed before the marker: {error!r}")
                for apns_id, seq in self.read_events(device, channel, parser, chunk):
                    newest = seq
                    if apns_id == marker.apns_id:
                        marker_seq = seq
                if newest is not None and not device.ack_busy:
                    device.tasks.append(asyncio.create_task(self.ack(connection, device, newest)))
            await self.ack(connection, device, marker_seq, wait=True)
        finally:
            stream.reset()

    # MARK: Providers

    def provider_client(self):
        return httpx.AsyncClient(
            base_url=self.base, http1=False, http2=True, timeout=REQUEST_TIMEOUT,
            limits=httpx.Limits(max_connections=1, max_keepalive_connections=1),
        )

    def make_push(self, apns_id, device, topic, token, kind, collapse, expiration, expiration_seconds, label, pad):
        push = Push(apns_id, self.cycle, device.id, token, topic, kind, collapse, expiration, expiration_seconds, label, pad, 0)
        self.history.pushes[push.apns_id] = push
        return push

    def choose_push(self, rng, label):
        device = rng.choice(self.devices)
        topic = rng.choice(TOPICS)
        token = device.tokens.get(topic)
        if device.old_tokens and rng.random() < 0.04:
            token = rng.choice(device.old_tokens)
            topic = next(r.topic for r in self.history.registrations if r.token == token)
        if not token:
            return None
        kind = pick(rng, KINDS[topic])
        collapse = None
        if rng.random() < 0.25:
            collapse = f"{'s' if kind == 'silent' else 'r'}{rng.randint(1, 3)}"
        expiration = pick(rng, (("none", 62), ("future", 16), ("zero", 12), ("past", 6)))
        seconds = None
        if expiration == "future":
            seconds = int(time.time() + rng.uniform(1.0, 8.0)) + 1
        elif expiration == "past":
            seconds = int(time.time()) - rng.randint(1, 3600)
        apns_id = str(uuid.UUID(int=rng.getrandbits(128), version=4))
        push = self.make_push(apns_id, device, topic, token, kind, collapse, expiration, seconds, label, rng.randint(0, 400))
        push.say_priority = rng.random() < 0.5
        return push

    async def send_push(self, client, push):
        aps = {"content-available": 1} if push.silent else {"alert": {"title": "soak", "body": push.label}}
        body = json.dumps({"aps": aps, "soak": push.label, "pad": "x" * push.pad}).encode()
        headers = {
            "authorization": f"bearer {self.provider_token}",
            "apns-id": push.apns_id,
            "apns-topic": push.topic,
            "apns-push-type": push.push_type,
        }
        # Priority 10 is the default for alerts and 5 for background pushes: sometimes said.
        if push.priority != (5 if push.silent else 10) or push.say_priority:
            headers["apns-priority"] = str(push.priority)
        if push.collapse is not None:
            headers["apns-collapse-id"] = push.collapse
        if push.expiration == "zero":
            headers["apns-expiration"] = "0"
        elif push.expiration_seconds is not None:
            headers["apns-expiration"] = str(push.expiration_seconds)
        push.sent = now_ms()
        try:
            response = await client.post(f"/3/device/{push.token}", headers=headers, content=body)
        except Exception as error:  # noqa: BLE001 - any failure of the request: no answer
            push.error = f"{type(error).__name__}: {error}"
            self.note_error(f"push {push.apns_id}", error)
            return
        push.answered = now_ms()
        push.status = response.status_code
        push.disposition = response.headers.get("pushgate-disposition")
        if response.status_code != 200:
            try:
                push.reason = response.json().get("reason")
            except ValueError:
                push.reason = response.text[:200]
        if response.headers.get("apns-id") != push.apns_id:
            self.history.violation("answer", f"{push.apns_id}: answered with apns-id {response.headers.get('apns-id')}")

    async def provider(self, number, warm):
        """One provider connection, four pushes in flight. Its first push goes alone: a gateway
        that authenticates providers allows one stream until a valid token proves the provider."""
        async with self.provider_client() as client:
            async def worker(index):
                rng = self.rng("provider", self.cycle, number, index)
                sent = 0
                if index > 0:
                    await warm.wait()
                while self.alive:
                    push = self.choose_push(rng, f"{self.cycle}.{number}.{index}.{sent}")
                    sent += 1
                    if push is not None:
                        await self.send_push(client, push)
                    if index == 0:
                        warm.set()
                    await asyncio.sleep(rng.uniform(0, 0.02))
            await asyncio.gather(*(worker(i) for i in range(4)))

    # MARK: Cycles

    async def take_reading(self, final=False):
        before = now_ms()
        views = {}
        async with httpx.AsyncClient(base_url=self.base, timeout=REQUEST_TIMEOUT) as admin:
            for device in self.devices:
                response = await admin.get(f"/v1/admin/devices/{device.id}")
                if response.status_code != 200:
                    raise SoakBroken(f"GET /v1/admin/devices/{device.id}: {response.status_code} {response.text[:200]}")
                views[device.id] = response.json()
        if final:
            self.history.final_views = views
            self.history.final_at = now_ms()
        else:
            self.history.readings.append(Reading(self.cycle, before, now_ms(), views))

    async def run_cycle(self):
        self.alive = True
        for device in self.devices:
            device.start_cycle(self.rng("device", self.cycle, device.index), self.rng("side", self.cycle, device.index))
        self.warm = [asyncio.Event(), asyncio.Event()]
        tasks = [asyncio.create_task(self.device_session(device)) for device in self.devices]
        tasks += [asyncio.create_task(self.provider(number, self.warm[number])) for number in range(2)]
        delay = self.rng("kill", self.cycle).uniform(0, self.args.max_load_seconds)
        self.kill_delays.append(delay)
        await asyncio.sleep(delay)
        await self.kill_gateway()
        done, pending = await asyncio.wait(tasks, timeout=REQUEST_TIMEOUT + 5)
        for task in pending:
            task.cancel()
        for task in list(done) + list(pending):
            try:
                await task
            except asyncio.CancelledError:
                self.history.violation("soak", f"cycle {self.cycle}: a load task was still running {REQUEST_TIMEOUT + 5} s after the kill")
            except SoakBroken:
                raise
            except Exception as error:  # noqa: BLE001 - a driver bug: report it as such
                raise SoakBroken(f"cycle {self.cycle}: load task failed: {type(error).__name__}: {error}") from error

    async def run(self):
        started = time.monotonic()
        self.kill_delays = []
        self.prepare()
        await self.start_gateway(0)
        await self.setup_devices()
        await self.take_reading()
        for cycle in range(1, self.args.cycles + 1):
            self.cycle = cycle
            await self.run_cycle()
            self.check_store(f"after kill {cycle}")
            await self.start_gateway(cycle)
            await self.take_reading()
            print(f"cycle {cycle}: killed after {self.kill_delays[-1]:.3f} s; {len(self.history.pushes)} pushes, {len(self.history.receipts)} received so far", file=sys.stderr, flush=True)
        # The end: no kill; every device reads everything that is left.
        self.cycle = self.args.cycles + 1
        self.alive = True
        for device in self.devices:
            device.start_cycle(self.rng("device", "final", device.index), self.rng("side", "final", device.index))
        await asyncio.gather(*(self.device_session(device, final=True) for device in self.devices))
        await self.take_reading(final=True)
        self.alive = False
        self.gateway.send_signal(signal.SIGTERM)
        status = await asyncio.wait_for(self.gateway.wait(), 60)
        if status != 0:
            self.history.violation("gateway", f"SIGTERM at the end: exit status {status}")
        self.check_store("after the final stop")
        for name in sorted(os.listdir(self.work)):
            if name.startswith("gateway-"):
                with open(os.path.join(self.work, name), errors="replace") as handle:
                    lines = [line.strip() for line in handle if line.strip()]
                self.log_lines += [f"{name}: {line}" for line in lines]
                # A gateway that trapped as its kill came may end with the kill's status: only
                # its log tells.
                crash = [line for line in lines if any(marker in line for marker in CRASH_MARKERS)]
                if crash:
                    self.history.violation("gateway", f"{name}: the gateway crashed: {crash[:3]}")
        violations, figures = Checker(self.history, POLICY).run()
        figures["cycles"] = self.args.cycles
        figures["integrityChecks"] = self.integrity_checks
        figures["gatewayLogLines"] = len(self.log_lines)
        figures["wallSeconds"] = round(time.monotonic() - started, 1)
        figures["killDelaysSeconds"] = [round(d, 3) for d in self.kill_delays]
        return violations, figures


class Device:
    def __init__(self, device_id, secret, index):
        self.id = device_id
        self.secret = secret
        self.index = index
        self.tokens = {}
        self.old_tokens = []
        self.pending_unregister = []
        self.pending_register = set()
        self.power = "awake"
        self.apps = {}
        self.last_seq = None
        self.tasks = []

    def auth(self):
        return [("authorization", f"bearer {self.secret}")]

    def start_cycle(self, rng, side_rng):
        self.rng = rng
        self.side_rng = side_rng
        self.ack_lock = asyncio.Lock()
        self.ack_busy = False


# What the Swift runtime writes to stderr when a precondition fails (and, with its backtracer on,
# on any trap or fatal signal).
CRASH_MARKERS = ("Fatal error:", "Swift runtime failure", "*** Signal ")


class Down(Exception):
    """The gateway did not answer (killed): this device's load ends for the cycle."""


class SoakBroken(Exception):
    """The soak itself could not go on (not a finding about the gateway)."""


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pushgate", required=True, help="the pushgate binary")
    parser.add_argument("--cycles", type=int, default=20)
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--devices", type=int, default=6)
    parser.add_argument("--max-load-seconds", type=float, default=3.0)
    parser.add_argument("--user", default="nobody" if os.geteuid() == 0 else None, help="run the gateway as this user (default: nobody when run as root)")
    parser.add_argument("--work-dir", default=None, help="where the store, keys and gateway logs go (default: a new temporary directory)")
    parser.add_argument("--serve-arg", action="append", default=[], help="one more argument for pushgate serve (repeatable): --serve-arg=--durability --serve-arg=interval")
    parser.add_argument("--keep", action="store_true", help="keep the work directory even when the soak passes")
    args = parser.parse_args()
    if args.seed is None:
        args.seed = random.SystemRandom().randrange(1, 2**31)
    print(f"crash_loop.py: seed {args.seed} (replay with --seed {args.seed}), {args.cycles} cycles", file=sys.stderr, flush=True)

    soak = Soak(args)

    def on_alarm(signum, frame):
        if soak.gateway is not None and soak.gateway.returncode is None:
            os.kill(soak.gateway.pid, signal.SIGKILL)
        sys.stderr.write(f"crash_loop.py: hard timeout; seed {args.seed}; work directory {getattr(soak, 'work', '?')}\n")
        sys.stderr.flush()
        os._exit(2)

    signal.signal(signal.SIGALRM, on_alarm)
    signal.alarm(120 + 30 * args.cycles)
    try:
        violations, figures = asyncio.run(soak.run())
    except Exception as error:  # noqa: BLE001 - SoakBroken, or a request to a gateway that died
        broken = str(error) if isinstance(error, SoakBroken) else f"{type(error).__name__}: {error}"
        if soak.gateway is not None and soak.gateway.returncode is None:
            soak.gateway.kill()
        elif soak.gateway is not None:
            # It ended by itself (a trap, say, while the soak set up its devices): why is in its log.
            broken += f"; pushgate serve had ended with {soak.gateway.returncode}; {soak.log_end()}"
        print(json.dumps({"ok": False, "seed": args.seed, "broken": broken, "workDir": getattr(soak, "work", None)}))
        return 2
    by_category = {}
    for category, message in violations:
        by_category.setdefault(category, []).append(message)
    ok = not violations
    if not ok:
        # Everything seen, for working out what happened (kills are in "kills").
        with open(os.path.join(soak.work, "history.json"), "w") as handle:
            json.dump(dataclasses.asdict(soak.history), handle)
    summary = {
        "ok": ok,
        "seed": args.seed,
        "figures": dict(sorted(figures.items())),
        "gatewayLog": soak.log_lines[:10],
        "violations": {category: {"count": len(messages), "first": messages[:10]} for category, messages in sorted(by_category.items())},
        "workDir": soak.work,
    }
    if ok and not args.keep and not args.work_dir:
        shutil.rmtree(soak.work, ignore_errors=True)
        summary["workDir"] = None
    print(json.dumps(summary))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
