import Foundation
import GRDB
@_spi(Testing) import PushgateStore
@_spi(Testing) import PushgateStoreSQLite
import PushgateStoreTestKit
import Testing

/// `pushgate backup` and `pushgate restore` at the store's level: what a backup holds, what a
/// restore refuses, and what it keeps.
@Suite("SQLiteBackup")
struct SQLiteBackupTests {
    @Test(
        "a backup of an open store holds exactly what was committed before it, and restores into a store that loads it"
    )
    func backupAndRestore() async throws {
        let root = try TempDirectory()
        defer { root.remove() }
        let store = try openStore(root.path + "/live")
        try await store.commit([
            .createDevice(device("d")), .createDevice(device("e")),
            .register(registration(1, device: "d", topic: "com.example.a")),
            .register(registration(2, device: "e", topic: "com.example.b", unregisteredAt: 3_000)),
        ])
        try await store.commit((1...50).map { .enqueue(notification($0, device: "d", seq: $0)) })
        let before = try store.load()

        let file = root.path + "/backup.sqlite"
        let summary = try SQLiteBackup.backup(directory: root.path + "/live", to: file)
        #expect(summary.path == file && summary.schema == "v7")
        #expect(summary.devices == 2 && summary.registrations == 1 && summary.notifications == 50)
        let mode = try FileManager.default.attributesOfItem(atPath: file)[.posixPermissions] as? Int
        #expect(mode == 0o600, "a backup holds device secrets' hashes and payloads: owner only")
        #expect(!FileManager.default.fileExists(atPath: file + "-wal"), "one self-contained file")
        // Committed after the backup began: not in it.
        try await store.commit([.enqueue(notification(51, device: "d", seq: 51))])
        await store.close()

        let restored = try SQLiteBackup.restore(
            file: file,
            into: root.path + "/restored",
            replacing: false,
            now: { "T" }
        )
        #expect(restored.installed.path == root.path + "/restored/pushgate.sqlite")
        #expect(restored.replaced == nil)
        let reopened = try openStore(root.path + "/restored")
        #expect(try reopened.load() == before)
        try await reopened.commit([.enqueue(notification(52, device: "d", seq: 51))])  // it serves
        await reopened.close()
    }

    @Test(
        "a backup is never written over the store's own files, by any path naming its directory, nor onto a directory"
    )
    func backupDestinationRefusals() async throws {
        let root = try TempDirectory()
        defer { root.remove() }
        let live = root.path + "/live"
        let store = try openStore(live)
        try await store.commit([.createDevice(device("d"))])
        try await store.commit((1...5).map { .enqueue(notification($0, device: "d", seq: $0)) })
        try FileManager.default.createSymbolicLink(atPath: root.path + "/link", withDestinationPath: live)
        func refusal(_ destination: String) -> String {
            do {
                _ = try SQLiteBackup.backup(directory: live, to: destination)
                return "accepted"
            } catch {
                return error.message
            }
        }
        for name in ["pushgate.sqlite", "pushgate.sqlite-wal", "pushgate.sqlite-shm", "pushgate.lock"] {
            for directory in [live, root.path + "/link", live + "/."] {
                #expect(
                    refusal(directory + "/" + name)
                        == "\(directory)/\(name) is the gateway's own \(name) in \(live): name another file, such as \(live)/pushgate-backup.sqlite, and copy it off this machine (a backup on the store's disk is lost with it)"
                )
            }
        }
        #expect(
            refusal(root.path)
                == "\(root.path) is a directory; name the backup file to write, e.g. \(root.path)/pushgate-backup.sqlite"
        )
        // Another name in the data directory is only a file there.
        #expect(refusal(live + "/copy.sqlite") == "accepted")
        #expect(try store.load().notifications.count == 5)
        await store.close()
        #expect(try await openStoreAndLoad(live).notifications.count == 5)
    }

    @Test(
        "a restore is refused while a store is open on the directory, and over a store unless replacing; the replaced one is kept whole"
    )
    func restoreRefusals() async throws {
        let root = try TempDirectory()
        defer { root.remove() }
        let source = try openStore(root.path + "/source")
        try await source.commit([.createDevice(device("from-backup"))])
        let file = root.path + "/backup.sqlite"
        _ = try SQLiteBackup.backup(directory: root.path + "/source", to: file)
        await source.close()

        let target = root.path + "/target"
        let running = try openStore(target)
        try await running.commit([.createDevice(device("already-there"))])
        #expect {
            _ = try SQLiteBackup.restore(file: file, into: target, replacing: true, now: { "T" })
        } throws: { error in
            (error as? StoreError)?.message.contains(
                "cannot restore into \(target): another Pushgate process (pid \(getpid()))"
            ) == true
        }
        await running.close()

        #expect {
            _ = try SQLiteBackup.restore(file: file, into: target, replacing: false, now: { "T" })
        } throws: { error in
            (error as? StoreError)?.message.contains(
                "\(target) already holds a store (\(target)/pushgate.sqlite); pass --replace"
            ) == true
        }
        #expect(
            try await openStoreAndLoad(target).devices.map(\.id) == ["already-there"],
            "a refused restore changes nothing"
        )

        let restored = try SQLiteBackup.restore(file: file, into: target, replacing: true, now: { "20261126T000000Z" })
        let aside = target + "/pushgate.sqlite.replaced-20261126T000000Z"
        #expect(restored.replaced == aside)
        #expect(try await openStoreAndLoad(target).devices.map(\.id) == ["from-backup"])
        // The replaced store, moved aside with its -wal, is still a whole store.
        #expect(try SQLiteBackup.inspect(file: aside).devices == 1)
    }

    @Test("files that are not whole Pushgate stores are refused by name, with the reason")
    func inspectRefusals() async throws {
        let root = try TempDirectory()
        defer { root.remove() }
        func refusal(_ path: String) -> String {
            do {
                _ = try SQLiteBackup.inspect(file: path)
                return "accepted"
            } catch {
                return error.message
            }
        }

        #expect(
            refusal(root.path + "/missing").hasPrefix("cannot read \(root.path)/missing: No such file or directory")
        )
        #expect(refusal(root.path) == "\(root.path) is not a regular file")

        let garbage = root.path + "/garbage.sqlite"
        try Data(repeating: 0x42, count: 8192).write(to: URL(fileURLWithPath: garbage))
        #expect(
            refusal(garbage)
                == "\(garbage) is damaged or is not a SQLite database (SQLite error 26: file is not a database)"
        )

        let foreign = root.path + "/foreign.sqlite"
        try execute("CREATE TABLE users (id INTEGER PRIMARY KEY)", in: foreign)
        #expect(refusal(foreign) == "\(foreign) is not a Pushgate store: it holds a table users and no Pushgate schema")

        let empty = root.path + "/empty.sqlite"
        try execute("PRAGMA user_version = 1", in: empty)
        #expect(refusal(empty) == "\(empty) is not a Pushgate store: it is an empty database")

        let store = try openStore(root.path + "/store")
        try await store.commit((0..<300).map { .createDevice(device("device-\($0)")) })
        let newer = root.path + "/newer.sqlite"
        _ = try SQLiteBackup.backup(directory: root.path + "/store", to: newer)
        await store.close()
        try execute("INSERT INTO grdb_migrations (identifier) VALUES ('v99')", in: newer)
        #expect(
            refusal(newer).hasPrefix(
                "\(newer) comes from a newer Pushgate (schema v1, v2, v3, v4, v5, v6, v7, v99); this version knows v1"
            )
        )

        let damaged = root.path + "/damaged.sqlite"
        _ = try SQLiteBackup.backup(directory: root.path + "/store", to: damaged)
        let handle = try FileHandle(forUpdating: URL(fileURLWithPath: damaged))
        try handle.seek(toOffset: 3 * 4096)
        try handle.write(contentsOf: Data(repeating: 0x5A, count: 4096))
        try handle.close()
        // Found by the integrity check, or earlier by SQLite reading the schema: either way named.
        #expect(refusal(damaged).hasPrefix("\(damaged) is damaged"), "\(refusal(damaged))")
    }

    private func openStoreAndLoad(_ directory: String) async throws -> StoreSnapshot {
        let store = try openStore(directory)
        let snapshot = try store.load()
        await store.close()
        return snapshot
    }

    private func execute(_ sql: String, in path: String) throws {
        let database = try DatabaseQueue(path: path)
        try database.inDatabase { db in try db.execute(sql: sql) }
        try database.close()
    }
}
