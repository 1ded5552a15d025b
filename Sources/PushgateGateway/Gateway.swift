import Logging
import NIOCore
import PushgateDelivery
import PushgateDeviceAPI
import PushgateProviderAPI
import PushgateRouting
import PushgateTransport

/// Assembles the gateway's routes. Each API registers its own routes here.
public enum Gateway {
    public static func makeRouter(
        readiness: Readiness,
        core: DeliveryCore,
        validator: ProviderRequestValidator = ProviderRequestValidator()
    ) -> Router {
        var router = Router()
        HealthRoutes.register(on: &router, readiness: readiness)
        ProviderRoute.register(on: &router, core: core, validator: validator)
        DeviceRoutes.register(on: &router, core: core)
        return router
    }
}
