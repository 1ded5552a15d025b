// What the device-bodies and http2-server targets share: the gateway's provider and device
// routes over a delivery core that runs on an EmbeddedEventLoop, with a store that commits at
// once and a clock that stands still, so that one input always runs the same way and every
// answer is given before the harness looks.
//
// The core knows one device with one registration, and the provider routes one key (the
// fixture key, as in the provider-token target); the seeds use their names
// (Tests/Fuzz/make-seeds.py).
import Logging
import NIOCore
import NIOEmbedded
import PushgateCrypto
import PushgateDeviceAPI
import PushgateHTTP
import PushgateModel
import PushgateProviderAPI
import PushgateProviderAuth
import PushgateStore

@testable import PushgateDelivery

enum FuzzGateway {
    static let deviceID = "00112233445566778899aabbccddeeff"
    static let deviceSecret = "fuzz-device-secret"
    /// The device's registration: its shard byte (00), then hex digits.
    static let token = "00" + String(repeating: "0123456789abcdef", count: 3) + "0123456789abcd"
    static let topic = "com.example.app"
    /// 2023-11-14T22:13:20Z; the seeds' provider token was issued then.
    static let nowMillis: Int64 = 1_700_000_000_000
    static let quiet = Logger(label: "fuzz") { _ in SwiftLogNoOpLogHandler() }

    private static let providers: ProviderAuthenticatorSource = {
        let key = try! ES256PrivateKey(pem: fixture("tls/client-key.pem"))
        let keyring = try! ProviderKeyring(keys: [
            ProviderKey(teamID: "TEAM000001", keyID: "KEY0000001", publicKey: key.publicKey, topics: [topic])
        ])
        return ProviderAuthenticatorSource(ProviderAuthenticator(keyring: keyring, acceptsClientCertificates: false))
    }()

    /// A new core on `loop` that knows the device and its registration.
    static func core(on loop: EmbeddedEventLoop) -> DeliveryCore {
        let core = try! DeliveryCore(group: loop, store: ImmediateStore(), clock: FixedClock(), logger: quiet)
        let device = DeviceRecord(id: deviceID, secretHash: SHA256.hash(deviceSecret.utf8), createdAt: nowMillis)
        let registration = RegistrationRecord(token: token, deviceID: deviceID, topic: topic, createdAt: nowMillis)
        _ = core.shards[0].submit { shard in
            shard.load(ShardSnapshot(devices: [device], registrations: [registration]))
        }
        loop.run()
        return core
    }

    /// The main listener's routes, as `Gateway.assemble` registers them (less the operator's).
    static func router(core: DeliveryCore) -> Router {
        var router = Router()
        let gate = ProviderGate(providers: providers, isDraining: { false }, nowMillis: { nowMillis })
        let validator = ProviderRequestValidator(uuidGenerator: { (0x0123_4567_89AB_CDEF, 0xFEDC_BA98_7654_3210) })
        ProviderRoute.register(on: &router, acceptor: core, validator: validator, gate: gate, logger: quiet)
        DeviceRoutes.register(on: &router, core: core)
        return router
    }
}

struct FixedClock: DeliveryClock {
    func nowMillis() -> Int64 { FuzzGateway.nowMillis }
}

/// Commits succeed at once, on the caller's thread (the loop's), and nothing is kept.
final class ImmediateStore: NotificationStore {
    let health = StoreHealth(logger: FuzzGateway.quiet)

    func commit(
        _ commands: [StoreCommand],
        urgency: CommitUrgency,
        completion: @escaping @Sendable (Result<Void, StoreError>) -> Void
    ) {
        completion(.success(()))
    }

    func load() throws(StoreError) -> StoreSnapshot {
        StoreSnapshot(devices: [], registrations: [], notifications: [], maxAcceptanceID: 0)
    }

    func close() async {}
}
