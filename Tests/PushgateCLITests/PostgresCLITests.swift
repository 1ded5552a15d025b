import Foundation
import PushgateStoreTestKit
import PushgateTestKit
import Testing

/// `pushgate serve --database-url` against a real PostgreSQL server started by the tests: the URL
/// forms operators write, a role that is only a member of the owner, a restart on a new empty
/// data directory, an outage under load and without traffic, and `pushgate store copy`.
@Suite("PostgreSQL: serve --database-url, outages, store copy", .serialized, .timeLimit(.minutes(5)))
struct PostgresCLITests {
    // MARK: URL forms and roles

    @Test(
        "URL forms: sslmode absent or given, a percent-encoded password with @ : / % ? # & = and a space, the socket form with no user, a URL file ending in a newline"
    )
    func urlForms() throws {
        let server = try PostgresServer.shared()
        let database = try server.createDatabase()
        let password = "p@ss:/%?#&= w"
        let role = "gw_\(getpid())"
        try server.psql("CREATE ROLE \(role) LOGIN PASSWORD '\(password)'")
        try server.psql("ALTER DATABASE \(database) OWNER TO \(role)")
        try server.psql("ALTER SCHEMA public OWNER TO \(role)", database: database)
        let encoded = try #require(password.addingPercentEncoding(withAllowedCharacters: .alphanumerics))
        #expect(encoded == "p%40ss%3A%2F%25%3F%23%26%3D%20w")
        let tcp = "postgresql://\(role):\(encoded)@127.0.0.1:\(server.port)/\(database)"
        // The socket form names no user: libpq takes the OS user's name, which local trust
        // (peer on a packaged server) admits as the role of that name.
        let osUser =
            Unprivileged.dropsPrivileges ? Unprivileged.user : String(cString: getpwuid(geteuid()).pointee.pw_name)
        if try server.psql("SELECT count(*) FROM pg_roles WHERE rolname = '\(osUser)'") == "0" {
            try server.psql("CREATE ROLE \"\(osUser)\" LOGIN")
        }
        try server.psql("GRANT \(role) TO \"\(osUser)\"")
        let socket = "postgresql:///\(database)?host=\(server.socketDirectory)&port=\(server.port)"

        let scratch = try scratchDirectory()
        defer { try? FileManager.default.removeItem(atPath: scratch) }
        let urlFile = scratch + "/database-url"
        try Data((tcp + "?sslmode=prefer\n").utf8).write(to: URL(fileURLWithPath: urlFile))
        try Unprivileged.handOver(urlFile)

        var pushes = 0
        for (name, arguments) in [
            ("no sslmode", ["--database-url", tcp]),
            ("sslmode=disable", ["--database-url", tcp + "?sslmode=disable"]),
            ("a URL file ending in a newline", ["--database-url-file", urlFile]),
            ("the socket form", ["--database-url", socket]),
        ] {
            let gateway = try GatewayProcess(arguments: ["--listen", "127.0.0.1:0"] + arguments, listeners: 1)
            // Listening comes before the node has joined its cluster (a lease taken in the
            // database): on a loaded machine /readyz may say 503 for a moment.
            try waitUntil("\(name): /readyz 200", seconds: 30) { try httpStatus(gateway.urls[0] + "/readyz") == 200 }
            let device = try PythonClient.json(
                DeviceInfo.self,
                "device_setup.py",
                [gateway.urls[0], "com.example.\(pushes)"]
            )
            let push = try curlPush(
                gateway.urls[0],
                token: device.token,
                topic: device.topic,
                apnsID: nil,
                body: #"{"aps":{"alert":"x"}}"#
            )
            #expect(push.status == 200, "\(name): \(push.raw)")
            pushes += 1
            #expect(gateway.stop() == 0, "\(name)")
            #expect(
                !gateway.logged.contains(password) && !gateway.logged.contains(encoded),
                "\(name): the password was logged"
            )
        }
        #expect(try server.psql("SELECT count(*) FROM notifications", database: database) == "\(pushes)")
    }

    @Test("a role that is a member of the owner role (not the owner) runs the gateway on the owner's schema")
    func memberOfOwner() throws {
        let server = try PostgresServer.shared()
        let database = try server.createDatabase()
        let owner = "owner_\(getpid())"
        let member = "member_\(getpid())"
        try server.psql("CREATE ROLE \(owner) LOGIN PASSWORD 'owner-pw'")
        try server.psql("CREATE ROLE \(member) LOGIN PASSWORD 'member-pw' IN ROLE \(owner)")
        try server.psql("ALTER DATABASE \(database) OWNER TO \(owner)")
        try server.psql("ALTER SCHEMA public OWNER TO \(owner)", database: database)
        let base = "@127.0.0.1:\(server.port)/\(database)"

        // The owner's gateway makes the schema; the member's finds it and works in it.
        var gateway = try GatewayProcess(
            arguments: ["--listen", "127.0.0.1:0", "--database-url", "postgresql://\(owner):owner-pw" + base],
            listeners: 1
        )
        let device = try PythonClient.json(DeviceInfo.self, "device_setup.py", [gateway.urls[0], "com.example.member"])
        #expect(gateway.stop() == 0)
        #expect(
            try server.psql("SELECT tableowner FROM pg_tables WHERE tablename = 'devices'", database: database) == owner
        )

        gateway = try GatewayProcess(
            arguments: ["--listen", "127.0.0.1:0", "--database-url", "postgresql://\(member):member-pw" + base],
            listeners: 1
        )
        #expect(try httpStatus(gateway.urls[0] + "/readyz") == 200)
        let push = try curlPush(
            gateway.urls[0],
            token: device.token,
            topic: device.topic,
            apnsID: nil,
            body: #"{"aps":{"alert":"m"}}"#
        )
        #expect(push.status == 200, "\(push.raw)")
        #expect(gateway.stop() == 0, "\(gateway.logged)")
    }

    // MARK: Nothing in SQLite

    @Test("with --database-url nothing is written to the data directory: a restart on a new, empty one loses nothing")
    func newEmptyDataDirectory() throws {
        let server = try PostgresServer.shared()
        let url = server.url(database: try server.createDatabase())
        let scratch = try scratchDirectory()
        defer { try? FileManager.default.removeItem(atPath: scratch) }
        let first = scratch + "/first"
        var gateway = try GatewayProcess(
            arguments: ["--listen", "127.0.0.1:0", "--database-url", url, "--data-dir", first],
            listeners: 1
        )
        let device = try PythonClient.json(DeviceInfo.self, "device_setup.py", [gateway.urls[0], "com.example.newdir"])
        let burst = try PythonClient.json(
            BurstResult.self,
            "provider_burst.py",
            ["--url", gateway.urls[0], "--token", device.token, "--topic", device.topic, "--count", "200"]
        )
        #expect(burst.ok.count == 200, "\(burst.rejected.prefix(3))")
        #expect(gateway.stop(signal: SIGKILL) == SIGKILL)
        #expect(!FileManager.default.fileExists(atPath: first), "the unused data directory was created")

        gateway = try GatewayProcess(
            arguments: ["--listen", "127.0.0.1:0", "--database-url", url, "--data-dir", scratch + "/second"],
            listeners: 1
        )
        let drained = try drainBacklog(gateway, device)
        #expect(Set(burst.ok).isSubset(of: Set(drained.events.compactMap(\.apnsId))), "pushes answered 200 were lost")
        #expect(gateway.stop() == 0)
    }

    // MARK: Outages

    @Test(
        "PostgreSQL stopped under load and without traffic: 503s with apns-id and retry-after, /readyz 503 within 10 s, /healthz 200, ready again within 30 s of its return, every 200 delivered"
    )
    func outage() throws {
        let server = try PostgresServer()
        defer { server.destroy() }
        let url = server.url(database: try server.createDatabase())
        let gateway = try GatewayProcess(
            arguments: [
                "--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0", "--database-url", url, "--log-level",
                "notice",
            ],
            listeners: 1,
            adminListeners: 1
        )
        let base = gateway.urls[0]
        let admin = gateway.adminURLs[0]
        let device = try PythonClient.json(DeviceInfo.self, "device_setup.py", [base, "com.example.outage"])

        // Under load: the server goes away (a fast shutdown) once 300 pushes have their 200, and
        // comes back 8 s later, while the rest are answered. Longer than a commit caught by the
        // shutdown waits to learn its outcome (databaseStatementTimeoutMs and a second): then
        // the store stops committing, and pushes are refused until the server is back.
        let bounce =
            "cd /tmp; \(server.controlCommand(["-m", "fast", "-w", "stop"]).joined(separator: " ")); sleep 8; \(server.controlCommand(["-w", "start"]).joined(separator: " "))"
        let command = String(decoding: try JSONEncoder().encode(["/bin/sh", "-c", bounce]), as: UTF8.self)
        let burst = try PythonClient.json(
            BurstResult.self,
            "provider_burst.py",
            [
                "--url", base, "--token", device.token, "--topic", device.topic, "--count", "3000",
                "--concurrency", "20", "--run-after", "300", "--run", command,
            ]
        )
        #expect(burst.run?.status == 0, "\(burst.run?.stderr ?? "")")
        #expect(burst.ok.count >= 300)
        #expect(burst.unknown.isEmpty, "\(burst.unknown.prefix(3))")
        let unavailable = burst.rejected.filter { $0.status == 503 && $0.reason == "ServiceUnavailable" }
        #expect(unavailable.count == burst.rejected.count, "other refusals: \(burst.rejected.prefix(5))")
        // The 200s stop once the server does: the rest of the burst meets the outage.
        #expect(
            !unavailable.isEmpty && (burst.run?.okWhenDone ?? 0) < burst.sent.count,
            "no 503 while the database was down: \(burst.ok.count) 200s, \(burst.run?.okWhenDone ?? -1) when it was back"
        )
        #expect(unavailable.allSatisfy { $0.retryAfter != nil }, "503s without retry-after")
        #expect(unavailable.allSatisfy { $0.apnsIdEcho == $0.apnsId }, "503s without their apns-id")

        // Back: ready again in the same process.
        let back = try waitFor(200, admin + "/readyz", within: .seconds(30))
        #expect(back != nil, "not ready within 30 s of the database's return")

        // Without traffic: the idle probe notices the outage, and the return.
        server.stop(mode: "immediate")
        let down = try waitFor(503, admin + "/readyz", within: .seconds(10))
        #expect(down != nil, "/readyz still 200 10 s after the database went away")
        #expect(try httpStatus(admin + "/healthz") == 200)
        let metrics = try run("curl", ["-sS", admin + "/metrics"]).stdout
        #expect(metrics.contains("pushgate_store_healthy 0"))
        #expect(metrics.contains("pushgate_store_database_connected 0"))
        let refused = try curlPush(
            base,
            token: device.token,
            topic: device.topic,
            apnsID: nil,
            body: #"{"aps":{"alert":"down"}}"#
        )
        #expect(
            refused.status == 503 && refused.headers["retry-after"] != nil && refused.headers["apns-id"] != nil,
            "\(refused.raw)"
        )
        try server.start()
        let up = try waitFor(200, admin + "/readyz", within: .seconds(30))
        #expect(up != nil, "not ready within 30 s of the database's return")

        // Every push answered 200, before, during or after the outage, is delivered.
        let drained = try drainBacklog(gateway, device)
        let delivered = Set(drained.events.compactMap(\.apnsId))
        let lost = Set(burst.ok).subtracting(delivered)
        #expect(lost.isEmpty, "\(lost.count) of \(burst.ok.count) pushes answered 200 were not delivered")
        // A commit whose answer the outage took and whose outcome could not be learned before its
        // 503 may have committed: its pushes are delivered once the device is read again (the
        // node lets its devices go when its lease lapses in the outage). The gateway logs how
        // many such batches there were; no other 503 may be delivered.
        let refusedDelivered = delivered.intersection(unavailable.map(\.apnsId))
        let committedAfterAll = gateway.logged.split(separator: "\n")
            .filter { $0.contains("commit's answer was lost with the connection had committed") }
            .compactMap { line in
                line.split(separator: " ").firstIndex(of: "its").map { line.split(separator: " ")[$0 + 1] }
            }
            .compactMap { Int($0) }.reduce(0, +)
        #expect(
            refusedDelivered.count <= committedAfterAll,
            "pushes answered 503 were delivered: \(refusedDelivered.prefix(3)), beyond the \(committedAfterAll) in commits found committed later"
        )
        #expect(gateway.stop() == 0)
        // One line as the store stops committing, one as it commits again, per outage.
        let lines = gateway.logged.split(separator: "\n")
        #expect(lines.filter { $0.contains("store cannot commit") }.count == 2, "\(gateway.logged.suffix(3000))")
        #expect(lines.filter { $0.contains("store commits again") }.count == 2, "\(gateway.logged.suffix(3000))")
    }

    // MARK: store copy

    @Test(
        "store copy: a stopped gateway's SQLite store into an empty database, devices, secrets, pushes, tombstones and seqs carry over; a second copy is refused and changes nothing"
    )
    func storeCopy() throws {
        let server = try PostgresServer.shared()
        let database = try server.createDatabase()
        let url = server.url(database: database)
        let scratch = try scratchDirectory()
        defer { try? FileManager.default.removeItem(atPath: scratch) }
        let dataDirectory = scratch + "/data"

        var gateway = try GatewayProcess(
            arguments: ["--listen", "127.0.0.1:0", "--data-dir", dataDirectory],
            listeners: 1,
            storeInSQLite: true
        )
        let device = try PythonClient.json(DeviceInfo.self, "device_setup.py", [gateway.urls[0], "com.example.copy"])
        let gone = try PythonClient.json(DeviceInfo.self, "device_setup.py", [gateway.urls[0], "com.example.gone"])
        let burst = try PythonClient.json(
            BurstResult.self,
            "provider_burst.py",
            ["--url", gateway.urls[0], "--token", device.token, "--topic", device.topic, "--count", "50"]
        )
        #expect(burst.ok.count == 50)
        let deleted = try run(
            "curl",
            [
                "-sS", "-o", "/dev/null", "-w", "%{http_code}", "--http2-prior-knowledge", "-X", "DELETE", "-H",
                "authorization: bearer \(gone.secret)",
                gateway.urls[0] + "/v1/devices/\(gone.deviceId)/registrations/\(gone.token)",
            ]
        )
        #expect(deleted.stdout == "204", "\(deleted.stdout) \(deleted.stderr)")
        #expect(gateway.stop() == 0)

        let urlFile = scratch + "/url"
        try Data((url + "\n").utf8).write(to: URL(fileURLWithPath: urlFile))
        let copy = try runPushgate(["store", "copy", "--from", dataDirectory, "--to-file", urlFile])
        #expect(copy.status == 0, "\(copy.stderr)")
        #expect(copy.stdout.contains("checked"), "\(copy.stdout)")
        #expect(copy.stdout.contains("devices: 2"), "\(copy.stdout)")
        #expect(copy.stdout.contains("notifications: 50"), "\(copy.stdout)")
        #expect(copy.stdout.contains("registrations: 2 (1 unregistered)"), "\(copy.stdout)")
        let rowsBefore = try server.psql("SELECT count(*) FROM notifications", database: database)

        let again = try runPushgate(["store", "copy", "--from", dataDirectory, "--to-file", urlFile])
        #expect(again.status != 0)
        #expect(again.stderr.contains("not empty"), "\(again.stderr)")
        #expect(try server.psql("SELECT count(*) FROM notifications", database: database) == rowsBefore)

        // The gateway on PostgreSQL: the device's secret works, its backlog arrives, its seqs
        // continue, and the deleted registration's token is still gone (410).
        gateway = try GatewayProcess(
            arguments: ["--listen", "127.0.0.1:0", "--database-url", url, "--data-dir", scratch + "/unused"],
            listeners: 1
        )
        let drained = try drainBacklog(gateway, device)
        #expect(Set(burst.ok).isSubset(of: Set(drained.events.compactMap(\.apnsId))))
        let tombstone = try curlPush(
            gateway.urls[0],
            token: gone.token,
            topic: gone.topic,
            apnsID: nil,
            body: #"{"aps":{"alert":"x"}}"#
        )
        #expect(tombstone.status == 410, "\(tombstone.raw)")
        #expect(gateway.stop() == 0)

        // backup and restore point at PostgreSQL's own tools.
        let backup = try runPushgate(["backup", "--database-url", url, scratch + "/backup.sqlite"])
        #expect(backup.status != 0)
        #expect(backup.stderr.contains("pg_dump"), "\(backup.stderr)")
    }

    // MARK: Helpers

    private func drainBacklog(_ gateway: GatewayProcess, _ device: DeviceInfo) throws -> DrainResult {
        try PythonClient.json(
            DrainResult.self,
            "drain_stream.py",
            [
                "--url", gateway.urls[0], "--device-id", device.deviceId, "--secret", device.secret, "--token",
                device.token, "--topic", device.topic, "--ack-every", "64", "--ack-final",
            ]
        )
    }

    private func httpStatus(_ url: String) throws -> Int {
        Int(try run("curl", ["-sS", "--max-time", "10", "-o", "/dev/null", "-w", "%{http_code}", url]).stdout) ?? -1
    }

    /// Polls `url` until it answers `status`; how long that took, or nil past `within`.
    private func waitFor(_ status: Int, _ url: String, within: Duration) throws -> Duration? {
        let start = ContinuousClock.now
        while ContinuousClock.now - start < within {
            if try httpStatus(url) == status { return ContinuousClock.now - start }
            usleep(100_000)
        }
        return nil
    }
}
