import GRDB
import PushgateModel
import PushgateStore
import PushgateStoreTestKit
import Testing

@testable @_spi(Testing) import PushgateStoreSQLite

@Suite("SQLite migrations")
struct MigrationTests {
    /// A database in `directory` migrated up to v3 only, holding the rows `sql` inserts; `check`
    /// looks at it before it is closed.
    private static func v3Database(
        in directory: TempDirectory,
        _ sql: String,
        check: (DatabaseQueue) async throws -> Void = { _ in }
    ) async throws {
        let queue = try DatabaseQueue(path: directory.path + "/" + SQLiteSchema.databaseFileName)
        try SQLiteSchema.migrator.migrate(queue, upTo: "v3")
        try await queue.write { db in try db.execute(sql: sql) }
        try await check(queue)
        try queue.close()
    }

    @Test("v4 keeps every notification of a v3 database and drops the device index and foreign key")
    func v3ToV4() async throws {
        let directory = try TempDirectory()
        defer { directory.remove() }
        try await Self.v3Database(
            in: directory,
            """
            INSERT INTO devices (id, secret_hash, created_at, acked_seq, last_seq) VALUES ('d', x'00', 1, 2, 3);
            INSERT INTO notifications VALUES (1, 'd', 't', 'topic', 'a1', 'alert', 10, NULL, x'7b7d', 5, 99, 7);
            INSERT INTO notifications VALUES (2, 'd', 't', 'topic', 'a2', 'background', 5, 'c', x'7b7d', 6, 99, NULL);
            """
        ) { queue in
            let index = try await queue.read { db in try String.fetchOne(db, sql: "PRAGMA index_list(notifications)") }
            #expect(index != nil)
        }

        let store = try openStore(directory.path)
        let snapshot = try store.load()
        #expect(snapshot.notifications.map(\.acceptanceID) == [1, 2])
        #expect(snapshot.notifications.map(\.seq) == [7, nil])
        #expect(snapshot.notifications.map(\.push.collapseID) == [nil, "c"])
        // The seq still stored counts: it is above the device's reservation.
        #expect(snapshot.devices.map(\.lastSeq) == [7])
        #expect(try store.pragma("index_list(notifications)") == nil)
        #expect(try store.pragma("foreign_key_list(notifications)") == nil)
        // Without the foreign key, a device's rows go by acceptance id.
        try await store.commit([.deleteDevice(id: "d", at: 10, acceptanceIDs: [1, 2])])
        #expect(try store.load().notifications.isEmpty)
        await store.close()
    }

    @Test("v7 keeps a v6 database's registrations and pushes as APNs ones, and takes Web Push ones")
    func v6ToV7() async throws {
        let directory = try TempDirectory()
        defer { directory.remove() }
        let queue = try DatabaseQueue(path: directory.path + "/" + SQLiteSchema.databaseFileName)
        try SQLiteSchema.migrator.migrate(queue, upTo: "v6")
        try await queue.write { db in
            try db.execute(
                sql: """
                    INSERT INTO devices (id, secret_hash, created_at, acked_seq, last_seq) VALUES ('d', x'00', 1, 0, 3);
                    INSERT INTO registrations (token, device_id, topic, created_at) VALUES ('t', 'd', 'com.example.app', 2);
                    INSERT INTO notifications VALUES (1, 'd', 't', 'com.example.app', 'a1', 'alert', 10, NULL, x'7b7d', 5, 99, 7);
                    """
            )
        }
        try queue.close()

        let store = try openStore(directory.path)
        let snapshot = try store.load()
        #expect(snapshot.registrations.map(\.kind) == [.apns])
        #expect(snapshot.registrations.map(\.applicationServerKey) == [nil])
        #expect(snapshot.notifications.map(\.push.urgency) == [nil])
        let subscription = RegistrationRecord(
            token: "w",
            deviceID: "d",
            topic: "inbox",
            createdAt: 3,
            kind: .webpush,
            applicationServerKey: [4, 5, 6]
        )
        try await store.commit([.register(subscription)])
        #expect(try store.load().registrations.last == subscription)
        await store.close()
    }

    @Test("the ack level of a database written before reservations still bounds the seqs given next")
    func legacyAckLevel() async throws {
        let directory = try TempDirectory()
        defer { directory.remove() }
        // Acked up to 12, every row deleted, the reservation behind: seq 12 was seen.
        try await Self.v3Database(
            in: directory,
            "INSERT INTO devices (id, secret_hash, created_at, acked_seq, last_seq) VALUES ('d', x'00', 1, 12, 3)"
        )
        let store = try openStore(directory.path)
        #expect(try store.load().devices.map(\.lastSeq) == [12])
        await store.close()
    }
}
