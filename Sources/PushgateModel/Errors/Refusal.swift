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
    /// Seconds to wait before trying again (a `retry-after` header); only on a 503 whose cause
    /// is expected to pass (the store overloaded, or unable to commit for now), and on a 429
    /// that knows when the limit lets the next request through (device creation).
    public var retryAfterSeconds: Int?
    /// The methods the path takes (an `allow` header, which RFC 9110 requires on a 405); only on
    /// 405 `MethodNotAllowed`.
    public var allowedMethods: [String]?

    public init(
        _ reason: Reason,
        _ detail: String,
        timestamp: Int64? = nil,
        retryAfterSeconds: Int? = nil,
        allowedMethods: [String]? = nil
    ) {
        self.reason = reason
        self.detail = detail
        self.timestamp = timestamp
        self.retryAfterSeconds = retryAfterSeconds
        self.allowedMethods = allowedMethods
    }

    public var status: Int { reason.status }

    public var description: String { "\(status) \(reason): \(detail)" }
}
