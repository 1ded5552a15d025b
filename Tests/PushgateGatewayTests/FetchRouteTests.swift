import Foundation
import PushgateDelivery
import PushgateScheduler
import PushgateTestKit
import Testing

/// Background fetch through the real server: the window in the event, the results route and
/// its refusals, timeouts, fetch intervals in the state route, and what the admin view and the
/// metrics then say.
@Suite(
    "Background fetch over HTTP/2: results, timeouts, intervals, the admin view",
    .serialized,
    .timeLimit(.minutes(2))
)
struct FetchRouteTests {
    static let fast = "com.example.fast"
    static let slow = "com.example.slow"
    /// 2023-11-14 22:13:20 UTC.
    static let start: Int64 = 1_700_000_000_000
    static let silent = [("apns-push-type", "background"), ("apns-priority", "5")]
    static let payload = #"{"aps":{"content-available":1}}"#

    static func delivery() -> DeliveryConfiguration {
        var configuration = DeliveryConfiguration()
        var policy = SchedulerPolicy(appBurst: 1, appRefillPerHour: 4, deviceBurst: 100, deviceRefillPerHour: 100)
        policy.fetchWindowMillis = 20_000
        configuration.scheduler = SchedulerConfiguration(global: policy)
        return configuration
    }

    @Test("a result counts and a silent window times out; the view and the metrics say why the slow app gets less")
    func resultsAndTimeouts() async throws {
        let clock = TestClock(Self.start)
        try await withGateway(clock: clock, delivery: Self.delivery()) { gateway in
            let api = try await API(gateway)
            let device = try await api.createDevice()
            let fastToken = try await api.registeredToken(device, topic: Self.fast)
            let slowToken = try await api.registeredToken(device, topic: Self.slow)
            let stream = try await api.openEvents(device)
            #expect(
                try await api.push(token: fastToken, topic: Self.fast, headers: Self.silent, payload: Self.payload)
                    .disposition == "delivered"
            )
            #expect(
                try await api.push(token: slowToken, topic: Self.slow, headers: Self.silent, payload: Self.payload)
                    .disposition == "delivered"
            )
            let fastEvent = try await stream.nextNotification()
            let slowEvent = try await stream.nextNotification()
            #expect(fastEvent.fetchWindowSeconds == 20)
            #expect(slowEvent.fetchWindowSeconds == 20)

            let results = { (body: String) in try await api.device(device, "POST", "fetch-results", body: body) }
            let counted = try await results(#"{"results":[{"seq":\#(fastEvent.seq),"result":"newData"}]}"#)
            #expect(counted.status == 204, "\(counted.text)")
            let again = try await results(#"{"results":[{"seq":\#(fastEvent.seq),"result":"newData"}]}"#)
            #expect(again.status == 400)
            #expect(again.json["reason"] as? String == "BadFetchResult")
            #expect((again.json["detail"] as? String)?.contains("already reported") == true)
            let word = try await results(#"{"results":[{"seq":\#(slowEvent.seq),"result":"timeout"}]}"#)
            #expect(word.status == 400)
            #expect(word.json["reason"] as? String == "BadRequest", "a timeout is the absence of a report")
            let stranger = try await api.device(nil, id: device.id, "POST", "fetch-results", body: #"{"results":[]}"#)
            #expect(stranger.status == 401)

            clock.advance(by: 20_000)
            try await gateway.core.advanceSchedulers()
            let late = try await results(#"{"results":[{"seq":\#(slowEvent.seq),"result":"newData"}]}"#)
            #expect((late.json["detail"] as? String)?.contains("counted as a timeout") == true)

            let view = try await gateway.operatorGet("/v1/admin/devices/\(device.id)").json
            let registrations = try #require(view["registrations"] as? [[String: Any]])
            let byTopic = Dictionary(uniqueKeysWithValues: registrations.map { ($0["topic"] as? String ?? "", $0) })
            let fast = try #require(byTopic[Self.fast]?["fetch"] as? [String: Any])
            let slow = try #require(byTopic[Self.slow]?["fetch"] as? [String: Any])
            #expect(fast["results"] as? [String] == ["newData"])
            #expect(fast["refillPerHour"] as? Double == 4)
            #expect(
                fast["explanation"] as? String == "refill 4/h as configured: score 1 over the last 1 result (1 newData)"
            )
            #expect(slow["results"] as? [String] == ["timeout"])
            #expect(slow["refillPerHour"] as? Double == 1)
            #expect(int64(slow["penaltyUntil"]) == Self.start + 20_000 + 86_400_000)
            #expect(
                slow["explanation"] as? String
                    == "refill 1/h instead of 4/h, at the floor of 1/h: score 0 over the last 1 result (1 timeout); halved until 2023-11-15 22:13:40 UTC after a timeout"
            )
            #expect((byTopic[Self.slow]?["bucket"] as? [String: Any])?["refillPerHour"] as? Double == 1)

            let metrics = try await gateway.operatorGet("/metrics").body
            #expect(metrics.contains("pushgate_fetch_results_total{result=\"newData\"} 1"))
            #expect(metrics.contains("pushgate_fetch_results_total{result=\"timeout\"} 1"))
            #expect(metrics.contains("pushgate_silent_refill_scaled 1"))
            await api.close()
        }
    }

    @Test(
        "fetch intervals: set in the state route, shown in the view, never holds silent pushes for a wake event; bad values refused"
    )
    func intervals() async throws {
        let clock = TestClock(Self.start)
        try await withGateway(clock: clock, delivery: Self.delivery()) { gateway in
            let api = try await API(gateway)
            let device = try await api.createDevice()
            let fastToken = try await api.registeredToken(device, topic: Self.fast)
            _ = try await api.registeredToken(device, topic: Self.slow)
            let set = try await api.device(
                device,
                "PUT",
                "state",
                body: #"{"fetchIntervals":{"\#(Self.fast)":"never","\#(Self.slow)":600}}"#
            )
            #expect(set.status == 200, "\(set.text)")
            let stream = try await api.openEvents(device)
            let held = try await api.push(
                token: fastToken,
                topic: Self.fast,
                headers: Self.silent,
                payload: Self.payload
            )
            #expect(held.disposition == "held")

            let view = try await gateway.operatorGet("/v1/admin/devices/\(device.id)").json
            let registrations = try #require(view["registrations"] as? [[String: Any]])
            let intervals = registrations.map {
                (($0["topic"] as? String) ?? "", ($0["fetch"] as? [String: Any])?["interval"])
            }
            #expect(intervals.first { $0.0 == Self.fast }?.1 as? String == "never")
            #expect(intervals.first { $0.0 == Self.slow }?.1 as? Int == 600)
            let notification = try #require((view["notifications"] as? [[String: Any]])?.first)
            #expect((notification["reason"] as? String)?.hasPrefix("its app's fetch interval is never") == true)

            let released = try await api.keepalive(device)
            #expect(released.map { $0["apnsId"] as? String } == [held.apnsID])
            #expect(released.first?["fetchWindowSeconds"] as? Int == 20)

            for body in [
                #"{"fetchIntervals":{"\#(Self.fast)":0}}"#, #"{"fetchIntervals":{"\#(Self.fast)":"sometimes"}}"#,
            ] {
                let refused = try await api.device(device, "PUT", "state", body: body)
                #expect(refused.status == 400)
                #expect(refused.json["reason"] as? String == "BadState")
            }
            let unknown = try await api.device(
                device,
                "PUT",
                "state",
                body: #"{"fetchIntervals":{"com.example.other":"never"}}"#
            )
            #expect(unknown.json["reason"] as? String == "BadTopic")
            _ = stream
            await api.close()
        }
    }
}
