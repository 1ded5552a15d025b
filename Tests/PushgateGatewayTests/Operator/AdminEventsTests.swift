import Foundation
import NIOCore
import PushgateDelivery
import PushgateGateway
import PushgateScheduler
import PushgateTestKit
import PushgateTransport
import Testing

/// `GET /v1/admin/events`: the live stream the dashboard reads, over HTTP/1.1 as browsers read
/// it and over HTTP/2.
@Suite("Admin events: ticks, notable events, limits, shutdown", .serialized, .timeLimit(.minutes(2)))
struct AdminEventsTests {
    static let token = "events-token-0b7e"
    static let topic = "com.example.events"
    static let start: Int64 = 1_700_000_000_000
    static let silent = [("apns-push-type", "background"), ("apns-priority", "5")]
    static let silentPayload = #"{"aps":{"content-available":1}}"#

    @Test("over HTTP/1.1: a tick at once, then holds, drops and releases as they happen, and ticks with the figures")
    func liveOverHTTP1() async throws {
        try await withGateway(
            clock: TestClock(Self.start),
            delivery: oneTokenBudget(maxHeld: 1),
            configure: { $0.adminToken = Self.token }
        ) { gateway in
            let events = try await gateway.adminEvents(token: Self.token)
            let head = try await events.head()
            #expect(head.status.code == 200)
            #expect(head.headers.first(name: "content-type") == "text/event-stream; charset=utf-8")
            #expect(head.headers.first(name: "transfer-encoding") == "chunked")
            let first = try #require(try await events.next("stats"))
            #expect(first["held"] as? Int == 0)
            #expect(first["notableSkipped"] as? Int == 0)

            let api = try await API(gateway)
            let (device, token) = try await api.registeredDevice(topic: Self.topic)
            let stream = try await api.openEvents(device)
            // The app's one token.
            #expect(
                try await api.push(token: token, topic: Self.topic, headers: Self.silent, payload: Self.silentPayload)
                    .disposition == "delivered"
            )
            _ = try await stream.nextNotification()
            let held = try await api.push(
                token: token,
                topic: Self.topic,
                headers: Self.silent,
                payload: Self.silentPayload
            )
            #expect(held.disposition == "held")
            let holding = try await events.next("notable") { $0["kind"] as? String == "held" }
            #expect(holding["apnsId"] as? String == held.apnsID)
            #expect(holding["deviceId"] as? String == device.id)
            #expect(holding["topic"] as? String == Self.topic)
            #expect(holding["detail"] as? String == "app budget empty")
            #expect(int64(holding["time"]) == Self.start)

            // The next held push replaces it (one held per app): the older is dropped.
            let newer = try await api.push(
                token: token,
                topic: Self.topic,
                headers: Self.silent,
                payload: Self.silentPayload
            )
            let dropped = try await events.next("notable") { $0["kind"] as? String == "dropped" }
            #expect(dropped["apnsId"] as? String == held.apnsID)
            #expect(dropped["detail"] as? String == "overflow")

            _ = try await api.push(token: token, topic: Self.topic)
            let released = try await events.next("notable") { $0["kind"] as? String == "released" }
            #expect(released["apnsId"] as? String == newer.apnsID)
            #expect(released["detail"] as? String == "piggyback")
            _ = try await stream.nextNotification()

            // A push is counted as received before its shard takes it: a tick can fall between.
            // Once the piggyback is counted, the release has happened.
            let tick = try await events.next("stats") {
                ($0["totals"] as? [String: Any])?["received"] as? Int == 4
                    && ($0["deliveredByKind"] as? [String: Any])?["piggyback"] as? Int == 1
            }
            #expect(tick["held"] as? Int == 0)
            #expect(tick["connectedDevices"] as? Int == 1)
            #expect((tick["droppedByReason"] as? [String: Any])?["overflow"] as? Int == 1)
            #expect((tick["deliveredByKind"] as? [String: Any])?["piggyback"] as? Int == 1)
            // The newer one waited behind the older held push, not for a token.
            #expect((tick["budgetExhausted"] as? [String: Any])?["app"] as? Int == 1)
            await events.close()
            await api.close()
        }
    }

    @Test("over HTTP/2 too")
    func liveOverHTTP2() async throws {
        try await withGateway { gateway in
            let connection = try await gateway.connect()
            let response = try await connection.stream(HTTPClientRequest(path: "/v1/admin/events"))
            #expect(response.status == 200)
            let stream = EventStream(response)
            let event = try #require(try await stream.nextEvent())
            #expect(event.type == "stats")
            await connection.close()
        }
    }

    @Test("at most 100 notable events a second per stream; the rest are counted in the next tick")
    func notableLimit() async throws {
        // The clock stands still: every event is in the same second.
        try await withGateway(clock: TestClock(Self.start), delivery: oneTokenBudget(maxHeld: 200)) { gateway in
            let events = try await gateway.adminEvents()
            #expect(try await events.head().status.code == 200)
            _ = try await events.next("stats")
            let api = try await API(gateway)
            let (device, token) = try await api.registeredDevice(topic: Self.topic)
            // Connected (offline, priority 1 is stored for the device's return).
            let stream = try await api.openEvents(device)
            for _ in 0..<150 {
                let reply = try await api.push(token: token, topic: Self.topic, headers: [("apns-priority", "1")])
                #expect(reply.disposition == "held")
            }
            var notables = 0
            var skipped = 0
            // Each tick reports what was skipped since the one before. Ticks run on the wall
            // clock, so one may fall in the middle of the burst: the skipped add up. The test
            // clock stands still, so the limit's second never ends and 100 is the total.
            while notables + skipped < 150 {
                let event = try #require(try await events.nextEvent())
                if event.type == "notable" { notables += 1 }
                if event.type == "stats" { skipped += event.json["notableSkipped"] as? Int ?? 0 }
            }
            #expect(notables == 100)
            // Its stream stays open (and the device connected) until here.
            withExtendedLifetime(stream) {}
            #expect(skipped == 50)
            await events.close()
            await api.close()
        }
    }

    @Test("64 streams at most; the next gets 503 until one closes")
    func streamLimit() async throws {
        try await withGateway { gateway in
            var open: [AdminEventStream] = []
            for _ in 0..<64 {
                let events = try await gateway.adminEvents()
                #expect(try await events.head().status.code == 200)
                open.append(events)
            }
            let refused = try await gateway.adminEvents()
            #expect(try await refused.head().status.code == 503)
            await refused.close()
            await open.removeLast().close()
            try await eventually("a place for one more stream") {
                let again = try await gateway.adminEvents()
                defer { Task { await again.close() } }
                return try await again.head().status.code == 200
            }
            for events in open { await events.close() }
        }
    }

    @Test("a graceful shutdown ends open event streams at once, not at its deadline")
    func shutdownEndsStreams() async throws {
        try await withGateway { gateway in
            let events = try await gateway.adminEvents()
            #expect(try await events.head().status.code == 200)
            _ = try await events.next("stats")
            let stopping = Task { await gateway.assembled.stop(deadline: .seconds(60)) }
            #expect(try await events.ended(within: 10))
            await stopping.value
        }
    }
}
