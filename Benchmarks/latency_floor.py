"""The floor under a durable push's latency: pushes arriving at RATE per second, each answered
only once an fdatasync covering it has returned, with perfect group commit and no other work.

    python3 Benchmarks/latency_floor.py DIRECTORY RATE SECONDS [file|sqlite]

One thread. Arrivals are a fixed schedule (one every 1/RATE s); whenever pushes are due the
thread writes them all and syncs once, so a push that arrives during a sync waits for the next,
as it does in the gateway. A push's latency is from its scheduled arrival to the end of its
sync. Nothing a gateway must do besides the sync is done (no request, no parsing, no event
write), so its percentiles are what this disk alone allows at that rate:
  file    append 512 bytes per push to a file and fdatasync it (the disk's own floor);
  sqlite  the store's shape: SQLite in WAL mode with synchronous=FULL, an INSERT per push and
          the DELETE of the previous commit's pushes (their acks) in one transaction, the WAL
          checkpointed by SQLite whenever it passes 1,000 pages (the gateway checkpoints from
          another thread instead, so this mode is a little above the gateway's floor).
Prints one JSON line: the pushes' percentiles in ms, commits, pushes per commit, and the
percentiles of the commits' own durations (what the disk took; a push waits longer when it
arrives during the commit before its own).
"""
import json
import os
import sqlite3
import sys
import time


def quantile(values, q):
    return values[min(len(values) - 1, int(q * len(values)))]


def main():
    if len(sys.argv) not in (4, 5):
        sys.exit("usage: python3 Benchmarks/latency_floor.py DIRECTORY RATE SECONDS [file|sqlite]")
    directory, rate, seconds = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
    mode = sys.argv[4] if len(sys.argv) > 4 else "file"
    total = int(rate * seconds)
    path = os.path.join(directory, f"latency-floor.{mode}")
    if mode == "file":
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        record = b"x" * 512

        def commit(first, last):
            os.write(fd, record * (last - first))
            os.fdatasync(fd)

        close = lambda: os.close(fd)
    elif mode == "sqlite":
        db = sqlite3.connect(path, isolation_level=None)
        db.execute("PRAGMA journal_mode = WAL")
        db.execute("PRAGMA synchronous = FULL")
        db.execute("CREATE TABLE IF NOT EXISTS notifications (acceptance_id INTEGER PRIMARY KEY, device_id TEXT, payload BLOB)")
        payload = b"x" * 200
        acked = []

        def commit(first, last):
            db.execute("BEGIN IMMEDIATE")
            db.executemany("INSERT INTO notifications VALUES (?, ?, ?)",
                           ((i, f"{i % 1000:032x}", payload) for i in range(first, last)))
            db.executemany("DELETE FROM notifications WHERE acceptance_id = ?", ((i,) for i in acked))
            db.execute("COMMIT")
            acked[:] = range(first, last)

        close = db.close
    else:
        sys.exit(f"latency_floor.py: mode is file or sqlite, not {mode}")

    latencies, commits, start = [], [], time.monotonic()
    done = 0
    while done < total:
        now = time.monotonic()
        due = min(total, int((now - start) * rate) + 1)
        if due <= done:
            time.sleep(start + done / rate - now)
            continue
        began = time.monotonic()
        commit(done, due)
        ended = time.monotonic()
        commits.append((ended - began) * 1000)
        latencies.extend((ended - (start + i / rate)) * 1000 for i in range(done, due))
        done = due
    close()
    os.unlink(path)
    for suffix in ("-wal", "-shm"):
        if os.path.exists(path + suffix):
            os.unlink(path + suffix)
    latencies.sort()
    commits.sort()
    print(json.dumps({
        "mode": mode, "rate": rate, "pushes": total, "commits": len(commits),
        "pushesPerCommit": round(total / len(commits), 2),
        "p50Ms": round(quantile(latencies, 0.5), 3), "p99Ms": round(quantile(latencies, 0.99), 3),
        "p999Ms": round(quantile(latencies, 0.999), 3), "maxMs": round(latencies[-1], 3),
        "commitP50Ms": round(quantile(commits, 0.5), 3), "commitP99Ms": round(quantile(commits, 0.99), 3),
        "commitP999Ms": round(quantile(commits, 0.999), 3), "commitMaxMs": round(commits[-1], 3),
    }))


main()
