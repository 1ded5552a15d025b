import Foundation
import PushgateTestFixtures
import Testing

/// Issue 24 item 4, in small: `Tests/Soak/crash_loop.py` SIGKILLs `pushgate serve` (unprivileged)
/// at a random moment of mixed load (providers with provider tokens, devices streaming, acking,
/// resuming, sending keep-alives and state reports, unregistering and registering again),
/// restarts it on the same store, and checks after each restart and at the end everything the
/// gateway answered (the rules are in `Tests/Soak/history.py`). Six cycles of twelve devices here
/// (more queues per run than the script's default of six devices, in fewer restarts); docs/testing.md
/// ("Crash-loop soak") has the 20-cycle command. The seed is new each run and named in any failure, so that a
/// failure can be replayed with `--seed`.
@Suite("Crash loop: kill -9 under mixed load, restart, check", .serialized, .timeLimit(.minutes(5)))
struct CrashLoopSoakTests {
    static let script = TestFixtures.file("Tests/Soak/crash_loop.py").path

    @Test(
        "six random kills: every 200 delivered or dropped by a rule, nothing refused or acked delivered (again), held pushes and budgets restored, the store intact"
    )
    func sixCycles() throws {
        var arguments = [
            "-B", Self.script, "--pushgate", Unprivileged.staged.binary.path, "--cycles", "6", "--devices", "12",
        ]
        if Unprivileged.dropsPrivileges { arguments += ["--user", Unprivileged.user] }
        let result = try run(
            executable: URL(fileURLWithPath: PythonClient.interpreter),
            arguments,
            timeout: .seconds(240)
        )
        let line = result.stdout.split(separator: "\n").last.map(String.init) ?? ""
        let summary = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any]
        let seed = summary?["seed"] ?? "?"
        try #require(
            summary != nil,
            "crash_loop.py exited \(result.status) without a summary\nstderr: \(result.stderr.suffix(4000))"
        )
        #expect(
            result.status == 0 && summary?["ok"] as? Bool == true,
            "seed \(seed) (replay: python3 Tests/Soak/crash_loop.py --pushgate .build/debug/pushgate --cycles 6 --devices 12 --seed \(seed)): \(line.prefix(6000))\nstderr: \(result.stderr.suffix(2000))"
        )
        let figures = summary?["figures"] as? [String: Any] ?? [:]
        func figure(_ name: String) -> Int { figures[name] as? Int ?? 0 }
        // The soak did what it says: six kills, load in each, restarts read, the store checked
        // after each kill and at the end.
        #expect(
            figure("cycles") == 6 && (figures["killDelaysSeconds"] as? [Any])?.count == 6,
            "seed \(seed): \(figures)"
        )
        #expect(figure("pushes.ok") > 100 && figure("delivered.unique") > 100, "seed \(seed): \(figures)")
        #expect(figure("acks.definite.post") > 0 && figure("budget.checks") > 0, "seed \(seed): \(figures)")
        #expect(figure("integrityChecks") == 7, "seed \(seed): \(figures)")
    }
}
