import NIOCore
import PushgateHTTP
import PushgateTransport
import Synchronization

/// Whether the gateway should receive traffic: set once everything is up, cleared when draining.
public final class Readiness: Sendable {
    private let ready = Atomic<Bool>(false)
    private let draining = Atomic<Bool>(false)

    public init() {}

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

    public static func register(on router: inout Router, readiness: Readiness) {
        router.add("GET", "/healthz", protocols: .http1AndHTTP2, role: .operator) { _, responder in
            responder.respond(healthy)
        }
        router.add("GET", "/readyz", protocols: .http1AndHTTP2, role: .operator) { _, responder in
            responder.respond(readiness.isReady ? ready : notReady)
        }
    }
}
