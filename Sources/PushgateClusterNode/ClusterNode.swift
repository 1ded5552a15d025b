import Foundation
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import PushgateCluster
import PushgateDelivery
import PushgateModel
import PushgateStore

/// This gateway as one node of several sharing a database: it keeps its lease (`NodeLease`),
/// holds the devices whose streams are open on it or that it took over, and hands what arrives
/// for a device another node owns to that node.
///
/// - A push (APNs or Web Push) arriving here for a device owned elsewhere is forwarded to the
///   owner, authenticated and read already, and the owner's answer relayed: one scheduler per
///   device decides, so dispositions and budgets are the same whichever node a push arrives on.
/// - A device with no live owner is claimed by the node that must act for it (`takeover`), and
///   a device's stream claims it for the node it opens on (`stream`, the newest stream wins; the
///   node it came from is told, and fenced if it does not hear).
/// - Every commit a node makes for its devices is fenced with its claim (`DeviceOwner`); a
///   refused one makes the node let the device go.
/// - A node stops acting before its lease can have expired in the database (`NodeLease`), and
///   lets every device go then.
///
/// The database calls block: they run on thread pools of their own, never on an event loop; the
/// lease's on one to itself, so that no number of claims can delay a renewal.
public final class ClusterNode: Sendable {
    let store: any ClusterStore
    let core: DeliveryCore
    let peers: PeerConnections
    /// Forwarded requests carry it; only they are trusted as checked already.
    let secret: String
    let logger: Logger
    private let pool: NIOThreadPool
    private let leasePool: NIOThreadPool
    private let eventLoop: any EventLoop
    private let state = NIOLockedValueBox(State())
    /// One claim at a time per device: two pushes for one unowned device must not load it twice.
    private let claims = ClaimQueue()
    /// Tokens missing from the cache, looked up together.
    private let tokenLookups: BatchedLookups<String, DeviceLocation>
    /// Forwarded work served lately, by id.
    let served = ServedWork()

    struct State {
        var lease = NodeLease()
        /// Devices this node holds, with its claim.
        var held: [String: DeviceOwner] = [:]
        /// Set at `start`: as configured, or from the first listener.
        var name = ""
        var address = ""
        var keeper: Task<Void, Never>?
        /// Which device a token is (never changes), bounded.
        var tokens: [String: String] = [:]
        /// The address of the live node that owns a device, as last heard, bounded; forgotten
        /// when that node cannot be reached or says the device moved.
        var remoteOwners: [String: String] = [:]
        var stopping = false
        /// A sweep is running.
        var sweeping = false
        var activity = ClusterActivity()
        /// Live nodes at the last sweep.
        var liveNodes = 0
    }

    private let configuredName: String?
    private let configuredAddress: String?

    /// `secret`: the cluster's (`ClusterStore.clusterSecret`), which forwarded requests carry.
    /// `name` and `address`: nil for `HOST:PORT` and `http://HOST:PORT` of the first listener
    /// (`start`).
    public init(
        name: String?,
        address: String?,
        store: any ClusterStore,
        core: DeliveryCore,
        secret: String,
        group: any EventLoopGroup,
        logger: Logger
    ) {
        configuredName = name
        configuredAddress = address
        self.store = store
        self.core = core
        self.logger = logger
        self.secret = secret
        eventLoop = group.next()
        peers = PeerConnections(secret: secret, group: group, logger: logger)
        // As many threads as the store has ownership connections.
        pool = NIOThreadPool(numberOfThreads: 4)
        pool.start()
        leasePool = NIOThreadPool(numberOfThreads: 1)
        leasePool.start()
        tokenLookups = BatchedLookups { [pool, eventLoop] tokens in
            pool.runIfActive(eventLoop: eventLoop) { try store.locate(tokens: tokens) }
        }
        core.releases.observe { [state] id in state.withLockedValue { _ = $0.held.removeValue(forKey: id) } }
    }

    var eventLoopForFutures: any EventLoop { eventLoop }

    func knownOwner(of deviceID: String) -> String? { state.withLockedValue { $0.remoteOwners[deviceID] } }

    func rememberOwner(of deviceID: String, _ address: String) {
        state.withLockedValue { state in
            if state.remoteOwners.count >= Self.tokenCacheLimit { state.remoteOwners.removeAll(keepingCapacity: true) }
            state.remoteOwners[deviceID] = address
        }
    }

    func forgetOwner(of deviceID: String) {
        state.withLockedValue { _ = $0.remoteOwners.removeValue(forKey: deviceID) }
    }

    func forgetHeld(_ deviceID: String) { state.withLockedValue { _ = $0.held.removeValue(forKey: deviceID) } }

    func count(_ change: @Sendable (inout ClusterActivity) -> Void) { state.withLockedValue { change(&$0.activity) } }

    var activitySoFar: ClusterActivity { state.withLockedValue { $0.activity } }

    var liveNodesSeen: Int { state.withLockedValue { $0.liveNodes } }

    /// The lease this node acts under, if it may act now.
    var actingLease: UInt64? {
        state.withLockedValue { state in
            state.lease.mayAct(now: Self.monotonicMillis()) ? state.lease.leaseID : nil
        }
    }

    enum PlaceAtOnce {
        case here
        case node(deviceID: String, address: String)
    }

    /// Where the device `token` names is served, when that is known without asking the
    /// database: here when this node holds it and may act for it, at its owner as last heard.
    /// Nil when only the database can say (or this node may not act now).
    func placeAtOnce(token: String) -> PlaceAtOnce? {
        let now = Self.monotonicMillis()
        return state.withLockedValue { state in
            guard state.lease.mayAct(now: now), let id = state.tokens[token] else { return nil }
            return Self.placeAtOnce(id, in: state)
        }
    }

    /// `placeAtOnce(token:)` for a device named by its id.
    func placeAtOnce(deviceID: String) -> PlaceAtOnce? {
        let now = Self.monotonicMillis()
        return state.withLockedValue { state in
            guard state.lease.mayAct(now: now) else { return nil }
            return Self.placeAtOnce(deviceID, in: state)
        }
    }

    private static func placeAtOnce(_ id: String, in state: State) -> PlaceAtOnce? {
        if state.held[id] != nil { return .here }
        return state.remoteOwners[id].map { .node(deviceID: id, address: $0) }
    }

    /// Whether this node holds the device now.
    public func holds(_ deviceID: String) -> Bool { state.withLockedValue { $0.held[deviceID] != nil } }

    /// The devices this node holds.
    public var heldCount: Int { state.withLockedValue { $0.held.count } }

    /// A database call, off the event loops; `lease`: one for the lease (or the node list).
    func blocking<T: Sendable>(lease: Bool = false, _ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await (lease ? leasePool : pool).runIfActive(eventLoop: eventLoop, body).get()
    }

    static func monotonicMillis() -> Int64 {
        Int64(DispatchTime.now().uptimeNanoseconds / 1_000_000)
    }

    /// This node's name in the cluster.
    public var name: String { state.withLockedValue { $0.name } }
    /// Where the other nodes reach this one (`http://HOST:PORT`).
    public var address: String { state.withLockedValue { $0.address } }

    // MARK: Membership

    /// Joins the cluster once the listeners are bound (`listeners`: their addresses, in order,
    /// and whether each is cleartext), and keeps the lease from then on. Unless configured, the
    /// first listener names the node and the first cleartext one is its address: the other
    /// nodes speak HTTP/2 without TLS to it.
    public func start(listeners: [(address: SocketAddress, cleartext: Bool)]) throws {
        guard let first = listeners.first else { throw ClusterAddressError(reason: "the gateway has no listener") }
        let name = configuredName ?? Self.hostPort(first.address)
        let address: String
        if let configuredAddress {
            address = configuredAddress
        } else if let cleartext = listeners.first(where: \.cleartext) {
            address = "http://\(Self.hostPort(cleartext.address))"
        } else {
            throw ClusterAddressError(reason: "every listener is TLS, and the other nodes reach this one in cleartext")
        }
        state.withLockedValue { state in
            state.name = name
            state.address = address
            state.keeper = Task { await self.run() }
        }
    }

    /// `HOST:PORT` as another process on this machine reaches it (a wildcard is loopback).
    private static func hostPort(_ address: SocketAddress) -> String {
        let port = address.port ?? 0
        let host = address.ipAddress ?? "127.0.0.1"
        let reachable = host == "0.0.0.0" || host == "::" ? "127.0.0.1" : host
        return reachable.contains(":") ? "[\(reachable)]:\(port)" : "\(reachable):\(port)"
    }

    /// Keeps the lease and checks the devices it holds, until cancelled: the lease every tick
    /// (renewed each `renewEveryMillis`), the devices every `sweepMillis`. Requests to the
    /// database run beside the ticks, never in their way: a database that does not answer (cut
    /// off, a renewal waiting out its timeout) must not hold up the clock that gives the devices
    /// up before the lease can have expired.
    func run(tickMillis: Int64 = 250, sweepMillis: Int64 = 2_000) async {
        await withDiscardingTaskGroup { group in
            var lastSweep = Self.monotonicMillis()
            while !Task.isCancelled {
                for action in state.withLockedValue({ $0.lease.tick(now: Self.monotonicMillis()) }) {
                    switch action {
                    case .giveUpDevices(let id):
                        await giveUpDevices(
                            lease: id,
                            why: "the lease may have run out (no renewal reached the database)"
                        )
                    case .join, .renew:
                        group.addTask { await self.request(action) }
                    }
                }
                let now = Self.monotonicMillis()
                if now - lastSweep >= sweepMillis, startSweep() {
                    lastSweep = now
                    group.addTask {
                        await self.sweep()
                        self.state.withLockedValue { $0.sweeping = false }
                    }
                }
                try? await Task.sleep(for: .milliseconds(tickMillis))
            }
        }
    }

    /// Whether a sweep may start now: one at a time.
    private func startSweep() -> Bool {
        state.withLockedValue { state in
            defer { state.sweeping = true }
            return !state.sweeping
        }
    }

    private func request(_ action: NodeLease.Action) async {
        switch action {
        case .join(let request):
            do {
                let (name, address, store) = (name, address, store)
                let id = try await blocking(lease: true) { try store.join(node: name, address: address) }
                state.withLockedValue { $0.lease.joined(id: id, request: request) }
                logger.info("cluster lease taken", metadata: ["cluster.lease": "\(id)", "cluster.node": "\(name)"])
                await countNodes()
            } catch {
                state.withLockedValue { $0.lease.requestFailed(request: request) }
                logger.warning("cluster join failed", metadata: ["error": "\(error)"])
            }
        case .renew(let id, let request):
            do {
                let (store, held) = (store, heldCount)
                let renewed = try await blocking(lease: true) { try store.renew(lease: id, devicesHeld: held) }
                if renewed {
                    state.withLockedValue { $0.lease.renewed(id: id, request: request) }
                } else {
                    let more = state.withLockedValue { $0.lease.renewalRefused(id: id, request: request) }
                    if !more.isEmpty { await giveUpDevices(lease: id, why: "the database holds the lease expired") }
                }
            } catch {
                state.withLockedValue { $0.lease.requestFailed(request: request) }
            }
        case .giveUpDevices:
            break
        }
    }

    /// Every device goes: another node takes each over when it must act for it.
    private func giveUpDevices(lease: UInt64, why: String) async {
        let held = state.withLockedValue { state in
            defer { state.held = [:] }
            state.activity.leaseLosses += 1
            return Array(state.held.keys)
        }
        logger.warning(
            "cluster lease lost: letting every device go",
            metadata: ["cluster.lease": "\(lease)", "devices": "\(held.count)", "reason": "\(why)"]
        )
        for id in held { try? await core.release(deviceID: id) }
    }

    /// Devices the database says another node owns now (their stream opened there while this
    /// node did not hear of it) are let go; the live nodes are counted.
    private func sweep() async {
        guard let lease = actingLease else { return }
        await countNodes()
        let store = store
        let held = state.withLockedValue { $0.held.map { (device: $0.key, epoch: $0.value.epoch) } }
        guard !held.isEmpty else { return }
        guard let lost = try? await blocking({ try store.lost(held, lease: lease) }) else { return }
        for id in lost { await release(id) }
    }

    private func countNodes() async {
        let store = store
        if let nodes = try? await blocking(lease: true, { try store.nodes() }) {
            state.withLockedValue { $0.liveNodes = nodes.count }
        }
    }

    /// Lets a device go (another node took it over).
    func release(_ id: String) async {
        guard state.withLockedValue({ $0.held.removeValue(forKey: id) }) != nil else { return }
        try? await core.release(deviceID: id)
    }

    /// Another node claimed the device at `epoch`: let it go if this node's claim is older.
    func released(_ id: String, claimedAt epoch: UInt64) async {
        let older = state.withLockedValue { state -> Bool in
            guard let held = state.held[id], held.epoch < epoch else { return false }
            state.held[id] = nil
            return true
        }
        if older { try? await core.release(deviceID: id) }
    }

    /// Leaves the cluster at once, so that other nodes take this one's devices over without
    /// waiting for its lease to expire (the end of a drain).
    public func leave() async {
        let (lease, keeper) = state.withLockedValue { state in
            state.stopping = true
            return (state.lease.leaseID, state.keeper)
        }
        keeper?.cancel()
        await keeper?.value
        guard let lease else { return }
        let store = store
        try? await blocking(lease: true) { try store.leave(lease: lease) }
        await peers.close()
        try? await pool.shutdownGracefully()
        try? await leasePool.shutdownGracefully()
    }

    // MARK: Claims

    /// Makes this node the device's owner, claimed for `reason`, and holds its state; returns
    /// the owner to forward to when another live node owns it (`takeover` only).
    func claim(_ id: String, _ reason: OwnershipRules.ClaimReason) async throws -> ClaimOutcome {
        try await claims.serialize(id) { [self] in
            guard let lease = actingLease else { return .leaseNotAlive }
            let store = store
            let outcome = try await blocking { try store.claim(device: id, lease: lease, reason: reason) }
            guard case .claimed(let epoch, let previous) = outcome else { return outcome }
            let owner = DeviceOwner(lease: lease, epoch: epoch)
            if state.withLockedValue({ $0.held[id] }) != owner {
                let records = try await blocking { try store.records(ofDevice: id) }
                try await core.adopt(records, owner: owner)
                // Pushes forwarded to this node name the device by token: known now, the first
                // of them is served without a query.
                remember(tokens: records.registrations.map(\.token), of: id)
                state.withLockedValue { state in
                    state.held[id] = owner
                    switch reason {
                    case .stream: state.activity.streamClaims += 1
                    case .takeover: state.activity.takeovers += 1
                    }
                }
            }
            if let previous, previous.lease != lease {
                // Best effort: the old owner is fenced anyway, and its sweep finds out.
                Task { [peers] in await peers.release(id, epoch: epoch, at: previous.address) }
            }
            return outcome
        }
    }

    /// The device a token is, from the cache or the database; nil for a token never registered.
    func device(ofToken token: String) async throws -> String? {
        if let id = state.withLockedValue({ $0.tokens[token] }) { return id }
        return try await locate(token: token).get()
    }

    /// Whether the device `token` names is known here (without its owner, perhaps).
    func knows(token: String) -> Bool { state.withLockedValue { $0.tokens[token] != nil } }

    /// The device a token is, from the database; nil for a token never registered. Looked up,
    /// the device's live owner is remembered too when it is another node: the first push for a
    /// device owned elsewhere then costs a share of one query, not a claim's transaction.
    func locate(token: String) -> EventLoopFuture<String?> {
        tokenLookups.value(of: token, on: eventLoop).map { [self] location in
            guard let location else { return nil }
            remember(tokens: [token], of: location.deviceID)
            if let owner = location.owner, owner.lease != actingLease {
                rememberOwner(of: location.deviceID, owner.address)
            }
            return location.deviceID
        }
    }

    private func remember(tokens: some Sequence<String>, of deviceID: String) {
        state.withLockedValue { state in
            for token in tokens {
                if state.tokens.count >= Self.tokenCacheLimit { state.tokens.removeAll(keepingCapacity: true) }
                state.tokens[token] = deviceID
            }
        }
    }

    static let tokenCacheLimit = 100_000
}

struct ClusterAddressError: Error, CustomStringConvertible {
    var reason: String
    var description: String {
        "cannot tell the other nodes where this one is: \(reason); give --node-address http://HOST:PORT of a cleartext --listen"
    }
}
