import PushgateModel
import PushgateStore

/// What a request whose change the store could not take or commit is answered: the one
/// `503 ServiceUnavailable` for every route (nothing was kept, so retrying is right), with
/// `retry-after` when the cause should pass by itself.
extension Refusal {
    /// Seconds a client is asked to wait when the storage cannot commit (disk full, I/O error,
    /// PostgreSQL unreachable or restarting): long enough not to hammer a broken disk or a
    /// database coming back with retries, short enough that space freed by an operator, or a
    /// restarted database, is used again soon. The first commit (or probe) that succeeds makes
    /// the store healthy again.
    static let storeUnavailableRetryAfterSeconds = 5
    /// When the writer has too much waiting: it catches up within a second at any rate it can
    /// sustain. Also when another gateway node took the device over: the retry finds its owner.
    static let storeOverloadedRetryAfterSeconds = 1

    static func storeFailed(_ error: StoreError) -> Refusal {
        Refusal(
            .serviceUnavailable,
            "could not persist the change: \(error); retry",
            retryAfterSeconds: retryAfter(error)
        )
    }

    /// A push's own words, as a provider has always been told them.
    static func notificationNotStored(_ error: StoreError) -> Refusal {
        Refusal(
            .serviceUnavailable,
            "the notification could not be stored: \(error); retry",
            retryAfterSeconds: retryAfter(error)
        )
    }

    private static func retryAfter(_ error: StoreError) -> Int? {
        switch error.kind {
        case .unavailable: storeUnavailableRetryAfterSeconds
        case .overloaded, .fenced: storeOverloadedRetryAfterSeconds
        case .database, .closed: nil
        }
    }
}
