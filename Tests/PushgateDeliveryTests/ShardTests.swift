@_spi(Testing) import PushgateDelivery
import PushgateModel
import PushgateStore
import PushgateStoreTestKit
import PushgateTestKit
import Testing

/// Delivery's rules on a shard, seen through a recording event sink and store: no sockets, no
/// HTTP, no disk.
@Suite("Delivery without sockets", .timeLimit(.minutes(1)))
struct ShardTests {
    static let topic = "com.example.news"

    @Test("a push to a connected device is committed, then written with seq 1 as immediate")
    func immediate() async throws {
        try await DeliveryHarness.run { h in
            let device = try await h.device()
            let token = try await h.register(device, Self.topic)
            let sink = try await h.connect(device)
            let apnsID = UUIDs.next()
            #expect(try await h.push(token, Self.topic, apnsID: apnsID) == .delivered)
            let events = await sink.events(count: 1)
            #expect(events.map(\.seq) == [1])
            #expect(events.map(\.delivery) == [.immediate])
            #expect(events.first?.apnsID == apnsID)
            let enqueued = h.store.passed.flatMap { $0 }.compactMap { command -> AcceptedPush? in
                if case .enqueue(let notification) = command { return notification }
                return nil
            }
            #expect(enqueued.map(\.push.apnsID) == [apnsID], "committed before the 200")
            #expect(h.core.counters.deliveries[.immediate] == 1)
        }
    }

    @Test("stored while offline; on connect the stored go first, then the held silent ones ride along as online")
    func storedThenOnline() async throws {
        try await DeliveryHarness.run { h in
            let device = try await h.device()
            let token = try await h.register(device, Self.topic)
            let stored = UUIDs.next()
            let silent = UUIDs.next()
            #expect(try await h.push(token, Self.topic, apnsID: stored) == .stored)
            #expect(try await h.silent(token, Self.topic, apnsID: silent) == .held)
            let sink = try await h.connect(device)
            let events = await sink.events(count: 2)
            #expect(events.map(\.apnsID) == [stored, silent])
            #expect(events.map(\.delivery) == [.stored, .online])
            #expect(events.map(\.seq) == [1, 2])
        }
    }

    @Test(
        "stopping maintenance cancels the scheduler's timer and arms none again: nothing of the scheduler commits after the store closes"
    )
    func stoppedSchedulerArmsNoTimer() async throws {
        try await DeliveryHarness.run { h in
            let device = try await h.device()
            let token = try await h.register(device, Self.topic)
            for _ in 0..<3 { _ = try await h.silent(token, Self.topic) }
            #expect(try await h.silent(token, Self.topic) == .held)
            #expect(try await h.core.armedSchedulerTimers() == 1, "a held push has a deadline: the refill")
            await h.core.stopMaintenance()
            #expect(try await h.core.armedSchedulerTimers() == 0)
            // A push still arriving while connections drain is held as before, with no timer.
            #expect(try await h.silent(token, Self.topic) == .held)
            #expect(try await h.core.armedSchedulerTimers() == 0)
        }
    }

    @Test("past the app's silent budget a push is held; the next alert carries it as piggyback, naming its apns-id")
    func piggyback() async throws {
        try await DeliveryHarness.run { h in
            let device = try await h.device()
            let token = try await h.register(device, Self.topic)
            let sink = try await h.connect(device)
            for _ in 0..<3 { #expect(try await h.silent(token, Self.topic) == .delivered) }
            let held = UUIDs.next()
            #expect(try await h.silent(token, Self.topic, apnsID: held) == .held)
            #expect(try await h.core.statistics().held == 1)
            let alert = UUIDs.next()
            #expect(try await h.push(token, Self.topic, apnsID: alert) == .delivered)
            let events = await sink.events(count: 5)
            #expect(events.suffix(2).map(\.apnsID) == [held, alert])
            #expect(events.suffix(2).map(\.delivery) == [.piggyback, .immediate])
            #expect(events[3].carrier == alert)
            #expect(events[4].carrier == nil)
            #expect(try await h.core.statistics().held == 0)
        }
    }

    @Test("only what fits the unacked window is written; an ack lets the rest out")
    func unackedWindow() async throws {
        // Each recorded event is about 12 bytes: two fit, the third waits.
        try await DeliveryHarness.run({ $0.unackedWindowBytes = 20 }) { h in
            let device = try await h.device()
            let token = try await h.register(device, Self.topic)
            for _ in 0..<4 { _ = try await h.push(token, Self.topic) }
            let sink = try await h.connect(device)
            #expect(await sink.events(count: 2).map(\.seq) == [1, 2])
            try await h.core.ack(deviceID: device.id, secret: device.secret, upTo: 2).get()
            #expect(await sink.events(count: 4).map(\.seq) == [1, 2, 3, 4])
            #expect(h.core.counters.acknowledged == 2)
            #expect(try await h.core.statistics().queued == 2)
        }
    }

    @Test(
        "unregistering an app drops its unsent pushes wherever the device's queue sits in its ring; the sent ones and other apps' stay"
    )
    func unregisterAcrossTheRingsWrap() async throws {
        // A queue is a ring buffer whose start moves with every ack: round r first moves it by r,
        // so that in some rounds the unsent part starts past the end of the ring's storage. That
        // case trapped: the unsent part's indices were taken from a slice, whose own start
        // decides how they compare, and used on the whole queue.
        try await DeliveryHarness.run({ $0.unackedWindowBytes = 20 }) { h in
            let device = try await h.device()
            let kept = try await h.register(device, Self.topic)
            let sink = try await h.connect(device)
            var written: [UInt64] = []
            func pushWritten(_ count: Int) async throws {
                for _ in 0..<count { _ = try await h.push(kept, Self.topic) }
                written = await sink.events(count: written.count + count).map(\.seq)
            }
            for round in 0..<16 {
                for _ in 0..<round {
                    try await pushWritten(1)
                    try await h.core.ack(deviceID: device.id, secret: device.secret, upTo: written.last!).get()
                }
                try await pushWritten(2)  // the unacked window is full
                let otherTopic = "com.example.round\(round)"
                let other = try await h.register(device, otherTopic)
                _ = try await h.push(kept, Self.topic)
                _ = try await h.push(other, otherTopic)
                _ = try await h.push(kept, Self.topic)
                #expect(try await h.core.statistics().queued == 5, "round \(round)")
                try await h.core.unregister(deviceID: device.id, secret: device.secret, token: other).get()
                #expect(try await h.core.statistics().queued == 4, "round \(round)")
                try await h.core.ack(deviceID: device.id, secret: device.secret, upTo: written.last!).get()
                written = await sink.events(count: written.count + 2).map(\.seq)
                try await h.core.ack(deviceID: device.id, secret: device.secret, upTo: written.last!).get()
                #expect(try await h.core.statistics().queued == 0, "round \(round)")
            }
            // Every push to the kept app was written once, in order; none to the unregistered ones.
            let pushes = (0..<16).reduce(0) { $0 + $1 + 4 }
            #expect(written.count == pushes)
            #expect(written == written.sorted() && Set(written).count == written.count)
            #expect(h.core.counters.acknowledged == pushes)
        }
    }

    @Test("a push whose commit fails is refused with 503 ServiceUnavailable and never written")
    func failedCommit() async throws {
        try await DeliveryHarness.run { h in
            let device = try await h.device()
            let token = try await h.register(device, Self.topic)
            let sink = try await h.connect(device)
            h.store.failNext { $0.contains { if case .enqueue = $0 { true } else { false } } }
            await #expect(throws: Refusal.self) { _ = try await h.push(token, Self.topic) }
            do {
                _ = try await h.push(token, Self.topic)
            } catch {
                Issue.record("the next push is accepted: \(error)")
            }
            let events = await sink.events(count: 1)
            #expect(events.map(\.seq) == [2], "seq 1 was taken by the refused push and never written")
            #expect(try await h.core.statistics().queued == 1)
        }
    }

    @Test("a collapse whose commit fails leaves the stored push it would have replaced queued, and delivered")
    func failedCollapseOfStored() async throws {
        try await DeliveryHarness.run { h in
            let device = try await h.device()
            let token = try await h.register(device, Self.topic)
            let first = UUIDs.next()
            #expect(try await h.push(token, Self.topic, apnsID: first, collapseID: "score") == .stored)
            h.store.failNext { $0.contains { if case .enqueue = $0 { true } else { false } } }
            await #expect(throws: Refusal.self) { _ = try await h.push(token, Self.topic, collapseID: "score") }
            try #require(
                try await h.core.statistics().queued == 1,
                "the replaced push is still on disk, so still queued"
            )
            let sink = try await h.connect(device)
            #expect(await sink.events(count: 1).map(\.apnsID) == [first])
        }
    }

    @Test("a held push that a newer one would coalesce stays held when the newer one's commit fails")
    func failedCollapseOfHeld() async throws {
        try await DeliveryHarness.run { h in
            let device = try await h.device()
            let token = try await h.register(device, Self.topic)
            let first = UUIDs.next()
            #expect(
                try await h.push(
                    token,
                    Self.topic,
                    apnsID: first,
                    type: .background,
                    priority: .normal,
                    collapseID: "sync"
                ) == .held
            )
            h.store.failNext { $0.contains { if case .enqueue = $0 { true } else { false } } }
            await #expect(throws: Refusal.self) {
                _ = try await h.push(token, Self.topic, type: .background, priority: .normal, collapseID: "sync")
            }
            try #require(
                try await h.core.statistics().held == 1,
                "the coalesced push is still held on disk, so still held"
            )
            let sink = try await h.connect(device)
            #expect(await sink.events(count: 1).map(\.apnsID) == [first])
        }
    }

    @Test("an app at its share of a device's queue gets 429; another app's push to the device still goes")
    func queuedPerApp() async throws {
        try await DeliveryHarness.run({
            $0.maxQueuedPerApp = 3
            $0.maxQueuedPerDevice = 10
        }) { h in
            let device = try await h.device()
            let noisy = try await h.register(device, "com.example.noisy")
            let quiet = try await h.register(device, "com.example.quiet")
            for _ in 0..<3 { #expect(try await h.push(noisy, "com.example.noisy") == .stored) }
            do {
                _ = try await h.push(noisy, "com.example.noisy")
                Issue.record("a fourth push of the app was accepted")
            } catch let refusal as Refusal {
                #expect(refusal.reason == .tooManyRequests)
                #expect(refusal.detail.contains("3 notifications of this app are already waiting"), "\(refusal.detail)")
            }
            #expect(try await h.push(quiet, "com.example.quiet") == .stored)
            // An ack frees the app's share.
            let sink = try await h.connect(device)
            _ = await sink.events(count: 4)
            try await h.core.ack(deviceID: device.id, secret: device.secret, upTo: 1).get()
            #expect(try await h.push(noisy, "com.example.noisy") == .delivered)
        }
    }

    @Test("a device has at most maxRegistrationsPerDevice registrations: 409 TooManyRegistrations until one goes")
    func registrationsPerDevice() async throws {
        try await DeliveryHarness.run({ $0.maxRegistrationsPerDevice = 2 }) { h in
            let device = try await h.device()
            let first = try await h.register(device, "com.example.one")
            _ = try await h.register(device, "com.example.two")
            do {
                _ = try await h.register(device, "com.example.three")
                Issue.record("a third registration was accepted")
            } catch let refusal as Refusal {
                #expect(refusal.reason == .tooManyRegistrations && refusal.status == 409)
                #expect(refusal.detail.contains("the device has 2 registrations"), "\(refusal.detail)")
            }
            #expect(
                try await h.register(device, "com.example.one") == first,
                "an app already registered gets its token again"
            )
            try await h.core.unregister(deviceID: device.id, secret: device.secret, token: first).get()
            _ = try await h.register(device, "com.example.three")
        }
    }

    @Test(
        "an unregistered token answers 410 for unregisteredRetentionMillis, then is forgotten (400 BadDeviceToken), on disk too"
    )
    func tombstoneRetention() async throws {
        let storage = InMemoryStorage()
        let clock = TestClock(DeliveryHarness.start)
        var forgotten = ""
        try await DeliveryHarness.run(storage: storage, clock: clock, { $0.unregisteredRetentionMillis = 60_000 }) {
            h in
            let device = try await h.device()
            let token = try await h.register(device, Self.topic)
            forgotten = token
            try await h.core.unregister(deviceID: device.id, secret: device.secret, token: token).get()
            h.clock.advance(by: 59_999)
            try await h.core.sweepExpired()
            await #expect { _ = try await h.push(token, Self.topic) } throws: {
                ($0 as? Refusal)?.reason == .unregistered
            }
            h.clock.advance(by: 1)
            try await h.core.sweepExpired()
            await #expect { _ = try await h.push(token, Self.topic) } throws: {
                ($0 as? Refusal)?.reason == .badDeviceToken
            }
            #expect(
                h.store.passed.joined().contains { if case .forgetRegistrations([token]) = $0 { true } else { false } }
            )
        }
        // After a restart the token stays forgotten: its row is gone.
        try await DeliveryHarness.run(storage: storage, clock: clock) { h in
            await #expect { _ = try await h.push(forgotten, Self.topic) } throws: {
                ($0 as? Refusal)?.reason == .badDeviceToken
            }
        }
    }

    @Test(
        "a stream hears from the gateway at least every heartbeat interval, and not much sooner, whatever the phase of the ticks; an event resets the silence",
        arguments: [0, 1, 500, 999] as [Int64]
    )
    func heartbeats(phase: Int64) async throws {
        try await DeliveryHarness.run({
            $0.heartbeatIntervalMillis = 30_000
            $0.heartbeatTickMillis = 1_000
        }) { h in
            let device = try await h.device()
            let token = try await h.register(device, Self.topic)
            let sink = try await h.connect(device)
            // Milliseconds since the stream opened (a write), and each write since.
            var now: Int64 = 0
            var writes: [(at: Int64, heartbeat: Bool)] = [(0, false)]
            func advance(_ millis: Int64) {
                h.clock.advance(by: millis)
                now += millis
            }
            // The maintenance timer's ticks, a second apart, `phase` ms past the whole seconds.
            advance(phase)
            for tick in 0..<120 {
                if tick == 45 {
                    advance(300)
                    #expect(try await h.push(token, Self.topic) == .delivered)
                    _ = await sink.events(count: 1)
                    writes.append((now, false))
                    advance(700)
                } else if tick > 0 {
                    advance(1_000)
                }
                let before = sink.heartbeats
                try await h.core.heartbeatTick()
                if sink.heartbeats > before { writes.append((now, true)) }
            }
            let gaps = zip(writes, writes.dropFirst()).map { (gap: $1.at - $0.at, heartbeat: $1.heartbeat) }
            #expect(gaps.allSatisfy { $0.gap <= 30_000 }, "silences: \(gaps)")
            #expect(gaps.filter(\.heartbeat).allSatisfy { $0.gap >= 29_000 }, "silences before heartbeats: \(gaps)")
            #expect(now - writes[writes.count - 1].at < 30_000)
            #expect(sink.heartbeats >= 3)
        }
    }

    @Test("heartbeats follow the device's current stream: none for a replaced one, none after the device is deleted")
    func heartbeatsFollowTheStream() async throws {
        try await DeliveryHarness.run({
            $0.heartbeatIntervalMillis = 30_000
            $0.heartbeatTickMillis = 1_000
        }) { h in
            let device = try await h.device()
            _ = try await h.register(device, Self.topic)
            let first = try await h.connect(device)
            h.clock.advance(by: 10_000)
            let second = try await h.connect(device)
            h.clock.advance(by: 20_000)
            try await h.core.heartbeatTick()
            #expect(first.heartbeats == 0 && second.heartbeats == 0)
            h.clock.advance(by: 9_000)
            try await h.core.heartbeatTick()
            #expect(first.heartbeats == 0 && second.heartbeats == 1)
            #expect(try await h.core.statistics().connectedDevices == 1)
            try await h.core.deleteDevice(deviceID: device.id, secret: device.secret).get()
            #expect(try await h.core.statistics().connectedDevices == 0)
            h.clock.advance(by: 29_000)
            try await h.core.heartbeatTick()
            #expect(second.heartbeats == 1)
        }
    }

    @Test("deleting a device counts as dropped what it never received, not what it received and did not ack")
    func deletionCountsUndelivered() async throws {
        try await DeliveryHarness.run { h in
            let device = try await h.device()
            let token = try await h.register(device, Self.topic)
            let (sink, generation) = try await h.stream(device)
            #expect(try await h.push(token, Self.topic) == .delivered)
            #expect(await sink.events(count: 1).count == 1)
            h.core.closeStream(deviceID: device.id, generation: generation)
            #expect(try await h.push(token, Self.topic) == .stored)
            #expect(try await h.push(token, Self.topic) == .stored)
            try await h.core.deleteDevice(deviceID: device.id, secret: device.secret).get()
            #expect(h.core.counters.drops[.unregistered] == 2)
        }
    }

    @Test(
        "a collapse id replaces a stored push never written, not one an earlier stream sent that waits for its ack: that push is stored beside it"
    )
    func collapseSparesWhatWasSent() async throws {
        try await DeliveryHarness.run { h in
            let device = try await h.device()
            let token = try await h.register(device, Self.topic)
            let (sink, generation) = try await h.stream(device)
            let sent = UUIDs.next()
            #expect(try await h.push(token, Self.topic, apnsID: sent, collapseID: "d") == .delivered)
            #expect(await sink.events(count: 1).count == 1)
            h.core.closeStream(deviceID: device.id, generation: generation)
            let stored = UUIDs.next()
            #expect(try await h.push(token, Self.topic, apnsID: stored, collapseID: "d") == .stored)
            let newest = UUIDs.next()
            #expect(try await h.push(token, Self.topic, apnsID: newest, collapseID: "d") == .coalesced)
            #expect(h.core.counters.drops[.coalesced] == 1)
            let again = try await h.connect(device)
            #expect(await again.events(count: 2).map(\.apnsID) == [sent, newest])
        }
    }

    @Test("apns-expiration is honoured up to maxExpirationMillis after acceptance, not beyond")
    func expirationClamp() async throws {
        try await DeliveryHarness.run({ $0.maxExpirationMillis = 60_000 }) { h in
            let device = try await h.device()
            let token = try await h.register(device, Self.topic)
            let now = DeliveryHarness.start
            #expect(try await h.push(token, Self.topic, expiration: .at(epochSeconds: now / 1000 + 30)) == .stored)
            #expect(try await h.push(token, Self.topic, expiration: .at(epochSeconds: Int64.max)) == .stored)
            #expect(try await h.push(token, Self.topic, expiration: .at(epochSeconds: now / 1000 + 3600)) == .stored)
            let expiries = h.store.passed.flatMap { $0 }.compactMap { command -> Int64? in
                if case .enqueue(let notification) = command { return notification.expiresAt }
                return nil
            }
            #expect(expiries == [now + 30_000, now + 60_000, now + 60_000])
        }
    }

    @Test("the store's failure is the catalog's 503")
    func failureIsServiceUnavailable() async throws {
        try await DeliveryHarness.run { h in
            let device = try await h.device()
            let token = try await h.register(device, Self.topic)
            h.store.failNext { _ in true }
            do {
                _ = try await h.push(token, Self.topic)
                Issue.record("accepted")
            } catch let refusal as Refusal {
                #expect(refusal.reason == .serviceUnavailable)
                #expect(refusal.detail.contains("injected"))
            }
        }
    }

    @Test("a newer stream ends the older one cleanly and gets what is unacked")
    func replacedStream() async throws {
        try await DeliveryHarness.run { h in
            let device = try await h.device()
            let token = try await h.register(device, Self.topic)
            let first = try await h.connect(device)
            _ = try await h.push(token, Self.topic)
            _ = await first.events(count: 1)
            let second = try await h.connect(device)
            #expect(await second.events(count: 1).map(\.seq) == [1], "unacked: sent again")
            #expect(first.isFinished)
            #expect(!second.isFinished)
            #expect(try await h.core.statistics().connectedDevices == 1)
        }
    }

    @Test("a keep-alive releases what is held, with seqs, in acceptance order; the stream does not send them again")
    func keepalive() async throws {
        try await DeliveryHarness.run { h in
            let device = try await h.device()
            let token = try await h.register(device, Self.topic)
            let sink = try await h.connect(device)
            let held = [UUIDs.next(), UUIDs.next()]
            for apnsID in held { #expect(try await h.push(token, Self.topic, apnsID: apnsID, priority: .low) == .held) }
            let released = try await h.core.keepalive(deviceID: device.id, secret: device.secret).get().map(
                \.notification
            )
            #expect(released.map(\.push.apnsID) == held)
            #expect(released.map(\.seq) == [1, 2])
            #expect(h.core.counters.deliveries[.keepalive] == 2)
            let next = UUIDs.next()
            _ = try await h.push(token, Self.topic, apnsID: next)
            #expect(await sink.events(count: 1).map(\.apnsID) == [next])
        }
    }

    @Test("a stream resumed with a keep-alive's seq still gets the stored push that seq is newer than")
    func lastEventIDAboveUnsent() async throws {
        try await DeliveryHarness.run { h in
            let device = try await h.device()
            let token = try await h.register(device, Self.topic)
            let alert = UUIDs.next()
            #expect(try await h.push(token, Self.topic, apnsID: alert) == .stored)
            #expect(try await h.silent(token, Self.topic) == .held)
            let released = try await h.core.keepalive(deviceID: device.id, secret: device.secret).get().map(
                \.notification
            )
            #expect(released.map(\.seq) == [2])
            // The agent resumes with the highest seq it has seen, the keep-alive's: the alert
            // (seq 1) was never sent, and is not acked by it.
            let sink = try await h.connect(device, lastEventID: 2)
            _ = try await h.push(token, Self.topic)  // so that something comes either way
            // First (the ack stops below it, so the keep-alive's push follows, at least once).
            let events = await sink.events(count: 1)
            #expect(events.map(\.apnsID).first == alert, "\(events.map(\.seq)) \(events.map(\.delivery))")
        }
    }

    @Test(
        "provider refusals: an unknown token, another topic's token (naming no other topic, before its state), an unregistered token with its time"
    )
    func refusals() async throws {
        try await DeliveryHarness.run { h in
            let device = try await h.device()
            let token = try await h.register(device, Self.topic)
            func refusal(_ token: String, _ topic: String) async -> Refusal? {
                do {
                    _ = try await h.push(token, topic)
                    return nil
                } catch {
                    return error as? Refusal
                }
            }
            #expect(await refusal(String(repeating: "0", count: 64), Self.topic)?.reason == .badDeviceToken)
            let otherTopic = await refusal(token, "com.example.other")
            #expect(otherTopic?.reason == .deviceTokenNotForTopic)
            #expect(
                otherTopic?.detail == "the token is not registered for com.example.other",
                "the token's own topic is not named"
            )
            h.clock.advance(by: 5_000)
            try await h.core.unregister(deviceID: device.id, secret: device.secret, token: token).get()
            let gone = await refusal(token, Self.topic)
            #expect(gone?.reason == .unregistered)
            #expect(gone?.timestamp == DeliveryHarness.start + 5_000)
            let goneOther = await refusal(token, "com.example.other")
            #expect(
                goneOther?.reason == .deviceTokenNotForTopic,
                "another app's provider does not learn of the unregistration"
            )
            #expect(goneOther?.timestamp == nil)
        }
    }

    @Test("a wrong secret and an unknown device get the same 401")
    func unauthorized() async throws {
        try await DeliveryHarness.run { h in
            let device = try await h.device()
            await #expect(throws: Refusal.unauthorized) {
                try await h.core.register(deviceID: device.id, secret: "wrong", topic: Self.topic).get()
            }
            await #expect(throws: Refusal.unauthorized) {
                try await h.core.register(
                    deviceID: String(repeating: "a", count: 32),
                    secret: device.secret,
                    topic: Self.topic
                ).get()
            }
        }
    }

    @Test("the overview counts by topic and lists the devices holding most, most first, equals by id, capped")
    func overview() async throws {
        try await DeliveryHarness.run { h in
            let other = "com.example.mail"
            var heldBy: [String: Int] = [:]
            // Offline devices hold every silent push: 3, 1, 1, 2 and 1 held.
            for (index, count) in [3, 1, 1, 2, 1].enumerated() {
                let device = try await h.device()
                let token = try await h.register(device, index == 0 ? other : Self.topic)
                for _ in 0..<count { #expect(try await h.silent(token, index == 0 ? other : Self.topic) == .held) }
                heldBy[device.id] = count
            }
            let alertDevice = try await h.device()
            #expect(try await h.push(try await h.register(alertDevice, Self.topic), Self.topic) == .stored)

            let overview = try await h.core.overview(topicLimit: 1, deviceLimit: 3)
            let ones = heldBy.filter { $0.value == 1 }.keys.sorted()
            let expected = [heldBy.first { $0.value == 3 }!.key, heldBy.first { $0.value == 2 }!.key, ones[0]]
            #expect(overview.topHeldDevices.map(\.deviceID) == expected)
            #expect(overview.topHeldDevices.map(\.held) == [3, 2, 1])
            #expect(overview.heldDevicesTruncated)
            let topic = try #require(overview.topics.first)
            #expect(overview.topics.count == 1)
            #expect([topic.registrations, topic.held, topic.stored, topic.unacked] == [5, 5, 1, 0])
            #expect(topic.topic == Self.topic)
            #expect(overview.topicsTruncated)

            let all = try await h.core.overview(topicLimit: 10, deviceLimit: 10)
            #expect(all.topHeldDevices.map(\.held) == [3, 2, 1, 1, 1])
            #expect(all.topHeldDevices.suffix(3).map(\.deviceID) == ones)
            #expect(!all.heldDevicesTruncated)
            #expect(all.topics.map(\.topic) == [Self.topic, other])
            #expect(!all.topicsTruncated)
        }
    }
}
