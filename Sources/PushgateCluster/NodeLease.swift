/// This node's membership of the cluster, as the node itself sees it by its own monotonic clock.
///
/// The database holds each node's lease (`OwnershipRules`: an id per joining, an expiry in the
/// database's time), and a node may act as the owner of its devices (deliver, commit as owner)
/// only while its lease is alive there. The node cannot read the database's clock, so it counts
/// from when it *sent* each renewal: the database received it later, so its expiry is later than
/// `sentAt + leaseMillis`; `safetyMillis` covers the two clocks running at slightly different
/// rates. The node therefore stops acting before its lease can have expired in the database,
/// whatever the delays or pauses in between: a node paused past its lease wakes up no longer
/// acting, and another node may by then have taken its devices over.
///
/// Pure and clock-injected: times are the caller's monotonic milliseconds.
public struct NodeLease: Sendable, Equatable {
    public struct Configuration: Sendable, Equatable {
        /// How long a lease lasts in the database after each renewal.
        public var leaseMillis: Int64
        /// How often the node renews it.
        public var renewEveryMillis: Int64
        /// Taken off the lease by the node, for clock-rate differences.
        public var safetyMillis: Int64

        public init(leaseMillis: Int64 = 5_000, renewEveryMillis: Int64 = 1_000, safetyMillis: Int64 = 250) {
            self.leaseMillis = leaseMillis
            self.renewEveryMillis = renewEveryMillis
            self.safetyMillis = safetyMillis
        }
    }

    public enum State: Sendable, Equatable {
        /// Not a member: joining (again).
        case joining
        /// A member under lease `id`, acting until `actsUntil` (the node's clock).
        case member(id: UInt64, actsUntil: Int64)
    }

    /// What the node must do.
    public enum Action: Sendable, Equatable {
        /// Ask the database for a new lease (`OwnershipRules.join`); the answer names `request`.
        case join(request: UInt64)
        /// Ask the database to extend lease `id` (`OwnershipRules.renew`); the answer names
        /// `request`.
        case renew(id: UInt64, request: UInt64)
        /// Stop acting as the owner of every device: the lease may have run out. Devices are
        /// claimed again under a new lease.
        case giveUpDevices(leaseID: UInt64)
    }

    public struct Request: Sendable, Equatable {
        public var number: UInt64
        public var sentAt: Int64
    }

    public let configuration: Configuration
    public private(set) var state: State = .joining
    /// The request in flight (one at a time) and when it was sent; nil when none is. An answer
    /// to an earlier request (one given up on as failed) is not taken as this one's.
    public private(set) var inFlight: Request?
    private var requests: UInt64 = 0
    private var lastRenewalSentAt: Int64 = .min

    public init(configuration: Configuration = Configuration()) {
        precondition(
            configuration.renewEveryMillis + configuration.safetyMillis < configuration.leaseMillis,
            "a lease must outlast a renewal interval and the safety margin"
        )
        self.configuration = configuration
    }

    /// The lease's id while the node is a member.
    public var leaseID: UInt64? {
        if case .member(let id, _) = state { id } else { nil }
    }

    /// Whether the node may act as the owner of its devices at `now`.
    public func mayAct(now: Int64) -> Bool {
        if case .member(_, let until) = state { now < until } else { false }
    }

    /// The passing of time: gives the devices up once the lease may have expired, and asks for a
    /// renewal or a new lease when one is due and none is in flight.
    public mutating func tick(now: Int64) -> [Action] {
        var actions: [Action] = []
        if case .member(let id, let until) = state, now >= until {
            state = .joining
            actions.append(.giveUpDevices(leaseID: id))
        }
        guard inFlight == nil else { return actions }
        switch state {
        case .joining:
            actions.append(.join(request: send(now)))
        case .member(let id, _):
            if now - lastRenewalSentAt >= configuration.renewEveryMillis {
                lastRenewalSentAt = now
                actions.append(.renew(id: id, request: send(now)))
            }
        }
        return actions
    }

    /// The database gave the node lease `id` in answer to `request`. An answer to a request
    /// given up on is ignored: that lease runs out unused.
    public mutating func joined(id: UInt64, request: UInt64) {
        guard let sentAt = answered(request) else { return }
        lastRenewalSentAt = sentAt
        state = .member(id: id, actsUntil: actsUntil(sentAt))
    }

    /// The database extended lease `id`. A renewal that comes back after the node gave the lease
    /// up changes nothing: the node joins again instead of acting under a lease whose devices it
    /// let go.
    public mutating func renewed(id: UInt64, request: UInt64) {
        guard let sentAt = answered(request) else { return }
        if case .member(id, let until) = state {
            state = .member(id: id, actsUntil: max(until, actsUntil(sentAt)))
        }
    }

    /// The database refused to renew lease `id`: it had expired there. The node stops acting at
    /// once and joins again, whichever request the refusal answers.
    public mutating func renewalRefused(id: UInt64, request: UInt64) -> [Action] {
        _ = answered(request)
        guard case .member(id, _) = state else { return [] }
        state = .joining
        return [.giveUpDevices(leaseID: id)]
    }

    /// The request in flight got no answer (the database unreachable, a timeout). Nothing
    /// changes but that another may be sent: the lease runs out by time if none succeeds.
    public mutating func requestFailed(request: UInt64) {
        _ = answered(request)
    }

    private mutating func send(_ now: Int64) -> UInt64 {
        requests += 1
        inFlight = Request(number: requests, sentAt: now)
        return requests
    }

    /// When `request` was sent, if it is the one in flight; it no longer is.
    private mutating func answered(_ request: UInt64) -> Int64? {
        guard let inFlight, inFlight.number == request else { return nil }
        self.inFlight = nil
        return inFlight.sentAt
    }

    private func actsUntil(_ sentAt: Int64) -> Int64 {
        sentAt + configuration.leaseMillis - configuration.safetyMillis
    }
}
