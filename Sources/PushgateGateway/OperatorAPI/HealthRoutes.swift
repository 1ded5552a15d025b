import NIOCore
import PushgateHTTP
import PushgateOperator
import PushgateStore
import PushgateTransport
import Synchronization

/// Whether the gateway should receive traffic: set once everything is up, cleared when draining.
public final class Readiness: Sendable {
    private let ready = Atomic<Bool>(false)
    private let draining = Atomic<Bool>(false)
    private let store: StoreHealth?
    private let cluster: (any ClusterView)?

    /// `store`: the store's health, when a store that cannot commit should take the gateway out
    /// of rotation (every change it is sent would be refused). `cluster`: the cluster this
    /// gateway is a node of, whose membership it needs to serve its devices.
    public init(store: StoreHealth? = nil, cluster: (any ClusterView)? = nil) {
        self.store = store
        self.cluster = cluster
    }

    /// The store cannot commit now (disk full, I/O error); ready again after a commit succeeds.
    public var storeCannotCommit: Bool { store.map { !$0.canCommit } ?? false }

    /// This node is not a member of its cluster now (joining, or its lease lapsed: the database
    /// out of reach); ready again once it has joined.
    public var notAClusterMember: Bool { cluster.map { $0.memberLease == nil } ?? false }

    public var isReady: Bool { ready.load(ordering: .relaxed) }

    /// A graceful shutdown has begun (requests get `503 Shutdown`).
    public var isDraining: Bool { draining.load(ordering: .relaxed) }

    public func set(_ value: Bool) { ready.store(value, ordering: .relaxed) }

    public func beginDraining() {
        draining.store(true, ordering: .relaxed)
        ready.store(false, ordering: .relaxed)
    }
}

/// `GET /healthz` (the process answers) and `GET /readyz` (it should be sent traffic).
public enum HealthRoutes {
    // Built once: probes hit these constantly, and the buffers are shared copy-on-write.
    private static let healthy = HTTPServerResponse(status: 200, text: "ok\n")
    private static let ready = HTTPServerResponse(status: 200, text: "ready\n")
    private static let notReady = HTTPServerResponse(status: 503, text: "not ready (starting or draining)\n")
    // No cause from the store here: /readyz is open to anyone, and the log has it.
    private static let storeFailing = HTTPServerResponse(status: 503, text: "not ready: store cannot commit\n")
    private static let notAMember = HTTPServerResponse(
        status: 503,
        text: "not ready: not a member of its cluster (joining, or its lease lapsed)\n"
    )

    public static func register(on router: inout Router, readiness: Readiness) {
        router.add("GET", "/healthz", protocols: .http1AndHTTP2, role: .operator, answersHEAD: true) { _, responder in
            responder.respond(healthy)
        }
        router.add("GET", "/readyz", protocols: .http1AndHTTP2, role: .operator, answersHEAD: true) { _, responder in
            responder.respond(
                !readiness.isReady
                    ? notReady
                    : readiness.storeCannotCommit ? storeFailing : readiness.notAClusterMember ? notAMember : ready
            )
        }
    }
}
