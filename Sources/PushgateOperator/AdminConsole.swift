import Logging
import NIOConcurrencyHelpers
import NIOCore
import PushgateDelivery
import PushgateHTTP
import PushgateModel
import PushgateStore
import PushgateTransport

/// What operators see: `/metrics`, the admin API (`/v1/admin/...`), its live event stream and
/// the dashboard (`/admin`), behind one access rule (`AdminAccess`); and the durable totals,
/// written to the store as the gateway runs.
///
/// Built before the delivery core is restored (the core records into `metrics` and tells
/// `events`), started after (`start`), stopped once the listeners have drained (`stop`).
public final class AdminConsole: Sendable {
    public struct Settings: Sendable {
        public var access: AdminAccess
        /// Export per-topic gauges (`--metrics-topic-labels`): topics are not a bounded set,
        /// so this is opt-in; at most `topicLimit` topics, most held first.
        public var metricsTopicLabels = false
        public var topicLimit = 100
        public var tickInterval: TimeAmount = .seconds(1)
        public var persistInterval: TimeAmount = .seconds(10)

        public init(access: AdminAccess) {
            self.access = access
        }
    }

    public let metrics: GatewayMetrics
    public let events: EventHub
    private let settings: Settings
    private let core: DeliveryCore
    private let provider: ProviderCounters
    private let totals: DurableTotals
    private let clock: any DeliveryClock
    private let group: any EventLoopGroup
    private let startedAt: Int64
    /// The cluster this gateway is a node of; nil alone.
    private let cluster: (any ClusterView)?
    private let tasks = NIOLockedValueBox<[RepeatedTask]>([])

    public init(
        settings: Settings,
        metrics: GatewayMetrics,
        events: EventHub,
        core: DeliveryCore,
        provider: ProviderCounters,
        store: any NotificationStore,
        cluster: (any ClusterView)? = nil,
        clock: any DeliveryClock,
        group: any EventLoopGroup,
        logger: Logger
    ) {
        self.cluster = cluster
        self.settings = settings
        self.metrics = metrics
        self.events = events
        self.core = core
        self.provider = provider
        self.totals = DurableTotals(store: store, logger: logger)
        self.clock = clock
        self.group = group
        self.startedAt = clock.nowMillis()
    }

    /// This process's totals now.
    public var currentTotals: Totals { Totals(delivery: core.counters, provider: provider) }

    /// Begins the live ticks and the durable totals' writes; `storedTotals` are the store's at
    /// start (`DeliveryCore.restore`).
    public func start(storedTotals: [String: Int64]) async {
        await totals.restore(storedTotals)
        let loop = group.next()
        let tick = loop.scheduleRepeatedTask(initialDelay: settings.tickInterval, delay: settings.tickInterval) {
            [weak self] _ in
            guard let self, self.events.isListening else { return }
            Task { await self.broadcastTick() }
        }
        let persist = loop.scheduleRepeatedTask(initialDelay: settings.persistInterval, delay: settings.persistInterval)
        { [weak self] _ in
            guard let self else { return }
            Task { await self.persistTotals() }
        }
        tasks.withLockedValue { $0 += [tick, persist] }
    }

    /// Stops the ticks and writes the last counts. Call before the store closes.
    public func stop() async {
        let running = tasks.withLockedValue { tasks in
            defer { tasks = [] }
            return tasks
        }
        for task in running { task.cancel() }
        await persistTotals()
    }

    /// Writes what was counted since the last write to the durable totals.
    public func persistTotals() async {
        await totals.persist(current: currentTotals)
    }

    /// The durable totals now (what the store had at start, plus this process's).
    public func durableTotals() async -> Totals {
        await totals.durable(current: currentTotals)
    }

    // MARK: Routes

    /// `/metrics`, `/v1/admin/stats`, `/v1/admin/nodes`, `/v1/admin/devices/{id}`,
    /// `/v1/admin/events`, `/admin`.
    public func register(on router: inout Router) {
        let access = settings.access
        router.add("GET", "/metrics", protocols: .http1AndHTTP2, role: .operator, answersHEAD: true) {
            [self] request, responder in
            guard Self.admitted(request, responder, access) else { return }
            Task { responder.respond(await self.metricsResponse()) }
        }
        router.add("GET", "/v1/admin/stats", protocols: .http1AndHTTP2, role: .operator, answersHEAD: true) {
            [self] request, responder in
            guard Self.admitted(request, responder, access) else { return }
            Task { responder.respond(await self.statsResponse()) }
        }
        router.add("GET", "/v1/admin/nodes", protocols: .http1AndHTTP2, role: .operator, answersHEAD: true) {
            [self] request, responder in
            guard Self.admitted(request, responder, access) else { return }
            Task { responder.respond(await self.nodesResponse()) }
        }
        router.addPrefix("GET", "/v1/admin/devices/", protocols: .http1AndHTTP2, role: .operator, answersHEAD: true) {
            [self] request, responder in
            guard Self.admitted(request, responder, access) else { return }
            let path = request.path.split(separator: "?", maxSplits: 1).first.map(String.init) ?? request.path
            let deviceID = String(path.dropFirst("/v1/admin/devices/".count))
            Task { responder.respond(await self.deviceResponse(deviceID)) }
        }
        router.add("GET", "/v1/admin/events", protocols: .http1AndHTTP2, role: .operator) { [self] request, responder in
            guard Self.admitted(request, responder, access) else { return }
            self.openEventStream(responder)
        }
        router.add("GET", "/admin", protocols: .http1AndHTTP2, role: .operator, answersHEAD: true) { _, responder in
            responder.respond(Self.dashboard)
        }
    }

    /// Whether the request passes the admin access rule; if not, the refusal is answered. For
    /// admin routes that other modules register (`POST /v1/admin/reload`).
    public func admits(_ request: HTTPServerRequest, _ responder: HTTPResponder) -> Bool {
        Self.admitted(request, responder, settings.access)
    }

    private static func admitted(
        _ request: HTTPServerRequest,
        _ responder: HTTPResponder,
        _ access: AdminAccess
    ) -> Bool {
        guard
            let refusal = access.refusal(
                authorization: request.headers.first(name: "authorization"),
                peer: request.connection.remoteAddress,
                forwardedBy: AdminAccess.forwardingFields.first { request.headers.contains(name: $0) }
            )
        else {
            request.connection.markAuthenticated()
            return true
        }
        var response = HTTPServerResponse.refusal(refusal)
        if refusal.reason == .unauthorized {
            response.head.headers.add(name: "www-authenticate", value: "Bearer realm=\"pushgate admin\"")
        }
        responder.respond(response)
        return false
    }

    private func metricsResponse() async -> HTTPServerResponse {
        do {
            let statistics = try await core.statistics(includeOldestHeld: true)
            let topics =
                settings.metricsTopicLabels
                ? try await core.overview(topicLimit: settings.topicLimit, deviceLimit: 0).topics : nil
            let body = metrics.exposition(statistics: statistics, topics: topics, now: clock.nowMillis())
            return HTTPServerResponse(
                status: 200,
                headers: ["content-type": "text/plain; version=0.0.4; charset=utf-8"],
                body: ByteBuffer(bytes: body)
            )
        } catch {
            return .refusal(for: error)
        }
    }

    private func statsResponse() async -> HTTPServerResponse {
        do {
            let statistics = try await core.statistics()
            let overview = try await core.overview(topicLimit: settings.topicLimit, deviceLimit: 20)
            var stats = AdminStats(
                startedAt: startedAt,
                totals: currentTotals,
                durableTotals: await durableTotals(),
                statistics: statistics,
                overview: overview
            )
            if let cluster {
                stats.scope = "node"
                stats.node = cluster.nodeName
                stats.nodes = try await Self.nodes(cluster)
            }
            return .json(AdminJSON.encode(stats))
        } catch {
            return .refusal(for: error)
        }
    }

    private func nodesResponse() async -> HTTPServerResponse {
        guard let cluster else {
            return .refusal(
                Refusal(
                    .notFound,
                    "this gateway is not a node of a cluster: only gateways on a database (--database-url) are"
                )
            )
        }
        do {
            return .json(AdminJSON.encode(AdminNodes(nodes: try await Self.nodes(cluster))))
        } catch {
            return .refusal(for: error)
        }
    }

    private static func nodes(_ cluster: any ClusterView) async throws -> [AdminNode] {
        let lease = cluster.memberLease
        return try await cluster.members().map { AdminNode($0, this: $0.lease == lease) }
    }

    /// The device's view, from the node that holds it in a cluster.
    private func deviceResponse(_ deviceID: String) async -> HTTPServerResponse {
        if let cluster {
            do {
                if let owners = try await cluster.ownersView(ofDevice: deviceID) { return owners }
            } catch {
                return .refusal(for: error)
            }
        }
        return await localDeviceResponse(deviceID)
    }

    /// The view of a device this gateway holds (in a cluster, what the node that holds it
    /// answers the others).
    public func localDeviceResponse(_ deviceID: String) async -> HTTPServerResponse {
        do {
            guard let device = try await core.inspect(deviceID: deviceID) else {
                // Echoed as far as an id goes (32 hex digits): a path of any length is not repeated whole.
                let shown =
                    deviceID.isEmpty
                    ? "id (the path ends at /v1/admin/devices/)"
                    : deviceID.count > 40 ? "\"\(deviceID.prefix(40))...\" (\(deviceID.utf8.count) bytes)" : deviceID
                return .refusal(Refusal(.notFound, "no device \(shown) on this gateway"))
            }
            return .json(AdminJSON.encode(AdminDevice(device, owner: cluster?.nodeName, now: clock.nowMillis())))
        } catch {
            return .refusal(for: error)
        }
    }

    // MARK: Event stream

    private func openEventStream(_ responder: HTTPResponder) {
        guard let id = events.reserve() else {
            responder.respond(
                .refusal(
                    Refusal(
                        .serviceUnavailable,
                        "\(events.maxStreams) admin event streams are open already; close one (a dashboard tab) and retry"
                    )
                )
            )
            return
        }
        let head = ResponseHead(
            status: 200,
            headers: [
                "content-type": "text/event-stream; charset=utf-8",
                "cache-control": "no-store",
                // Proxies (nginx) would otherwise buffer the stream.
                "x-accel-buffering": "no",
            ]
        )
        responder.startStream(head).whenComplete { [self] result in
            switch result {
            case .success(let writer):
                writer.onClose = { [events] _ in events.remove(id) }
                events.attach(id, writer: writer)
                writer.write(ByteBuffer(string: "retry: 2000\n: pushgate admin events; a stats event each second\n\n"))
                Task { await self.sendFirstTick(id) }
            case .failure:
                events.remove(id)
            }
        }
    }

    private func tickFigures() async -> ((Int) -> String)? {
        // The counters before the shards' figures: a shard changes its state (a held push
        // released) before it counts what followed (the release delivered), so read in this
        // order a tick never shows an event counted and its state not yet changed (held 1 with
        // the piggyback that released it already counted).
        let counters = core.counters
        let time = clock.nowMillis()
        let totals = currentTotals
        let droppedByReason = Dictionary(
            uniqueKeysWithValues: DropReason.allCases.map { ($0.rawValue, counters.drops[$0]) }
        )
        let deliveredByKind = Dictionary(
            uniqueKeysWithValues: DeliveryKind.allCases.map { ($0.rawValue, counters.deliveries[$0]) }
        )
        let budgetExhausted = Dictionary(
            uniqueKeysWithValues: BudgetScope.allCases.map { ($0.rawValue, counters.budgetExhausted[$0]) }
        )
        guard let statistics = try? await core.statistics() else { return nil }
        let tick = AdminStatsTick(
            time: time,
            totals: totals,
            droppedByReason: droppedByReason,
            deliveredByKind: deliveredByKind,
            budgetExhausted: budgetExhausted,
            held: statistics.held,
            stored: statistics.stored,
            unacked: statistics.unacked,
            connectedDevices: statistics.connectedDevices,
            notableSkipped: 0
        )
        return { skipped in
            var tick = tick
            tick.notableSkipped = skipped
            return AdminJSON.encode(tick)
        }
    }

    private func broadcastTick() async {
        guard let body = await tickFigures() else { return }
        events.tick(body)
    }

    private func sendFirstTick(_ id: UInt64) async {
        guard let body = await tickFigures() else { return }
        events.tick(id, body)
    }

    // MARK: Dashboard

    private static let dashboard = HTTPServerResponse(
        status: 200,
        headers: [
            "content-type": "text/html; charset=utf-8",
            "cache-control": "no-store",
            // Everything is inline; the page talks to this gateway only.
            "content-security-policy":
                "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
            "x-content-type-options": "nosniff",
            "referrer-policy": "no-referrer",
        ],
        body: ByteBuffer(string: DashboardPage.html)
    )
}
