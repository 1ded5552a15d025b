import Foundation
import NIOCore
import PushgateDelivery
import PushgateGateway
import PushgateModel
import PushgateScheduler
import PushgateTestKit
import Testing

/// `GET /metrics` through the real server: every metric the contract names, each moving exactly
/// with the traffic that should move it, and the gauges equal to the shards' state and the
/// admin view.
@Suite("Metrics: names, exact deltas with traffic, gauges", .serialized, .timeLimit(.minutes(2)))
struct MetricsTests {
    static let topic = "com.example.metrics"
    static let start: Int64 = 1_700_000_000_000
    static let silentHeaders = [("apns-push-type", "background"), ("apns-priority", "5")]
    static let silentPayload = #"{"aps":{"content-available":1}}"#

    /// One silent push per app before the budget is empty, one held before the oldest is dropped.
    static let delivery = oneTokenBudget(maxHeld: 1)

    static let counters = [
        "pushgate_notifications_received_total", "pushgate_notifications_rejected_total",
        "pushgate_notifications_delivered_total", "pushgate_notifications_dropped_total",
        "pushgate_silent_budget_exhausted_total", "pushgate_piggybacked_total",
        "pushgate_connection_setup_failures_total", "pushgate_notifications_redelivered_total",
        "process_cpu_seconds_total",
        "pushgate_fetch_results_total", "pushgate_fetch_windows_overflow_total", "pushgate_store_lost_batches_total",
        "pushgate_config_reloads_total", "pushgate_store_commit_failures_total",
        "pushgate_request_body_budget_refusals_total",
        "pushgate_connections_refused_total", "pushgate_device_creations_refused_total",
        "pushgate_http2_flood_closures_total",
    ]
    static let gauges = [
        "pushgate_held_notifications", "pushgate_stored_notifications", "pushgate_unacked_notifications",
        "pushgate_connected_devices", "pushgate_held_oldest_age_seconds", "pushgate_deferred_oldest_age_seconds",
        "pushgate_silent_refill_scaled", "pushgate_store_healthy", "pushgate_request_body_bytes",
        "pushgate_queued_notification_bytes",
        "pushgate_http2_connections", "pushgate_http2_streams", "pushgate_build_info",
        "process_resident_memory_bytes", "process_virtual_memory_bytes", "process_open_fds", "process_max_fds",
        "process_start_time_seconds",
    ]
    static let histograms = [
        "pushgate_delivery_latency_seconds", "pushgate_hold_duration_seconds",
        "pushgate_store_commit_duration_seconds", "pushgate_store_commit_pushes", "pushgate_store_commit_batches",
    ]

    @Test(
        "every metric is exposed with HELP and TYPE, counters with every label value at 0, as text/plain version 0.0.4"
    )
    func everyMetricIsDeclared() async throws {
        try await withGateway { gateway in
            let api = try await API(gateway)
            let reply = try await api.send("GET", "/metrics")
            #expect(reply.status == 200)
            #expect(reply.headers.first(name: "content-type") == "text/plain; version=0.0.4; charset=utf-8")
            let exposition = try Exposition(reply.text)
            for name in Self.counters { #expect(exposition.types[name] == "counter", "\(name)") }
            for name in Self.gauges { #expect(exposition.types[name] == "gauge", "\(name)") }
            for name in Self.histograms { #expect(exposition.types[name] == "histogram", "\(name)") }
            for name in Self.counters + Self.gauges + Self.histograms {
                #expect(exposition.help[name].map { !$0.isEmpty } == true, "HELP of \(name)")
            }
            for type in PushType.allCases {
                #expect(
                    exposition["pushgate_notifications_received_total{push_type=\"\(type.rawValue)\"}"] == 0,
                    "\(type)"
                )
            }
            for reason in ["expired", "overflow", "coalesced", "app_terminated", "unregistered"] {
                #expect(exposition["pushgate_notifications_dropped_total{reason=\"\(reason)\"}"] == 0, "\(reason)")
            }
            for kind in ["immediate", "stored", "piggyback", "keepalive", "budget", "online"] {
                #expect(exposition["pushgate_notifications_delivered_total{delivery=\"\(kind)\"}"] == 0, "\(kind)")
            }
            #expect(exposition["pushgate_silent_budget_exhausted_total{scope=\"app\"}"] == 0)
            #expect(exposition["pushgate_piggybacked_total{carrier=\"keepalive\"}"] == 0)
            #expect(exposition["pushgate_notifications_rejected_total{reason=\"BadDeviceToken\"}"] == 0)
            #expect(exposition["pushgate_build_info{version=\"\(PushgateVersion.current)\"}"] == 1)
            #expect((exposition["process_resident_memory_bytes"] ?? 0) > 0)
            #expect((exposition["process_open_fds"] ?? 0) > 0)
            // No label names a device or a token.
            for series in exposition.samples.keys {
                #expect(!series.contains("token") && !series.contains("device_id"), "\(series)")
            }
            await api.close()
        }
    }

    /// One step of traffic and exactly what it moves; every other series must stay put.
    struct Step: CustomStringConvertible, Sendable {
        var description: String
        var action: @Sendable (World) async throws -> Void
        var expected: [String: Double]
    }

    /// The gateway, a connected device A and an offline device B, one topic each.
    final class World: @unchecked Sendable {
        let gateway: RunningGateway
        let clock: TestClock
        var api: API
        let a: Device
        let tokenA: String
        let b: Device
        let tokenB: String
        var streamA: EventStream?
        var lastSeqA = 0

        init(_ gateway: RunningGateway, clock: TestClock) async throws {
            self.gateway = gateway
            self.clock = clock
            api = try await API(gateway)
            (a, tokenA) = try await api.registeredDevice(topic: MetricsTests.topic)
            (b, tokenB) = try await api.registeredDevice(topic: MetricsTests.topic)
        }

        func push(
            _ token: String,
            headers: [(String, String)] = [],
            payload: String = #"{"aps":{"alert":"hi"}}"#
        ) async throws -> Reply {
            try await api.push(token: token, topic: MetricsTests.topic, headers: headers, payload: payload)
        }

        func silent(_ token: String) async throws -> Reply {
            try await push(token, headers: MetricsTests.silentHeaders, payload: MetricsTests.silentPayload)
        }

        /// The next `count` events on A's stream, in order.
        func receive(_ count: Int) async throws -> [PushEvent] {
            var events: [PushEvent] = []
            for _ in 0..<count { events.append(try await streamA!.nextNotification()) }
            lastSeqA = events.last?.seq ?? lastSeqA
            return events
        }
    }

    static let received = "pushgate_notifications_received_total"
    static let delivered = "pushgate_notifications_delivered_total"
    static let latency = "pushgate_delivery_latency_seconds_count"
    static let queuedBytes = "pushgate_queued_notification_bytes"
    /// What an alert and a silent push of `World` take in memory while they wait.
    static let alertBytes = Double(QueuedNotificationBudget.cost(payloadBytes: #"{"aps":{"alert":"hi"}}"#.utf8.count))
    static let silentBytes = Double(QueuedNotificationBudget.cost(payloadBytes: MetricsTests.silentPayload.utf8.count))

    static let steps: [Step] = [
        Step(
            description: "connect",
            action: { world async throws in
                world.streamA = try await world.api.openEvents(world.a)
            },
            expected: ["pushgate_connected_devices": 1]
        ),
        Step(
            description: "send to a connected device",
            action: { world async throws in
                #expect(try await world.push(world.tokenA).disposition == "delivered")
                _ = try await world.receive(1)
            },
            expected: [
                "\(received){push_type=\"alert\"}": 1, "\(delivered){delivery=\"immediate\"}": 1, latency: 1,
                "pushgate_unacked_notifications": 1,
                queuedBytes: alertBytes,
            ]
        ),
        Step(
            description: "ack",
            action: { world async throws in
                #expect(try await world.api.ack(world.a, upTo: UInt64(world.lastSeqA)).status == 204)
            },
            expected: ["pushgate_unacked_notifications": -1, queuedBytes: -alertBytes]
        ),
        Step(
            description: "a silent push within the budget",
            action: { world async throws in
                #expect(try await world.silent(world.tokenA).disposition == "delivered")
                _ = try await world.receive(1)
                #expect(try await world.api.ack(world.a, upTo: UInt64(world.lastSeqA)).status == 204)
            },
            expected: [
                "\(received){push_type=\"background\"}": 1, "\(delivered){delivery=\"immediate\"}": 1, latency: 1,
            ]
        ),
        Step(
            description: "hold (app budget empty)",
            action: { world async throws in
                #expect(try await world.silent(world.tokenA).disposition == "held")
            },
            expected: [
                "\(received){push_type=\"background\"}": 1, "pushgate_held_notifications": 1,
                "pushgate_silent_budget_exhausted_total{scope=\"app\"}": 1, queuedBytes: silentBytes,
            ]
        ),
        Step(
            description: "drop the oldest held (overflow)",
            action: { world async throws in
                #expect(try await world.silent(world.tokenA).disposition == "held")
            },
            expected: [
                // Held behind the older held push of its app, not for want of a token.
                "\(received){push_type=\"background\"}": 1,
                "pushgate_notifications_dropped_total{reason=\"overflow\"}": 1,
            ]
        ),
        Step(
            description: "release by piggyback on a priority-10 push",
            action: { world async throws in
                #expect(try await world.push(world.tokenA).disposition == "delivered")
                _ = try await world.receive(2)
            },
            expected: [
                "\(received){push_type=\"alert\"}": 1, "\(delivered){delivery=\"piggyback\"}": 1,
                "\(delivered){delivery=\"immediate\"}": 1,
                "pushgate_piggybacked_total{carrier=\"regular\"}": 1, "pushgate_held_notifications": -1,
                "pushgate_unacked_notifications": 2, latency: 2, "pushgate_hold_duration_seconds_count": 1,
                queuedBytes: alertBytes,
            ]
        ),
        Step(
            description: "store for an offline device",
            action: { world async throws in
                #expect(try await world.push(world.tokenB).disposition == "stored")
            },
            expected: [
                "\(received){push_type=\"alert\"}": 1, "pushgate_stored_notifications": 1, queuedBytes: alertBytes,
            ]
        ),
        Step(
            description: "expire a stored push",
            action: { world async throws in
                let expiration = (world.clock.nowMillis() + 10_000) / 1000
                #expect(
                    try await world.push(world.tokenB, headers: [("apns-expiration", "\(expiration)")]).disposition
                        == "stored"
                )
                world.clock.advance(by: 20_000)
                try await world.gateway.core.sweepExpired()
            },
            expected: [
                "\(received){push_type=\"alert\"}": 1, "pushgate_notifications_dropped_total{reason=\"expired\"}": 1,
            ]
        ),
        Step(
            description: "reject (unknown token, empty payload)",
            action: { world async throws in
                #expect(try await world.push(randomHex(bytes: 32)).status == 400)
                #expect(try await world.push(world.tokenA, payload: "").status == 400)
            },
            expected: [
                "pushgate_notifications_rejected_total{reason=\"BadDeviceToken\"}": 1,
                "pushgate_notifications_rejected_total{reason=\"PayloadEmpty\"}": 1,
            ]
        ),
        Step(
            description: "disconnect: what was written and not acknowledged is stored again",
            action: { world async throws in
                try await world.api.reconnect()
                try await eventually("device A offline") {
                    try await world.gateway.core.statistics().connectedDevices == 0
                }
            },
            expected: [
                "pushgate_connected_devices": -1, "pushgate_unacked_notifications": -2,
                "pushgate_stored_notifications": 2,
            ]
        ),
        Step(
            description: "reconnect: stored pushes go out",
            action: { world async throws in
                world.streamA = try await world.api.openEvents(world.a, lastEventID: UInt64(world.lastSeqA - 2))
                _ = try await world.receive(2)
            },
            expected: [
                "pushgate_connected_devices": 1, "pushgate_unacked_notifications": 2,
                "pushgate_stored_notifications": -2,
                "pushgate_notifications_redelivered_total": 2,
            ]
        ),
        Step(
            description: "hold again",
            action: { world async throws in
                #expect(try await world.silent(world.tokenA).disposition == "held")
            },
            expected: [
                "\(received){push_type=\"background\"}": 1, "pushgate_held_notifications": 1,
                "pushgate_silent_budget_exhausted_total{scope=\"app\"}": 1, queuedBytes: silentBytes,
            ]
        ),
        Step(
            description: "release by keep-alive",
            action: { world async throws in
                #expect(try await world.api.keepalive(world.a).count == 1)
            },
            expected: [
                "\(delivered){delivery=\"keepalive\"}": 1, "pushgate_piggybacked_total{carrier=\"keepalive\"}": 1,
                "pushgate_held_notifications": -1, "pushgate_unacked_notifications": 1, latency: 1,
                "pushgate_hold_duration_seconds_count": 1,
            ]
        ),
    ]

    @Test("each step of traffic moves exactly its series, by exactly its count")
    func deltas() async throws {
        let clock = TestClock(Self.start)
        try await withGateway(clock: clock, delivery: Self.delivery) { gateway in
            let world = try await World(gateway, clock: clock)
            for step in Self.steps {
                let before = try await scrape(gateway)
                try await step.action(world)
                let after = try await scrape(gateway)
                let moved = after.deltas(from: before).filter { Self.isCompared($0.key) }
                #expect(moved == step.expected, "\(step)")
            }
            await world.api.close()
        }
    }

    /// What the steps control: everything but the process's own figures, connections and
    /// streams (the test's own connection moves them), store commits (their grouping is the
    /// store's), and histogram buckets and sums (their counts are compared).
    static func isCompared(_ series: String) -> Bool {
        !series.hasPrefix("process_") && !series.hasPrefix("pushgate_http2_") && !series.hasPrefix("pushgate_store_")
            && !series.contains("_bucket{") && !series.hasSuffix("_sum")
    }

    @Test("the gauges are the shards' state and the admin view's figures")
    func gaugesEqualAdminView() async throws {
        let clock = TestClock(Self.start)
        try await withGateway(clock: clock, delivery: Self.delivery) { gateway in
            let world = try await World(gateway, clock: clock)
            world.streamA = try await world.api.openEvents(world.a)
            _ = try await world.push(world.tokenA)
            _ = try await world.silent(world.tokenA)
            _ = try await world.silent(world.tokenA)
            _ = try await world.push(world.tokenB)
            _ = try await world.receive(2)
            clock.advance(by: 90_000)

            let exposition = try await scrape(gateway)
            let stats = try await world.api.send("GET", "/v1/admin/stats").json
            let shards = try await gateway.core.statistics()
            #expect(shards.held == 1 && shards.stored == 1 && shards.unacked == 2 && shards.connectedDevices == 1)
            #expect(exposition["pushgate_held_notifications"] == Double(shards.held))
            #expect(exposition["pushgate_stored_notifications"] == Double(shards.stored))
            #expect(exposition["pushgate_unacked_notifications"] == Double(shards.unacked))
            #expect(exposition["pushgate_connected_devices"] == Double(shards.connectedDevices))
            #expect(stats["held"] as? Int == shards.held)
            #expect(stats["stored"] as? Int == shards.stored)
            #expect(stats["unacked"] as? Int == shards.unacked)
            #expect(stats["connectedDevices"] as? Int == shards.connectedDevices)
            #expect(exposition["pushgate_held_oldest_age_seconds"] == 90)
            // The held one is silent, not a deferred priority-5 alert.
            #expect(exposition["pushgate_deferred_oldest_age_seconds"] == 0)
            await world.api.close()
        }
    }

    @Test("HTTP/2 connections by role and their streams, back to zero when they close")
    func connectionsByRole() async throws {
        try await withGateway { gateway in
            let provider = try await API(gateway)
            let (device, token) = try await provider.registeredDevice(topic: Self.topic)
            let agent = try await API(gateway)
            _ = try await agent.device(device, "POST", "keepalive")
            let stream = try await agent.openEvents(device)
            _ = try await provider.push(token: token, topic: Self.topic)
            _ = try await stream.nextNotification()

            // The scrape's own connection is an operator's.
            let operatorConnection = try await API(gateway)
            let open = try Exposition(try await operatorConnection.send("GET", "/metrics").text)
            // The provider connection's first request created a device: a device request.
            #expect(open["pushgate_http2_connections{role=\"device\"}"] == 2)
            #expect(open["pushgate_http2_connections{role=\"operator\"}"] == 1)
            #expect(open["pushgate_http2_connections{role=\"provider\"}"] == 0)
            // The event stream and the scrape itself.
            #expect(open["pushgate_http2_streams"] == 2)

            let pusher = try await API(gateway)
            _ = try await pusher.push(token: token, topic: Self.topic)
            _ = try await stream.nextNotification()
            let pushing = try Exposition(try await operatorConnection.send("GET", "/metrics").text)
            #expect(pushing["pushgate_http2_connections{role=\"provider\"}"] == 1)

            for api in [provider, agent, pusher] { await api.close() }
            try await eventually("only the operator's connection left") {
                let now = try Exposition(try await operatorConnection.send("GET", "/metrics").text)
                return now["pushgate_http2_connections{role=\"device\"}"] == 0
                    && now["pushgate_http2_connections{role=\"provider\"}"] == 0
                    && now["pushgate_http2_streams"] == 1
            }
            await operatorConnection.close()
        }
    }
}

/// The metrics the gateway exposes now, over HTTP/1.1 as Prometheus asks.
func scrape(_ gateway: RunningGateway, token: String? = nil) async throws -> Exposition {
    let authorization = token.map { "Authorization: Bearer \($0)\r\n" } ?? ""
    let text = try await gateway.http1("GET /metrics HTTP/1.1\r\nHost: x\r\n\(authorization)Connection: close\r\n\r\n")
    guard text.hasPrefix("HTTP/1.1 200"), let bodyStart = text.range(of: "\r\n\r\n") else {
        throw ExpositionError(message: "GET /metrics: \(text.prefix(300))")
    }
    return try Exposition(String(text[bodyStart.upperBound...]))
}

struct ExpositionError: Error, CustomStringConvertible {
    var message: String
    var description: String { message }
}

/// Prometheus' text format, read as a scraper reads it.
struct Exposition {
    var samples: [String: Double] = [:]
    var help: [String: String] = [:]
    var types: [String: String] = [:]

    init(_ text: String) throws {
        for line in text.split(separator: "\n") {
            if line.hasPrefix("# HELP ") {
                let rest = line.dropFirst("# HELP ".count)
                guard let space = rest.firstIndex(of: " ") else { throw ExpositionError(message: "bad HELP: \(line)") }
                help[String(rest[..<space])] = String(rest[rest.index(after: space)...])
            } else if line.hasPrefix("# TYPE ") {
                let parts = line.split(separator: " ")
                guard parts.count == 4 else { throw ExpositionError(message: "bad TYPE: \(line)") }
                types[String(parts[2])] = String(parts[3])
            } else if !line.hasPrefix("#") {
                guard let space = line.lastIndex(of: " "), let value = Double(line[line.index(after: space)...]) else {
                    throw ExpositionError(message: "bad sample: \(line)")
                }
                let series = String(line[..<space])
                if samples[series] != nil { throw ExpositionError(message: "series twice: \(series)") }
                samples[series] = value
            }
        }
    }

    subscript(series: String) -> Double? { samples[series] }

    /// The series whose value changed, by how much.
    func deltas(from before: Exposition) -> [String: Double] {
        var moved: [String: Double] = [:]
        for (series, value) in samples where value != before.samples[series] ?? 0 {
            moved[series] = value - (before.samples[series] ?? 0)
        }
        return moved
    }
}
