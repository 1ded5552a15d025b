import PushgateDelivery
import PushgateModel
import PushgateStoreTestKit
import Testing

/// Web Push messages through the delivery core: the refusals' order once the subscription is
/// known, subscriptions beside APNs registrations, and a held message across a restart.
@Suite("Delivery: Web Push subscriptions and messages", .timeLimit(.minutes(1)))
struct WebPushDeliveryTests {
    static let key = [UInt8(4)] + (1...64).map { UInt8($0) }

    static func message(
        _ token: String,
        urgency: WebPushUrgency = .normal,
        ttl: Int64 = 60,
        body: [UInt8] = [1, 2, 3]
    ) -> WebPushMessage {
        WebPushMessage(
            push: Push(
                deviceToken: token,
                apnsID: UUIDs.next(),
                topic: "",
                pushType: .webpush,
                priority: urgency.priority,
                collapseID: nil,
                payload: body,
                urgency: urgency
            ),
            ttlSeconds: ttl
        )
    }

    static func submit(
        _ core: DeliveryCore,
        _ token: String,
        _ message: Result<WebPushMessage, Refusal>,
        vapid: VAPIDVerdict = .absent
    ) async -> Result<WebPushAcceptance, Refusal> {
        do {
            return .success(
                try await core.acceptWebPush(WebPushSubmission(token: token, message: message, vapid: vapid)).get()
            )
        } catch {
            return .failure(Refusal(error))
        }
    }

    @Test("the order once the subscription is known: 410, the message's own 400, 401, 403 (another key), then 201")
    func refusalOrder() async throws {
        try await DeliveryHarness.run { harness in
            let device = try await harness.device()
            let core = harness.core
            let token = try await core.subscribe(
                deviceID: device.id,
                secret: device.secret,
                name: "inbox",
                applicationServerKey: Self.key
            ).get()
            let badTTL = Refusal(.badTTL, "TTL is required")
            let invalid = VAPIDVerdict.invalid(Refusal(.badJwtToken, "bad signature"))
            // The message's rules come before VAPID's.
            #expect(await Self.submit(core, token, .failure(badTTL), vapid: .absent).failure?.reason == .badTTL)
            #expect(await Self.submit(core, token, .success(Self.message(token))).failure?.reason == .vapidRequired)
            #expect(
                await Self.submit(core, token, .success(Self.message(token)), vapid: invalid).failure?.reason
                    == .badJwtToken
            )
            let other = [UInt8(4)] + [UInt8](repeating: 9, count: 64)
            let otherKey = await Self.submit(core, token, .success(Self.message(token)), vapid: .valid(key: other))
            #expect(otherKey.failure?.reason == .badJwtToken)
            let accepted = await Self.submit(core, token, .success(Self.message(token)), vapid: .valid(key: Self.key))
            #expect(accepted.success?.disposition == .held)
            #expect(accepted.success?.ttlSeconds == 60)

            // Deleted: 410 before anything about the message.
            try await core.unsubscribe(deviceID: device.id, secret: device.secret, token: token).get()
            let gone = await Self.submit(core, token, .failure(badTTL), vapid: invalid)
            #expect(gone.failure?.reason == .unregistered)
            #expect(gone.failure?.timestamp != nil)
            // Unknown: 404.
            let unknown = String(repeating: "0", count: 64)
            #expect(await Self.submit(core, unknown, .failure(badTTL)).failure?.reason == .notFound)
        }
    }

    @Test("an unrestricted subscription takes pushes with or without VAPID, never an invalid one")
    func unrestricted() async throws {
        try await DeliveryHarness.run { harness in
            let device = try await harness.device()
            let token = try await harness.core.subscribe(
                deviceID: device.id,
                secret: device.secret,
                name: "feed",
                applicationServerKey: nil
            ).get()
            let core = harness.core
            #expect(await Self.submit(core, token, .success(Self.message(token))).success != nil)
            #expect(
                await Self.submit(core, token, .success(Self.message(token)), vapid: .valid(key: Self.key)).success
                    != nil
            )
            let invalid = await Self.submit(
                core,
                token,
                .success(Self.message(token)),
                vapid: .invalid(Refusal(.badJwtToken, "aud"))
            )
            #expect(invalid.failure?.status == 403)
        }
    }

    @Test("subscriptions and APNs registrations share a device's names; each kind's token is its own route's only")
    func namesAndKinds() async throws {
        try await DeliveryHarness.run { harness in
            let device = try await harness.device()
            let core = harness.core
            let apns = try await harness.register(device, "com.example.app")
            let subscribe = { (name: String, key: [UInt8]?) in
                try await core.subscribe(
                    deviceID: device.id,
                    secret: device.secret,
                    name: name,
                    applicationServerKey: key
                )
                .get()
            }
            await #expect(throws: Refusal.self) { try await subscribe("com.example.app", nil) }
            let token = try await subscribe("inbox", Self.key)
            #expect(try await subscribe("inbox", Self.key) == token)
            await #expect(throws: Refusal.self) { try await subscribe("inbox", nil) }
            await #expect(throws: Refusal.self) { try await harness.register(device, "inbox") }
            // An APNs push to a subscription's token, a Web Push message to an APNs token.
            await #expect(throws: Refusal.self) { try await harness.push(token, "inbox") }
            #expect(await Self.submit(core, apns, .success(Self.message(apns))).failure?.reason == .notFound)
            await #expect(throws: Refusal.self) {
                try await core.unsubscribe(deviceID: device.id, secret: device.secret, token: apns).get()
            }
        }
    }

    @Test("a held message keeps its urgency across a restart: in lowPower it still waits, and awake releases it")
    func heldAcrossRestart() async throws {
        let storage = InMemoryStorage()
        var device: DeliveryHarness.Device?
        var token = ""
        try await DeliveryHarness.run(storage: storage) { harness in
            device = try await harness.device()
            token = try await harness.core.subscribe(
                deviceID: device!.id,
                secret: device!.secret,
                name: "inbox",
                applicationServerKey: nil
            ).get()
            let held = await Self.submit(harness.core, token, .success(Self.message(token, urgency: .low)))
            #expect(held.success?.disposition == .held)
            // The admin view: a subscription, and why its message waits.
            _ = try await harness.core.setState(
                deviceID: device!.id,
                secret: device!.secret,
                power: .lowPower,
                apps: []
            )
            .get()
            let view = try #require(try await harness.core.inspect(deviceID: device!.id))
            #expect(view.registrations.map(\.kind) == [.webpush])
            #expect(view.notifications.map(\.reason) == [.belowUrgency(.low, power: .lowPower)])
        }
        try await DeliveryHarness.run(storage: storage) { harness in
            let device = try #require(device)
            _ = try await harness.core.setState(deviceID: device.id, secret: device.secret, power: .lowPower, apps: [])
                .get()
            let sink = try await harness.connect(device)
            let high = await Self.submit(harness.core, token, .success(Self.message(token, urgency: .high)))
            #expect(high.success?.disposition == .delivered)
            #expect(await sink.events(count: 1).map(\.notification.push.urgency) == [.high])
            _ = try await harness.core.setState(deviceID: device.id, secret: device.secret, power: .awake, apps: [])
                .get()
            let events = await sink.events(count: 2)
            #expect(events.map(\.notification.push.urgency) == [.high, .low])
            #expect(events.map(\.delivery) == [.immediate, .online])
            #expect(events.map(\.notification.push.topic) == ["inbox", "inbox"])
        }
    }
}

extension Result {
    var failure: Failure? {
        if case .failure(let failure) = self { return failure }
        return nil
    }

    var success: Success? { try? get() }
}
