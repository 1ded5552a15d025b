import CoreMetrics

/// The delivery core's timings, recorded as they happen, through swift-metrics handles that
/// whoever exports them makes once (the operator module, for Prometheus). Counts are not here:
/// `DeliveryCounters` keeps them, readable by the admin API too.
public struct DeliveryMetrics: Sendable {
    /// Acceptance to the first write of a notification to its device (its event stream, or a
    /// keep-alive's response).
    public var deliveryLatency: Timer
    /// Acceptance to the release of a held push.
    public var holdDuration: Timer

    public init(deliveryLatency: Timer, holdDuration: Timer) {
        self.deliveryLatency = deliveryLatency
        self.holdDuration = holdDuration
    }

    /// Records nothing.
    public static let none = DeliveryMetrics(
        deliveryLatency: Timer(label: "delivery_latency", dimensions: [], handler: NOOPMetricsHandler.instance),
        holdDuration: Timer(label: "hold_duration", dimensions: [], handler: NOOPMetricsHandler.instance)
    )
}

extension Timer {
    /// `millis` of the delivery core's clock; a clock that stepped back records zero.
    func record(millis: Int64) {
        recordNanoseconds(max(0, millis) &* 1_000_000)
    }
}
