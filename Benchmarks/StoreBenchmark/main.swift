import Dispatch
import Logging
import PushgateModel
import PushgateStore
import PushgateStoreSQLite
import Synchronization

// The gateway's SQLite store alone (no network, no event loop), in the shape of
// Benchmarks/store-floor.c:
// GROUP pushes per transaction, each its own batch (`enqueue`), with the acks of the group
// before (`ack`, one batch per ack); the same rows, payload and fsync'd commits. What it adds
// to the C floor is the store's own cost around the same SQL: GRDB, the Swift commands and
// their bindings, the batches, and what the gateway's schema adds (the (device_id, seq) index,
// the foreign key to devices), applied on the calling thread. Prints CPU-seconds (user +
// system) per 100k pushes, as the C floor does; compare them in one session
// (`Benchmarks/store.sh` runs this, its writer mode and the floor).
//
// With `writer` the same batches go through the store the gateway uses (`SQLiteStore`: the
// group-commit queue, its writer thread, completions on that thread), submitted one by one as
// an event loop does and waited for, a group at a time: what the hand-off to the writer and
// back costs on top of the backend's work. Pacing is `.immediate`: the caller waits for every
// batch of a group, so none would arrive during a linger. (The writer wakes after the caller
// has submitted the group: 1.08 fdatasync per group under strace, checkpoints included.)
//
//   swift run -c release StoreBenchmark DIR PUSHES GROUP ACKS_PER_PUSH [writer]
#if canImport(Glibc)
import Glibc
#endif

func cpuSeconds() -> Double {
    var usage = rusage()
    getrusage(RUSAGE_SELF.rawValue, &usage)
    return Double(usage.ru_utime.tv_sec) + Double(usage.ru_utime.tv_usec) / 1e6
        + Double(usage.ru_stime.tv_sec) + Double(usage.ru_stime.tv_usec) / 1e6
}

func fail(_ message: String) -> Never {
    print(message)
    exit(1)
}

let arguments = CommandLine.arguments
guard arguments.count == 5 || (arguments.count == 6 && arguments[5] == "writer"), let pushes = Int(arguments[2]),
    let group = Int(arguments[3]), let acksPerPush = Double(arguments[4]), pushes > 0, group > 0, acksPerPush >= 0
else {
    fail("usage: StoreBenchmark DIR PUSHES GROUP ACKS_PER_PUSH [writer]")
}
let logger = Logger(label: "store-benchmark") { _ in SwiftLogNoOpLogHandler() }

let apply: ([[StoreCommand]]) -> Void
if arguments.count == 6 {
    let store: SQLiteStore
    do {
        store = try SQLiteStore(directory: arguments[1], pacing: .immediate, logger: logger)
    } catch {
        fail("cannot open the store: \(error.message)")
    }
    // One wake-up of the caller per group, as the gateway's loop gets one per commit.
    let done = DispatchSemaphore(value: 0)
    let remaining = Atomic<Int>(0)
    apply = { batches in
        remaining.store(batches.count, ordering: .relaxed)
        for batch in batches {
            store.commit(batch, urgency: .prompt) { result in
                if case .failure(let error) = result { fail("a batch failed: \(error.message)") }
                if remaining.subtract(1, ordering: .acquiringAndReleasing).newValue == 0 { done.signal() }
            }
        }
        done.wait()
    }
} else {
    let backend: SQLiteBackend
    do {
        backend = try SQLiteBackend(directory: arguments[1], logger: logger)
    } catch {
        fail("cannot open the store: \(error.message)")
    }
    apply = { batches in
        do throws(StoreError) {
            for case .failure(let error) in try backend.apply(batches) { fail("a batch failed: \(error.message)") }
        } catch {
            fail("the group failed: \(error.message)")
        }
    }
}

// The C floor's pushes: 1,000 devices, a 64-digit token, its topic, a UUID-shaped id, 122 bytes.
func deviceID(_ n: Int) -> String {
    let digits = String(n % 1000)
    return "device-" + String(repeating: "0", count: 8 - digits.count) + digits + "-aaaaaaaaaaaa"
}
apply(
    (0..<1000).map {
        [.createDevice(DeviceRecord(id: deviceID($0), secretHash: [UInt8](repeating: 1, count: 32), createdAt: 0))]
    }
)
let payload = [UInt8](repeating: UInt8(ascii: "x"), count: 122)
func push(_ n: Int) -> AcceptedPush {
    let digits = String(n % 1000)
    let token = String(repeating: "0", count: 64 - digits.count) + digits
    let hex = String(n, radix: 16, uppercase: true)
    let apnsID =
        String(repeating: "0", count: max(0, 8 - hex.count)) + hex + "-0000-4000-8000-"
        + String(repeating: "0", count: max(0, 12 - hex.count)) + hex
    let push = Push(
        deviceToken: token,
        apnsID: apnsID,
        topic: "com.example.bench",
        pushType: .alert,
        priority: .high,
        collapseID: nil,
        payload: payload
    )
    return AcceptedPush(
        acceptanceID: UInt64(n),
        deviceID: deviceID(n),
        push: push,
        acceptedAt: 1_700_000_000_000,
        expiresAt: 1_702_592_000_000,
        seq: UInt64(n / 1000 + 1)
    )
}

// Built before the clock starts, as the C floor formats each row in its loop (a few
// snprintf calls, far below the store's cost): what is timed is the store.
let records = (1...pushes).map(push)
var unacked: [Int] = []
var ackCredit = 0.0
var acks = 0
let start = cpuSeconds()
var next = 1
while next <= pushes {
    var batches: [[StoreCommand]] = []
    // Acks for the previous group: each deletes the pushes since the device's previous ack.
    if acksPerPush > 0, !unacked.isEmpty {
        ackCredit += acksPerPush * Double(unacked.count)
        let count = max(1, Int(ackCredit))
        ackCredit -= Double(count)
        let per = (unacked.count + count - 1) / count
        for first in stride(from: 0, to: unacked.count, by: per) {
            let ids = unacked[first..<min(first + per, unacked.count)]
            batches.append([.ack(deviceID: deviceID(ids.first!), acceptanceIDs: ids.map { UInt64($0) })])
            acks += 1
        }
    }
    unacked.removeAll(keepingCapacity: true)
    let last = min(next + group - 1, pushes)
    for n in next...last {
        batches.append([.enqueue(records[n - 1])])
        unacked.append(n)
    }
    next = last + 1
    apply(batches)
}
let used = cpuSeconds() - start
let perHundredThousand = (used / (Double(pushes) / 1e5) * 1000).rounded() / 1000
print("\(perHundredThousand) CPU-s per 100k pushes (group \(group), \(acks) acks for \(pushes) pushes)")
