/// The clock rules for provider tokens (APNs JWTs), in seconds.
public enum ProviderTokenRules {
    /// APNs refuses a token whose `iat` is more than one hour before now (`403 ExpiredProviderToken`).
    public static let lifetime: Int64 = 3600
    /// How far `iat` may lie ahead of Pushgate's clock before the token is refused. APNs documents
    /// no figure; one minute absorbs ordinary NTP drift between provider and gateway.
    public static let allowedFutureSkew: Int64 = 60
    /// APNs: a connection may switch to a new token at most once every 20 minutes
    /// (`429 TooManyProviderTokenUpdates`).
    public static let minimumUpdateInterval: Int64 = 1200
    /// How long ``ProviderTokenSigner`` reuses a token: inside APNs' advice to refresh no more
    /// often than every 20 minutes and no less often than every 60.
    public static let signerReuse: Int64 = 3000
}
