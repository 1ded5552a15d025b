import Foundation
import NIOCore
import PushgateDelivery
import PushgateModel
import Testing

@testable import PushgateOperator

/// What operators read, without a server: times in words, the reasons, the access rule, totals.
@Suite("Operator console without sockets: words, access, totals")
struct OperatorWordsTests {
    /// 2023-11-14 22:13:20 UTC.
    static let now: Int64 = 1_700_000_000_000

    @Test(
        "UTC times: the time of day when it is today, the date too otherwise",
        arguments: [
            (now, "22:13:20 UTC"),
            (now + 6_399_999, "23:59:59 UTC"),
            (now + 6_400_000, "2023-11-15 00:00:00 UTC"),
            (Int64(0), "1970-01-01 00:00:00 UTC"),
            (Int64(951_782_400_000), "2000-02-29 00:00:00 UTC"),
            (Int64(-1_000), "1969-12-31 23:59:59 UTC"),
        ]
    )
    func utcTimes(_ millis: Int64, _ words: String) {
        #expect(UTCTime.words(millis, now: Self.now) == words)
    }

    @Test("each reason in words, with the time it names")
    func reasons() {
        let hour = Self.now + 3_600_000
        #expect(
            WaitWords.describe(.appBudgetEmpty(until: hour), now: Self.now) == "app budget empty until 23:13:20 UTC"
        )
        #expect(
            WaitWords.describe(.deviceBudgetEmpty(until: hour), now: Self.now)
                == "device budget empty until 23:13:20 UTC"
        )
        #expect(
            WaitWords.describe(.behindOlderSilent(count: 1), now: Self.now)
                == "behind 1 older silent push of its app, released oldest first"
        )
        #expect(
            WaitWords.describe(.behindOlderSilent(count: 3), now: Self.now)
                == "behind 3 older silent pushes of its app, released oldest first"
        )
        #expect(
            WaitWords.describe(.offline(since: Self.now - 86_400_000), now: Self.now)
                == "device offline since 2023-11-13 22:13:20 UTC; sent when its event stream opens"
        )
        #expect(
            WaitWords.describe(.awaitingAck(inKeepaliveResponse: true), now: Self.now)
                == "sent in a keep-alive response; waits for the device's ack"
        )
        #expect(
            WaitWords.describe(.belowUrgency(.low, power: .lowPower), now: Self.now)
                == "Web Push urgency low: a device in lowPower takes high and above; it waits until the power state allows low, or its TTL runs out, and no wake event brings it"
        )
        #expect(WaitWords.until(.deferred(until: hour)) == hour)
        #expect(WaitWords.until(.waitsForWake) == nil)
    }

    @Test("why an app's refill is what it is, in words: docs/scheduler.md's worked example")
    func fetchExplanation() {
        let results = [FetchResult.timeout] + Array(repeating: .noData, count: 2) + Array(repeating: .newData, count: 6)
        let fetch = DeviceInspection.Fetch(
            score: 0.833,
            results: results,
            configuredRefillPerHour: 3,
            minRefillPerHour: 1,
            penaltyUntil: Self.now + 3_600_000,
            interval: .minimum,
            intervalReadyAt: nil,
            openWindows: []
        )
        #expect(
            FetchWords.explain(fetch, refillPerHour: 1.25, now: Self.now)
                == "refill 1.25/h instead of 3/h: score 0.833 over the last 9 results (6 newData, 2 noData, 1 timeout); halved until 23:13:20 UTC after a timeout"
        )
        var floor = fetch
        floor.results = [.timeout]
        floor.score = 0
        floor.penaltyUntil = nil
        #expect(
            FetchWords.explain(floor, refillPerHour: 1, now: Self.now)
                == "refill 1/h instead of 3/h, at the floor of 1/h: score 0 over the last 1 result (1 timeout)"
        )
        var fresh = fetch
        fresh.results = []
        fresh.penaltyUntil = nil
        #expect(
            FetchWords.explain(fresh, refillPerHour: 3, now: Self.now)
                == "refill 3/h as configured: no fetch result yet"
        )
        #expect(
            WaitWords.describe(.fetchInterval(seconds: 600, until: Self.now + 600_000), now: Self.now)
                == "its app's fetch interval is 600 s: the next budget release is allowed at 22:23:20 UTC"
        )
        #expect(WaitWords.until(.fetchInterval(seconds: 600, until: Self.now + 600_000)) == Self.now + 600_000)
    }

    @Test("the next budget release a fetch interval allows: a time, or null both for now and for never")
    func nextRelease() throws {
        func document(_ interval: FetchInterval, readyAt: Int64?) throws -> Any? {
            let fetch = DeviceInspection.Fetch(
                score: 1,
                results: [],
                configuredRefillPerHour: 3,
                minRefillPerHour: 1,
                penaltyUntil: nil,
                interval: interval,
                intervalReadyAt: readyAt,
                openWindows: []
            )
            let data = try JSONEncoder().encode(AdminDevice.Fetch(fetch, refillPerHour: 3, now: Self.now))
            let object = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
            return object["nextReleaseAllowedAt"]
        }
        #expect(try document(.seconds(600), readyAt: Self.now + 600_000) as? Int64 == Self.now + 600_000)
        #expect(try document(.minimum, readyAt: nil) is NSNull)
        #expect(try document(.never, readyAt: .max) is NSNull)
    }

    @Test("with a token: the exact token, as a bearer credential, from anywhere; without one: loopback only")
    func access() throws {
        let remote = try SocketAddress(ipAddress: "192.0.2.2", port: 1)
        let local = try SocketAddress(ipAddress: "127.0.0.1", port: 1)
        let guarded = AdminAccess(token: "s3cret")
        #expect(guarded.refusal(authorization: "bearer s3cret", peer: remote, forwardedBy: nil) == nil)
        #expect(guarded.refusal(authorization: "Bearer s3cret", peer: remote, forwardedBy: nil) == nil)
        for header in [nil, "", "bearer", "bearer s3cre", "bearer s3cret2", "basic s3cret", "s3cret"] {
            #expect(
                guarded.refusal(authorization: header, peer: local, forwardedBy: nil)?.reason == .unauthorized,
                "\(header ?? "none")"
            )
        }
        let open = AdminAccess(token: nil)
        #expect(open.refusal(authorization: nil, peer: local, forwardedBy: nil) == nil)
        #expect(open.refusal(authorization: "bearer anything", peer: remote, forwardedBy: nil)?.reason == .forbidden)
        #expect(
            open.refusal(authorization: nil, peer: nil, forwardedBy: nil)?.reason == .forbidden,
            "a peer of unknown address is not loopback"
        )
        // A proxy on the machine is a loopback peer: what it forwards is refused without a token.
        let forwarded = open.refusal(authorization: nil, peer: local, forwardedBy: "x-forwarded-for")
        #expect(forwarded?.reason == .forbidden)
        #expect(forwarded?.detail.contains("through a proxy (it carries x-forwarded-for)") == true)
        #expect(
            guarded.refusal(authorization: "bearer s3cret", peer: local, forwardedBy: "via") == nil,
            "with the token it may come through a proxy"
        )
    }

    @Test("totals as the store keeps them: by name, unknown names ignored, only nonzero ones written")
    func storedTotals() {
        var totals = Totals(stored: ["received": 5, "dropped": 2, "fromAFutureVersion": 9])
        #expect(totals.received == 5 && totals.dropped == 2 && totals.delivered == 0)
        totals.acknowledged = 1
        #expect(totals.stored == ["received": 5, "dropped": 2, "acknowledged": 1])
        #expect((totals - Totals(stored: ["received": 5])).stored == ["dropped": 2, "acknowledged": 1])
    }
}
