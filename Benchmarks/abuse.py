"""Abusive clients of the gateway, one kind at a time, for Benchmarks/abuse.sh and the CLI test
(Tests/PushgateCLITests/AbuseCLITests.swift). Each runs for --seconds, or until SIGTERM, then
prints one JSON line on stdout: what it did and how the gateway answered.

    /usr/bin/python3 Benchmarks/abuse.py address              # this machine's non-loopback IPv4
    /usr/bin/python3 Benchmarks/abuse.py KIND --host H --port P [options]

Connections that the gateway closes are opened again at once (an abuser does not give up), so
"ended" counts every connection by how it ended: "GOAWAY <code> <debug data>", "reset",
"closed" (FIN, with the answers read before it), prefixed "at once:" when that came within a
second of the connect. Sockets close with RST (SO_LINGER 0) so that a flood of short
connections does not run out of ports in TIME_WAIT.

Kinds (--count connections unless said; --host and --port are the target):
  connections      TCP connections that send nothing
  idle             HTTP/2 preface and SETTINGS, then nothing (acks the gateway's SETTINGS)
  settings-flood   one connection sending SETTINGS frames (one entry) as fast as it can, reading the acks
  ping-flood       one connection sending PING frames as fast as it can, reading the acks
  empty-data       one connection: POST /v1/devices with the registration secret, never ended,
                   then empty DATA frames on it as fast as it can
  empty-headers    one connection sending HEADERS frames with an empty header block (END_STREAM),
                   each on a new stream, as fast as it can
  slow-h2          a request's HEADERS without END_HEADERS, then one CONTINUATION of one byte
                   of header block every --interval seconds
  slow-h1-head     an HTTP/1.1 request head sent one byte every --interval seconds
  slow-h1-body     POST /v1/admin/reload over HTTP/1.1 with content-length 1000000, then one
                   byte of body every --interval seconds
  tls-stall        TCP connections to a TLS listener: half send nothing, half half a ClientHello
  device-flood     one connection creating devices (the registration secret), --in-flight at once
  registration-flood  one connection registering new topics on one device, --in-flight at once
                   (the device is created through --setup-port, on loopback)
  zero-window      --count devices (created and registered through --setup-port) each open its
                   event stream from --host with SETTINGS_INITIAL_WINDOW_SIZE 0 on a socket it
                   never reads, while a provider (--key) pushes --payload-bytes to them at --rate
"""
import argparse
import asyncio
import collections
import fcntl
import json
import signal
import socket
import ssl
import statistics
import struct
import sys
import time

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
DATA, HEADERS, RST_STREAM, SETTINGS, PING, GOAWAY, WINDOW_UPDATE, CONTINUATION = 0, 1, 3, 4, 6, 7, 8, 9
END_STREAM, ACK, END_HEADERS = 0x1, 0x1, 0x4
ERRORS = ["NO_ERROR", "PROTOCOL_ERROR", "INTERNAL_ERROR", "FLOW_CONTROL_ERROR", "SETTINGS_TIMEOUT", "STREAM_CLOSED",
          "FRAME_SIZE_ERROR", "REFUSED_STREAM", "CANCEL", "COMPRESSION_ERROR", "CONNECT_ERROR", "ENHANCE_YOUR_CALM",
          "INADEQUATE_SECURITY", "HTTP_1_1_REQUIRED"]
STOP = None  # asyncio.Event, set when the time is up or SIGTERM came


def error_name(code):
    return ERRORS[code] if code < len(ERRORS) else str(code)


def frame(kind, flags, stream, payload=b""):
    return struct.pack(">I", len(payload))[1:] + bytes([kind, flags]) + struct.pack(">I", stream) + payload


def hpack_integer(value, prefix_bits):
    limit = (1 << prefix_bits) - 1
    if value < limit:
        return bytes([value])
    out, value = [limit], value - limit
    while value >= 128:
        out.append(value % 128 + 128)
        value //= 128
    return bytes(out + [value])


def header_block(fields):
    """HPACK literals without indexing and without Huffman: no state shared with the gateway."""
    out = b""
    for name, value in fields:
        name, value = name.encode(), value.encode()
        out += b"\x00" + hpack_integer(len(name), 7) + name + hpack_integer(len(value), 7) + value
    return out


def request_block(method, path, host, extra=()):
    return header_block([(":method", method), (":scheme", "http"), (":path", path), (":authority", host), *extra])


def non_loopback_address():
    """The first IPv4 address of an interface that is not loopback (as the Swift tests'
    nonLoopbackAddress()): a peer connecting to it from here is not a loopback peer."""
    probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    for _, name in socket.if_nameindex():
        try:
            packed = fcntl.ioctl(probe.fileno(), 0x8915, struct.pack("256s", name[:15].encode()))  # SIOCGIFADDR
        except OSError:
            continue
        address = socket.inet_ntoa(packed[20:24])
        if not address.startswith("127."):
            return address
    return None


class Tally:
    """What the abuse did and how the gateway answered, for the JSON line."""

    def __init__(self):
        self.opened = 0
        self.connect_failures = collections.Counter()
        self.ended = collections.defaultdict(list)  # how -> lifetimes in seconds
        self.still_open = 0
        self.counts = collections.Counter()  # kind-specific: frames sent, acks, statuses...

    def end(self, how, lifetime):
        self.ended[("at once: " if lifetime < 1 else "") + how].append(lifetime)

    def result(self, kind, seconds, **extra):
        ended = {how: {"connections": len(times), "medianSeconds": round(statistics.median(times), 2),
                       "maxSeconds": round(max(times), 2)} for how, times in sorted(self.ended.items())}
        return {"kind": kind, "seconds": seconds, "opened": self.opened, "connectFailures": dict(self.connect_failures),
                "ended": ended, "stillOpen": self.still_open, "counts": dict(self.counts), **extra}


class Connection:
    """One raw connection: the abuse writes what it likes; a reader notes what the gateway says."""

    def __init__(self, reader, writer, tally, mode):
        self.reader, self.writer, self.tally, self.mode = reader, writer, tally, mode
        self.goaway = None
        self.answers = collections.Counter()  # HTTP/1.1 status lines, HTTP/2 ":status" and resets
        self.received = 0
        self.settings_seen = asyncio.Event()
        self.stream_done = asyncio.Event()
        self.decoder = None
        self.block = b""

    def write(self, data):
        self.writer.write(data)

    async def read_until_closed(self):
        """Reads until the gateway closes; returns how it did."""
        buffer = bytearray()
        try:
            while True:
                chunk = await self.reader.read(65536)
                if not chunk:
                    break
                self.received += len(chunk)
                if self.mode == "h2":
                    buffer += chunk
                    offset = 0
                    while len(buffer) - offset >= 9:
                        length = int.from_bytes(buffer[offset:offset + 3], "big")
                        if len(buffer) - offset < 9 + length:
                            break
                        kind, flags = buffer[offset + 3], buffer[offset + 4]
                        stream = int.from_bytes(buffer[offset + 5:offset + 9], "big") & 0x7FFFFFFF
                        self.on_frame(kind, flags, stream, bytes(buffer[offset + 9:offset + 9 + length]))
                        offset += 9 + length
                    del buffer[:offset]
                elif self.mode == "h1":
                    for line in chunk.split(b"\r\n"):
                        if line.startswith(b"HTTP/1.1 "):
                            self.answers[line[:12].decode()] += 1
        except (ConnectionResetError, ssl.SSLError):
            return "reset" + self.heard()
        if self.goaway:
            return self.goaway + self.heard()
        return "closed" + self.heard()

    def heard(self):
        if not self.answers:
            return "" if self.received or self.mode != "raw" else ", no byte"
        return " after " + ", ".join(f"{count} x {what}" for what, count in sorted(self.answers.items()))

    def on_frame(self, kind, flags, stream, payload):
        counts = self.tally.counts
        if kind == SETTINGS:
            if flags & ACK:
                counts["SETTINGS acks received"] += 1
            else:
                self.write(frame(SETTINGS, ACK, 0))
                self.settings_seen.set()
        elif kind == PING and flags & ACK:
            counts["PING acks received"] += 1
        elif kind == GOAWAY:
            code = int.from_bytes(payload[4:8], "big")
            self.goaway = f"GOAWAY {error_name(code)} {payload[8:].decode(errors='replace')}".rstrip()
        elif kind == RST_STREAM:
            self.answers["RST_STREAM " + error_name(int.from_bytes(payload[:4], "big"))] += 1
            self.stream_done.set()
        elif kind in (HEADERS, CONTINUATION):
            self.block += payload[self.padding_and_priority(kind, flags, payload):] if kind == HEADERS else payload
            if flags & END_HEADERS:
                self.answers[":status " + status_of(self.block)] += 1
                self.block = b""
                self.stream_done.set()

    @staticmethod
    def padding_and_priority(kind, flags, payload):
        skip = 1 if flags & 0x8 else 0
        return skip + (5 if flags & 0x20 else 0)


def status_of(block):
    """The :status of a response header block: the gateway's HPACK encoder has no dynamic table,
    so the status is a static index (0x88 200 ... 0x8e 500) or a literal."""
    if block and 0x88 <= block[0] <= 0x8E:
        return {0x88: "200", 0x89: "204", 0x8A: "206", 0x8B: "304", 0x8C: "400", 0x8D: "404", 0x8E: "500"}[block[0]]
    try:
        import hpack  # Debian's python3-hpack, with python3-h2
        return dict(hpack.Decoder().decode(block)).get(":status", "?")
    except Exception:
        return "?"


async def connect(args, tls=None, port=None, receive_buffer=None):
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    if receive_buffer:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)
    sock.setblocking(False)
    try:
        await asyncio.wait_for(asyncio.get_running_loop().sock_connect(sock, (args.host, port or args.port)), 5)
        return await asyncio.open_connection(sock=sock, ssl=tls, server_hostname="localhost" if tls else None)
    except BaseException:
        sock.close()
        raise


async def hold(args, tally, behave, mode="h2"):
    """Keeps one connection going with `behave(connection)`; when the gateway ends it, opens
    another, until STOP."""
    while not STOP.is_set():
        started = time.monotonic()
        try:
            reader, writer = await connect(args)
        except (OSError, asyncio.TimeoutError) as error:
            tally.connect_failures[type(error).__name__] += 1
            await asyncio.sleep(0.05)
            continue
        tally.opened += 1
        connection = Connection(reader, writer, tally, mode)
        reading = asyncio.create_task(connection.read_until_closed())
        acting = asyncio.create_task(quietly(behave(connection)))
        stopping = asyncio.create_task(STOP.wait())
        done, _ = await asyncio.wait({reading, stopping}, return_when=asyncio.FIRST_COMPLETED)
        acting.cancel()
        for answer, count in connection.answers.items():
            tally.counts["answered " + answer] += count
        if reading in done:
            tally.end(reading.result(), time.monotonic() - started)
        else:
            reading.cancel()
            tally.still_open += 1
        stopping.cancel()
        writer.transport.abort()


async def quietly(work):
    """An abuse's writing ends when the gateway closes the connection under it."""
    try:
        await work
    except (OSError, ConnectionError, ssl.SSLError):
        pass


async def forever(_connection=None):
    await asyncio.Event().wait()


# MARK: - Kinds over raw connections

async def idle(connection):
    connection.write(PREFACE + frame(SETTINGS, 0, 0))
    await forever()


async def sent(connection, data):
    """Writes `data` once the socket has taken what came before; false once the gateway has
    closed the connection (asyncio's drain does not say so)."""
    await connection.writer.drain()
    if connection.writer.transport.is_closing():
        return False
    connection.write(data)
    return True


async def flood(connection, unit, counter):
    """Writes `unit` as fast as the gateway takes it (about 64 KiB at a time)."""
    connection.write(PREFACE + frame(SETTINGS, 0, 0))
    copies = max(1, 65536 // len(unit))
    batch = unit * copies
    while await sent(connection, batch):
        connection.tally.counts[counter] += copies


def settings_flood(connection):
    return flood(connection, frame(SETTINGS, 0, 0, struct.pack(">HI", 3, 100)), "SETTINGS frames sent")


def ping_flood(connection):
    return flood(connection, frame(PING, 0, 0, b"abusive!"), "PING frames sent")


async def empty_headers(connection):
    connection.write(PREFACE + frame(SETTINGS, 0, 0))
    stream = 1
    while await sent(connection, b"".join(frame(HEADERS, END_HEADERS | END_STREAM, s) for s in range(stream, stream + 2 * 4096, 2))):
        stream += 2 * 4096
        connection.tally.counts["empty HEADERS frames sent"] += 4096


def empty_data(args):
    async def behave(connection):
        connection.write(PREFACE + frame(SETTINGS, 0, 0))
        stream = 1
        while True:
            connection.stream_done.clear()
            block = request_block("POST", "/v1/devices", args.host, [("authorization", "bearer " + args.secret)])
            connection.write(frame(HEADERS, END_HEADERS, stream, block))
            connection.tally.counts["requests opened"] += 1
            empty = frame(DATA, 0, stream) * 7000
            while not connection.stream_done.is_set():
                if not await sent(connection, empty):
                    return
                connection.tally.counts["empty DATA frames sent"] += 7000
            stream += 2
    return behave


def slow_h2(args):
    async def behave(connection):
        connection.write(PREFACE + frame(SETTINGS, 0, 0))
        # Our ack of the gateway's SETTINGS may not come between HEADERS and CONTINUATION.
        await connection.settings_seen.wait()
        block = request_block("GET", "/healthz", args.host, [("x-slow", "s" * 1000)])
        connection.write(frame(HEADERS, END_STREAM, 1, block[:16]))
        for offset in range(16, len(block)):
            await asyncio.sleep(args.interval)
            connection.write(frame(CONTINUATION, 0, 1, block[offset:offset + 1]))
            connection.tally.counts["CONTINUATION frames sent"] += 1
        await forever()
    return behave


def drip(data, counter):
    async def behave(connection):
        for index in range(len(data)):
            connection.write(data[index:index + 1])
            connection.tally.counts[counter] += 1
            await asyncio.sleep(ARGS.interval)
        await forever()
    return behave


def slow_h1_head(args):
    head = f"GET /healthz HTTP/1.1\r\nhost: {args.host}\r\nx-slow: {'s' * 4000}\r\n\r\n".encode()
    return drip(head, "head bytes sent")


def slow_h1_body(args):
    async def behave(connection):
        connection.write(f"POST /v1/admin/reload HTTP/1.1\r\nhost: {args.host}\r\ncontent-length: 1000000\r\n\r\n".encode())
        await drip(b"x" * 1000000, "body bytes sent")(connection)
    return behave


def half_client_hello():
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    context.set_alpn_protocols(["h2"])
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    tls = context.wrap_bio(incoming, outgoing, server_hostname="localhost")
    try:
        tls.do_handshake()
    except ssl.SSLWantReadError:
        pass
    hello = outgoing.read()
    return hello[: len(hello) // 2]


# MARK: - Kinds over well-formed HTTP/2 (the h2 library)

class Client:
    """A well-formed HTTP/2 client (Debian's python3-h2) for floods of valid requests."""

    def __init__(self, reader, writer):
        import h2.config
        import h2.connection
        self.reader, self.writer = reader, writer
        self.h2 = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True, header_encoding="utf-8"))
        self.h2.initiate_connection()
        self.writer.write(self.h2.data_to_send())
        self.pending = {}  # stream -> [future, status, headers, body]
        self.changed = asyncio.Event()  # settings, windows or streams changed: a waiting sender may go
        self.closed = None
        # A connection that has proven nothing may open one stream until the gateway's SETTINGS
        # raise the limit: requests wait for them, as pushgate bench does.
        self.settled = asyncio.Event()
        self.task = asyncio.create_task(self.read())

    @classmethod
    async def open(cls, args, host=None, port=None):
        sock = socket.create_connection((host or args.host, port or args.port), timeout=5)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        sock.setblocking(False)
        return cls(*await asyncio.open_connection(sock=sock))

    async def read(self):
        import h2.events
        try:
            while True:
                data = await self.reader.read(65536)
                if not data:
                    break
                for event in self.h2.receive_data(data):
                    entry = self.pending.get(getattr(event, "stream_id", None))
                    if isinstance(event, h2.events.ResponseReceived) and entry:
                        entry[2] = dict(event.headers)
                        entry[1] = entry[2].get(":status")
                    elif isinstance(event, h2.events.DataReceived):
                        self.h2.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
                        if entry:
                            entry[3] += event.data
                    elif isinstance(event, h2.events.StreamEnded) and entry:
                        self.finish(event.stream_id, entry[1])
                    elif isinstance(event, h2.events.StreamReset) and entry:
                        self.finish(event.stream_id, "RST_STREAM " + error_name(event.error_code))
                    elif isinstance(event, h2.events.RemoteSettingsChanged):
                        self.settled.set()
                    elif isinstance(event, h2.events.ConnectionTerminated):
                        debug = (event.additional_data or b"").decode(errors="replace")
                        self.closed = f"GOAWAY {error_name(event.error_code)} {debug}".rstrip()
                self.writer.write(self.h2.data_to_send())
                self.changed.set()
        except (ConnectionError, OSError):
            pass
        self.closed = self.closed or "closed"
        self.settled.set()
        for stream in list(self.pending):
            self.finish(stream, self.closed)
        self.changed.set()

    def finish(self, stream, status):
        entry = self.pending.pop(stream)
        if not entry[0].done():
            entry[1] = status
            entry[0].set_result((status, entry[2], bytes(entry[3])))

    async def request(self, method, path, headers=(), body=b""):
        """(status or how it failed, response headers, body)."""
        await self.settled.wait()
        while (self.h2.open_outbound_streams >= self.h2.remote_settings.max_concurrent_streams
               or (body and self.h2.outbound_flow_control_window < len(body))) and not self.closed:
            self.changed.clear()
            await self.changed.wait()
        if self.closed:
            return self.closed, {}, b""
        stream = self.h2.get_next_available_stream_id()
        future = asyncio.get_running_loop().create_future()
        self.pending[stream] = [future, None, {}, bytearray()]
        fields = [(":method", method), (":scheme", "http"), (":path", path), (":authority", "gateway"), *headers]
        self.h2.send_headers(stream, fields, end_stream=not body)
        if body:
            self.h2.send_data(stream, body, end_stream=True)
        self.writer.write(self.h2.data_to_send())
        return await future

    def close(self):
        self.task.cancel()
        self.writer.transport.abort()


async def create_device(client, secret):
    status, _, body = await client.request("POST", "/v1/devices", [("authorization", "bearer " + secret)])
    if status != "201":
        raise SystemExit(f"creating a device: {status} {body[:200]}")
    created = json.loads(body)
    return created["deviceId"], created["secret"]


async def register(client, device, topic):
    device_id, secret = device
    status, _, body = await client.request(
        "POST", f"/v1/devices/{device_id}/registrations",
        [("authorization", "bearer " + secret), ("content-type", "application/json")], json.dumps({"topic": topic}).encode())
    return status, body


async def requests_in_flight(args, send, tally):
    """`args.in_flight` senders, each sending `send(n)` again as soon as it is answered, until STOP."""
    counter = iter(range(1 << 62))

    async def sender():
        while not STOP.is_set():
            status = await send(next(counter))
            tally.counts[f"answered {status}"] += 1
            if status in ("closed",) or str(status).startswith("GOAWAY"):
                return
    senders = [asyncio.create_task(sender()) for _ in range(args.in_flight)]
    await STOP.wait()
    for task in senders:
        task.cancel()


async def device_flood(args, tally):
    client = await Client.open(args)
    tally.opened += 1
    retry_after = set()

    async def send(_):
        status, headers, _ = await client.request("POST", "/v1/devices", [("authorization", "bearer " + args.secret)])
        if "retry-after" in headers:
            retry_after.add(headers["retry-after"])
        return status
    await requests_in_flight(args, send, tally)
    tally.counts["retry-after values seen"] = len(retry_after)
    client.close()


async def registration_flood(args, tally):
    setup = await Client.open(args, host="127.0.0.1", port=args.setup_port)
    device = await create_device(setup, args.secret)
    setup.close()
    client = await Client.open(args)
    tally.opened += 1

    async def send(n):
        status, _ = await register(client, device, f"com.example.abuse.t{n}")
        return status
    await requests_in_flight(args, send, tally)
    client.close()


async def zero_window(args, tally):
    import jwt  # Debian's python3-jwt
    setup = await Client.open(args, host="127.0.0.1", port=args.setup_port)
    devices = [await create_device(setup, args.secret) for _ in range(args.count)]
    tokens = []
    for device in devices:
        status, body = await register(setup, device, args.topic)
        if status != "201":
            raise SystemExit(f"registering: {status} {body[:200]}")
        tokens.append(json.loads(body)["token"])
    # Each device's event stream, from --host, on a socket read by no one: window 0 for every
    # stream, and the receive buffer as small as the kernel allows.
    sockets = []
    for device_id, secret in devices:
        reader, writer = await connect(args, receive_buffer=1024)
        tally.opened += 1
        block = request_block("GET", f"/v1/devices/{device_id}/events", args.host, [("authorization", "bearer " + secret)])
        writer.write(PREFACE + frame(SETTINGS, 0, 0, struct.pack(">HI", 4, 0)) + frame(HEADERS, END_HEADERS | END_STREAM, 1, block))
        sockets.append((reader, writer))
    with open(args.key) as key_file:
        key = key_file.read()
    token = jwt.encode({"iss": args.team_id, "iat": int(time.time())}, key, algorithm="ES256", headers={"kid": args.key_id})
    provider = await Client.open(args, host="127.0.0.1", port=args.setup_port)
    payload = json.dumps({"aps": {"alert": "x" * max(1, args.payload_bytes - 30)}}).encode()
    headers = [("authorization", "bearer " + token), ("apns-topic", args.topic), ("apns-push-type", "alert")]
    started, sent = time.monotonic(), 0
    in_flight = set()

    async def push(index):
        status, _, _ = await provider.request("POST", f"/3/device/{tokens[index % len(tokens)]}", headers, payload)
        tally.counts[f"pushes answered {status}"] += 1
    while not STOP.is_set() and not provider.closed:
        due = int((time.monotonic() - started) * args.rate)
        while sent < due and len(in_flight) < 256:
            task = asyncio.create_task(push(sent))
            in_flight.add(task)
            task.add_done_callback(in_flight.discard)
            sent += 1
        await asyncio.sleep(0.01)
    # What became of the streams: closed by the gateway (read to the end) or still open.
    async def fate(reader, writer):
        try:
            while await asyncio.wait_for(reader.read(65536), 0.5):
                pass
            tally.end("closed", time.monotonic() - started)
        except asyncio.TimeoutError:
            tally.still_open += 1
        except ConnectionError:
            tally.end("reset", time.monotonic() - started)
        writer.transport.abort()
    await asyncio.gather(*(fate(reader, writer) for reader, writer in sockets))
    provider.close()


# MARK: - Main

ARGS = None


async def main(args):
    global STOP
    STOP = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, STOP.set)
    loop.call_later(args.seconds, STOP.set)
    tally = Tally()
    started = time.monotonic()
    kind = args.kind
    raw = {
        "connections": (args.count, forever, "raw"),
        "idle": (args.count, idle, "h2"),
        "settings-flood": (args.count, settings_flood, "h2"),
        "ping-flood": (args.count, ping_flood, "h2"),
        "empty-headers": (args.count, empty_headers, "h2"),
        "empty-data": (args.count, empty_data(args), "h2"),
        "slow-h2": (args.count, slow_h2(args), "h2"),
        "slow-h1-head": (args.count, slow_h1_head(args), "h1"),
        "slow-h1-body": (args.count, slow_h1_body(args), "h1"),
    }
    if kind in raw:
        count, behave, mode = raw[kind]
        await asyncio.gather(*(hold(args, tally, behave, mode) for _ in range(count)))
    elif kind == "tls-stall":
        hello = half_client_hello()

        async def send_half_hello(connection):
            connection.write(hello)
            await forever()
        await asyncio.gather(*(hold(args, tally, send_half_hello if n % 2 else forever, "raw") for n in range(args.count)))
    else:
        await {"device-flood": device_flood, "registration-flood": registration_flood, "zero-window": zero_window}[kind](args, tally)
    print(json.dumps(tally.result(kind, round(time.monotonic() - started, 1))), flush=True)


def parse():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("kind")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int)
    parser.add_argument("--setup-port", type=int, help="a loopback listener, for the setup of registration-flood and zero-window")
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--count", type=int, default=1)
    parser.add_argument("--interval", type=float, default=1.0)
    parser.add_argument("--in-flight", type=int, default=32)
    parser.add_argument("--secret", help="the registration secret")
    parser.add_argument("--key")
    parser.add_argument("--key-id")
    parser.add_argument("--team-id")
    parser.add_argument("--topic", default="com.example.abuse")
    parser.add_argument("--rate", type=float, default=200)
    parser.add_argument("--payload-bytes", type=int, default=4000)
    return parser.parse_args()


if __name__ == "__main__":
    ARGS = parse()
    if ARGS.kind == "address":
        print(non_loopback_address() or "")
    else:
        asyncio.run(main(ARGS))
