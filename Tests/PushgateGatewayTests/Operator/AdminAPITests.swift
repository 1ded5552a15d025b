import Foundation
import NIOCore
import NIOPosix
import PushgateDelivery
import PushgateGateway
import PushgateScheduler
import PushgateTestKit
import PushgateTransport
import Testing

/// The admin API and its access rule through the real server: the token, the loopback rule, the
/// admin listener, the device view's reasons, the overview, the durable totals.
@Suite("Admin API: access, device view, overview, admin listener, durable totals", .serialized, .timeLimit(.minutes(2)))
struct AdminAPITests {
    static let token = "operator-secret-4f1c"
    static let topic = "com.example.admin"
    /// 2023-11-14 22:13:20 UTC.
    static let start: Int64 = 1_700_000_000_000
    static let routes = ["/metrics", "/v1/admin/stats", "/v1/admin/devices/00112233445566778899aabbccddeeff"]

    @Test(
        "with a token: no token or a wrong one gets 401 with a hint, the token gets in; /admin, /healthz and /readyz are open"
    )
    func tokenRequired() async throws {
        try await withGateway(configure: { $0.adminToken = Self.token }) { gateway throws in
            for path in Self.routes {
                for token in [nil, "wrong", Self.token + "x", String(Self.token.dropLast())] {
                    let reply = try await gateway.operatorGet(path, token: token)
                    #expect(reply.status == 401, "\(path) with \(token ?? "no token")")
                    #expect(reply.json["reason"] as? String == "Unauthorized")
                    #expect((reply.json["detail"] as? String)?.contains("--admin-token-file") == true)
                    #expect(reply.headers["www-authenticate"]?.hasPrefix("Bearer") == true)
                }
            }
            #expect(try await gateway.operatorGet("/metrics", token: Self.token).status == 200)
            #expect(try await gateway.operatorGet("/v1/admin/stats", token: Self.token).status == 200)
            #expect(
                try await gateway.operatorGet("/v1/admin/devices/00112233445566778899aabbccddeeff", token: Self.token)
                    .status == 404
            )
            let events = try await gateway.adminEvents()
            #expect(try await events.head().status.code == 401)
            await events.close()

            let page = try await gateway.operatorGet("/admin")
            #expect(page.status == 200)
            #expect(page.headers["content-type"] == "text/html; charset=utf-8")
            #expect(page.headers["content-security-policy"]?.contains("default-src 'none'") == true)
            #expect(try await gateway.operatorGet("/healthz").status == 200)
            #expect(try await gateway.operatorGet("/readyz").status == 200)
        }
    }

    @Test("without a token: loopback peers are served; others get 403 saying how to set a token")
    func loopbackOnlyWithoutToken() async throws {
        let address = try #require(
            try nonLoopbackAddress(),
            "this machine has no non-loopback IPv4 address to test from"
        )
        try await withGateway(listenHost: "0.0.0.0") { gateway in
            for path in Self.routes.prefix(2) {
                #expect(try await gateway.operatorGet(path).status == 200, "\(path) from loopback")
                let remote = try await gateway.operatorGet(path, host: address)
                #expect(remote.status == 403, "\(path) from \(address)")
                #expect(remote.json["reason"] as? String == "Forbidden")
                #expect((remote.json["detail"] as? String)?.contains("--admin-token") == true)
            }
            // Everything else is served as ever.
            #expect(try await gateway.operatorGet("/healthz", host: address).status == 200)
            #expect(try await gateway.operatorGet("/admin", host: address).status == 200)
        }
        try await withGateway(configure: { $0.adminToken = Self.token }, listenHost: "0.0.0.0") { gateway throws in
            #expect(try await gateway.operatorGet("/metrics", token: Self.token, host: address).status == 200)
            #expect(try await gateway.operatorGet("/metrics", host: address).status == 401)
        }
    }

    @Test(
        "an admin listener serves the operator routes only; with --admin-only-on-admin-listener the main one keeps health alone"
    )
    func adminListener() async throws {
        for adminOnly in [false, true] {
            try await withGateway(configure: { configuration in
                configuration.adminListen = [.init(host: "127.0.0.1", port: 0)]
                configuration.adminOnlyOnAdminListener = adminOnly
            }) { gateway throws in
                let admin = try #require(gateway.adminPort)
                for path in ["/metrics", "/v1/admin/stats", "/admin", "/healthz", "/readyz"] {
                    #expect(
                        try await gateway.operatorGet(path, port: admin).status == 200,
                        "\(path) on the admin listener"
                    )
                }
                let connection = try await gateway.connect(port: admin)
                let push = try await connection.send(
                    HTTPClientRequest(method: "POST", path: "/3/device/\(randomHex(bytes: 32))")
                )
                #expect(push.status == 404, "no provider API on the admin listener")
                let create = try await connection.send(HTTPClientRequest(method: "POST", path: "/v1/devices"))
                #expect(create.status == 404, "no device API on the admin listener")
                await connection.close()

                for path in ["/metrics", "/v1/admin/stats", "/admin"] {
                    #expect(
                        try await gateway.operatorGet(path).status == (adminOnly ? 404 : 200),
                        "\(path) on the main listener"
                    )
                }
                #expect(try await gateway.operatorGet("/healthz").status == 200)
                #expect(try await gateway.operatorGet("/readyz").status == 200)
            }
        }
    }

    @Test("the device view says why each notification waits, with its buckets and registrations")
    func deviceViewExplains() async throws {
        let clock = TestClock(Self.start)
        try await withGateway(clock: clock, delivery: oneTokenBudget()) { gateway in
            let api = try await API(gateway)
            let (device, token) = try await api.registeredDevice(topic: Self.topic)
            let silent = [("apns-push-type", "background"), ("apns-priority", "5")]
            let payload = #"{"aps":{"content-available":1}}"#
            let stream = try await api.openEvents(device)
            let first = try await api.push(token: token, topic: Self.topic, headers: silent, payload: payload)
            #expect(first.disposition == "delivered")
            _ = try await stream.nextNotification()
            let budget = try await api.push(token: token, topic: Self.topic, headers: silent, payload: payload)
            let behind = try await api.push(token: token, topic: Self.topic, headers: silent, payload: payload)
            let state = try await api.device(device, "PUT", "state", body: #"{"power":"idle"}"#)
            #expect(state.status == 200)
            let deferred = try await api.push(token: token, topic: Self.topic, headers: [("apns-priority", "5")])
            let wake = try await api.push(token: token, topic: Self.topic, headers: [("apns-priority", "1")])
            #expect([budget, behind, deferred, wake].map(\.disposition) == ["held", "held", "held", "held"])

            let view = try await gateway.operatorGet("/v1/admin/devices/\(device.id)")
            #expect(view.status == 200)
            let json = view.json
            #expect(json["deviceId"] as? String == device.id)
            #expect(json["connected"] as? Bool == true)
            #expect(json["power"] as? String == "idle")
            let bucket = try #require(json["bucket"] as? [String: Any])
            #expect(bucket["capacity"] as? Int == 100)
            #expect(bucket["tokens"] as? Double == 99)
            let registrations = try #require(json["registrations"] as? [[String: Any]])
            #expect(registrations.count == 1)
            #expect(registrations.first?["token"] as? String == token)
            #expect(registrations.first?["appState"] as? String == "foreground", "until the device reports otherwise")
            let appBucket = try #require(registrations.first?["bucket"] as? [String: Any])
            #expect(appBucket["tokens"] as? Double == 0)
            #expect(int64(appBucket["nextTokenAt"]) == Self.start + 3_600_000)

            let notifications = try #require(json["notifications"] as? [[String: Any]])
            let byID = Dictionary(uniqueKeysWithValues: notifications.map { ($0["apnsId"] as? String ?? "", $0) })
            func reason(_ reply: Reply) -> String? { byID[reply.apnsID ?? ""]?["reason"] as? String }
            #expect(notifications.count == 5)
            #expect(byID[first.apnsID ?? ""]?["state"] as? String == "unacked")
            #expect(reason(first) == "sent; waits for the device's ack")
            // 22:13:20 plus the hour the one-token-an-hour bucket takes to refill.
            #expect(reason(budget) == "app budget empty until 23:13:20 UTC")
            #expect(int64(byID[budget.apnsID ?? ""]?["waitsUntil"]) == Self.start + 3_600_000)
            #expect(reason(behind) == "behind 1 older silent push of its app, released oldest first")
            #expect(reason(deferred) == "priority 5: deferred until 22:28:20 UTC or a wake event")
            #expect(reason(wake)?.hasPrefix("priority 1: waits for a wake event") == true)
            for held in [budget, behind, deferred, wake] {
                #expect(byID[held.apnsID ?? ""]?["state"] as? String == "held")
                #expect(byID[held.apnsID ?? ""]?["seq"] == nil, "no seq while held")
            }

            // Offline: every held and stored push says since when.
            try await api.reconnect()
            try await eventually("the device offline") { try await gateway.core.statistics().connectedDevices == 0 }
            clock.advance(by: 86_400_000)
            let offline = try await gateway.operatorGet("/v1/admin/devices/\(device.id)").json
            #expect(offline["connected"] as? Bool == false)
            #expect(int64(offline["offlineSince"]) == Self.start)
            for notification in try #require(offline["notifications"] as? [[String: Any]]) {
                #expect(
                    notification["reason"] as? String
                        == "device offline since 2023-11-14 22:13:20 UTC; sent when its event stream opens"
                )
            }

            let unknown = try await gateway.operatorGet("/v1/admin/devices/00112233445566778899aabbccddeeff")
            #expect(unknown.status == 404)
            #expect(unknown.json["reason"] as? String == "NotFound")
            #expect(try await gateway.operatorGet("/v1/admin/devices/not-a-device-id").status == 404)
            // A long path is not echoed whole, and an empty id is named as such.
            let long = try await gateway.operatorGet("/v1/admin/devices/" + String(repeating: "a", count: 5_000))
            #expect(long.status == 404 && long.body.utf8.count < 200, "\(long.body.utf8.count) bytes")
            #expect(
                (long.json["detail"] as? String)?.hasSuffix("...\" (5000 bytes) on this gateway") == true,
                "\(long.json)"
            )
            let empty = try await gateway.operatorGet("/v1/admin/devices/")
            #expect(
                empty.json["detail"] as? String == "no device id (the path ends at /v1/admin/devices/) on this gateway"
            )
            await api.close()
        }
    }

    @Test("the overview: totals, per topic, the devices holding the most (20, then truncated)")
    func overview() async throws {
        try await withGateway(delivery: oneTokenBudget()) { gateway in
            let api = try await API(gateway)
            var holding: [String] = []
            for index in 0..<21 {
                let (device, token) = try await api.registeredDevice(topic: Self.topic)
                // Offline: silent pushes are held. Device i holds i + 1.
                for _ in 0...(index % 3) {
                    let reply = try await api.push(
                        token: token,
                        topic: Self.topic,
                        headers: [("apns-push-type", "background"), ("apns-priority", "5")],
                        payload: #"{"aps":{"content-available":1}}"#
                    )
                    #expect(reply.disposition == "held")
                }
                holding.append(device.id)
            }
            let (_, other) = try await api.registeredDevice(topic: "com.example.other")
            #expect(try await api.push(token: other, topic: "com.example.other").disposition == "stored")
            #expect(try await api.push(token: randomHex(bytes: 32), topic: Self.topic).status == 400)

            let stats = try await gateway.operatorGet("/v1/admin/stats").json
            let held = 7 * (1 + 2 + 3)
            #expect(stats["held"] as? Int == held)
            #expect(stats["stored"] as? Int == 1)
            #expect(stats["devices"] as? Int == 22)
            let totals = try #require(stats["totals"] as? [String: Any])
            #expect(totals["received"] as? Int == held + 1)
            #expect(totals["rejected"] as? Int == 1)
            let topics = try #require(stats["topics"] as? [[String: Any]])
            #expect(topics.map { $0["topic"] as? String } == [Self.topic, "com.example.other"])
            #expect(topics.first?["held"] as? Int == held)
            #expect(topics.first?["registrations"] as? Int == 21)
            #expect(topics.last?["stored"] as? Int == 1)
            #expect(stats["topicsTruncated"] as? Bool == false)
            let top = try #require(stats["topHeldDevices"] as? [[String: Any]])
            #expect(top.count == 20)
            #expect(stats["truncated"] as? Bool == true)
            #expect(top.prefix(7).allSatisfy { $0["held"] as? Int == 3 })
            #expect(top.map { $0["held"] as? Int ?? 0 } == top.map { $0["held"] as? Int ?? 0 }.sorted(by: >))
            await api.close()
        }
    }

    @Test("durable totals survive a restart; this process's totals start again at 0")
    func durableTotals() async throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try await withGateway(directory: directory) { gateway in
            let api = try await API(gateway)
            let (_, token) = try await api.registeredDevice(topic: Self.topic)
            for _ in 0..<3 { _ = try await api.push(token: token, topic: Self.topic) }
            _ = try await api.push(token: randomHex(bytes: 32), topic: Self.topic)
            await api.close()
        }
        try await withGateway(directory: directory) { gateway in
            let api = try await API(gateway)
            let (_, token) = try await api.registeredDevice(topic: Self.topic)
            _ = try await api.push(token: token, topic: Self.topic)
            let stats = try await gateway.operatorGet("/v1/admin/stats").json
            let totals = try #require(stats["totals"] as? [String: Any])
            let durable = try #require(stats["durableTotals"] as? [String: Any])
            #expect(totals["received"] as? Int == 1)
            #expect(totals["rejected"] as? Int == 0)
            #expect(durable["received"] as? Int == 4)
            #expect(durable["rejected"] as? Int == 1)
            await api.close()
        }
    }
}
