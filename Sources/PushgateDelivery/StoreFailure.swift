import PushgateModel
import PushgateStore

/// What a request whose change the store could not take or commit is answered: the one
/// `503 ServiceUnavailable` for every route (nothing was kept, so retrying is right).
extension Refusal {
    static func storeFailed(_ error: StoreError) -> Refusal {
        Refusal(.serviceUnavailable, "could not persist the change: \(error); retry")
    }

    /// A push's own words, as a provider has always been told them.
    static func notificationNotStored(_ error: StoreError) -> Refusal {
        Refusal(.serviceUnavailable, "the notification could not be stored: \(error); retry")
    }
}
