/// Where a Web Push subscription's endpoint lives: `<origin>/webpush/<token>`, on the gateway's
/// own listeners. Its origin is the one configured (`webpushOrigin`, for a gateway behind a
/// proxy), else the one the request came to: the listener's scheme and the request's authority.
/// VAPID's `aud` must be that origin (RFC 8292 section 2).
public enum WebPushEndpoint {
    public static let pathPrefix = "/webpush/"

    /// The endpoint of `token` under `origin`.
    public static func url(origin: String, token: String) -> String { origin + pathPrefix + token }

    /// `scheme://host[:port]` of a request that came over TLS or not, to `authority` (the Host
    /// header or `:authority`); nil without one. Normalized (`normalized(_:)`).
    public static func origin(tls: Bool, authority: String?) -> String? {
        guard let authority, !authority.isEmpty else { return nil }
        return normalized((tls ? "https://" : "http://") + authority)
    }

    /// One spelling of an origin, so that two spellings of the same one compare equal: scheme
    /// and host in lowercase, no default port (443 for https, 80 for http), no trailing slash.
    public static func normalized(_ origin: some StringProtocol) -> String {
        var text = origin.lowercased()
        while text.hasSuffix("/") { text.removeLast() }
        for (scheme, port) in [("https://", ":443"), ("http://", ":80")]
        where text.hasPrefix(scheme) && text.hasSuffix(port) {
            text.removeLast(port.count)
        }
        return text
    }

    /// Why `origin` cannot be a configured endpoint origin, if it cannot: it must be
    /// `http://` or `https://`, a host, an optional port, and nothing after.
    public static func problem(withConfigured origin: String) -> String? {
        let lowered = origin.lowercased()
        guard let scheme = ["https://", "http://"].first(where: { lowered.hasPrefix($0) }) else {
            return "must start with https:// or http://, e.g. https://push.example.com"
        }
        var rest = lowered.dropFirst(scheme.count)
        while rest.hasSuffix("/") { rest = rest.dropLast() }
        guard !rest.isEmpty else { return "has no host" }
        guard !rest.contains(where: { "/?#@ ".contains($0) }) else {
            return "must be an origin (scheme, host and port) with no path, query, user or blanks"
        }
        return nil
    }
}

/// What a registration of a device is: an APNs app (its token takes `POST /3/device/<token>`) or
/// a Web Push subscription (its token ends its endpoint). A device's registrations share one
/// namespace of names (an APNs topic, a subscription's name).
public enum RegistrationKind: String, Sendable, Hashable, CaseIterable {
    case apns
    case webpush
}
