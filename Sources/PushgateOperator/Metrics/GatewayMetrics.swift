import CoreMetrics
import NIOConcurrencyHelpers
import Prometheus
import PushgateCluster
import PushgateDelivery
import PushgateModel
import PushgateStore
import PushgateTransport

// CoreMetrics has types of these names too.
private typealias Gauge = Prometheus.Gauge
private typealias Counter = Prometheus.Counter

/// Every metric the gateway exports (PRODUCT.md section 6), created once in a registry of its
/// own, with bounded labels only. Counters follow the totals delivery and the provider API keep
/// (`FollowingCounters`); gauges are set from the shards' state at each scrape; histograms are
/// recorded as events happen, through the swift-metrics handles `delivery` and `store` hand down.
public final class GatewayMetrics: Sendable {
    /// Handles for the delivery core's timings.
    public let delivery: DeliveryMetrics
    /// Handles for the store's commits.
    public let store: StoreMetrics

    private let registry = PrometheusCollectorRegistry()
    private let counters = FollowingCounters()
    private let gauges: Gauges
    private let scrape = NIOLock()
    private let reloads: (success: Counter, failure: Counter)

    private struct Gauges: Sendable {
        let held: Gauge
        let stored: Gauge
        let unacked: Gauge
        let connected: Gauge
        let oldestHeldAge: Gauge
        let oldestDeferredAge: Gauge
        let refillScaled: Gauge
        let storeHealthy: Gauge
        let queuedBytes: Gauge
        let requestBodyBytes: Gauge
        let connections: [(ConnectionRole, Gauge)]
        let streams: Gauge
        let residentBytes: Gauge
        let virtualBytes: Gauge
        let openFileDescriptors: Gauge
        let maxFileDescriptors: Gauge
        let startTime: Gauge
    }

    /// Listeners whose connections and setup failures are exported (`watch`).
    private let servers = NIOLockedValueBox<[HTTPServer]>([])
    /// The store whose health is exported (`watch`).
    private let storeHealth = NIOLockedValueBox<StoreHealth?>(nil)
    /// The store's database connection, when it has one (`watch(database:)`).
    private let databaseStatus = NIOLockedValueBox<DatabaseConnectionStatus?>(nil)
    /// Its gauges, made by the first scrape after `watch(database:)`.
    private let databaseGauges = NIOLockedValueBox<(connected: Gauge, connections: Gauge)?>(nil)
    /// The request body budget whose bytes and refusals are exported (`watch`).
    private let bodyBudget = NIOLockedValueBox<RequestBodyBudget?>(nil)
    /// What waiting notifications take (`watch`).
    private let queuedBudget = NIOLockedValueBox<QueuedNotificationBudget?>(nil)
    /// Device creations refused by the per-address limit (`watchDeviceCreationRefusals`).
    private let creationRefusals = NIOLockedValueBox<(@Sendable () -> Int)?>(nil)
    /// The cluster this gateway is a node of (`watch(cluster:)`).
    private let clusterView = NIOLockedValueBox<(any ClusterView)?>(nil)
    /// Its gauges, made by the first scrape once the node has a name.
    private let clusterGauges = NIOLockedValueBox<(member: Gauge, devices: Gauge, nodes: Gauge)?>(nil)
    /// Per-topic gauges (`--metrics-topic-labels`), by topic; only the topics of the last scrape.
    private let topicGauges = NIOLockedValueBox<[String: TopicGauges]>([:])

    private struct TopicGauges {
        let registrations: Gauge
        let held: Gauge
        let stored: Gauge
        let unacked: Gauge
    }

    public init(version: String) {
        let registry = self.registry
        func name(_ name: String, _ help: String) -> MetricNameDescriptor {
            MetricNameDescriptor(metricName: name, unitName: "", helpText: help)
        }
        func gauge(_ metric: String, _ help: String, _ labels: [(String, String)] = []) -> Gauge {
            registry.makeGauge(descriptor: name(metric, help), labels: labels)
        }
        let following = counters
        /// A counter without labels that follows a total kept elsewhere.
        func counter(_ metric: String, _ help: String, following total: @escaping @Sendable () -> Double) {
            following.follow(registry.makeCounter(descriptor: name(metric, help), labels: []), total)
        }
        let servers = self.servers
        counter(
            "pushgate_connection_setup_failures_total",
            "Connections closed because they could not be set up, and accepts that failed; the first of each cause is logged."
        ) { Double(servers.withLockedValue { $0.reduce(0) { $0 + $1.connectionSetupFailures } }) }
        let refused = name(
            "pushgate_connections_refused_total",
            "Connections closed as soon as they were accepted, by reason: server_full (maxConnections open), address_full (maxConnectionsPerAddress open from the client's address); the first of each is logged."
        )
        for reason in ConnectionRefusal.allCases {
            following.follow(registry.makeCounter(descriptor: refused, labels: [("reason", reason.rawValue)])) {
                Double(servers.withLockedValue { $0.reduce(0) { $0 + $1.refusedConnections(reason) } })
            }
        }
        counter(
            "pushgate_http2_flood_closures_total",
            "HTTP/2 connections closed for flooding: frames that do nothing (empty DATA frames not ending their stream, streams refused for a protocol error) past http2FloodBurst and http2FloodFramesPerSecond, 1,000 unread PING or SETTINGS acks, 8 CONTINUATION frames, or streams reset faster than nghttp2's rapid-reset limit."
        ) { Double(servers.withLockedValue { $0.reduce(0) { $0 + $1.statistics.floodClosures } }) }
        let timeouts = name(
            "pushgate_timeouts_total",
            "Connections closed, and HTTP/2 requests reset, because a limit on time ran out, by timeout: connection_setup (connectionSetupTimeout: TLS or the first bytes, a stalled handshake), idle (idleTimeout, or unauthenticatedIdleTimeout before a connection has proven itself; over HTTP/1.1 also a request head trickled in), request (requestTimeout: a request's head and body not arrived, slowloris), stalled_reader (a peer that read nothing while answers waited)."
        )
        for timeout in ServerTimeout.allCases {
            following.follow(registry.makeCounter(descriptor: timeouts, labels: [("timeout", timeout.name)])) {
                Double(servers.withLockedValue { $0.reduce(0) { $0 + $1.statistics.timedOut(timeout) } })
            }
        }
        let reloads = name(
            "pushgate_config_reloads_total",
            "Configuration reloads (SIGHUP, POST /v1/admin/reload), by result; a failed one changed nothing."
        )
        self.reloads = (
            registry.makeCounter(descriptor: reloads, labels: [("result", "success")]),
            registry.makeCounter(descriptor: reloads, labels: [("result", "failure")])
        )
        let storeHealth = self.storeHealth
        counter(
            "pushgate_store_commit_failures_total",
            "Store transactions the storage could not take (disk full, I/O error, PostgreSQL unreachable or refusing); the requests in them were refused with 503 ServiceUnavailable."
        ) { Double(storeHealth.withLockedValue { $0?.failedTransactions ?? 0 }) }
        let bodyBudget = self.bodyBudget
        counter(
            "pushgate_request_body_budget_refusals_total",
            "Request bodies refused because the bodies held across all connections filled requestBodyBudgetBytes (HTTP/2: RST_STREAM REFUSED_STREAM, HTTP/1.1: 503)."
        ) { Double(bodyBudget.withLockedValue { $0?.refusedBodies ?? 0 }) }
        let creationRefusals = self.creationRefusals
        counter(
            "pushgate_device_creations_refused_total",
            "POST /v1/devices refused with 429 because the client's address had created deviceCreationsPerAddressPerHour devices within the hour."
        ) { Double(creationRefusals.withLockedValue { $0?() ?? 0 }) }
        counter("process_cpu_seconds_total", "User and system CPU time of the process, in seconds.") {
            ProcessStatistics.read()?.cpuSeconds ?? 0
        }

        gauges = Gauges(
            held: gauge("pushgate_held_notifications", "Notifications the scheduler holds now."),
            stored: gauge(
                "pushgate_stored_notifications",
                "Notifications queued for a device and not yet written to it (offline, or behind its unacked window)."
            ),
            unacked: gauge(
                "pushgate_unacked_notifications",
                "Notifications written to a device and not yet acknowledged."
            ),
            connected: gauge("pushgate_connected_devices", "Devices with an open event stream."),
            oldestHeldAge: gauge(
                "pushgate_held_oldest_age_seconds",
                "Age of the oldest held notification, in seconds; 0 when none is held."
            ),
            oldestDeferredAge: gauge(
                "pushgate_deferred_oldest_age_seconds",
                "Age of the oldest held regular (not silent) priority-5 notification, in seconds (released after at most its maximum deferral); 0 when none is held."
            ),
            refillScaled: gauge(
                "pushgate_silent_refill_scaled",
                "Registrations whose silent refill is below the configured one now, because of their fetch results or a timeout's penalty."
            ),
            storeHealthy: gauge(
                "pushgate_store_healthy",
                "1 while the store commits, 0 from a commit the storage refused (disk full, I/O error, PostgreSQL unreachable or refusing) until one succeeds (or, with PostgreSQL, a probe of the idle connection finds it would); /readyz answers 503 meanwhile."
            ),
            queuedBytes: gauge(
                "pushgate_queued_notification_bytes",
                "Memory notifications waiting for their devices take now (payload plus overhead each), all devices together; at queuedNotificationBudgetBytes pushes are refused with 429."
            ),
            requestBodyBytes: gauge(
                "pushgate_request_body_bytes",
                "Request body bytes held now, all connections together, until their requests end; at most requestBodyBudgetBytes."
            ),
            connections: ConnectionRole.allCases.map { role in
                (
                    role,
                    gauge(
                        "pushgate_http2_connections",
                        "Open HTTP/2 connections, by what their first request was for.",
                        [("role", role.name)]
                    )
                )
            },
            streams: gauge("pushgate_http2_streams", "Open HTTP/2 streams."),
            residentBytes: gauge("process_resident_memory_bytes", "Resident memory of the process, in bytes."),
            virtualBytes: gauge("process_virtual_memory_bytes", "Virtual memory of the process, in bytes."),
            openFileDescriptors: gauge("process_open_fds", "Open file descriptors."),
            maxFileDescriptors: gauge("process_max_fds", "The limit of open file descriptors."),
            startTime: gauge("process_start_time_seconds", "When the process started, in seconds since the epoch.")
        )
        gauge("pushgate_build_info", "The running version; always 1.", [("version", version)]).set(Int64(1))

        // Histograms. Bucket edges in seconds, chosen around what each measures.
        func timer(_ metric: String, _ help: String, _ edges: [Double]) -> Timer {
            let histogram = registry.makeDurationHistogram(
                descriptor: name(metric, help),
                buckets: edges.map { Duration.nanoseconds(Int64($0 * 1_000_000_000)) }
            )
            return Timer(label: metric, dimensions: [], handler: histogram)
        }
        delivery = DeliveryMetrics(
            deliveryLatency: timer(
                "pushgate_delivery_latency_seconds",
                "From a push's acceptance to its first write to the device.",
                [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 60, 600, 3600]
            ),
            holdDuration: timer(
                "pushgate_hold_duration_seconds",
                "From a held push's acceptance to its release.",
                [1, 10, 60, 300, 900, 1800, 3600, 10800, 21600, 43200, 86400, 604800]
            )
        )
        let commitPushes = registry.makeValueHistogram(
            descriptor: name("pushgate_store_commit_pushes", "Pushes carried by one fsync'd commit."),
            buckets: [0, 1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 4096]
        )
        let commitBatches = registry.makeValueHistogram(
            descriptor: name(
                "pushgate_store_commit_batches",
                "Requests (pushes, acks, registrations...) sharing one commit; the commit pacer makes them share at moderate load."
            ),
            buckets: [1, 2, 4, 8, 16, 32, 64, 128, 256, 1024, 4096]
        )
        store = StoreMetrics(
            commitDuration: timer(
                "pushgate_store_commit_duration_seconds",
                "Duration of one store transaction, from its start to its durable commit.",
                [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5]
            ),
            commitPushes: Recorder(
                label: "pushgate_store_commit_pushes",
                dimensions: [],
                aggregate: true,
                handler: commitPushes
            ),
            commitBatches: Recorder(
                label: "pushgate_store_commit_batches",
                dimensions: [],
                aggregate: true,
                handler: commitBatches
            ),
            lostBatches: CoreMetrics.Counter(
                label: "pushgate_store_lost_batches_total",
                dimensions: [],
                handler: registry.makeCounter(
                    descriptor: name(
                        "pushgate_store_lost_batches_total",
                        "With --durability interval: batches (pushes, acks...) answered 200 that never reached the disk."
                    )
                )
            )
        )
    }

    /// Exports the totals `delivery` and `provider` keep, as counters. Call once.
    public func follow(delivery deliveryCounters: DeliveryCounters, provider: ProviderCounters) {
        let registry = self.registry
        let following = counters
        func name(_ name: String, _ help: String) -> MetricNameDescriptor {
            MetricNameDescriptor(metricName: name, unitName: "", helpText: help)
        }
        // One series per label value, all present from the start at 0.
        func follow<Label>(
            _ metric: String,
            _ help: String,
            _ label: String,
            _ family: CounterFamily<Label>,
            _ value: (Label) -> String
        ) {
            for case let item in Label.allCases {
                let counter = registry.makeCounter(descriptor: name(metric, help), labels: [(label, value(item))])
                following.follow(counter) { Double(family[item]) }
            }
        }
        follow(
            "pushgate_notifications_received_total",
            "Pushes that passed validation, by push type.",
            "push_type",
            provider.received
        ) { $0.rawValue }
        follow(
            "pushgate_notifications_rejected_total",
            "Provider requests refused, by APNs-style reason.",
            "reason",
            provider.rejected
        ) { $0.name }
        follow(
            "pushgate_notifications_delivered_total",
            "Notifications written to a device, by how they came; each counts once, at its first write.",
            "delivery",
            deliveryCounters.deliveries
        ) { $0.rawValue }
        follow(
            "pushgate_notifications_dropped_total",
            "Kept notifications dropped undelivered, by reason.",
            "reason",
            deliveryCounters.drops
        ) { $0.rawValue }
        follow(
            "pushgate_silent_budget_exhausted_total",
            "Silent pushes held because a budget had no token when they came, by the empty bucket (app or device); one queued behind older held pushes of its app is not counted.",
            "scope",
            deliveryCounters.budgetExhausted
        ) { $0.rawValue }
        follow(
            "pushgate_piggybacked_total",
            "Held pushes released by a wake event without taking budget, by what woke the device.",
            "carrier",
            deliveryCounters.piggybacked
        ) { $0.rawValue }
        let redelivered = registry.makeCounter(
            descriptor: name(
                "pushgate_notifications_redelivered_total",
                "Notifications written again on a new stream because an earlier write was not acknowledged (delivered counts the first write only)."
            ),
            labels: []
        )
        following.follow(redelivered) { Double(deliveryCounters.redelivered) }
        follow(
            "pushgate_fetch_results_total",
            "Background fetch results of apps woken by silent pushes, as agents report them; timeout is a window that ended with no report.",
            "result",
            deliveryCounters.fetchResults
        ) { $0.rawValue }
        let windowOverflow = registry.makeCounter(
            descriptor: name(
                "pushgate_fetch_windows_overflow_total",
                "Silent pushes delivered to a device that already had 256 fetch windows open: no window was opened, so no result counts for them."
            ),
            labels: []
        )
        following.follow(windowOverflow) { Double(deliveryCounters.fetchWindowOverflow) }
    }

    /// Counts one configuration reload.
    public func countReload(succeeded: Bool) {
        (succeeded ? reloads.success : reloads.failure).increment()
    }

    /// Exports `server`'s HTTP/2 connections, streams and setup failures too.
    public func watch(_ server: HTTPServer) {
        servers.withLockedValue { $0.append(server) }
    }

    /// Exports the request body bytes `budget` holds and the bodies it refused.
    public func watch(_ budget: RequestBodyBudget) {
        bodyBudget.withLockedValue { $0 = budget }
    }

    /// Exports the memory waiting notifications take.
    public func watch(_ budget: QueuedNotificationBudget) {
        queuedBudget.withLockedValue { $0 = budget }
    }

    /// Exports the device creations the per-address limit refused, as `total` counts them.
    public func watchDeviceCreationRefusals(_ total: @escaping @Sendable () -> Int) {
        creationRefusals.withLockedValue { $0 = total }
    }

    /// Exports whether the store can commit, and its failed commits.
    public func watch(_ store: StoreHealth) {
        storeHealth.withLockedValue { $0 = store }
    }

    /// Exports the state of the store's database connection (PostgreSQL) and its errors by
    /// kind. Call once, for a store that has a connection.
    public func watch(database status: DatabaseConnectionStatus) {
        let registry = self.registry
        let following = counters
        func name(_ name: String, _ help: String) -> MetricNameDescriptor {
            MetricNameDescriptor(metricName: name, unitName: "", helpText: help)
        }
        let errors = name(
            "pushgate_store_database_errors_total",
            "Errors of the store's PostgreSQL connection, by kind: connect (a connection could not be made), connection_lost (a working one broke), timeout (no answer within databaseStatementTimeoutMs), transaction (the server refused a transaction: no space, shutting down, read-only), batch (a batch refused for its content, that batch only), commit_unknown (the connection broke while a commit was on its way; its outcome was looked up)."
        )
        for kind in DatabaseConnectionStatus.ErrorKind.allCases {
            following.follow(registry.makeCounter(descriptor: errors, labels: [("kind", kind.rawValue)])) {
                Double(status.errors[kind])
            }
        }
        databaseStatus.withLockedValue { $0 = status }
    }

    /// Exports this node's membership of its cluster, the devices it holds, the live nodes, and
    /// its cluster work, each labelled with the node's name (`node`), so that a cluster's series
    /// sum and compare across nodes whatever the scrape's own labels.
    public func watch(cluster: any ClusterView) {
        clusterView.withLockedValue { $0 = cluster }
    }

    /// The exposition, with the gauges set from `statistics` (read from the shards just before)
    /// and every counter brought up to its total; per-topic gauges for `topics` when given. One
    /// scrape at a time.
    public func exposition(
        statistics: DeliveryStatistics,
        topics: [DeliveryOverview.Topic]? = nil,
        now: Int64
    ) -> [UInt8] {
        scrape.withLock {
            if let topics { setTopicGauges(topics) }
            if let cluster = clusterView.withLockedValue({ $0 }) { setClusterMetrics(cluster) }
            counters.sync()
            gauges.held.set(Int64(statistics.held))
            gauges.stored.set(Int64(statistics.stored))
            gauges.unacked.set(Int64(statistics.unacked))
            gauges.connected.set(Int64(statistics.connectedDevices))
            let oldest = statistics.oldestHeldAcceptedAt.map { Double(max(0, now - $0)) / 1000 } ?? 0
            gauges.oldestHeldAge.set(oldest)
            gauges.oldestDeferredAge.set(
                statistics.oldestDeferredAcceptedAt.map { Double(max(0, now - $0)) / 1000 } ?? 0
            )
            gauges.refillScaled.set(Int64(statistics.refillScaled))
            gauges.storeHealthy.set(Int64(storeHealth.withLockedValue { $0?.canCommit ?? true } ? 1 : 0))
            if let database = databaseStatus.withLockedValue({ $0 }) { setDatabaseGauges(database) }
            gauges.requestBodyBytes.set(Int64(bodyBudget.withLockedValue { $0?.heldBytes ?? 0 }))
            gauges.queuedBytes.set(Int64(queuedBudget.withLockedValue { $0?.bytes ?? 0 }))
            let servers = servers.withLockedValue { $0 }
            for (role, gauge) in gauges.connections {
                gauge.set(Int64(servers.reduce(0) { $0 + $1.statistics.connections(role) }))
            }
            gauges.streams.set(Int64(servers.reduce(0) { $0 + $1.statistics.openStreams }))
            if let process = ProcessStatistics.read() {
                gauges.residentBytes.set(process.residentBytes)
                gauges.virtualBytes.set(process.virtualBytes)
                gauges.openFileDescriptors.set(process.openFileDescriptors)
                gauges.maxFileDescriptors.set(process.maxFileDescriptors)
                gauges.startTime.set(process.startTime)
            }
            return registry.emitToBuffer()
        }
    }

    private func setDatabaseGauges(_ status: DatabaseConnectionStatus) {
        let registry = self.registry
        let gauges = databaseGauges.withLockedValue { gauges in
            if let gauges { return gauges }
            func gauge(_ metric: String, _ help: String) -> Gauge {
                registry.makeGauge(
                    descriptor: MetricNameDescriptor(metricName: metric, unitName: "", helpText: help),
                    labels: []
                )
            }
            let made = (
                connected: gauge(
                    "pushgate_store_database_connected",
                    "1 while the store holds a working PostgreSQL connection (as far as its last statement or probe knew), 0 while it is reconnecting."
                ),
                connections: gauge(
                    "pushgate_store_database_connections",
                    "PostgreSQL connections the store holds: 1 (its writer's), 0 while reconnecting, briefly 2 while a lost commit's outcome is looked up."
                )
            )
            gauges = made
            return made
        }
        gauges.connected.set(Int64(status.isConnected ? 1 : 0))
        gauges.connections.set(Int64(status.connections))
    }

    private func setClusterMetrics(_ cluster: any ClusterView) {
        let node = cluster.nodeName
        // Named once the listeners are bound: scrapes before that export no cluster series.
        guard !node.isEmpty else { return }
        let (registry, following) = (self.registry, counters)
        let gauges = clusterGauges.withLockedValue { gauges in
            if let gauges { return gauges }
            func name(_ name: String, _ help: String) -> MetricNameDescriptor {
                MetricNameDescriptor(metricName: name, unitName: "", helpText: help)
            }
            let labels = [("node", node)]
            func counter(
                _ metric: String,
                _ help: String,
                _ extra: [(String, String)],
                _ read: @escaping @Sendable (ClusterActivity) -> Int
            ) {
                following.follow(registry.makeCounter(descriptor: name(metric, help), labels: labels + extra)) {
                    Double(read(cluster.activity))
                }
            }
            let forwarded = "pushgate_cluster_forwarded_total"
            let forwardedHelp =
                "Requests this node took for a device another node holds and handed to that node, by request: push (APNs or Web Push), device (the device API's requests other than the event stream)."
            counter(forwarded, forwardedHelp, [("request", "push")]) { $0.forwardedPushes }
            counter(forwarded, forwardedHelp, [("request", "device")]) { $0.forwardedDeviceRequests }
            let claims = "pushgate_cluster_claims_total"
            let claimsHelp =
                "Devices this node claimed, by reason: stream (the device's event stream opened here, taking it from any node), takeover (this node had to act for a device no live node held)."
            counter(claims, claimsHelp, [("reason", "stream")]) { $0.streamClaims }
            counter(claims, claimsHelp, [("reason", "takeover")]) { $0.takeovers }
            counter(
                "pushgate_cluster_lease_losses_total",
                "Times this node's lease lapsed (no renewal reached the database in time) or was refused, and it let every device go; it joins again at once.",
                []
            ) { $0.leaseLosses }
            let made = (
                member: registry.makeGauge(
                    descriptor: name(
                        "pushgate_cluster_member",
                        "1 while this node is a member of its cluster (its lease alive: it serves its devices), 0 while it joins or after its lease lapsed."
                    ),
                    labels: labels
                ),
                devices: registry.makeGauge(
                    descriptor: name("pushgate_cluster_devices_held", "Devices this node holds (serves) now."),
                    labels: labels
                ),
                nodes: registry.makeGauge(
                    descriptor: name(
                        "pushgate_cluster_nodes",
                        "Live nodes of the cluster, this one included, as this node last counted them (every 2 s)."
                    ),
                    labels: labels
                )
            )
            gauges = made
            return made
        }
        gauges.member.set(Int64(cluster.memberLease == nil ? 0 : 1))
        gauges.devices.set(Int64(cluster.devicesHeld))
        gauges.nodes.set(Int64(cluster.liveNodeCount))
    }

    /// Series for these topics only: a topic that left the list leaves the exposition.
    private func setTopicGauges(_ topics: [DeliveryOverview.Topic]) {
        let registry = self.registry
        topicGauges.withLockedValue { gauges in
            let listed = Set(topics.map(\.topic))
            for (topic, old) in gauges where !listed.contains(topic) {
                for gauge in [old.registrations, old.held, old.stored, old.unacked] { registry.unregisterGauge(gauge) }
                gauges[topic] = nil
            }
            for topic in topics {
                let series =
                    gauges[topic.topic]
                    ?? {
                        func gauge(_ name: String, _ help: String, _ state: String?) -> Gauge {
                            var labels = [("topic", topic.topic)]
                            if let state { labels.append(("state", state)) }
                            return registry.makeGauge(
                                descriptor: MetricNameDescriptor(metricName: name, unitName: "", helpText: help),
                                labels: labels
                            )
                        }
                        let help =
                            "Notifications of a topic now, by state (held, stored, unacked); the topics with the most held, at most 100."
                        return TopicGauges(
                            registrations: gauge(
                                "pushgate_topic_registrations",
                                "Active registrations of a topic.",
                                nil
                            ),
                            held: gauge("pushgate_topic_notifications", help, "held"),
                            stored: gauge("pushgate_topic_notifications", help, "stored"),
                            unacked: gauge("pushgate_topic_notifications", help, "unacked")
                        )
                    }()
                series.registrations.set(Int64(topic.registrations))
                series.held.set(Int64(topic.held))
                series.stored.set(Int64(topic.stored))
                series.unacked.set(Int64(topic.unacked))
                gauges[topic.topic] = series
            }
        }
    }
}
