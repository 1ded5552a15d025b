import PushgateModel

/// What a request whose change the store could not take or commit, or whose lookup it could not
/// answer, is answered: the one `503 ServiceUnavailable` for every route (nothing was kept, so
/// retrying is right), with `retry-after` when the cause should pass by itself.
extension StoreError: RefusalConvertible {
    /// Seconds a client is asked to wait when the storage cannot commit (disk full, I/O error,
    /// PostgreSQL unreachable or restarting): long enough not to hammer a broken disk or a
    /// database coming back with retries, short enough that space freed by an operator, or a
    /// restarted database, is used again soon. The first commit (or probe) that succeeds makes
    /// the store healthy again.
    public static let unavailableRetryAfterSeconds = 5
    /// When the writer has too much waiting: it catches up within a second at any rate it can
    /// sustain. Also when another gateway node took the device over: the retry finds its owner.
    public static let overloadedRetryAfterSeconds = 1

    public var refusal: Refusal {
        Refusal(
            .serviceUnavailable,
            "could not persist the change: \(self); retry",
            retryAfterSeconds: retryAfterSeconds
        )
    }

    /// A push's own words, as a provider has always been told them.
    public var notificationNotStored: Refusal {
        Refusal(
            .serviceUnavailable,
            "the notification could not be stored: \(self); retry",
            retryAfterSeconds: retryAfterSeconds
        )
    }

    private var retryAfterSeconds: Int? {
        switch kind {
        case .unavailable: Self.unavailableRetryAfterSeconds
        case .overloaded, .fenced: Self.overloadedRetryAfterSeconds
        case .database, .closed: nil
        }
    }
}
