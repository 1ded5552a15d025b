import Foundation
import Logging
import PushgateModel
import PushgateStore
import PushgateStoreSQLite

/// A fresh directory under the system temp directory, removed by `remove()`.
public struct TempDirectory {
    public let path: String

    public init() throws {
        let url = FileManager.default.temporaryDirectory
            .appendingPathComponent("pushgate-store-tests-\(UUID().uuidString)", isDirectory: true)
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        path = url.path
    }

    public func remove() {
        try? FileManager.default.removeItem(atPath: path)
    }
}

public let quietLogger = Logger(label: "pushgate.store.tests") { _ in SwiftLogNoOpLogHandler() }

public func openStore(_ directory: String) throws -> SQLiteStore {
    try SQLiteStore(directory: directory, logger: quietLogger)
}

/// Runs `body` with a SQLite store in a fresh directory, then closes it and removes the
/// directory.
public func withSQLiteStore(_ body: (SQLiteStore, String) async throws -> Void) async throws {
    let directory = try TempDirectory()
    defer { directory.remove() }
    let store = try openStore(directory.path)
    do {
        try await body(store, directory.path)
    } catch {
        await store.close()
        throw error
    }
    await store.close()
}

/// Collects the results of callback-style commits, so that a test can submit several batches
/// synchronously (e.g. while the writer is paused) and await them afterwards.
public final class Outcomes: Sendable {
    public typealias Outcome = Result<Void, StoreError>
    private let stream: AsyncStream<(Int, Outcome)>
    private let continuation: AsyncStream<(Int, Outcome)>.Continuation

    public init() {
        (stream, continuation) = AsyncStream.makeStream()
    }

    /// Submits batch number `index`; returns when the batch is queued (or refused).
    public func submit(
        _ store: any NotificationStore,
        _ index: Int,
        _ commands: [StoreCommand],
        urgency: CommitUrgency = .prompt
    ) {
        store.commit(commands, urgency: urgency) { [continuation] result in
            continuation.yield((index, result))
        }
    }

    /// Waits for `count` results, keyed by batch number.
    public func collect(_ count: Int) async -> [Int: Outcome] {
        var results: [Int: Outcome] = [:]
        if count == 0 { return results }
        for await (index, result) in stream {
            results[index] = result
            if results.count == count { break }
        }
        return results
    }

    /// Waits for `count` results, in the order their completions ran.
    public func collectInOrder(_ count: Int) async -> [(Int, Outcome)] {
        var results: [(Int, Outcome)] = []
        if count == 0 { return results }
        for await outcome in stream {
            results.append(outcome)
            if results.count == count { break }
        }
        return results
    }
}

extension Result where Success == Void, Failure == StoreError {
    public var errorKind: StoreError.Kind? {
        if case .failure(let error) = self { return error.kind }
        return nil
    }

    public var isSuccess: Bool {
        if case .success = self { return true }
        return false
    }
}

// MARK: - Records

public func device(_ id: String, createdAt: Int64 = 1_000, lastSeq: UInt64 = 0) -> DeviceRecord {
    DeviceRecord(
        id: id,
        secretHash: Array(repeating: 0xAB, count: 32) + Array(id.utf8),
        createdAt: createdAt,
        lastSeq: lastSeq
    )
}

public func token(_ n: Int) -> String {
    let hex = String(n, radix: 16)
    return String(repeating: "0", count: 64 - hex.count) + hex
}

public func registration(
    _ tokenNumber: Int,
    device: String,
    topic: String,
    createdAt: Int64 = 2_000,
    unregisteredAt: Int64? = nil
) -> RegistrationRecord {
    RegistrationRecord(
        token: token(tokenNumber),
        deviceID: device,
        topic: topic,
        createdAt: createdAt,
        unregisteredAt: unregisteredAt
    )
}

public func notification(
    _ acceptanceID: UInt64,
    device: String,
    tokenNumber: Int = 1,
    topic: String = "com.example.news",
    collapseID: String? = nil,
    payloadSize: Int = 40,
    seq: UInt64? = nil
) -> AcceptedPush {
    let push = Push(
        deviceToken: token(tokenNumber),
        apnsID: "00000000-0000-0000-0000-\(String(format: "%012d", acceptanceID))",
        topic: topic,
        pushType: seq == nil ? .background : .alert,
        priority: seq == nil ? .normal : .high,
        collapseID: collapseID,
        payload: payload(acceptanceID, size: payloadSize)
    )
    return AcceptedPush(
        acceptanceID: acceptanceID,
        deviceID: device,
        push: push,
        acceptedAt: 10_000 &+ Int64(truncatingIfNeeded: acceptanceID),
        expiresAt: 99_000_000 &+ Int64(truncatingIfNeeded: acceptanceID),
        seq: seq
    )
}

/// A JSON object of exactly `size` bytes (when `size` is large enough), padded with spaces.
public func payload(_ n: UInt64, size: Int) -> [UInt8] {
    let json = Array("{\"aps\":{\"content-available\":1},\"n\":\(n)}".utf8)
    return json + Array(repeating: UInt8(ascii: " "), count: max(0, size - json.count))
}
