import Foundation
import NIOConcurrencyHelpers
import NIOCore
import PushgateDelivery
import PushgateModel
import PushgateStore
import PushgateStoreTestKit
import PushgateTestKit
import Testing

/// What the gateway does when a commit fails or is slow, with faults injected into the store
/// (the real SQLite store does everything else).
@Suite("Store failures: nothing is answered before it is on disk, nothing held is lost", .timeLimit(.minutes(1)))
struct StoreFailureTests {
    static let isRegister: FaultyStore.Match = { $0.contains { if case .register = $0 { true } else { false } } }
    static let isRelease: FaultyStore.Match = { $0.contains { if case .assignSeq = $0 { true } else { false } } }
    static let isReservation: FaultyStore.Match = { $0.contains { if case .reserveSeqs = $0 { true } else { false } } }

    @Test(
        "a register of a topic whose registration is not on disk yet waits for it: the same failure, or the same token"
    )
    func registerWaitsForThePendingCommit() async throws {
        let faults = FaultyStore()
        try await withGateway(faults: faults) { gateway in
            let api = try await API(gateway)
            let device = try await api.createDevice()
            let core = gateway.core
            let topic = "com.example.race"

            for failing in [true, false] {
                faults.holdNext(where: Self.isRegister)
                let first = core.register(deviceID: device.id, secret: device.secret, topic: topic)
                await faults.waitUntilHeld()
                let second = core.register(deviceID: device.id, secret: device.secret, topic: topic)
                let answered = NIOLockedValueBox(false)
                second.whenComplete { _ in answered.withLockedValue { $0 = true } }
                // Runs on every shard after the second register (and any answer it gave at once).
                try await core.advanceSchedulers()
                #expect(!answered.withLockedValue { $0 }, "answered before the first registration was on disk")

                faults.release(failing: failing)
                if failing {
                    await #expect(throws: Refusal.self) { try await first.get() }
                    await #expect(throws: Refusal.self) { try await second.get() }
                } else {
                    let token = try await first.get()
                    #expect(try await second.get() == token)
                    #expect(try await api.push(token: token, topic: topic, apnsID: newAPNsID()).status == 200)
                }
            }
            await api.close()
        }
    }

    @Test(
        "a keep-alive whose release fails to commit answers 503 and keeps the pushes held; the next one releases them"
    )
    func failedReleaseIsHeldAgain() async throws {
        let faults = FaultyStore()
        let delivery = SchedulerDeliveryTests.delivery()
        try await withGateway(clock: TestClock(SchedulerDeliveryTests.start), delivery: delivery, faults: faults) {
            gateway in
            let api = try await API(gateway)
            let device = try await api.createDevice()
            let token = try await api.registeredToken(device, topic: SchedulerDeliveryTests.topic)
            // Offline: silent pushes are held.
            let ids = [newAPNsID(), newAPNsID()]
            for id in ids { #expect(try await SchedulerDeliveryTests.silent(api, token, id: id).disposition == "held") }

            faults.failNext(where: Self.isRelease)
            let failed = try await api.device(device, "POST", "keepalive")
            #expect(failed.status == 503, "\(failed.text)")
            #expect(try await gateway.core.statistics().held == 2)

            let reply = try await api.device(device, "POST", "keepalive")
            #expect(reply.status == 200)
            let notifications = try #require(reply.json["notifications"] as? [[String: Any]], "\(reply.text)")
            #expect(notifications.map { $0["apnsId"] as? String } == ids)
            #expect(try await gateway.core.statistics().held == 0)
            await api.close()
        }
    }

    @Test(
        "a store that cannot commit: writes answer 503 with retry-after, /readyz 503 until a commit succeeds, /healthz 200; a refused command changes neither"
    )
    func storageCannotCommit() async throws {
        let faults = FaultyStore()
        let topic = "com.example.full"
        try await withGateway(faults: faults) { gateway in
            let api = try await API(gateway)
            let (device, token) = try await api.registeredDevice(topic: topic)
            let stream = try await api.openEvents(device)
            let before = newAPNsID()
            #expect(try await api.push(token: token, topic: topic, apnsID: before).status == 200)
            let first = try await stream.nextNotification()
            #expect(first.apnsID == before)

            faults.fillStorage()
            // Nothing has failed yet: readiness follows commits, not guesses.
            #expect(try await api.send("GET", "/readyz").status == 200)
            let refused = newAPNsID()
            let writes: [(String, Reply)] = [
                ("push", try await api.push(token: token, topic: topic, apnsID: refused)),
                ("device creation", try await api.send("POST", "/v1/devices")),
                ("registration", try await api.register(device, topic: "com.example.other")),
                ("ack", try await api.ack(device, upTo: UInt64(first.seq))),
                (
                    "state",
                    try await api.device(device, "PUT", "state", body: #"{"apps":{"com.example.full":"terminated"}}"#)
                ),
            ]
            for (what, reply) in writes {
                #expect(reply.status == 503, "\(what): \(reply.status) \(reply.text)")
                #expect(reply.json["reason"] as? String == "ServiceUnavailable", "\(what): \(reply.text)")
                #expect(reply.headers.first(name: "retry-after") == "5", "\(what): \(reply.headers)")
            }
            #expect(writes[0].1.apnsID == refused)
            let notReady = try await api.send("GET", "/readyz")
            #expect(
                notReady.status == 503 && notReady.text == "not ready: store cannot commit\n",
                "\(notReady.status) \(notReady.text)"
            )
            #expect(try await api.send("GET", "/healthz").status == 200)
            let failing = try Exposition(try await api.send("GET", "/metrics").text)
            #expect(failing["pushgate_store_healthy"] == 0)
            #expect((failing["pushgate_store_commit_failures_total"] ?? 0) >= Double(writes.count))

            faults.freeStorage()
            #expect(try await api.send("GET", "/readyz").status == 503, "ready again only once a commit succeeds")
            let after = newAPNsID()
            #expect(try await api.push(token: token, topic: topic, apnsID: after).status == 200)
            #expect(try await api.send("GET", "/readyz").status == 200)
            #expect(try Exposition(try await api.send("GET", "/metrics").text)["pushgate_store_healthy"] == 1)
            // The refused push left nothing behind; the one after it is next.
            #expect(try await stream.nextNotification().apnsID == after)
            #expect(try await api.ack(device, upTo: UInt64(first.seq)).status == 204)

            // A command the database refuses for its content answers as before: no retry-after,
            // and the store is still ready.
            faults.failNext(where: { $0.contains { if case .enqueue = $0 { true } else { false } } }, kind: .database)
            let content = try await api.push(token: token, topic: topic)
            #expect(
                content.status == 503 && content.headers.first(name: "retry-after") == nil,
                "\(content.status) \(content.headers)"
            )
            #expect(try await api.send("GET", "/readyz").status == 200)
            await api.close()
        }
    }

    @Test(
        "with no request to commit, the durable totals' periodic write is what finds the disk back: /readyz 200 again"
    )
    func totalsWriteProbesTheStore() async throws {
        let faults = FaultyStore()
        try await withGateway(faults: faults) { gateway in
            let api = try await API(gateway)
            faults.fillStorage()
            #expect(try await api.send("POST", "/v1/devices").status == 503)
            #expect(try await api.send("GET", "/readyz").status == 503)
            await gateway.console.persistTotals()  // nothing counted, the disk still full
            #expect(try await api.send("GET", "/readyz").status == 503)
            faults.freeStorage()
            await gateway.console.persistTotals()  // what the console does every 10 s
            #expect(try await api.send("GET", "/readyz").status == 200)
            await api.close()
        }
    }

    @Test(
        "an ack the store refused is committed by the next ack, even one that repeats it: what was acked 204 does not come back after a restart"
    )
    func refusedAckIsCommittedByTheNext() async throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let faults = FaultyStore()
        let topic = "com.example.ack"
        var device: Device!
        var token = ""
        try await withGateway(directory: directory, faults: faults) { gateway in
            let api = try await API(gateway)
            (device, token) = try await api.registeredDevice(topic: topic)
            let stream = try await api.openEvents(device)
            #expect(try await api.push(token: token, topic: topic).status == 200)
            let seq = UInt64(try await stream.nextNotification().seq)
            faults.failNext(where: { $0.contains { if case .ack = $0 { true } else { false } } }, kind: .unavailable)
            let refused = try await api.ack(device, upTo: seq)
            #expect(
                refused.status == 503 && refused.headers.first(name: "retry-after") == "5",
                "\(refused.status) \(refused.text)"
            )
            #expect(try await api.ack(device, upTo: seq).status == 204)
            await api.close()
        }
        try await withGateway(directory: directory) { gateway in
            let api = try await API(gateway)
            let stream = try await api.openEvents(device)
            let marker = newAPNsID()
            #expect(try await api.push(token: token, topic: topic, apnsID: marker).status == 200)
            #expect(
                try await stream.nextNotification().apnsID == marker,
                "a notification acked 204 came back after the restart"
            )
            await api.close()
        }
    }

    @Test("a seq reservation that failed to commit is made again: after acks and a restart, no seq is given twice")
    func failedReservationIsMadeAgain() async throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let faults = FaultyStore()
        var device: Device!
        var token = ""
        var lastSeq = 0
        try await withGateway(directory: directory, faults: faults) { gateway in
            let api = try await API(gateway)
            device = try await api.createDevice()
            token = try await api.registeredToken(device, topic: "com.example.seq")
            let stream = try await api.openEvents(device)
            faults.failNext(where: Self.isReservation)
            let refused = try await api.push(token: token, topic: "com.example.seq")
            #expect(refused.status == 503, "\(refused.status) \(refused.text)")
            #expect(refused.text.contains("ServiceUnavailable"), "one answer for every store failure: \(refused.text)")
            #expect(try await api.push(token: token, topic: "com.example.seq").status == 200)
            lastSeq = try await stream.nextNotification().seq
            #expect(try await api.ack(device, upTo: UInt64(lastSeq)).status == 204)
            await api.close()
        }
        try await withGateway(directory: directory) { gateway in
            let api = try await API(gateway)
            let stream = try await api.openEvents(device)
            #expect(try await api.push(token: token, topic: "com.example.seq").status == 200)
            #expect(try await stream.nextNotification().seq > lastSeq, "a seq the device acked was given again")
            await api.close()
        }
    }
}
