import Logging
import NIOCore
import PushgateDelivery
import PushgateDeviceAPI
import PushgateProviderAPI
import PushgateProviderAuth
import PushgateHTTP
import PushgateTransport

/// Assembles the gateway's routes. Each API registers its own routes here.
public enum Gateway {
    public static func makeRouter(
        readiness: Readiness,
        core: DeliveryCore,
        access: AccessConfiguration = AccessConfiguration(),
        validator: ProviderRequestValidator = ProviderRequestValidator(),
        clock: any DeliveryClock = SystemClock()
    ) -> Router {
        var router = Router()
        HealthRoutes.register(on: &router, readiness: readiness)
        let gate = ProviderGate(
            authenticator: access.providers,
            isDraining: { readiness.isDraining },
            maxConsecutiveErrors: access.maxConsecutiveProviderErrors,
            nowMillis: { clock.nowMillis() }
        )
        ProviderRoute.register(on: &router, core: core, validator: validator, gate: gate)
        DeviceRoutes.register(on: &router, core: core, registrationSecret: access.registrationSecret)
        return router
    }
}
