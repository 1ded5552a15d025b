import Foundation
import Logging
import PushgateGateway
import PushgateTestKit
import Testing

/// docs/scheduler.md "A reloaded policy": the scheduler policy of the configuration file, reloaded by
/// `POST /v1/admin/reload` under a connected device, takes effect on its open event stream; a
/// file the policy refuses changes nothing. The clock does not move: every change comes from
/// the reloads.
@Suite("Scheduler policy reloaded under connected devices", .serialized, .timeLimit(.minutes(2)))
struct SchedulerReloadTests {
    static let start: Int64 = 1_700_000_000_000

    @Test(
        "a larger budget releases what was held, on the open stream; a smaller one holds what the old one would have delivered; a new fetch window is what agents are told; a bad file changes nothing"
    )
    func budgetFollowsTheReload() async throws {
        let directory = temporaryDirectory()
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let config = directory + "/pushgate.json"
        func write(appBurst: Int, fetchWindowSeconds: Int = 30) throws {
            let scheduler =
                #"{"appBurst": \#(appBurst), "appRefillPerHour": 1, "fetchWindowSeconds": \#(fetchWindowSeconds)}"#
            try Data(#"{"scheduler": \#(scheduler)}"#.utf8).write(to: URL(fileURLWithPath: config))
        }
        // As `serve` does: the same settings resolved again at each reload.
        let settings = ["--config", config]
        let resolve: @Sendable () throws -> GatewayConfiguration = {
            try ResolvedSettings(arguments: settings, environment: [:]).checked()
        }
        try write(appBurst: 1)
        var initial = try resolve()
        _ = try initial.prepare(logger: Logger(label: "test") { _ in SwiftLogNoOpLogHandler() })

        try await withGateway(clock: TestClock(Self.start), configure: { $0 = initial }, reread: resolve) { gateway in
            let api = try await API(gateway)
            let (device, token) = try await api.registeredDevice(topic: SchedulerDeliveryTests.topic)
            let stream = try await api.openEvents(device)
            func silent(_ id: String = newAPNsID()) async throws -> String? {
                try await SchedulerDeliveryTests.silent(api, token, id: id).disposition
            }
            func reload() async throws -> Reply { try await api.send("POST", "/v1/admin/reload") }
            func appBurst() async throws -> Int? {
                try await gateway.core.inspect(deviceID: device.id)?.registrations.first?.bucket.capacity
            }

            let first = newAPNsID()
            let second = newAPNsID()
            #expect(try await silent(first) == "delivered")
            #expect(try await silent(second) == "held")
            let delivered = try await stream.nextNotification()
            #expect(delivered.apnsID == first && delivered.fetchWindowSeconds == 30)

            // 1 of 1 used; of 3, 2 are left: the held push goes at once.
            try write(appBurst: 3, fetchWindowSeconds: 45)
            let larger = try await reload()
            #expect(larger.status == 200, "\(larger.text)")
            #expect((larger.json["reloaded"] as? [String])?.contains("scheduler") == true, "\(larger.text)")
            #expect((larger.json["needsRestart"] as? [String]) == [], "\(larger.text)")
            let released = try await stream.nextNotification()
            #expect(
                released.apnsID == second && released.delivery == "budget" && released.fetchWindowSeconds == 45,
                "\(released)"
            )

            // 2 used; of 2, none is left: the old policy would have delivered this one.
            try write(appBurst: 2, fetchWindowSeconds: 60)
            #expect(try await reload().status == 200)
            let third = newAPNsID()
            #expect(try await silent(third) == "held")
            let woken = try await api.keepalive(device)
            #expect(woken.map { $0["apnsId"] as? String } == [third])
            #expect(
                woken.map { $0["fetchWindowSeconds"] as? Int } == [60],
                "a keep-alive's answer tells the window in force"
            )

            try write(appBurst: 0)
            let refused = try await reload()
            #expect(
                refused.status == 422 && refused.json["reason"] as? String == "ConfigurationRefused",
                "\(refused.text)"
            )
            #expect(
                (refused.json["detail"] as? String)?.contains("appBurst is 0; allowed 1...1000") == true,
                "\(refused.text)"
            )
            #expect(try await appBurst() == 2, "the running policy keeps serving")
            #expect(try await silent() == "held")
            let metrics = try await api.send("GET", "/metrics").text
            #expect(metrics.contains(#"pushgate_config_reloads_total{result="success"} 2"#))
            #expect(metrics.contains(#"pushgate_config_reloads_total{result="failure"} 1"#))
            #expect(try await gateway.core.statistics().connectedDevices == 1, "the device stayed connected throughout")
        }
    }
}
