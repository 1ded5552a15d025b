import Logging
import NIOCore
import PushgateRouting
import PushgateTransport

/// Assembles the gateway's routes. Each API registers its own routes here.
public enum Gateway {
    public static func makeRouter(readiness: Readiness) -> Router {
        var router = Router()
        HealthRoutes.register(on: &router, readiness: readiness)
        // Provider (APNs) and device APIs are HTTP/2 only.
        router.reserveHTTP2Only(prefix: "/3/")
        router.reserveHTTP2Only(prefix: "/v1/devices")
        return router
    }
}
