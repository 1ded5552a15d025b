import Foundation
import Testing

/// `pushgate backup` of a running gateway under load, `pushgate restore`, and a store that is not
/// one at start: the real binary, run as an unprivileged user; restore as the operator (root
/// when the tests run as root) into the gateway user's directory.
@Suite("Backup and restore: pushgate backup, restore, serve on a damaged store", .serialized, .timeLimit(.minutes(5)))
struct BackupCLITests {
    static let pushes = 3000
    static let topic = "com.example.backup"

    @Test("a backup taken under load restores to a store with every push answered 200 before it began")
    func backupUnderLoad() throws {
        let live = try scratchDirectory()
        let restored = try scratchDirectory()
        let backups = try scratchDirectory()
        defer { for path in [live, restored, backups] { try? FileManager.default.removeItem(atPath: path) } }
        let file = backups + "/pushgate-backup.sqlite"

        var gateway = try GatewayProcess(arguments: ["--data-dir", live, "--listen", "127.0.0.1:0"], listeners: 1)
        let device = try PythonClient.json(DeviceInfo.self, "device_setup.py", [gateway.urls[0], Self.topic])
        // The backup starts once 500 pushes have their 200, with the rest in flight: it reads the
        // database while the gateway commits.
        let backup = Unprivileged.command(["backup", "--data-dir", live, file])
        let command = [backup.executable.path] + backup.arguments
        let burst = try PythonClient.json(
            BurstResult.self,
            "provider_burst.py",
            [
                "--url", gateway.urls[0], "--token", device.token, "--topic", device.topic,
                "--count", "\(Self.pushes)", "--concurrency", "50",
                "--run-after", "500", "--run", String(decoding: try JSONEncoder().encode(command), as: UTF8.self),
            ]
        )
        #expect(
            burst.ok.count == Self.pushes,
            "rejected: \(burst.rejected.prefix(5)), unknown: \(burst.unknown.prefix(5))"
        )
        let backedUp = try #require(burst.run)
        #expect(backedUp.status == 0, "pushgate backup: \(backedUp.stderr)")
        #expect(backedUp.stdout.contains("backed up \(live) to \(file)"), "\(backedUp.stdout)")
        #expect(
            backedUp.okBefore.count >= 500 && backedUp.okBefore.count < Self.pushes,
            "the backup began during the burst: \(backedUp.okBefore.count) 200s before it"
        )

        // No restore into a directory a gateway is using.
        let refused = try run(
            executable: GatewayProcess.executable,
            ["restore", "--data-dir", live, "--replace", file]
        )
        #expect(refused.status == 1)
        #expect(
            refused.stderr.contains(
                "cannot restore into \(live): another Pushgate process (pid \(gateway.process.processIdentifier)) is using \(live)"
            ),
            "\(refused.stderr)"
        )
        #expect(gateway.stop() == 0)

        let restore = try run(executable: GatewayProcess.executable, ["restore", "--data-dir", restored, file])
        #expect(restore.status == 0, "pushgate restore: \(restore.stderr)")
        #expect(restore.stdout.contains("restored \(file) as \(restored)/pushgate.sqlite"), "\(restore.stdout)")

        gateway = try GatewayProcess(arguments: ["--data-dir", restored, "--listen", "127.0.0.1:0"], listeners: 1)
        let drained = try PythonClient.json(
            DrainResult.self,
            "drain_stream.py",
            [
                "--url", gateway.urls[0], "--device-id", device.deviceId, "--secret", device.secret,
                "--token", device.token, "--topic", device.topic, "--ack-every", "256",
            ]
        )
        #expect(
            drained.status == 200 && drained.events.last?.apnsId == drained.marker,
            "the restored gateway serves the device: \(drained.status)"
        )
        let arrived = drained.events.dropLast().compactMap(\.apnsId)
        let missing = Set(backedUp.okBefore).subtracting(arrived)
        #expect(
            missing.isEmpty,
            "\(missing.count) of the \(backedUp.okBefore.count) pushes answered 200 before the backup began are not in it, e.g. \(missing.sorted().prefix(3))"
        )
        #expect(Set(arrived).count == arrived.count, "a notification came twice")
        #expect(Set(arrived).isSubset(of: burst.ok), "the restored store holds only pushes that were answered 200")
        #expect(gateway.stop() == 0)
    }

    @Test(
        "a backup named as one of the store's own files is refused, saying to name another file and copy it off the disk; another name in the data directory is taken"
    )
    func backupOntoTheStore() throws {
        let live = try scratchDirectory()
        defer { try? FileManager.default.removeItem(atPath: live) }
        let gateway = try GatewayProcess(arguments: ["--data-dir", live, "--listen", "127.0.0.1:0"], listeners: 1)
        defer { _ = gateway.stop() }
        let refused = try runPushgate(["backup", "--data-dir", live, live + "/pushgate.sqlite"])
        #expect(refused.status == 1)
        #expect(
            refused.stderr
                == "error: \(live)/pushgate.sqlite is the gateway's own pushgate.sqlite in \(live): name another file, such as \(live)/pushgate-backup.sqlite, and copy it off this machine (a backup on the store's disk is lost with it)\n",
            "\(refused.stderr)"
        )
        let taken = try runPushgate(["backup", "--data-dir", live, live + "/pushgate-backup.sqlite"])
        #expect(taken.status == 0, "\(taken.stderr)")
    }

    @Test(
        "backup and restore find the data directory where serve does: the configuration file's dataDir, by --config or PUSHGATE_CONFIG; a flag still wins"
    )
    func dataDirectoryFromTheConfigurationFile() throws {
        let scratch = try scratchDirectory()
        defer { try? FileManager.default.removeItem(atPath: scratch) }
        func configuration(_ name: String, dataDir: String) throws -> String {
            let path = scratch + "/" + name
            try Data(#"{"dataDir": "\#(dataDir)"}"#.utf8).write(to: URL(fileURLWithPath: path))
            try Unprivileged.handOver(path)
            return path
        }
        let live = scratch + "/live"
        let restored = try scratchDirectory()
        defer { try? FileManager.default.removeItem(atPath: restored) }
        let served = try configuration("serve.json", dataDir: live)
        let gateway = try GatewayProcess(arguments: ["--data-dir", live, "--listen", "127.0.0.1:0"], listeners: 1)
        _ = try PythonClient.json(DeviceInfo.self, "device_setup.py", [gateway.urls[0], Self.topic])
        #expect(gateway.stop() == 0)

        let file = scratch + "/backup.sqlite"
        let backup = try runPushgate(["backup", "--config", served, file])
        #expect(
            backup.status == 0 && backup.stdout.contains("backed up \(live) to \(file)")
                && backup.stdout.contains(": 1 device, 1 registration, 0 notifications in "),
            "\(backup.stdout) \(backup.stderr)"
        )
        // Named by the flag, the directory needs no file: PUSHGATE_CONFIG is not read (the image
        // sets it for serve's file, which a restore container does not mount).
        let flagWins = try runPushgate(
            ["restore", "--data-dir", restored, file],
            environment: ["PUSHGATE_CONFIG": scratch + "/not-mounted.json"]
        )
        #expect(
            flagWins.status == 0 && flagWins.stdout.contains("restored \(file) as \(restored)/pushgate.sqlite"),
            "\(flagWins.stdout) \(flagWins.stderr)"
        )
        let fromEnvironment = try runPushgate(
            ["restore", "--replace", file],
            environment: ["PUSHGATE_CONFIG": try configuration("again.json", dataDir: restored)]
        )
        #expect(
            fromEnvironment.status == 0
                && fromEnvironment.stdout.contains("restored \(file) as \(restored)/pushgate.sqlite"),
            "\(fromEnvironment.stdout) \(fromEnvironment.stderr)"
        )
        // The operator (root, when the tests run as root) restoring into a directory that is not
        // there yet is told the directory is root's.
        let fresh = scratch + "/fresh/data"
        let created = try run(executable: GatewayProcess.executable, ["restore", "--data-dir", fresh, file])
        #expect(created.status == 0, "\(created.stderr)")
        #expect(
            created.stdout.contains("created \(fresh) owned by root: for a gateway that runs as its own user, chown -R")
                == (geteuid() == 0),
            "\(created.stdout)"
        )
        // A file serve would refuse is refused here too, rather than guessing a directory.
        let broken = try configuration("broken.json", dataDir: live).replacingOccurrences(
            of: "broken.json",
            with: "missing.json"
        )
        let refused = try runPushgate(["backup", "--config", broken, file])
        #expect(refused.status == 64 && refused.stderr.contains(broken), "\(refused.status) \(refused.stderr)")
    }

    @Test("serve on a store that is damaged or another program's fails at start, naming the file and what to do")
    func badStoreAtStart() throws {
        let damaged = try scratchDirectory()
        let foreign = try scratchDirectory()
        defer { for path in [damaged, foreign] { try? FileManager.default.removeItem(atPath: path) } }
        let garbage = damaged + "/pushgate.sqlite"
        try Data(repeating: 0x42, count: 16384).write(to: URL(fileURLWithPath: garbage))
        try Unprivileged.handOver(garbage)
        let refused = try runPushgate(["serve", "--listen", "127.0.0.1:0", "--data-dir", damaged])
        #expect(refused.status != 0)
        #expect(
            refused.stderr.contains(
                "cannot open the SQLite database \(garbage): SQLite error 26: file is not a database"
            ),
            "\(refused.stderr)"
        )
        #expect(refused.stderr.contains("pushgate restore"), "\(refused.stderr)")

        let other = foreign + "/pushgate.sqlite"
        let made = try run(
            "python3",
            [
                "-c", "import sqlite3, sys; sqlite3.connect(sys.argv[1]).execute('CREATE TABLE mail (id INTEGER)')",
                other,
            ]
        )
        #expect(made.status == 0, "\(made.stderr)")
        try Unprivileged.handOver(other)
        let foreignRun = try runPushgate(["serve", "--listen", "127.0.0.1:0", "--data-dir", foreign])
        #expect(foreignRun.status != 0)
        #expect(
            foreignRun.stderr.contains(
                "\(other) is not a Pushgate store: it holds a table mail and no Pushgate schema"
            ),
            "\(foreignRun.stderr)"
        )
    }
}
