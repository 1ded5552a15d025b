import Dispatch
import Foundation
import NIOConcurrencyHelpers
@_spi(Testing) import PushgateStore
import PushgateStorePostgres
import PushgateStoreTestKit
import Testing

/// What only the PostgreSQL backend has: a schema shared by gateways that start together, a
/// server that goes away and comes back, a statement that runs too long, and `store copy`.
@Suite("PostgreSQL backend: schema, outages, timeouts, copy", .serialized, .timeLimit(.minutes(3)))
struct PostgresBackendTests {
    @Test("a database of a newer schema version is refused, naming its version and the ones this version knows")
    func newerSchemaRefused() throws {
        let server = try PostgresServer.shared()
        let database = try server.createDatabase()
        try PostgresBackend(url: server.url(database: database), logger: quietLogger).close()
        try server.psql("INSERT INTO pushgate_migrations (version) VALUES (99)", database: database)
        #expect {
            try PostgresBackend(url: server.url(database: database), logger: quietLogger)
        } throws: { error in
            let message = (error as? StoreError)?.message ?? ""
            return message.contains("schema version 99") && message.contains("versions 1 to 3")
        }
    }

    @Test(
        "gateways starting together on an empty database migrate it once (the advisory lock); one of them at a time uses it"
    )
    func concurrentMigration() throws {
        let server = try PostgresServer.shared()
        let database = try server.createDatabase()
        let url = server.url(database: database)
        let failures = NIOLockedValueBox<[String]>([])
        let opened = NIOLockedValueBox<[PostgresBackend]>([])
        DispatchQueue.concurrentPerform(iterations: 4) { _ in
            do {
                let backend = try PostgresBackend(url: url, logger: quietLogger)
                opened.withLockedValue { $0.append(backend) }
            } catch {
                failures.withLockedValue { $0.append("\(error)") }
            }
        }
        let failed = failures.withLockedValue { $0 }
        let backends = opened.withLockedValue { $0 }
        #expect(backends.count == 1 && failed.count == 3, "\(failed)")
        #expect(failed.allSatisfy { $0.contains("is using this database") }, "\(failed)")
        #expect(try server.psql("SELECT count(*) FROM pushgate_migrations", database: database) == "3")
        // Once the first lets go, the next may open it.
        for backend in backends { try backend.close() }
        try PostgresBackend(url: url, logger: quietLogger).close()
    }

    @Test(
        "a fence holds for the device's owner at its epoch only: a device claimed since, or owned under a lapsed lease, fails its batch alone as fenced"
    )
    func fences() async throws {
        let server = try PostgresServer.shared()
        let database = try server.createDatabase()
        let url = server.url(database: database)
        let store = GroupCommitStore(backend: try PostgresBackend(url: url, logger: quietLogger), logger: quietLogger)
        defer { Task { await store.close() } }
        let cluster = PostgresCluster(url: url, leaseMillis: 60_000, logger: quietLogger)
        try await store.commit([.createDevice(DeviceRecord(id: "d", secretHash: [1], createdAt: 1))])
        let first = try cluster.join(node: "a", address: "http://127.0.0.1:1")
        let second = try cluster.join(node: "b", address: "http://127.0.0.1:2")
        #expect(try cluster.claim(device: "d", lease: first, reason: .takeover) == .claimed(epoch: 1, previous: nil))
        let enqueue = StoreCommand.enqueue(notification(1, device: "d"))
        try await store.commit([.fence(deviceID: "d", lease: first, epoch: 1), enqueue])

        // Another node's stream claims it: the first node's next batch is refused, alone.
        guard case .claimed(2, let previous) = try cluster.claim(device: "d", lease: second, reason: .stream) else {
            Issue.record("the stream did not claim the device")
            return
        }
        #expect(previous?.name == "a")
        await #expect {
            try await store.commit([.fence(deviceID: "d", lease: first, epoch: 1), .remove(acceptanceIDs: [1])])
        } throws: { ($0 as? StoreError)?.kind == .fenced }
        #expect(try store.load().notifications.map(\.acceptanceID) == [1])
        try await store.commit([.fence(deviceID: "d", lease: second, epoch: 2), .remove(acceptanceIDs: [1])])
        #expect(try store.load().notifications.isEmpty)

        // A lapsed lease fences its owner even before anyone claims the device.
        try cluster.leave(lease: second)
        await #expect {
            try await store.commit([.fence(deviceID: "d", lease: second, epoch: 2), enqueue])
        } throws: { ($0 as? StoreError)?.kind == .fenced }
        #expect(try cluster.claim(device: "d", lease: first, reason: .takeover) == .claimed(epoch: 3, previous: nil))
    }

    @Test(
        "a group's fences go in one statement, yet a device claimed since fails only the batches that fence it"
    )
    func fencesOfAGroup() throws {
        let server = try PostgresServer.shared()
        let database = try server.createDatabase()
        let url = server.url(database: database)
        let backend = try PostgresBackend(url: url, logger: quietLogger)
        defer { try? backend.close() }
        let cluster = PostgresCluster(url: url, leaseMillis: 60_000, logger: quietLogger)
        let devices = ["d1", "d2", "d3"]
        _ = try backend.apply([devices.map { .createDevice(DeviceRecord(id: $0, secretHash: [1], createdAt: 1)) }])
        let mine = try cluster.join(node: "a", address: "http://127.0.0.1:1")
        let other = try cluster.join(node: "b", address: "http://127.0.0.1:2")
        for device in devices {
            #expect(
                try cluster.claim(device: device, lease: mine, reason: .takeover) == .claimed(epoch: 1, previous: nil)
            )
        }
        // d2 is another node's now.
        guard case .claimed(2, _) = try cluster.claim(device: "d2", lease: other, reason: .stream) else {
            Issue.record("the stream did not claim d2")
            return
        }
        let results = try backend.apply([
            [.fence(deviceID: "d1", lease: mine, epoch: 1), .enqueue(notification(1, device: "d1"))],
            [.fence(deviceID: "d2", lease: mine, epoch: 1), .enqueue(notification(2, device: "d2"))],
            [
                .fence(deviceID: "d1", lease: mine, epoch: 1), .fence(deviceID: "d3", lease: mine, epoch: 1),
                .enqueue(notification(3, device: "d3")),
            ],
            [.fence(deviceID: "d2", lease: mine, epoch: 1), .enqueue(notification(4, device: "d2"))],
        ])
        #expect(results.map { (try? $0.get()) != nil } == [true, false, true, false])
        for case .failure(let error) in results {
            #expect(error.kind == .fenced && error.message.contains("device d2 is not owned by lease"))
        }
        #expect(try backend.load().notifications.map(\.acceptanceID).sorted() == [1, 3])
    }

    @Test("a URL libpq cannot read is refused without the fragment it quotes (it may be the password)")
    func unreadableURL() throws {
        #expect {
            try PostgresBackend(url: "postgresql://gw:se%zzcret@127.0.0.1:1/db", logger: quietLogger)
        } throws: { error in
            let message = (error as? StoreError)?.message ?? ""
            return message.contains("invalid percent-encoded token") && !message.contains("cret")
        }
    }

    @Test("a server restart fails commits as unavailable; the store commits again without being reopened")
    func serverRestart() async throws {
        let server = try PostgresServer()
        defer { server.destroy() }
        let url = server.url(database: try server.createDatabase())
        var options = PostgresOptions()
        options.probeInterval = .milliseconds(100)
        let store = GroupCommitStore(
            backend: try PostgresBackend(url: url, options: options, logger: quietLogger),
            logger: quietLogger
        )
        try await store.commit([.createDevice(device("d")), .enqueue(notification(1, device: "d", seq: 1))])

        server.stop(mode: "fast")
        await #expect {
            try await store.commit([.enqueue(notification(2, device: "d", seq: 2))])
        } throws: { ($0 as? StoreError)?.kind == .unavailable }
        #expect(!store.health.canCommit)
        #expect(!store.backend.connectionStatus.isConnected)

        try server.start()
        // The probe finds the server back with no commit to try.
        let deadline = ContinuousClock.now + .seconds(30)
        while !store.health.canCommit, ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(50))
        }
        #expect(store.health.canCommit)
        try await store.commit([.enqueue(notification(3, device: "d", seq: 3))])
        #expect(try store.load().notifications.map(\.acceptanceID) == [1, 3])
        #expect(
            store.backend.connectionStatus.errors[.connectionLost] + store.backend.connectionStatus.errors[.connect] > 0
        )
        await store.close()
    }

    @Test(
        "a commit waiting for a synchronous standby that never answers fails as unavailable, not committed; the store goes on once the standby requirement is lifted"
    )
    func synchronousStandbyAway() async throws {
        let server = try PostgresServer()
        defer { server.destroy() }
        let url = server.url(database: try server.createDatabase())
        var options = PostgresOptions()
        options.statementTimeoutMilliseconds = 300
        let store = GroupCommitStore(
            backend: try PostgresBackend(url: url, options: options, logger: quietLogger),
            logger: quietLogger
        )
        try await store.commit([.createDevice(device("before"))])
        // Every commit now waits for a standby that does not exist.
        try server.psql("ALTER SYSTEM SET synchronous_standby_names = 'absent'")
        try server.psql("SELECT pg_reload_conf()")
        // A new session sees it once the postmaster has reloaded, which signals every session
        // in the same step: the store's applies it before its next statement.
        while try server.psql("SHOW synchronous_standby_names") != "absent" {
            try await Task.sleep(for: .milliseconds(20))
        }
        await #expect {
            try await store.commit([.createDevice(device("waiting"))])
        } throws: { ($0 as? StoreError)?.kind == .unavailable }
        #expect(store.backend.connectionStatus.errors[.commitUnknown] == 1)

        try server.psql("ALTER SYSTEM RESET synchronous_standby_names")
        try server.psql("SELECT pg_reload_conf()")
        while try server.psql("SHOW synchronous_standby_names") != "" {
            try await Task.sleep(for: .milliseconds(20))
        }
        try await store.commit([.createDevice(device("after"))])
        // Committed locally when its session was ended: answered 503, yet in the database (as
        // documented), where the next start finds it.
        #expect(try store.load().devices.map(\.id) == ["after", "before", "waiting"])
        await store.close()
    }

    @Test("a statement held past the statement timeout fails its group as unavailable; the next commit succeeds")
    func statementTimeout() async throws {
        let server = try PostgresServer.shared()
        let database = try server.createDatabase()
        var options = PostgresOptions()
        options.statementTimeoutMilliseconds = 300
        let store = GroupCommitStore(
            backend: try PostgresBackend(url: server.url(database: database), options: options, logger: quietLogger),
            logger: quietLogger
        )
        try await store.commit([.createDevice(device("d"))])
        // Another session holds the devices table for longer than the timeout.
        let locker = Thread {
            _ = try? server.psql("BEGIN; LOCK TABLE devices; SELECT pg_sleep(2); COMMIT;", database: database)
        }
        locker.start()
        while try server.psql(
            "SELECT count(*) FROM pg_locks l JOIN pg_class c ON c.oid = l.relation WHERE c.relname = 'devices' AND l.mode = 'AccessExclusiveLock' AND l.granted",
            database: database
        ) == "0" {
            try await Task.sleep(for: .milliseconds(20))
        }
        let started = ContinuousClock.now
        await #expect {
            try await store.commit([.reserveSeqs(deviceID: "d", through: 5)])
        } throws: { ($0 as? StoreError)?.kind == .unavailable }
        #expect(ContinuousClock.now - started < .seconds(2), "the commit waited for the lock past the timeout")
        while try server.psql(
            "SELECT count(*) FROM pg_locks l JOIN pg_class c ON c.oid = l.relation WHERE c.relname = 'devices'",
            database: database
        ) != "0" {
            try await Task.sleep(for: .milliseconds(50))
        }
        try await store.commit([.reserveSeqs(deviceID: "d", through: 7)])
        #expect(try store.load().devices.first?.lastSeq == 7)
        await store.close()
    }

    @Test("importSnapshot copies every record into an empty database and refuses a non-empty one, changing nothing")
    func importSnapshot() async throws {
        let server = try PostgresServer.shared()
        let sourceStorage = InMemoryStorage()
        let source = GroupCommitStore(backend: InMemoryBackend(storage: sourceStorage), logger: quietLogger)
        try await source.commit([
            .createDevice(device("d", lastSeq: 3)), .createDevice(device("e")),
            .register(registration(1, device: "d", topic: "a")),
            .register(registration(2, device: "e", topic: "a", unregisteredAt: 50)),
            .setAppState(token: token(1), state: .background),
            .enqueue(notification(10, device: "d", seq: 4)), .enqueue(notification(11, device: "d")),
            .enqueue(notification(12, device: "d", seq: 5)),
            .saveBuckets([BucketRecord(key: BucketRecord.deviceKey("d"), level: 7, at: 9)]),
            .addTotals(["received": 12]),
            .saveFetchStates([
                FetchStateRecord(
                    token: token(1),
                    results: 5,
                    resultCount: 2,
                    penaltyUntil: nil,
                    interval: .seconds(60),
                    lastBudgetAt: 3
                )
            ]),
            .openFetchWindows([
                FetchWindowRecord(deviceID: "d", seq: 4, token: token(1), openedAt: 1),
                FetchWindowRecord(deviceID: "d", seq: 5, token: token(1), openedAt: 2),
            ]),
            .closeFetchWindows(deviceID: "d", seqs: [4]),
        ])
        try await source.commit([.enqueue(notification(13, device: "d")), .remove(acceptanceIDs: [13])])
        let snapshot = try source.load()
        #expect(snapshot.maxAcceptanceID == 13)
        await source.close()

        let database = try server.createDatabase()
        let backend = try PostgresBackend(url: server.url(database: database), logger: quietLogger)
        try backend.importSnapshot(snapshot)
        #expect(try backend.load() == snapshot)
        #expect {
            try backend.importSnapshot(snapshot)
        } throws: { ($0 as? StoreError)?.message.contains("not empty") == true }
        #expect(try backend.load() == snapshot)
        try backend.close()
    }
}
