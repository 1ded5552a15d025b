/// The metadata keys of log lines about one push or one device, the same in every module, so
/// that a log collector finds every line about a push by its `apns-id` and every line about a
/// device by its `device` id (never a secret, a token or a payload).
public enum LogMetadataKey {
    /// The push's apns-id, as its provider sent it or as the gateway generated it.
    public static let apnsID = "apns-id"
    /// The device's id.
    public static let device = "device"
}
