/// Why a request was refused: a reason from the catalog (``Refusal/Reason``: APNs' own words
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

extension Refusal {
    /// A refusal's stable, machine-readable word and the HTTP status that goes with it. The
    /// catalog (`Reasons.swift`) declares each one once; a reason never changes status.
    public struct Reason: Sendable, Hashable, CustomStringConvertible {
        /// The word in the error body's `reason` field.
        public let name: String
        public let status: Int
        /// The gateway's own limit was reached, not a fault in the request: a provider is not
        /// counted as misbehaving for it.
        public let isGatewayLimit: Bool

        init(_ name: String, _ status: Int, isGatewayLimit: Bool = false) {
            self.name = name
            self.status = status
            self.isGatewayLimit = isGatewayLimit
        }

        public var description: String { name }
    }
}
