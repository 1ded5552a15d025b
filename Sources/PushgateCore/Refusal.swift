/// Why a request was refused: an HTTP status, a stable `reason` word (APNs' own where one
/// exists, e.g. `BadDeviceToken`), and a `detail` that tells a person what exactly to fix.
public struct Refusal: Error, Sendable, Equatable, CustomStringConvertible {
    /// HTTP status (400, 401, 403, 404, 405, 410, 413, 429, 500, 503).
    public var status: Int
    public var reason: String
    /// What exactly was wrong, e.g. "apns-priority must be 1, 5 or 10, got \"7\"".
    public var detail: String
    /// Milliseconds since the epoch; only on 410 `Unregistered` (when the token was unregistered).
    public var timestamp: Int64?
    /// The gateway's own limit was reached, not a fault in the request: a provider is not
    /// counted as misbehaving for it (see `deviceQueueFull`).
    public private(set) var isGatewayLimit = false

    public init(status: Int, reason: String, detail: String, timestamp: Int64? = nil) {
        self.status = status
        self.reason = reason
        self.detail = detail
        self.timestamp = timestamp
    }

    public var description: String { "\(status) \(reason): \(detail)" }

    /// 429 as APNs answers too many pushes for one device: here, `waiting` notifications are
    /// already queued or held for it.
    public static func deviceQueueFull(waiting: Int) -> Refusal {
        var refusal = Refusal(
            status: 429,
            reason: "TooManyRequests",
            detail: "\(waiting) notifications are already waiting for this device; retry later"
        )
        refusal.isGatewayLimit = true
        return refusal
    }

    /// The same answer for a wrong secret and an unknown device: it never tells whether a device
    /// id exists.
    public static let unauthorized = Refusal(
        status: 401,
        reason: "Unauthorized",
        detail: "missing or wrong device secret: send authorization: bearer <secret> as returned by POST /v1/devices"
    )
}
