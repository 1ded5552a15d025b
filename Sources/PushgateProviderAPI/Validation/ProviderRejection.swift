/// Why a provider request was refused: an APNs status and reason, and a `detail` for a person.
public struct ProviderRejection: Error, Sendable, Equatable, CustomStringConvertible {
    /// HTTP status (400, 403, 404, 405, 410, 413, 429, 500, 503).
    public var status: Int
    /// APNs' reason string (e.g. `BadDeviceToken`), or Pushgate's own `BadPayload`.
    public var reason: String
    /// What exactly was wrong, e.g. "apns-priority must be 1, 5 or 10, got \"7\"".
    public var detail: String

    public init(status: Int, reason: String, detail: String) {
        self.status = status
        self.reason = reason
        self.detail = detail
    }

    public var description: String { "\(status) \(reason): \(detail)" }
}
