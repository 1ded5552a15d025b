import NIOConcurrencyHelpers
import PushgateModel
import PushgateTransport

/// How many devices one client address may create: a token bucket per address (an IPv4
/// address, or an IPv6 /64) that holds an hour's allowance and refills it evenly over the hour,
/// so a burst of `perHour` passes and then one per `3600 / perHour` seconds (kept as the time the
/// bucket is full again, the generic cell rate algorithm). A plain value with
/// an injected clock; `DeviceCreationGate` keeps one under a lock (device creation is rare next
/// to pushes and acks, which never take it).
///
/// Loopback clients are not limited (a proxy in front, a load test), and addresses whose bucket
/// has refilled are forgotten: the table holds only addresses that created devices within the
/// hour, at most `maxAddresses` of them; past that, creation is refused until some refill (an
/// attacker with that many addresses is not stopped by a per-address limit anyway).
struct DeviceCreationLimit: Sendable {
    enum Decision: Equatable, Sendable {
        case allowed
        /// Retry after this many seconds (at least 1).
        case refused(retryAfterSeconds: Int)
    }

    /// At most this many per hour (the setting's range keeps `nowMillis * perHour` in an Int64).
    static let maxPerHour = 1_000_000

    let perHour: Int
    let maxAddresses: Int
    /// Per address, when its bucket is full again (the generic cell rate algorithm's theoretical
    /// arrival time), in units of 1/`perHour` ms so that every step is an exact integer: one
    /// creation is 3,600,000 of them.
    private var fullAt: [ClientAddress: Int64] = [:]
    /// A full table is swept at most once a second: each sweep reads every entry.
    private var sweptAtMillis: Int64?

    init(perHour: Int, maxAddresses: Int = 100_000) {
        precondition((1...Self.maxPerHour).contains(perHour) && maxAddresses > 0)
        self.perHour = perHour
        self.maxAddresses = maxAddresses
    }

    var trackedAddresses: Int { fullAt.count }

    private static let interval: Int64 = 3_600_000

    mutating func take(_ address: ClientAddress?, nowMillis: Int64) -> Decision {
        guard let address, !address.isLoopback else { return .allowed }
        let now = nowMillis * Int64(perHour)
        if fullAt[address] == nil, fullAt.count >= maxAddresses {
            if sweptAtMillis.map({ nowMillis - $0 >= 1000 }) ?? true {
                sweptAtMillis = nowMillis
                fullAt = fullAt.filter { $0.value > now }
            }
            // One creation comes back every 3600/perHour seconds: by then an entry may be gone.
            guard fullAt.count < maxAddresses else { return .refused(retryAfterSeconds: max(1, 3600 / perHour)) }
        }
        let full = max(fullAt[address] ?? now, now)
        // The bucket holds perHour creations: it may be at most perHour - 1 creations from full.
        let tolerance = Int64(perHour - 1) * Self.interval
        guard full - now <= tolerance else {
            let waitMillis = (full - now - tolerance + Int64(perHour) - 1) / Int64(perHour)
            return .refused(retryAfterSeconds: Int(max(1, (waitMillis + 999) / 1000)))
        }
        fullAt[address] = full + Self.interval
        return .allowed
    }
}

/// `DeviceCreationLimit` shared by every connection, with the gateway's clock, and the count of
/// refusals for the metrics.
public final class DeviceCreationGate: Sendable {
    private struct State {
        var limit: DeviceCreationLimit
        var refused = 0
    }

    private let state: NIOLockedValueBox<State>
    private let nowMillis: @Sendable () -> Int64
    public let perHour: Int

    /// `perHour`: devices one address may create per hour (at least 1).
    public init(perHour: Int, maxAddresses: Int = 100_000, nowMillis: @escaping @Sendable () -> Int64) {
        state = NIOLockedValueBox(State(limit: DeviceCreationLimit(perHour: perHour, maxAddresses: maxAddresses)))
        self.nowMillis = nowMillis
        self.perHour = perHour
    }

    /// Creations refused since start.
    public var refusals: Int { state.withLockedValue { $0.refused } }

    /// Nil when `address` may create a device now (and counts it); otherwise the refusal.
    func refusal(for address: ClientAddress?) -> Refusal? {
        let now = nowMillis()
        let decision = state.withLockedValue { state -> DeviceCreationLimit.Decision in
            let decision = state.limit.take(address, nowMillis: now)
            if decision != .allowed { state.refused += 1 }
            return decision
        }
        guard case .refused(let seconds) = decision else { return nil }
        return Refusal(
            .tooManyRequests,
            "this client address (an IPv4 address, or an IPv6 /64) has created its \(perHour) devices for the hour "
                + "(deviceCreationsPerAddressPerHour); retry after \(seconds) s. A device keeps its id and secret: create it once and store them",
            retryAfterSeconds: seconds
        )
    }
}
