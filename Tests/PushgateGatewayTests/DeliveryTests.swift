import Foundation
import Logging
import NIOCore
import NIOHTTP1
import PushgateModel
import PushgateStore
import PushgateStoreSQLite
import PushgateTestKit
import PushgateTransport
import Synchronization
import Testing

@testable import PushgateDelivery

/// End-to-end delivery through a real gateway (PRODUCT.md sections 2, 3, 4 "Offline"/"Expiry", 8):
/// providers push over HTTP/2, device agents register, hold an event stream, ack, reconnect.
///
/// No sleeps for synchronisation: every wait is for a response or an event on the stream (with a
/// generous timeout so that a missing event fails the test instead of hanging it; an event
/// stream counts as attached once a no-op ack on its connection was answered, see
/// `API.openEvents`), and time moves only on the injected clock.
@Suite(
    "Delivery: tokens, event streams, store-and-forward, expiry, acks, restart",
    .serialized,
    .timeLimit(.minutes(2))
)
struct DeliveryTests {
    static let news = "com.example.news"
    static let chat = "com.example.chat"
    /// 2023-11-14T22:13:20Z, a whole second.
    static let start: Int64 = 1_700_000_000_000

    // MARK: 1. Token lifecycle

    @Test(
        "token lifecycle: register, same token again, push, unregister → 410 with time, new token, bad token, wrong topic"
    )
    func tokenLifecycle() async throws {
        let clock = TestClock(Self.start)
        try await withGateway(clock: clock) { gateway in
            let api = try await API(gateway)
            let device = try await api.createDevice()

            let first = try await api.register(device, topic: Self.news)
            #expect(first.status == 201)
            let token = try #require(first.json["token"] as? String)
            #expect(isToken(token), "a device token is 64 lowercase hex characters, got \(token)")
            #expect(first.json["topic"] as? String == Self.news)

            let again = try await api.register(device, topic: Self.news)
            #expect(again.status == 200 || again.status == 201)
            #expect(again.json["token"] as? String == token, "the same topic on the same device gives the same token")

            let ok = try await api.push(token: token, topic: Self.news)
            #expect(ok.status == 200)
            #expect(ok.disposition == "stored")

            clock.set(Self.start + 5_000)
            // In capitals: a token is hex in either case, here as on the provider path.
            let unregistered = try await api.unregister(device, token: token.uppercased())
            #expect(unregistered.status == 204)

            clock.set(Self.start + 12_000)
            let apnsID = newAPNsID()
            let gone = try await api.push(token: token, topic: Self.news, apnsID: apnsID)
            #expect(gone.status == 410)
            #expect(gone.apnsID == apnsID, "every response carries the request's apns-id")
            #expect(gone.json["reason"] as? String == "Unregistered")
            #expect(gone.json["detail"] is String)
            #expect(int64(gone.json["timestamp"]) == Self.start + 5_000, "timestamp is the unregistration time in ms")

            let renewed = try await api.register(device, topic: Self.news)
            #expect(renewed.status == 201)
            let newToken = try #require(renewed.json["token"] as? String)
            #expect(isToken(newToken))
            #expect(newToken != token, "registering again after unregistering gives a new token")

            let stillGone = try await api.push(token: token, topic: Self.news)
            #expect(stillGone.status == 410)
            #expect(stillGone.json["reason"] as? String == "Unregistered")
            #expect(int64(stillGone.json["timestamp"]) == Self.start + 5_000)

            let fresh = try await api.push(token: newToken, topic: Self.news)
            #expect(fresh.status == 200)
            #expect(fresh.disposition == "stored")

            let unknownID = newAPNsID()
            let unknown = try await api.push(token: randomHex(bytes: 32), topic: Self.news, apnsID: unknownID)
            #expect(unknown.status == 400)
            #expect(unknown.json["reason"] as? String == "BadDeviceToken")
            #expect(unknown.json["timestamp"] == nil, "timestamp only on 410")
            #expect(unknown.apnsID == unknownID)

            let otherTopic = try await api.push(token: newToken, topic: Self.chat)
            #expect(otherTopic.status == 400)
            #expect(otherTopic.json["reason"] as? String == "DeviceTokenNotForTopic")
            #expect(otherTopic.json["timestamp"] == nil)
            #expect(otherTopic.apnsID != nil)

            // The device API never tells whether a device id exists.
            let other = try await api.createDevice()
            let unknownDevice = Device(id: randomHex(bytes: 16), secret: device.secret)
            let wrongSecret = Device(id: device.id, secret: other.secret)
            let malformedID = Device(id: "not-a-device", secret: device.secret)
            for (method, route, body) in [
                ("POST", "registrations", #"{"topic":"com.example.news"}"#),
                ("DELETE", "registrations/\(newToken)", nil),
                ("POST", "ack", #"{"upTo":1}"#),
                ("POST", "keepalive", nil),
                ("GET", "events", nil),
                ("DELETE", "", nil),
            ] as [(String, String, String?)] {
                let wrong = try await api.device(wrongSecret, method, route, body: body)
                let missing = try await api.device(unknownDevice, method, route, body: body)
                let malformed = try await api.device(malformedID, method, route, body: body)
                let anonymous = try await api.device(nil, id: device.id, method, route, body: body)
                #expect(wrong.status == 401, "\(method) \(route) with a wrong secret")
                #expect(wrong.json["reason"] is String)
                for (name, response) in [
                    ("unknown device id", missing), ("malformed device id", malformed), ("no authorization", anonymous),
                ] {
                    #expect(response.status == 401, "\(method) \(route), \(name)")
                    #expect(
                        response.text == wrong.text,
                        "\(method) \(route): \(name) answers \(response.text), wrong secret \(wrong.text)"
                    )
                }
            }
            // Nothing above changed the device: its token still works.
            #expect(try await api.push(token: newToken, topic: Self.news).status == 200)
            await api.close()
        }
    }

    // MARK: 2. Delivery to a connected device

    @Test("a connected device gets each push at once, as one SSE event with exactly the pushed fields")
    func deliveryToConnectedDevice() async throws {
        let clock = TestClock(Self.start)
        try await withGateway(clock: clock) { gateway in
            let api = try await API(gateway)
            let (device, token) = try await api.registeredDevice(topic: Self.news)

            let stream = try await api.openEvents(device)
            #expect(stream.status == 200)
            #expect(stream.contentType?.hasPrefix("text/event-stream") == true)

            let sent: [(apnsID: String?, pushType: String, priority: String, collapseID: String?, payload: String)] = [
                (
                    newAPNsID(), "alert", "10", "score-1",
                    #"{"aps":{"alert":"Goal!","badge":3},"match":{"id":7,"home":[1,2.5,true,null]}}"#
                ),
                (
                    newAPNsID(), "alert", "5", nil,
                    "{\n  \"aps\" : {\"alert\" : {\"title\" : \"T\", \"body\" : \"line \\\"two\\\"\\nnext\"}},\n  \"u\" : \"\\u00e9\\u2603\"\n}"
                ),
                (nil, "background", "5", "sync", #"{"aps":{"content-available":1},"since":12345678901}"#),
            ]
            var dispositions: [String?] = []
            var apnsIDs: [String] = []
            for (index, push) in sent.enumerated() {
                clock.set(Self.start + Int64(index) * 1_000)
                var headers: [(String, String)] = [("apns-push-type", push.pushType), ("apns-priority", push.priority)]
                if let collapseID = push.collapseID { headers.append(("apns-collapse-id", collapseID)) }
                let response = try await api.push(
                    token: token,
                    topic: Self.news,
                    apnsID: push.apnsID,
                    headers: headers,
                    payload: push.payload
                )
                #expect(response.status == 200, "push \(index): \(response.text)")
                #expect(response.text.isEmpty, "a 200 has an empty body")
                dispositions.append(response.disposition)
                let echoed = try #require(response.apnsID)
                if let requested = push.apnsID {
                    #expect(echoed == requested)
                } else {
                    #expect(isCanonicalUUID(echoed), "a generated apns-id is a lowercase canonical UUID, got \(echoed)")
                }
                apnsIDs.append(echoed)
            }
            #expect(dispositions == ["delivered", "delivered", "delivered"])

            var seqs: [Int] = []
            for (index, push) in sent.enumerated() {
                let event = try await stream.nextNotification()
                seqs.append(event.seq)
                #expect(event.eventType == "notification")
                #expect(event.idField == "\(event.seq)", "the SSE id is the seq")
                #expect(event.seq == index + 1)
                #expect(event.apnsID == apnsIDs[index])
                #expect(event.token == token)
                #expect(event.topic == Self.news)
                #expect(event.pushType == push.pushType)
                #expect(event.priority == Int(push.priority))
                #expect(event.collapseID == push.collapseID)
                #expect(event.payload == canonicalJSON(push.payload), "payload of push \(index)")
                #expect(event.acceptedAt == Self.start + Int64(index) * 1_000)
                #expect(event.delivery == "immediate")
                #expect(event.unexpectedKeys.isEmpty, "unexpected fields \(event.unexpectedKeys)")
                #expect(event.missingKeys.isEmpty, "missing fields \(event.missingKeys)")
            }
            #expect(seqs == [1, 2, 3])
            await api.close()
        }
    }

    // MARK: 3. Store-and-forward

    @Test("pushes to an offline device are stored and arrive in order on connect; expiration 0 or past is discarded")
    func storeAndForward() async throws {
        let clock = TestClock(Self.start)
        try await withGateway(clock: clock) { gateway in
            let api = try await API(gateway)
            let device = try await api.createDevice()
            let news = try await api.registeredToken(device, topic: Self.news)
            let chat = try await api.registeredToken(device, topic: Self.chat)

            var stored: [(apnsID: String, token: String, topic: String, payload: String)] = []
            func store(_ token: String, _ topic: String, _ n: Int, expiration: Int64? = nil) async throws {
                let apnsID = newAPNsID()
                let payload = #"{"aps":{"alert":"stored \#(n)"},"n":\#(n)}"#
                let headers = expiration.map { [("apns-expiration", "\($0)")] } ?? []
                let response = try await api.push(
                    token: token,
                    topic: topic,
                    apnsID: apnsID,
                    headers: headers,
                    payload: payload
                )
                #expect(response.status == 200)
                #expect(response.disposition == "stored", "push \(n) to an offline device")
                #expect(response.apnsID == apnsID)
                stored.append((apnsID, token, topic, payload))
            }
            func discard(expiration: String, _ n: Int) async throws {
                let apnsID = newAPNsID()
                let response = try await api.push(
                    token: news,
                    topic: Self.news,
                    apnsID: apnsID,
                    headers: [("apns-expiration", expiration)],
                    payload: #"{"aps":{"alert":"discard \#(n)"},"discarded":\#(n)}"#
                )
                #expect(response.status == 200, "apns-expiration \(expiration): \(response.text)")
                #expect(response.disposition == "discarded", "apns-expiration \(expiration) for an offline device")
                #expect(response.apnsID == apnsID)
            }

            try await store(news, Self.news, 1)
            try await discard(expiration: "0", 1)
            try await store(chat, Self.chat, 2)
            try await discard(expiration: "\(Self.start / 1000 - 60)", 2)
            try await store(news, Self.news, 3, expiration: Self.start / 1000 + 3_600)
            try await discard(expiration: "000", 3)
            try await store(news, Self.news, 4)

            let stream = try await api.openEvents(device)
            var seqs: [Int] = []
            for (index, push) in stored.enumerated() {
                let event = try await stream.nextNotification()
                #expect(event.apnsID == push.apnsID, "stored push \(index + 1) arrives in acceptance order")
                #expect(event.token == push.token)
                #expect(event.topic == push.topic)
                #expect(event.payload == canonicalJSON(push.payload))
                #expect(event.delivery == "stored")
                #expect(event.idField == "\(event.seq)")
                seqs.append(event.seq)
            }
            #expect(seqs == seqs.sorted() && Set(seqs).count == seqs.count, "seqs strictly increase: \(seqs)")

            // Nothing else was queued: the next event is a push sent now.
            let live = newAPNsID()
            let response = try await api.push(token: chat, topic: Self.chat, apnsID: live)
            #expect(response.disposition == "delivered")
            let next = try await stream.nextNotification()
            #expect(next.apnsID == live, "a discarded push was delivered: \(next.payload)")
            #expect(next.delivery == "immediate")
            #expect(next.seq > (seqs.last ?? 0))

            // apns-expiration 0 for a connected device: delivered now.
            let now = newAPNsID()
            let immediate = try await api.push(
                token: news,
                topic: Self.news,
                apnsID: now,
                headers: [("apns-expiration", "0")]
            )
            #expect(immediate.status == 200)
            #expect(immediate.disposition == "delivered")
            #expect(try await stream.nextNotification().apnsID == now)
            await api.close()
        }
    }

    @Test("a drained backlog gives its queue's memory back; the device's next pushes still arrive")
    func drainedBacklogReleasesQueue() async throws {
        try await withGateway(clock: TestClock(Self.start)) { gateway in
            let api = try await API(gateway)
            let (device, token) = try await api.registeredDevice(topic: Self.news)
            for n in 1...100 {
                let response = try await api.push(
                    token: token,
                    topic: Self.news,
                    payload: #"{"aps":{"alert":"n\#(n)"}}"#
                )
                #expect(response.disposition == "stored")
            }
            let grown = try #require(try await gateway.core.queueCapacity(deviceID: device.id))
            #expect(grown >= 100)

            let stream = try await api.openEvents(device)
            var last: UInt64 = 0
            for _ in 1...100 { last = UInt64(try await stream.nextNotification().seq) }
            // Half acked: the queue still holds the rest, and its room.
            #expect(try await api.ack(device, upTo: last - 50).status == 204)
            #expect(try await gateway.core.queueCapacity(deviceID: device.id) == grown)
            #expect(try await api.ack(device, upTo: last).status == 204)
            let drained = try #require(try await gateway.core.queueCapacity(deviceID: device.id))
            #expect(
                drained <= DeviceState.retainedQueueCapacity,
                "an empty queue kept room for \(drained) notifications"
            )

            let response = try await api.push(token: token, topic: Self.news)
            #expect(response.disposition == "delivered")
            let event = try await stream.nextNotification()
            #expect(event.apnsID == response.apnsID)
            #expect(UInt64(event.seq) == last + 1)
            await api.close()
        }
    }

    // MARK: 4. Expiry

    @Test("a stored push past its apns-expiration is never delivered, on connect or by the sweep, and is counted")
    func expiry() async throws {
        let clock = TestClock(Self.start)
        try await withGateway(clock: clock) { gateway in
            let api = try await API(gateway)
            let counters = gateway.core.counters
            #expect(counters.drops[.expired] == 0)

            // At delivery time.
            let (device, token) = try await api.registeredDevice(topic: Self.news)
            let expiring = try await api.push(
                token: token,
                topic: Self.news,
                headers: [("apns-expiration", "\(Self.start / 1000 + 60)")]
            )
            #expect(expiring.disposition == "stored")
            let survivor = newAPNsID()
            #expect(try await api.push(token: token, topic: Self.news, apnsID: survivor).disposition == "stored")
            clock.set(Self.start + 61_000)
            let stream = try await api.openEvents(device)
            let first = try await stream.nextNotification()
            #expect(
                first.apnsID == survivor,
                "the push that expired at \(Self.start + 60_000) ms was delivered at \(Self.start + 61_000)"
            )
            #expect(counters.drops[.expired] == 1)

            // By the sweep, while the device is offline.
            let offline = try await api.createDevice()
            let offlineToken = try await api.registeredToken(offline, topic: Self.chat)
            let deadline = Self.start / 1000 + 120
            let doomed = try await api.push(
                token: offlineToken,
                topic: Self.chat,
                headers: [("apns-expiration", "\(deadline)")]
            )
            #expect(doomed.disposition == "stored")
            let kept = try await api.push(
                token: offlineToken,
                topic: Self.chat,
                headers: [("apns-expiration", "\(deadline + 60)")]
            )
            #expect(kept.disposition == "stored")

            clock.set(deadline * 1000 - 1)
            try await gateway.core.sweepExpired()
            #expect(counters.drops[.expired] == 1, "nothing has expired yet")

            clock.set(deadline * 1000 + 1)
            try await gateway.core.sweepExpired()
            #expect(counters.drops[.expired] == 2, "the sweep drops and counts the expired push")
            try await gateway.core.sweepExpired()
            #expect(counters.drops[.expired] == 2, "a second sweep counts nothing twice")

            let offlineStream = try await api.openEvents(offline)
            let arrived = try await offlineStream.nextNotification()
            #expect(arrived.apnsID == kept.apnsID, "the swept push was delivered")
            #expect(arrived.delivery == "stored")
            #expect(counters.drops[.expired] == 2)
            await api.close()
        }
    }

    // MARK: 5. At-least-once

    @Test("unacked notifications come back with the same seq; ack and last-event-id are cumulative and idempotent")
    func atLeastOnce() async throws {
        let clock = TestClock(Self.start)
        try await withGateway(clock: clock) { gateway in
            let api = try await API(gateway)
            let (device, token) = try await api.registeredDevice(topic: Self.news)

            var apnsIDs: [Int: String] = [:]
            func pushLive(_ seq: Int, expecting disposition: String = "delivered") async throws {
                let response = try await api.push(
                    token: token,
                    topic: Self.news,
                    payload: #"{"aps":{"alert":"n\#(seq)"},"n":\#(seq)}"#
                )
                #expect(response.status == 200)
                #expect(response.disposition == disposition)
                apnsIDs[seq] = response.apnsID
            }
            func expectSeqs(_ stream: EventStream, _ expected: [Int], _ comment: Comment) async throws {
                var got: [Int] = []
                for _ in expected {
                    let event = try await stream.nextNotification()
                    got.append(event.seq)
                    #expect(event.apnsID == apnsIDs[event.seq], "seq \(event.seq) carries the push it was given")
                }
                #expect(got == expected, comment)
            }

            // Reset the stream without acking: everything comes back with the same seq.
            let first = try await api.openEvents(device)
            for seq in 1...3 { try await pushLive(seq) }
            try await expectSeqs(first, [1, 2, 3], "first delivery")
            api.connection.reset(streamID: first.streamID)

            let second = try await api.openEvents(device)
            try await expectSeqs(second, [1, 2, 3], "redelivery after a reset stream")

            // Ack up to 2, drop the whole connection: only 3 comes back, then the next push.
            #expect(try await api.ack(device, upTo: 2).status == 204)
            try await api.reconnect()
            let third = try await api.openEvents(device)
            try await expectSeqs(third, [3], "after ack 2 and a new connection")
            try await pushLive(4)
            try await expectSeqs(third, [4], "a new push after the redelivered one")

            // last-event-id acks up to it, durably.
            let fourth = try await api.openEvents(device, lastEventID: 3)
            try await expectSeqs(fourth, [4], "reconnect with last-event-id 3")
            let fifth = try await api.openEvents(device)
            try await expectSeqs(fifth, [4], "last-event-id 3 acked 1...3 for good; 4 is still unacked")

            // Cumulative and idempotent: repeating or lowering an ack changes nothing.
            #expect(try await api.ack(device, upTo: 4).status == 204)
            #expect(try await api.ack(device, upTo: 4).status == 204)
            #expect(try await api.ack(device, upTo: 1).status == 204)
            let sixth = try await api.openEvents(device)
            try await pushLive(5)
            try await expectSeqs(sixth, [5], "after ack 4, 4, 1: only the new push")

            // An ack beyond anything sent does not swallow what comes later.
            #expect(try await api.ack(device, upTo: 1_000).status == 204)
            try await pushLive(6)
            try await expectSeqs(sixth, [6], "a push after an ack beyond the last seq is delivered")
            let seventh = try await api.openEvents(device)
            try await expectSeqs(seventh, [6], "ack 1000 (before seq 6 existed) did not ack seq 6")

            #expect(try await api.ack(device, upTo: 6).status == 204)
            let eighth = try await api.openEvents(device)
            try await pushLive(7)
            try await expectSeqs(eighth, [7], "everything up to 6 acked")

            // Bad ack and last-event-id bodies are refused, not taken as "ack everything".
            #expect(try await api.device(device, "POST", "ack", body: #"{"upTo":"all"}"#).status == 400)
            #expect(try await api.device(device, "POST", "ack", body: #"{"upTo":-1}"#).status == 400)
            #expect(try await api.device(device, "GET", "events", headers: [("last-event-id", "abc")]).status == 400)
            let ninth = try await api.openEvents(device)
            try await expectSeqs(ninth, [7], "a refused ack acked nothing")
            await api.close()
        }
    }

    @Test("at most 256 KiB of events are outstanding without an ack; an ack lets the rest through, in order")
    func unackedWindow() async throws {
        try await withGateway(clock: TestClock(Self.start)) { gateway in
            let api = try await API(gateway)
            let agent = try await API(gateway)
            let (device, token) = try await api.registeredDevice(topic: Self.news)
            let stream = try await agent.openEvents(device)

            let count = 80
            let pad = String(repeating: "a", count: 3_800)
            var apnsIDs: [String] = []
            for n in 1...count {
                let response = try await api.push(
                    token: token,
                    topic: Self.news,
                    payload: #"{"aps":{"alert":"w\#(n)"},"pad":"\#(pad)"}"#
                )
                try #require(response.status == 200, "push \(n): \(response.text)")
                apnsIDs.append(try #require(response.apnsID))
            }
            // Each 200 comes after its push was committed and pumped: the count is final.
            let written = gateway.core.counters.deliveries[.immediate]
            try #require(
                written > 0 && written < count,
                "\(written) of \(count) events (~4 KiB each) written without an ack"
            )

            var bytes = 0
            var last = 0
            for n in 1...written {
                let event = try #require(try await stream.nextEvent())
                let notification = PushEvent(event)
                #expect(notification.seq == n)
                #expect(notification.apnsID == apnsIDs[n - 1])
                last = "id: \(event.id ?? "")\nevent: \(event.type)\ndata: \(event.data)\n\n".utf8.count
                bytes += last
            }
            #expect(bytes >= 256 * 1024, "the window was not full (\(bytes) bytes) yet more events were held back")
            #expect(bytes - last < 256 * 1024, "\(bytes) bytes were outstanding before the last event was written")

            #expect(try await api.ack(device, upTo: UInt64(written)).status == 204)
            for n in (written + 1)...count {
                let event = try await stream.nextNotification()
                #expect(event.seq == n)
                #expect(event.apnsID == apnsIDs[n - 1])
            }
            #expect(gateway.core.counters.deliveries[.immediate] == count)
            await api.close()
            await agent.close()
        }
    }

    @Test("a push sent after the agent has its event stream's 200 head finds the device connected")
    func streamIsAttachedWhenItsHeadArrives() async throws {
        try await withGateway(clock: TestClock(Self.start)) { gateway in
            let provider = try await API(gateway)
            let agent = try await API(gateway)
            let iterations = 1_000
            var stored: [Int] = []
            var shards: Set<Int> = []
            // Fresh devices (a replaced stream would take the push), on both shards.
            for iteration in 0..<iterations {
                let device = try await agent.createDevice()
                shards.insert(Int(device.id.prefix(2), radix: 16)! % 2)
                let token = try await agent.registeredToken(device, topic: Self.news)
                let stream = try await agent.openEventsWithoutBarrier(device)
                let response = try await provider.push(token: token, topic: Self.news)
                #expect(response.status == 200)
                if response.disposition != "delivered" { stored.append(iteration) }
                let event = try await stream.nextNotification()
                #expect(event.apnsID == response.apnsID)
                agent.connection.reset(streamID: stream.streamID)
            }
            #expect(shards.count == 2, "the devices should cover both event loops")
            #expect(
                stored.isEmpty,
                """
                \(stored.count) of \(iterations) pushes sent after the event stream's 200 head were stored, not \
                delivered (iterations \(stored.prefix(10))...): the head went out before the stream was attached
                """
            )
            await provider.close()
            await agent.close()
        }
    }

    // MARK: 6. One stream per device

    @Test("a second event stream replaces the first, which ends cleanly; new pushes go to the second")
    func oneStreamPerDevice() async throws {
        try await withGateway(clock: TestClock(Self.start)) { gateway in
            let api = try await API(gateway)
            let other = try await API(gateway)
            let (device, token) = try await api.registeredDevice(topic: Self.news)

            let first = try await api.openEvents(device)
            let p1 = try await api.push(token: token, topic: Self.news)
            #expect(p1.disposition == "delivered")
            #expect(try await first.nextNotification().apnsID == p1.apnsID)

            let second = try await other.openEvents(device)
            #expect(second.status == 200)
            let end = try await first.nextEvent()
            #expect(
                end == nil,
                "the replaced stream ends cleanly (END_STREAM, no reset), got \(String(describing: end))"
            )

            let redelivered = try await second.nextNotification()
            #expect(redelivered.apnsID == p1.apnsID, "the unacked push is sent again on the new stream")
            #expect(redelivered.seq == 1)

            let p2 = try await api.push(token: token, topic: Self.news)
            #expect(p2.disposition == "delivered")
            let next = try await second.nextNotification()
            #expect(next.apnsID == p2.apnsID)
            #expect(next.seq == 2)
            let connected = try await gateway.core.statistics().connectedDevices
            #expect(connected == 1, "one device with one open stream counts once, got \(connected)")

            // The first connection is still usable for everything else.
            #expect(try await api.ack(device, upTo: 2).status == 204)
            await api.close()
            await other.close()
        }
    }

    // MARK: 7. Restart

    @Test(
        "after a restart on the same directory, everything unacked comes back, acked never; tokens, secrets, seqs survive"
    )
    func restart() async throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let clock = TestClock(Self.start)

        struct Before {
            var online = Device(id: "", secret: "")
            var offline = Device(id: "", secret: "")
            var onlineToken = ""
            var offlineToken = ""
            var goneToken = ""
            var delivered: [Int: String] = [:]
            var stored: [String] = []
        }
        var before = Before()

        try await withGateway(directory: directory, clock: clock) { gateway in
            let api = try await API(gateway)
            before.online = try await api.createDevice()
            before.offline = try await api.createDevice()
            before.onlineToken = try await api.registeredToken(before.online, topic: Self.news)
            before.offlineToken = try await api.registeredToken(before.offline, topic: Self.news)
            before.goneToken = try await api.registeredToken(before.offline, topic: Self.chat)
            clock.set(Self.start + 1_000)
            #expect(try await api.unregister(before.offline, token: before.goneToken).status == 204)

            let stream = try await api.openEvents(before.online)
            for n in 1...3 {
                let response = try await api.push(
                    token: before.onlineToken,
                    topic: Self.news,
                    payload: #"{"aps":{"alert":"a\#(n)"}}"#
                )
                #expect(response.disposition == "delivered")
                before.delivered[n] = response.apnsID
            }
            for n in 1...3 {
                let event = try await stream.nextNotification()
                #expect(event.seq == n)
                #expect(event.apnsID == before.delivered[n])
            }
            #expect(try await api.ack(before.online, upTo: 1).status == 204)

            for n in 1...2 {
                let response = try await api.push(
                    token: before.offlineToken,
                    topic: Self.news,
                    payload: #"{"aps":{"alert":"b\#(n)"}}"#
                )
                #expect(response.disposition == "stored")
                before.stored.append(try #require(response.apnsID))
            }
            await api.close()
        }

        clock.set(Self.start + 10_000)
        var lastSeq = 0
        try await withGateway(directory: directory, clock: clock) { gateway in
            let api = try await API(gateway)

            // Delivered but unacked: again, same seqs. Acked: never.
            let stream = try await api.openEvents(before.online)
            #expect(stream.status == 200, "the device secret survives the restart")
            for n in 2...3 {
                let event = try await stream.nextNotification()
                #expect(event.seq == n, "seq \(n) after the restart")
                #expect(event.apnsID == before.delivered[n])
                #expect(event.token == before.onlineToken)
            }
            let after = try await api.push(token: before.onlineToken, topic: Self.news)
            #expect(after.status == 200, "the token survives the restart")
            #expect(after.disposition == "delivered")
            let next = try await stream.nextNotification()
            #expect(next.apnsID == after.apnsID, "acked seq 1 came back, or something else was queued")
            #expect(next.seq > 3, "seqs continue above the old ones (after the block reserved before the restart)")

            // Stored: all of it, in order.
            let offline = try await api.openEvents(before.offline)
            for (index, apnsID) in before.stored.enumerated() {
                let event = try await offline.nextNotification()
                #expect(event.apnsID == apnsID)
                #expect(event.seq == index + 1)
                #expect(event.delivery == "stored")
            }
            let later = try await api.push(token: before.offlineToken, topic: Self.news)
            #expect(later.disposition == "delivered")
            let laterSeq = try await offline.nextNotification().seq
            #expect(laterSeq > before.stored.count)

            // Registrations, unregistrations and secrets came back.
            #expect(
                try await api.register(before.online, topic: Self.news).json["token"] as? String == before.onlineToken
            )
            let gone = try await api.push(token: before.goneToken, topic: Self.chat)
            #expect(gone.status == 410)
            #expect(int64(gone.json["timestamp"]) == Self.start + 1_000)
            #expect(try await api.device(before.offline, "POST", "keepalive").status == 200)

            #expect(try await api.ack(before.online, upTo: UInt64(next.seq)).status == 204)
            await api.close()
            lastSeq = next.seq
        }

        try await withGateway(directory: directory, clock: clock) { gateway in
            let api = try await API(gateway)
            let stream = try await api.openEvents(before.online)
            let after = try await api.push(token: before.onlineToken, topic: Self.news)
            #expect(after.disposition == "delivered")
            let next = try await stream.nextNotification()
            #expect(next.apnsID == after.apnsID, "everything acked before the second restart stays acked")
            #expect(next.seq > lastSeq)
            await api.close()
        }
    }

    @Test(
        "a seq the agent has seen is never given to another notification, even after its push expired and the gateway restarted"
    )
    func seqNotReusedAfterExpiryAndRestart() async throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let clock = TestClock(Self.start)
        var device = Device(id: "", secret: "")
        var token = ""

        // Seqs 1...3 delivered and seen; only 1 acked. 2 and 3 expire a minute later.
        try await withGateway(directory: directory, clock: clock) { gateway in
            let api = try await API(gateway)
            device = try await api.createDevice()
            token = try await api.registeredToken(device, topic: Self.news)
            let stream = try await api.openEvents(device)
            _ = try await api.push(token: token, topic: Self.news)
            for _ in 2...3 {
                _ = try await api.push(
                    token: token,
                    topic: Self.news,
                    headers: [("apns-expiration", "\(Self.start / 1000 + 60)")]
                )
            }
            for seq in 1...3 { #expect(try await stream.nextNotification().seq == seq) }
            #expect(try await api.ack(device, upTo: 1).status == 204)
            await api.close()
        }

        // The agent stays away; 2 and 3 expire and are swept.
        clock.set(Self.start + 120_000)
        try await withGateway(directory: directory, clock: clock) { gateway in
            try await gateway.core.sweepExpired()
            #expect(gateway.core.counters.drops[.expired] == 2)
        }

        // New pushes while the agent is still away; it then reconnects with the last id it saw.
        try await withGateway(directory: directory, clock: clock) { gateway in
            let api = try await API(gateway)
            var sent: [String] = []
            for n in 1...2 {
                let response = try await api.push(
                    token: token,
                    topic: Self.news,
                    payload: #"{"aps":{"alert":"new \#(n)"}}"#
                )
                #expect(response.disposition == "stored")
                sent.append(try #require(response.apnsID))
            }
            let stream = try await api.openEvents(device, lastEventID: 3)
            let sentinel = try await api.push(token: token, topic: Self.news, payload: #"{"aps":{"alert":"sentinel"}}"#)
            #expect(sentinel.disposition == "delivered")
            sent.append(try #require(sentinel.apnsID))
            var received: [String?] = []
            var seqs: [Int] = []
            while received.last != sentinel.apnsID {
                let event = try await stream.nextNotification()
                received.append(event.apnsID)
                seqs.append(event.seq)
            }
            #expect(
                received == sent,
                "pushes stored after the restart were lost: last-event-id 3 acked them (seqs \(seqs))"
            )
            #expect(
                seqs.allSatisfy { $0 > 3 },
                "seqs \(seqs): 2 and 3 were already used for notifications the agent saw"
            )
            await api.close()
        }
    }

    // MARK: 8. Delete device

    @Test(
        "deleting a device ends its stream, its tokens get 410 with the deletion time, its secret 401, also after a restart; its notifications leave the disk"
    )
    func deleteDevice() async throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let clock = TestClock(Self.start)
        var device = Device(id: "", secret: "")
        var bystanderID = ""
        var tokens: [(token: String, topic: String)] = []
        var unauthorized = ""

        try await withGateway(directory: directory, clock: clock) { gateway in
            let api = try await API(gateway)
            device = try await api.createDevice()
            tokens = [
                (try await api.registeredToken(device, topic: Self.news), Self.news),
                (try await api.registeredToken(device, topic: Self.chat), Self.chat),
            ]
            let bystander = try await api.createDevice()
            bystanderID = bystander.id
            let bystanderToken = try await api.registeredToken(bystander, topic: Self.news)
            unauthorized = try await api.device(
                Device(id: randomHex(bytes: 16), secret: device.secret),
                "POST",
                "keepalive"
            ).text

            let stream = try await api.openEvents(device)
            let live = try await api.push(token: tokens[0].token, topic: Self.news)
            #expect(live.disposition == "delivered")
            #expect(try await stream.nextNotification().apnsID == live.apnsID)
            // Priority 1 waits for a wake event: held, with no seq.
            #expect(
                try await api.push(token: tokens[1].token, topic: Self.chat, headers: [("apns-priority", "1")])
                    .disposition == "held"
            )
            #expect(try await gateway.core.statistics().connectedDevices == 1)

            clock.set(Self.start + 30_000)
            let deleted = try await api.device(device, "DELETE", "")
            #expect(deleted.status == 204)
            let end = try await stream.nextEvent()
            #expect(end == nil, "the deleted device's stream ends cleanly, got \(String(describing: end))")

            clock.set(Self.start + 40_000)
            for (token, topic) in tokens {
                let response = try await api.push(token: token, topic: topic)
                #expect(response.status == 410, "push to a deleted device's token: \(response.status) \(response.text)")
                #expect(response.json["reason"] as? String == "Unregistered")
                #expect(int64(response.json["timestamp"]) == Self.start + 30_000)
            }
            for (method, route) in [
                ("POST", "keepalive"), ("GET", "events"), ("POST", "registrations"), ("DELETE", ""),
            ] {
                let response = try await api.device(
                    device,
                    method,
                    route,
                    body: route == "registrations" ? #"{"topic":"com.example.x"}"# : nil
                )
                #expect(response.status == 401, "\(method) \(route) with a deleted device's secret")
                #expect(response.text == unauthorized)
            }
            #expect(
                try await gateway.core.statistics().connectedDevices == 0,
                "a deleted device is no longer connected"
            )
            #expect(try await gateway.core.statistics().queued == 0, "its queue went with it")

            // Other devices are untouched.
            #expect(try await api.push(token: bystanderToken, topic: Self.news).disposition == "stored")
            await api.close()
        }

        // Gone from the disk, the delivered and the held one: not merely skipped at the next start.
        let store = try SQLiteStore(directory: directory, logger: Logger(label: "test"))
        #expect(try store.load().notifications.map(\.deviceID) == [bystanderID])
        await store.close()

        try await withGateway(directory: directory, clock: clock) { gateway in
            let api = try await API(gateway)
            for (token, topic) in tokens {
                let response = try await api.push(token: token, topic: topic)
                #expect(
                    response.status == 410,
                    "after a restart, push to a deleted device's token: \(response.status) \(response.text)"
                )
                #expect(int64(response.json["timestamp"]) == Self.start + 30_000)
            }
            let keepalive = try await api.device(device, "POST", "keepalive")
            #expect(keepalive.status == 401)
            #expect(keepalive.text == unauthorized)
            #expect(try await gateway.core.statistics().queued == 1, "only the bystander's push was restored")
            await api.close()
        }
    }

    @Test("notifications of a device that no longer exists are removed from the disk at start")
    func orphansRemovedAtStart() async throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        // What a device deletion that failed half-way could leave: rows with no device row.
        let store = try SQLiteStore(directory: directory, logger: Logger(label: "test"))
        let gone = randomHex(bytes: 16)
        func orphan(_ id: UInt64, seq: UInt64?) -> StoreCommand {
            let push = Push(
                deviceToken: String(repeating: "ab", count: 32),
                apnsID: newAPNsID(),
                topic: Self.news,
                pushType: .alert,
                priority: .high,
                collapseID: nil,
                payload: Array("{}".utf8)
            )
            return .enqueue(
                AcceptedPush(
                    acceptanceID: id,
                    deviceID: gone,
                    push: push,
                    acceptedAt: Self.start,
                    expiresAt: Self.start + 60_000,
                    seq: seq
                )
            )
        }
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            store.commit([orphan(1, seq: 1), orphan(2, seq: nil)]) { continuation.resume(with: $0) }
        }
        await store.close()

        try await withGateway(directory: directory, clock: TestClock(Self.start)) { gateway async throws in
            #expect(try await gateway.core.statistics().queued == 0)
        }
        let reopened = try SQLiteStore(directory: directory, logger: Logger(label: "test"))
        #expect(try reopened.load().notifications.isEmpty)
        #expect(try reopened.load().maxAcceptanceID == 2, "acceptance ids are never reused")
        await reopened.close()
    }

    // MARK: 9. Keep-alive

    @Test("keep-alive answers 200 {\"notifications\":[]} for the device's secret and the common 401 otherwise")
    func keepalive() async throws {
        try await withGateway(clock: TestClock(Self.start)) { gateway in
            let api = try await API(gateway)
            let device = try await api.createDevice()
            let other = try await api.createDevice()

            let ok = try await api.device(device, "POST", "keepalive")
            #expect(ok.status == 200)
            #expect(ok.headers.first(name: "content-type")?.hasPrefix("application/json") == true)
            let notifications = try #require(ok.json["notifications"] as? [Any], "body: \(ok.text)")
            #expect(notifications.isEmpty)
            #expect(ok.json.keys.sorted() == ["notifications"])

            let wrong = try await api.device(Device(id: device.id, secret: other.secret), "POST", "keepalive")
            let unknown = try await api.device(
                Device(id: randomHex(bytes: 16), secret: device.secret),
                "POST",
                "keepalive"
            )
            let anonymous = try await api.device(nil, id: device.id, "POST", "keepalive")
            let notBearer = try await api.device(
                nil,
                id: device.id,
                "POST",
                "keepalive",
                headers: [("authorization", "basic \(device.secret)")]
            )
            for response in [wrong, unknown, anonymous, notBearer] {
                #expect(response.status == 401)
                #expect(response.json["reason"] is String)
                #expect(response.text == wrong.text)
            }
            await api.close()
        }
    }
}

// MARK: - Clock

/// A clock the test moves by hand.
