import Foundation
import NIOCore
import PushgateDelivery
import PushgateScheduler
import PushgateTestKit
import Testing

/// The scheduler through the real server and the agent protocol (PRODUCT.md section 4): budgets,
/// holding, piggyback with `carrier`, keep-alive releases, budget releases after a refill,
/// `lowPower`, `terminated`, collapse ids, and a restart. Time moves only on the injected clock;
/// budget releases run when the test calls `advanceSchedulers()` after moving it.
@Suite(
    "Scheduler end to end: held, piggyback, keep-alive, budget, power, app state, restart",
    .serialized,
    .timeLimit(.minutes(2))
)
struct SchedulerDeliveryTests {
    static let topic = "com.example.sync"
    static let start: Int64 = 1_700_000_000_000
    static let silentPayload = #"{"aps":{"content-available":1}}"#
    static let silentHeaders = [("apns-push-type", "background"), ("apns-priority", "5")]

    /// App budget `burst`, refilled at `perHour`; device budget large enough not to interfere.
    static func delivery(
        burst: Int = 2,
        perHour: Int = 3,
        maxHeld: Int = 8,
        maxDeferralMillis: Int64 = 15 * 60 * 1000
    ) -> DeliveryConfiguration {
        var configuration = DeliveryConfiguration()
        configuration.scheduler = SchedulerConfiguration(
            global: SchedulerPolicy(
                appBurst: burst,
                appRefillPerHour: perHour,
                deviceBurst: 100,
                deviceRefillPerHour: 100,
                maxHeldPerApp: maxHeld,
                maxDeferralMillis: maxDeferralMillis
            )
        )
        return configuration
    }

    static func silent(
        _ api: API,
        _ token: String,
        id: String = newAPNsID(),
        collapse: String? = nil
    ) async throws -> Reply {
        var headers = silentHeaders
        if let collapse { headers.append(("apns-collapse-id", collapse)) }
        return try await api.push(token: token, topic: topic, apnsID: id, headers: headers, payload: silentPayload)
    }

    /// Reports the state; returns the answer's body, what is in force.
    @discardableResult
    static func state(_ api: API, _ device: Device, _ body: String) async throws -> [String: Any] {
        let reply = try await api.device(device, "PUT", "state", body: body)
        try #require(reply.status == 200, "PUT state \(body): \(reply.status) \(reply.text)")
        return try #require(try JSONSerialization.jsonObject(with: Data(reply.text.utf8)) as? [String: Any])
    }

    @Test(
        "budget spent → held; everything held piggybacks on the next priority-10 push, with carrier, in acceptance order"
    )
    func heldThenPiggyback() async throws {
        try await withGateway(clock: TestClock(Self.start), delivery: Self.delivery(burst: 2)) { gateway in
            let api = try await API(gateway)
            let (device, token) = try await api.registeredDevice(topic: Self.topic)
            let stream = try await api.openEvents(device)

            let ids = (0..<4).map { _ in newAPNsID() }
            var dispositions: [String?] = []
            for id in ids { dispositions.append(try await Self.silent(api, token, id: id).disposition) }
            #expect(dispositions == ["delivered", "delivered", "held", "held"])
            #expect(try await gateway.core.statistics().held == 2)
            for id in ids.prefix(2) {
                let event = try await stream.nextNotification()
                #expect(event.apnsID == id)
                #expect(event.delivery == "immediate")
                #expect(event.carrier == nil)
            }

            let alert = newAPNsID()
            let carrierReply = try await api.push(token: token, topic: Self.topic, apnsID: alert)
            #expect(carrierReply.disposition == "delivered")
            var seqs: [Int] = []
            for id in ids.suffix(2) {
                let event = try await stream.nextNotification()
                #expect(event.apnsID == id)
                #expect(event.delivery == "piggyback")
                #expect(event.carrier == alert)
                seqs.append(event.seq)
            }
            let woke = try await stream.nextNotification()
            #expect(woke.apnsID == alert)
            #expect(woke.delivery == "immediate")
            #expect(seqs + [woke.seq] == Array((seqs[0])...(seqs[0] + 2)), "seqs follow acceptance order")
            #expect(try await gateway.core.statistics().held == 0)
            await api.close()
        }
    }

    @Test("a keep-alive releases what is held in its body, with seqs; acked like any other and not sent again")
    func keepaliveRelease() async throws {
        try await withGateway(clock: TestClock(Self.start), delivery: Self.delivery()) { gateway in
            let api = try await API(gateway)
            let (device, token) = try await api.registeredDevice(topic: Self.topic)
            // Offline: silent pushes are held (regular ones would be stored).
            let ids = [newAPNsID(), newAPNsID()]
            for id in ids { #expect(try await Self.silent(api, token, id: id).disposition == "held") }

            let notifications = try await api.keepalive(device)
            #expect(notifications.map { $0["apnsId"] as? String } == ids)
            #expect(notifications.map { $0["delivery"] as? String } == ["keepalive", "keepalive"])
            let seqs = notifications.compactMap { ($0["seq"] as? NSNumber)?.uint64Value }
            #expect(seqs.count == 2 && seqs[1] == seqs[0] + 1)
            #expect(try await api.keepalive(device).isEmpty, "released once")

            #expect(try await api.ack(device, upTo: seqs[1]).status == 204)
            let stream = try await api.openEvents(device)
            let next = newAPNsID()
            _ = try await api.push(token: token, topic: Self.topic, apnsID: next)
            let event = try await stream.nextNotification()
            #expect(event.apnsID == next, "acked keep-alive releases are not sent on the stream")
            #expect(event.seq == Int(seqs[1]) + 1)
            await api.close()
        }
    }

    @Test("acking a keep-alive release never deletes an older push still waiting to be sent")
    func ackStopsAtUnsent() async throws {
        try await withGateway(clock: TestClock(Self.start), delivery: Self.delivery()) { gateway in
            let api = try await API(gateway)
            let (device, token) = try await api.registeredDevice(topic: Self.topic)
            let stored = newAPNsID()
            #expect(try await api.push(token: token, topic: Self.topic, apnsID: stored).disposition == "stored")
            #expect(try await Self.silent(api, token).disposition == "held")
            let released = try await api.keepalive(device)
            let seq = try #require((released.first?["seq"] as? NSNumber)?.uint64Value)
            #expect(seq == 2, "the stored push has seq 1")
            #expect(try await api.ack(device, upTo: seq).status == 204)
            let stream = try await api.openEvents(device)
            let event = try await stream.nextNotification()
            #expect(event.apnsID == stored, "the stored push was never sent, so the ack did not cover it")
            await api.close()
        }
    }

    @Test("the expiry sweep leaves a push already sent in a keep-alive response to its ack")
    func sweepSkipsSent() async throws {
        let clock = TestClock(Self.start)
        try await withGateway(clock: clock, delivery: Self.delivery()) { gateway in
            let api = try await API(gateway)
            let (device, token) = try await api.registeredDevice(topic: Self.topic)
            let expiration = ("apns-expiration", "\((Self.start + 60_000) / 1000)")
            let reply = try await api.push(
                token: token,
                topic: Self.topic,
                headers: Self.silentHeaders + [expiration],
                payload: Self.silentPayload
            )
            #expect(reply.disposition == "held")
            #expect(try await api.keepalive(device).count == 1)
            clock.set(Self.start + 120_000)
            try await gateway.core.sweepExpired()
            #expect(gateway.core.counters.drops[.expired] == 0, "it was delivered; only its ack is missing")
            #expect(try await gateway.core.statistics().queued == 1)
            #expect(try await api.ack(device, upTo: 1).status == 204)
            #expect(try await gateway.core.statistics().queued == 0)
            await api.close()
        }
    }

    @Test("unregister drops the app's pushes never sent, and leaves one sent in a keep-alive response to its ack")
    func unregisterKeepsKeepaliveSent() async throws {
        try await withGateway(clock: TestClock(Self.start), delivery: Self.delivery()) { gateway in
            let api = try await API(gateway)
            let (device, token) = try await api.registeredDevice(topic: Self.topic)
            #expect(try await Self.silent(api, token).disposition == "held")
            let released = try await api.keepalive(device)
            let seq = try #require((released.first?["seq"] as? NSNumber)?.uint64Value)
            #expect(try await api.push(token: token, topic: Self.topic).disposition == "stored")
            #expect(try await gateway.core.statistics().queued == 2)

            #expect(try await api.unregister(device, token: token).status == 204)
            #expect(gateway.core.counters.drops[.unregistered] == 1, "the stored push was never sent")
            #expect(try await gateway.core.statistics().queued == 1, "the agent may be handling the keep-alive's push")
            #expect(try await api.ack(device, upTo: seq).status == 204)
            #expect(try await gateway.core.statistics().queued == 0)
            await api.close()
        }
    }

    @Test(
        "after a restart the stream still sends in seq order, though a held push was released after a later stored one"
    )
    func restartKeepsSeqOrder() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "pushgate-sched-\(UUID().uuidString)"
        ).path
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let clock = TestClock(Self.start)
        var device: Device?
        let silentID = newAPNsID()
        let storedID = newAPNsID()
        try await withGateway(directory: directory, clock: clock, delivery: Self.delivery()) { gateway in
            let api = try await API(gateway)
            device = try await api.createDevice()
            let token = try await api.registeredToken(device!, topic: Self.topic)
            #expect(try await Self.silent(api, token, id: silentID).disposition == "held")
            #expect(try await api.push(token: token, topic: Self.topic, apnsID: storedID).disposition == "stored")
            let stream = try await api.openEvents(device!)
            #expect(try await stream.nextNotification().apnsID == storedID)
            #expect(try await stream.nextNotification().apnsID == silentID)
            await api.close()  // nothing acked
        }
        try await withGateway(directory: directory, clock: clock, delivery: Self.delivery()) { gateway in
            let api = try await API(gateway)
            let stream = try await api.openEvents(device!)
            let first = try await stream.nextNotification()
            let second = try await stream.nextNotification()
            #expect([first.apnsID, second.apnsID] == [storedID, silentID])
            #expect(first.seq < second.seq)
            await api.close()
        }
    }

    @Test("after a restart, Last-Event-ID still acks what the old stream sent")
    func lastEventIDAfterRestart() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "pushgate-sched-\(UUID().uuidString)"
        ).path
        defer { try? FileManager.default.removeItem(atPath: directory) }
        var device: Device?
        let ids = (0..<3).map { _ in newAPNsID() }
        var seqs: [Int] = []
        try await withGateway(directory: directory, clock: TestClock(Self.start), delivery: Self.delivery()) {
            gateway in
            let api = try await API(gateway)
            device = try await api.createDevice()
            let token = try await api.registeredToken(device!, topic: Self.topic)
            let stream = try await api.openEvents(device!)
            for id in ids { _ = try await api.push(token: token, topic: Self.topic, apnsID: id) }
            for _ in ids { seqs.append(try await stream.nextNotification().seq) }
            await api.close()  // nothing acked
        }
        try await withGateway(directory: directory, clock: TestClock(Self.start), delivery: Self.delivery()) {
            gateway in
            let api = try await API(gateway)
            let stream = try await api.openEvents(device!, lastEventID: UInt64(seqs[1]))
            let next = try await stream.nextNotification()
            #expect(next.apnsID == ids[2], "seqs up to Last-Event-ID are acked, not sent again")
            await api.close()
        }
    }

    @Test("a terminated app stays terminated across a restart, even after reporting background")
    func terminatedSurvivesRestart() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "pushgate-sched-\(UUID().uuidString)"
        ).path
        defer { try? FileManager.default.removeItem(atPath: directory) }
        var device: Device?
        var token = ""
        try await withGateway(directory: directory, clock: TestClock(Self.start), delivery: Self.delivery()) {
            gateway in
            let api = try await API(gateway)
            device = try await api.createDevice()
            token = try await api.registeredToken(device!, topic: Self.topic)
            let terminated = try await Self.state(api, device!, #"{"apps":{"\#(Self.topic)":"terminated"}}"#)
            #expect((terminated["apps"] as? [String: [String: String]]) == [Self.topic: ["state": "terminated"]])
            #expect(terminated["power"] as? String == "awake")
            // Reported background, kept terminated: the answer says so and why.
            let kept = try await Self.state(api, device!, #"{"power":"idle","apps":{"\#(Self.topic)":"background"}}"#)
            let app = try #require((kept["apps"] as? [String: [String: String]])?[Self.topic])
            #expect(app["state"] == "terminated" && app["reported"] == "background")
            #expect(app["reason"]?.contains("until it reports foreground") == true)
            #expect(kept["power"] as? String == "idle")
            await api.close()
        }
        try await withGateway(directory: directory, clock: TestClock(Self.start), delivery: Self.delivery()) {
            gateway in
            let api = try await API(gateway)
            #expect(try await Self.silent(api, token).disposition == "discarded")
            await api.close()
        }
    }

    @Test(
        "a refilled budget releases the oldest held silent push (budget); lowPower stops that, awake releases all (online)"
    )
    func budgetReleaseAndPower() async throws {
        let clock = TestClock(Self.start)
        // One token, refilled every second.
        try await withGateway(clock: clock, delivery: Self.delivery(burst: 1, perHour: 3600)) { gateway in
            let api = try await API(gateway)
            let (device, token) = try await api.registeredDevice(topic: Self.topic)
            let stream = try await api.openEvents(device)
            let ids = (0..<3).map { _ in newAPNsID() }
            for id in ids { _ = try await Self.silent(api, token, id: id) }
            #expect(try await stream.nextNotification().apnsID == ids[0])

            clock.set(Self.start + 1_000)
            try await gateway.core.advanceSchedulers()
            let released = try await stream.nextNotification()
            #expect(released.apnsID == ids[1])
            #expect(released.delivery == "budget")

            try await Self.state(api, device, #"{"power":"lowPower"}"#)
            clock.set(Self.start + 5_000)
            try await gateway.core.advanceSchedulers()
            #expect(try await gateway.core.statistics().held == 1, "lowPower: no release on budget")

            try await Self.state(api, device, #"{"power":"awake"}"#)
            let woke = try await stream.nextNotification()
            #expect(woke.apnsID == ids[2])
            #expect(woke.delivery == "online")
            await api.close()
        }
    }

    @Test("terminated: held silent pushes dropped and counted, new ones discarded until foreground")
    func terminated() async throws {
        try await withGateway(clock: TestClock(Self.start), delivery: Self.delivery()) { gateway in
            let api = try await API(gateway)
            let (device, token) = try await api.registeredDevice(topic: Self.topic)
            #expect(try await Self.silent(api, token).disposition == "held")
            try await Self.state(api, device, #"{"apps":{"\#(Self.topic)":"terminated"}}"#)
            #expect(gateway.core.counters.drops[.appTerminated] == 1)
            #expect(try await gateway.core.statistics().held == 0)
            #expect(try await Self.silent(api, token).disposition == "discarded")
            // Alerts still get through, as on a real device.
            #expect(try await api.push(token: token, topic: Self.topic).disposition == "stored")
            try await Self.state(api, device, #"{"apps":{"\#(Self.topic)":"background"}}"#)
            #expect(try await Self.silent(api, token).disposition == "discarded", "only foreground lifts it")
            try await Self.state(api, device, #"{"apps":{"\#(Self.topic)":"foreground"}}"#)
            #expect(try await Self.silent(api, token).disposition == "held")

            let unknown = try await api.device(
                device,
                "PUT",
                "state",
                body: #"{"apps":{"com.example.none":"terminated"}}"#
            )
            #expect(unknown.status == 400)
            let bad = try await api.device(device, "PUT", "state", body: #"{"power":"asleep"}"#)
            #expect(bad.status == 400)
            #expect((bad.json["detail"] as? String)?.contains("lowPower") == true)
            await api.close()
        }
    }

    @Test("collapse ids: a newer push replaces a held one and a stored one (coalesced); others queued stay")
    func collapse() async throws {
        try await withGateway(clock: TestClock(Self.start), delivery: Self.delivery()) { gateway in
            let api = try await API(gateway)
            let (device, token) = try await api.registeredDevice(topic: Self.topic)
            let first = newAPNsID()
            let second = newAPNsID()
            #expect(try await Self.silent(api, token, id: first, collapse: "sync").disposition == "held")
            #expect(try await Self.silent(api, token, id: second, collapse: "sync").disposition == "coalesced")
            #expect(gateway.core.counters.drops[.coalesced] == 1)

            // A stored push with no collapse id, queued before the replaced one, stays.
            let storedPlain = newAPNsID()
            let storedFirst = newAPNsID()
            let storedSecond = newAPNsID()
            let collapse = [("apns-collapse-id", "score")]
            #expect(try await api.push(token: token, topic: Self.topic, apnsID: storedPlain).disposition == "stored")
            #expect(
                try await api.push(token: token, topic: Self.topic, apnsID: storedFirst, headers: collapse).disposition
                    == "stored"
            )
            #expect(
                try await api.push(token: token, topic: Self.topic, apnsID: storedSecond, headers: collapse).disposition
                    == "coalesced"
            )

            let stream = try await api.openEvents(device)
            #expect(try await stream.nextNotification().apnsID == storedPlain)
            let storedEvent = try await stream.nextNotification()
            #expect(storedEvent.apnsID == storedSecond)
            #expect(storedEvent.delivery == "stored")
            let heldEvent = try await stream.nextNotification()
            #expect(heldEvent.apnsID == second)
            #expect(heldEvent.delivery == "online")
            await api.close()
        }
    }

    @Test("priority 5 waits while the device is idle, at most maxDeferral (budget); priority 1 waits for a wake event")
    func priorities() async throws {
        let clock = TestClock(Self.start)
        try await withGateway(clock: clock, delivery: Self.delivery(maxDeferralMillis: 60_000)) { gateway in
            let api = try await API(gateway)
            let (device, token) = try await api.registeredDevice(topic: Self.topic)
            let stream = try await api.openEvents(device)
            try await Self.state(api, device, #"{"power":"idle"}"#)
            let normal = newAPNsID()
            let low = newAPNsID()
            #expect(
                try await api.push(token: token, topic: Self.topic, apnsID: normal, headers: [("apns-priority", "5")])
                    .disposition == "held"
            )
            #expect(
                try await api.push(token: token, topic: Self.topic, apnsID: low, headers: [("apns-priority", "1")])
                    .disposition == "held"
            )
            clock.set(Self.start + 60_000)
            try await gateway.core.advanceSchedulers()
            let deferred = try await stream.nextNotification()
            #expect(deferred.apnsID == normal)
            #expect(deferred.delivery == "budget")
            #expect(try await gateway.core.statistics().held == 1, "priority 1 has no deadline")
            #expect(try await api.keepalive(device).map { $0["apnsId"] as? String } == [low])
            await api.close()
        }
    }

    @Test("a restart keeps held pushes and bucket levels: nothing is lost, no budget is refilled")
    func restart() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "pushgate-sched-\(UUID().uuidString)"
        ).path
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let clock = TestClock(Self.start)
        let configuration = Self.delivery(burst: 2, perHour: 3)
        var device: Device?
        var token = ""
        let held = newAPNsID()
        try await withGateway(directory: directory, clock: clock, delivery: configuration) { gateway in
            let api = try await API(gateway)
            device = try await api.createDevice()
            token = try await api.registeredToken(device!, topic: Self.topic)
            let stream = try await api.openEvents(device!)
            #expect(try await Self.silent(api, token).disposition == "delivered")
            #expect(try await Self.silent(api, token).disposition == "delivered")
            #expect(try await Self.silent(api, token, id: held).disposition == "held")
            _ = try await stream.nextNotification()
            let last = try await stream.nextNotification()
            #expect(try await api.ack(device!, upTo: UInt64(last.seq)).status == 204)
            await api.close()
        }
        clock.set(Self.start + 1_000)
        try await withGateway(directory: directory, clock: clock, delivery: configuration) { gateway in
            #expect(try await gateway.core.statistics().held == 1)
            let api = try await API(gateway)
            let stream = try await api.openEvents(device!)
            let event = try await stream.nextNotification()
            #expect(event.apnsID == held)
            #expect(event.delivery == "online")
            // The bucket is as empty as before the restart.
            #expect(try await Self.silent(api, token).disposition == "held")
            await api.close()
        }
    }
}
