/// Why a request was refused: a reason from the catalog (``Refusal/Reason``, in `Reasons.swift`: APNs' own words
/// where one exists, e.g. `BadDeviceToken`, with its HTTP status) and a `detail` that tells a
/// person what exactly to fix. Every route renders one the same way (PushgateHTTP's
/// `HTTPServerResponse.refusal`).
public struct Refusal: Error, Sendable, Equatable, CustomStringConvertible {
    public var reason: Reason
    /// What exactly was wrong, e.g. "apns-priority must be 1, 5 or 10, got \"7\"".
    public var detail: String
    /// Milliseconds since the epoch; only on 410 `Unregistered` (when the token was unregistered).
    public var timestamp: Int64?

    public init(_ reason: Reason, _ detail: String, timestamp: Int64? = nil) {
        self.reason = reason
        self.detail = detail
        self.timestamp = timestamp
    }

    public var status: Int { reason.status }

    public var description: String { "\(status) \(reason): \(detail)" }
}
