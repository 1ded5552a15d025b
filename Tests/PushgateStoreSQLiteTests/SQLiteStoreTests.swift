import Foundation
import GRDB
@_spi(Testing) import PushgateStore
@_spi(Testing) import PushgateStoreSQLite
import PushgateStoreTestKit
import Testing

/// What only the SQLite backend has: its file, its settings, its directory handling, its
/// ownership of the database and SQLite's own words in refusals. What every backend does is in
/// the conformance suite (`StoreBackendKind`).
@Suite("SQLiteStore")
struct SQLiteStoreTests {
    @Test("a new store is empty, in WAL mode, fsyncs every commit and enforces foreign keys")
    func openingSettings() async throws {
        try await withSQLiteStore { store, directory throws in
            #expect(store.path == directory + "/pushgate.sqlite")
            #expect(FileManager.default.fileExists(atPath: store.path))
            #expect(try store.pragma("journal_mode") == "wal")
            #expect(try store.pragma("synchronous") == "2")  // FULL
            #expect(try store.pragma("foreign_keys") == "1")
            #expect(
                try store.load() == StoreSnapshot(devices: [], registrations: [], notifications: [], maxAcceptanceID: 0)
            )
        }
    }

    @Test(
        "the store's files are owner-only whatever the umask and the directory: new ones made so, older ones narrowed"
    )
    func privateFiles() throws {
        let directory = try TempDirectory()
        defer { directory.remove() }
        try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: directory.path)
        func mode(_ name: String) throws -> Int {
            try
                (FileManager.default.attributesOfItem(atPath: directory.path + "/" + name)[.posixPermissions]
                as? NSNumber)?.intValue ?? -1
        }
        let files = ["pushgate.sqlite", "pushgate.sqlite-wal", "pushgate.sqlite-shm"]
        do {
            let backend = try SQLiteBackend(directory: directory.path, logger: quietLogger)
            defer { try? backend.close() }
            _ = try backend.apply([[.createDevice(device("d"))]])
            for name in files { #expect(try mode(name) == 0o600, "\(name)") }
        }
        // A store made under a umask of 022 (as before): its files are narrowed when it opens.
        for name in files where FileManager.default.fileExists(atPath: directory.path + "/" + name) {
            try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: directory.path + "/" + name)
        }
        let reopened = try SQLiteBackend(directory: directory.path, logger: quietLogger)
        defer { try? reopened.close() }
        #expect(try mode("pushgate.sqlite") == 0o600)
        #expect(try reopened.load().devices.count == 1)
        for name in files.dropFirst() where FileManager.default.fileExists(atPath: directory.path + "/" + name) {
            #expect(try mode(name) == 0o600, "\(name)")
        }
    }

    @Test("creates missing parent directories")
    func createsDirectories() async throws {
        let root = try TempDirectory()
        defer { root.remove() }
        let nested = root.path + "/a/b/c/"
        let store = try openStore(nested)
        #expect(store.path == nested + "pushgate.sqlite")
        #expect(FileManager.default.fileExists(atPath: root.path + "/a/b/c/pushgate.sqlite"))
        await store.close()
    }

    @Test("a directory that cannot be created gives an error naming the path")
    func unusableDirectory() throws {
        let root = try TempDirectory()
        defer { root.remove() }
        let file = root.path + "/not-a-directory"
        try Data("x".utf8).write(to: URL(fileURLWithPath: file))
        #expect {
            _ = try openStore(file + "/data")
        } throws: { error in
            guard let error = error as? StoreError else { return false }
            return error.kind == .database && error.message.contains(file + "/data")
                && error.message.contains(file + " exists and is not a directory")
        }
        #expect {
            _ = try openStore(file)
        } throws: { error in
            guard let error = error as? StoreError else { return false }
            return error.kind == .database && error.message.contains(file + " exists and is not a directory")
        }
    }

    @Test("a file that is not a database gives an error with SQLite's message and the path")
    func notADatabase() throws {
        let root = try TempDirectory()
        defer { root.remove() }
        try Data(repeating: 0x42, count: 8192).write(to: URL(fileURLWithPath: root.path + "/pushgate.sqlite"))
        #expect {
            _ = try openStore(root.path)
        } throws: { error in
            guard let error = error as? StoreError else { return false }
            return error.kind == .database
                && error.message.contains(root.path + "/pushgate.sqlite")
                && error.message.contains("not a database")
        }
    }

    @Test("a SQLite database of another program is refused, named, and left untouched")
    func foreignDatabase() throws {
        let root = try TempDirectory()
        defer { root.remove() }
        let path = root.path + "/pushgate.sqlite"
        let other = try DatabaseQueue(path: path)
        try other.write { db in
            try db.execute(
                sql: "CREATE TABLE users (id INTEGER PRIMARY KEY); CREATE TABLE orders (id INTEGER PRIMARY KEY)"
            )
        }
        try other.close()
        #expect {
            _ = try openStore(root.path)
        } throws: { error in
            guard let error = error as? StoreError else { return false }
            return error.kind == .database
                && error.message.contains(
                    "\(path) is not a Pushgate store: it holds the tables orders, users and no Pushgate schema"
                )
        }
        let tables = try DatabaseQueue(path: path).read { db in
            try String.fetchAll(db, sql: "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
        }
        #expect(tables == ["orders", "users"], "no Pushgate table was added to the other program's database")
    }

    @Test("a store damaged on disk fails at start with SQLite's words, the path and what to do")
    func damagedDatabase() async throws {
        let root = try TempDirectory()
        defer { root.remove() }
        let store = try openStore(root.path)
        try await store.commit((0..<200).map { .createDevice(device("device-\($0)")) })
        await store.close()
        let path = root.path + "/pushgate.sqlite"
        // Garbage over every page but the first (the header and schema): the tables' pages.
        let handle = try FileHandle(forUpdating: URL(fileURLWithPath: path))
        let size = try handle.seekToEnd()
        try handle.seek(toOffset: 4096)
        try handle.write(contentsOf: Data(repeating: 0x5A, count: Int(size) - 4096))
        try handle.close()
        #expect {
            _ = try openStore(root.path)
        } throws: { error in
            guard let error = error as? StoreError else { return false }
            return error.kind == .database && error.message.contains(path)
                && error.message.contains("malformed") && error.message.contains("pushgate restore")
        }
    }

    @Test("a second store on the same directory is refused while the first is open")
    func exclusiveOwnership() async throws {
        let directory = try TempDirectory()
        defer { directory.remove() }
        let first = try openStore(directory.path)
        #expect {
            _ = try openStore(directory.path)
        } throws: { error in
            guard let error = error as? StoreError else { return false }
            return error.kind == .database
                && error.message.contains("another Pushgate process (pid \(getpid())) is using \(directory.path)")
                && error.message.contains(directory.path + "/pushgate.lock")
        }
        try await first.commit([.createDevice(device("d"))])  // the first one is unaffected
        await first.close()
        let second = try openStore(directory.path)
        #expect(try second.load().devices == [device("d")])
        await second.close()
    }

    @Test("commits leave WAL checkpoints to a connection of their own")
    func checkpointsOffTheWriter() async throws {
        try await withSQLiteStore { store, directory in
            // SQLite's automatic checkpoint (which would run inside a commit) is replaced.
            #expect(try store.pragma("wal_autocheckpoint") == "0")
            let database = directory + "/pushgate.sqlite"
            let before = try FileManager.default.attributesOfItem(atPath: database)[.size] as? Int ?? 0
            try await store.commit([.createDevice(device("d"))])
            // About 1,300 pages of WAL: past the threshold of 1,000.
            for batch in 0..<12 {
                try await store.commit(
                    (1...100).map { .enqueue(notification(UInt64(batch * 100 + $0), device: "d", payloadSize: 4000)) }
                )
            }
            store.waitForCheckpoints()
            let after = try FileManager.default.attributesOfItem(atPath: database)[.size] as? Int ?? 0
            #expect(
                after > before + 3_000_000,
                "the checkpoint copied the WAL into the database file: \(before) -> \(after) bytes"
            )
            #expect(try store.load().notifications.count == 1200)
        }
    }

    /// The backend itself, no group-commit queue (nothing pauses between its commits unless the
    /// test does), holding device "d", in a directory of its own.
    private func withBackend(_ body: (SQLiteBackend) throws -> Void) throws {
        let directory = try TempDirectory()
        defer { directory.remove() }
        let backend = try SQLiteBackend(directory: directory.path, logger: quietLogger)
        defer { try? backend.close() }
        _ = try backend.apply([[.createDevice(device("d"))]])
        try body(backend)
    }

    /// One transaction of pushes `ids` for device "d", each its own batch: 3,000 bytes, so a
    /// page (a WAL frame) each.
    private func commitPages(_ ids: ClosedRange<UInt64>, _ backend: SQLiteBackend) throws {
        let group: [[StoreCommand]] = ids.map { [.enqueue(notification($0, device: "d", payloadSize: 3000))] }
        for case .failure(let error) in try backend.apply(group) { Issue.record("a batch failed: \(error.message)") }
    }

    @Test("commits back to back keep the WAL bounded: the writer copies what the background checkpoint has not")
    func walBoundedUnderBackToBackCommits() throws {
        try withBackend { backend in
            // Nothing pauses between these commits, so the background checkpoint never catches
            // up by itself (each commit lands while it copies). 20 pages and more per commit,
            // 8,000 in all: twice the frames past which the writer checkpoints.
            let perCommit: UInt64 = 20
            var largest = 0
            for commit in UInt64(0)..<400 {
                try commitPages(commit * perCommit + 1...(commit + 1) * perCommit, backend)
                largest = max(
                    largest,
                    (try? FileManager.default.attributesOfItem(atPath: backend.path + "-wal")[.size] as? Int) ?? 0
                )
            }
            // A frame is a page and its 24-byte header; a commit may end a few frames past the bound.
            let bound = (Int(SQLiteBackend.walBoundFrames) + 2 * Int(perCommit)) * (4096 + 24) + 32
            #expect(largest <= bound, "the WAL reached \(largest) bytes (bound \(bound))")
            #expect(try backend.load().notifications.count == 400 * Int(perCommit))
        }
    }

    @Test("once the writer pauses past the threshold, the WAL is copied and the next commit starts it over")
    func walStartsOverAfterThePause() throws {
        try withBackend { backend in
            // Past the threshold of 1,000 frames; whatever checkpoint those commits asked for
            // has run, and the last commit asks for none (the next step is 125 frames on).
            for commit in UInt64(0)..<55 { try commitPages(commit * 20 + 1...(commit + 1) * 20, backend) }
            backend.waitForCheckpoints()
            try commitPages(1101...1101, backend)
            backend.writerIdle()
            backend.waitForCheckpoints()
            try commitPages(1102...1102, backend)
            #expect(backend.walFrames < 10, "the WAL did not start over after the pause: \(backend.walFrames) frames")
        }
    }

    @Test("the highest acceptance id is written to meta only by the commit that deletes its row")
    func maxAcceptanceIDWrittenOnDeletion() async throws {
        try await withSQLiteStore { store, directory in
            let reader = try DatabaseQueue(path: directory + "/pushgate.sqlite")
            func recorded() throws -> Int64? {
                try reader.read { db in
                    try Int64.fetchOne(db, sql: "SELECT value FROM meta WHERE key = 'max_acceptance_id'")
                }
            }
            try await store.commit([.createDevice(device("d"))])
            for id in 1...5 {
                try await store.commit([.enqueue(notification(UInt64(id), device: "d", seq: UInt64(id)))])
            }
            // Acks behind the newest row leave meta alone: that row says it.
            try await store.commit([.ack(deviceID: "d", acceptanceIDs: [1, 2, 3])])
            #expect(try recorded() == 0)
            #expect(try store.load().maxAcceptanceID == 5)
            try await store.commit([.ack(deviceID: "d", acceptanceIDs: [4, 5])])
            #expect(try recorded() == 5)
            #expect(try store.load().maxAcceptanceID == 5)
            try reader.close()
        }
    }

    @Test("a reopened store keeps its settings")
    func reopenedSettings() async throws {
        let directory = try TempDirectory()
        defer { directory.remove() }
        var store = try openStore(directory.path)
        try await store.commit([.createDevice(device("d"))])
        await store.close()

        store = try openStore(directory.path)
        #expect(try store.pragma("synchronous") == "2")
        #expect(try store.pragma("journal_mode") == "wal")
        // Not exclusive: `pushgate backup` reads the database from another process.
        #expect(try store.pragma("locking_mode") == "normal")
        await store.close()
    }

    @Test("refused batches carry SQLite's words and name the command")
    func refusalMessages() async throws {
        try await withSQLiteStore { store, _ in
            try await store.commit([
                .createDevice(device("d")), .createDevice(device("e")),
                .enqueue(notification(1, device: "d", seq: 1)),
                .register(registration(1, device: "d", topic: "t")),
            ])
            await #expect {
                try await store.commit([.createDevice(device("d"))])
            } throws: { ($0 as? StoreError)?.message.contains("UNIQUE constraint failed: devices.id") == true }
            await #expect {
                try await store.commit([.enqueue(notification(1, device: "d"))])
            } throws: {
                ($0 as? StoreError)?.message.contains("UNIQUE constraint failed: notifications.acceptance_id") == true
            }
            await #expect {
                try await store.commit([.enqueue(notification(UInt64(Int64.max) + 1, device: "d"))])
            } throws: { ($0 as? StoreError)?.message.contains("exceeds the largest storable value") == true }
            await #expect {
                try await store.commit([.register(registration(2, device: "d", topic: "t"))])
            } throws: { error in
                guard let error = error as? StoreError else { return false }
                return error.kind == .database && error.message.contains("UNIQUE constraint failed")
                    && error.message.contains(token(2))
            }

            // In a group: a batch of several commands (undone by its savepoint) and a single one.
            store.pauseWriter()
            let outcomes = Outcomes()
            outcomes.submit(
                store,
                1,
                [
                    .enqueue(notification(3, device: "d")),
                    .ack(deviceID: "d", acceptanceIDs: [1]),
                    .register(registration(9, device: "d", topic: "u")),
                    .createDevice(device("d")),
                ]
            )
            outcomes.submit(store, 2, [.enqueue(notification(UInt64(Int64.max) + 1, device: "d"))])
            store.resumeWriter()
            let results = await outcomes.collect(2)
            if case .failure(let error) = results[1] {
                #expect(error.message.contains("UNIQUE constraint failed: devices.id"))
                #expect(error.message.contains("createDevice d"))
            } else {
                Issue.record("batch 1 committed")
            }
            if case .failure(let error) = results[2] {
                #expect(error.message.contains("exceeds the largest storable value"))
            } else {
                Issue.record("batch 2 committed")
            }
        }
    }
}
