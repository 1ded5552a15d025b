"""A small asyncio HTTP/2 client (cleartext, prior knowledge) on the h2 library, for the soak's
device agents.

httpx drives the providers; the devices need what httpx 0.23 (httpcore 0.16) does not give: an
event stream that can be ended at any moment with RST_STREAM (httpcore forgets a closed response
without resetting it, so the gateway keeps writing to a stream nobody reads), and reads that can
be given up on a deadline without cancelling a task in the middle of a socket write. Here every
change to the connection's h2 state happens synchronously on the event loop and is written out at
once; reads wait on per-stream queues that the connection's reader task fills.
"""

import asyncio

import h2.config
import h2.connection
import h2.errors
import h2.events
import h2.exceptions
import h2.settings


class ConnectionLost(Exception):
    """The connection ended (the gateway died, or closed it) before the stream did."""


class StreamReset(Exception):
    """The server reset the stream."""


class Stream:
    def __init__(self, connection, stream_id):
        self.connection = connection
        self.id = stream_id
        self.head = asyncio.get_running_loop().create_future()
        self.chunks = asyncio.Queue()
        self.closed = False

    async def response_head(self, timeout):
        """(status, headers) once the response head is in."""
        return await asyncio.wait_for(asyncio.shield(self.head), timeout)

    async def next_chunk(self, timeout):
        """The next DATA bytes, b"" at the stream's end; raises asyncio.TimeoutError when none
        came within `timeout` (the stream stays usable), ConnectionLost or StreamReset."""
        item = await asyncio.wait_for(self.chunks.get(), timeout)
        if isinstance(item, Exception):
            self.chunks.put_nowait(item)  # every later read fails the same way
            raise item
        return item

    async def body(self, timeout):
        parts = []
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            chunk = await self.next_chunk(max(0.001, deadline - loop.time()))
            if chunk == b"":
                return b"".join(parts)
            parts.append(chunk)

    def reset(self):
        """Ends the stream from this side (RST_STREAM CANCEL) if it is still open."""
        self.connection.reset(self)

    def fail(self, error):
        self.closed = True
        if not self.head.done():
            self.head.set_exception(error)
            self.head.exception()  # retrieved: no "never retrieved" warning when nobody waits
        self.chunks.put_nowait(error)


class Connection:
    """One HTTP/2 connection. `request` opens a stream; the reader task routes frames to it."""

    def __init__(self, host, port):
        self.host = host
        self.port = port
        self.streams = {}
        self.lost = None
        self.capacity = asyncio.Condition()
        self.settled = asyncio.Event()
        self.reader_task = None

    async def open(self, timeout=10.0):
        self.reader, self.writer = await asyncio.wait_for(asyncio.open_connection(self.host, self.port), timeout)
        config = h2.config.H2Configuration(client_side=True, header_encoding="utf-8", validate_inbound_headers=False)
        self.h2 = h2.connection.H2Connection(config=config)
        # Set before the preface, so that it carries them (no SETTINGS update after it).
        self.h2.local_settings = h2.settings.Settings(
            client=True,
            initial_values={
                h2.settings.SettingCodes.ENABLE_PUSH: 0,
                h2.settings.SettingCodes.MAX_CONCURRENT_STREAMS: 100,
                h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: 1 << 20,
            },
        )
        self.h2.initiate_connection()
        self.h2.increment_flow_control_window(1 << 24)
        self.flush()
        self.reader_task = asyncio.create_task(self.read_loop())
        # A gateway that authenticates providers allows one stream until the peer proves who
        # it is, and says so in its first SETTINGS: wait for them before opening any.
        await asyncio.wait_for(self.settled.wait(), timeout)

    def flush(self):
        data = self.h2.data_to_send()
        if data and self.lost is None:
            self.writer.write(data)

    async def request(self, method, path, headers=(), body=None):
        """Opens a stream with this request; returns it once the request is written."""
        if self.lost is not None:
            raise self.lost
        async with self.capacity:
            await self.capacity.wait_for(
                lambda: self.lost is not None
                or self.h2.open_outbound_streams < self.h2.remote_settings.max_concurrent_streams
            )
        if self.lost is not None:
            raise self.lost
        stream_id = self.h2.get_next_available_stream_id()
        stream = Stream(self, stream_id)
        self.streams[stream_id] = stream
        fields = [
            (":method", method),
            (":scheme", "http"),
            (":authority", f"{self.host}:{self.port}"),
            (":path", path),
        ] + list(headers)
        if body is not None:
            fields.append(("content-length", str(len(body))))
        self.h2.send_headers(stream_id, fields, end_stream=body is None)
        if body is not None:
            # Bodies here are small: always within the initial stream window.
            self.h2.send_data(stream_id, body, end_stream=True)
        self.flush()
        return stream

    async def call(self, method, path, headers=(), body=None, timeout=20.0):
        """A whole request: (status, headers, body bytes)."""
        stream = await self.request(method, path, headers, body)
        try:
            status, response_headers = await stream.response_head(timeout)
            content = await stream.body(timeout)
        finally:
            stream.reset()
        return status, response_headers, content

    def reset(self, stream):
        if stream.closed:
            return
        stream.closed = True
        self.streams.pop(stream.id, None)
        if self.lost is not None:
            return
        try:
            self.h2.reset_stream(stream.id, error_code=h2.errors.ErrorCodes.CANCEL)
        except (h2.exceptions.StreamClosedError, h2.exceptions.ProtocolError):
            pass  # it ended meanwhile
        self.flush()
        asyncio.create_task(self.notify_capacity())

    async def notify_capacity(self):
        async with self.capacity:
            self.capacity.notify_all()

    async def read_loop(self):
        try:
            while True:
                data = await self.reader.read(65536)
                if not data:
                    raise ConnectionLost("the server closed the connection")
                for event in self.h2.receive_data(data):
                    self.dispatch(event)
                self.flush()
                await self.notify_capacity()
        except (ConnectionLost, OSError, h2.exceptions.ProtocolError) as error:
            self.lose(error if isinstance(error, ConnectionLost) else ConnectionLost(f"{type(error).__name__}: {error}"))
            await self.notify_capacity()

    def dispatch(self, event):
        stream = self.streams.get(getattr(event, "stream_id", 0) or 0)
        if isinstance(event, h2.events.RemoteSettingsChanged):
            self.settled.set()
        elif isinstance(event, h2.events.ResponseReceived) and stream is not None:
            headers = dict(event.headers)
            if not stream.head.done():
                stream.head.set_result((int(headers.get(":status", "0")), headers))
        elif isinstance(event, h2.events.DataReceived):
            # Everything is buffered on the stream's queue: give the window back at once.
            if event.flow_controlled_length:
                self.h2.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
            if stream is not None:
                stream.chunks.put_nowait(event.data)
        elif isinstance(event, h2.events.StreamEnded) and stream is not None:
            stream.closed = True
            self.streams.pop(stream.id, None)
            stream.chunks.put_nowait(b"")
        elif isinstance(event, h2.events.StreamReset) and stream is not None:
            self.streams.pop(stream.id, None)
            stream.fail(StreamReset(f"stream {stream.id} reset by the server: {event.error_code!r}"))
        elif isinstance(event, h2.events.ConnectionTerminated):
            raise ConnectionLost(f"GOAWAY {event.error_code!r} {event.additional_data!r}")

    def lose(self, error):
        if self.lost is not None:
            return
        self.lost = error
        self.settled.set()
        for stream in list(self.streams.values()):
            stream.fail(error)
        self.streams.clear()
        try:
            self.writer.close()
        except Exception:  # noqa: BLE001 - closing a socket that is already gone
            pass

    async def close(self):
        self.lose(ConnectionLost("closed by the client"))
        if self.reader_task is None:
            return
        self.reader_task.cancel()
        try:
            await self.reader_task
        except (asyncio.CancelledError, Exception):  # noqa: BLE001
            pass


class SSEParser:
    """Incremental text/event-stream parser: feed bytes, get complete events
    ({"id", "event", "data"}); comments (heartbeats) are skipped."""

    def __init__(self):
        self.buffer = b""
        self.fields = {}
        self.data = []

    def feed(self, chunk):
        self.buffer += chunk
        events = []
        while True:
            newline = self.buffer.find(b"\n")
            if newline < 0:
                return events
            line = self.buffer[:newline].rstrip(b"\r").decode("utf-8")
            self.buffer = self.buffer[newline + 1:]
            if line == "":
                if self.data or self.fields:
                    events.append({"id": self.fields.get("id"), "event": self.fields.get("event", "message"), "data": "\n".join(self.data)})
                self.fields = {}
                self.data = []
            elif line.startswith(":"):
                continue
            else:
                name, _, value = line.partition(":")
                if value.startswith(" "):
                    value = value[1:]
                if name == "data":
                    self.data.append(value)
                else:
                    self.fields[name] = value
