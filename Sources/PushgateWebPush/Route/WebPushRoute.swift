import Logging
import NIOCore
import NIOHTTP1
import PushgateDelivery
import PushgateHTTP
import PushgateModel
import PushgateTransport

/// `POST <endpoint>`: Web Push's push resource (RFC 8030 section 5), over HTTP/1.1 and HTTP/2 on
/// the same listeners as everything else (pywebpush and the npm `web-push` speak HTTP/1.1 only).
///
/// Validation (`WebPushRequestValidator`) runs on the connection's event loop once the body is
/// in, VAPID's signature included (remembered per connection: senders reuse a token for hours);
/// the subscription's shard then answers in the contract's order and keeps the message. The 201
/// comes once it is on disk, with `Location` (the message's id) and the `TTL` kept. The body is
/// never decrypted: it is forwarded to the device as it came.
public enum WebPushRoute {
    /// `origin`: the endpoints' configured origin (`webpushOrigin`); nil: each request's own.
    public static func register(
        on router: inout Router,
        acceptor: any PushAcceptor,
        validator: WebPushRequestValidator,
        origin configuredOrigin: String?,
        isDraining: @escaping @Sendable () -> Bool,
        nowMillis: @escaping @Sendable () -> Int64,
        counters: ProviderCounters,
        logger: Logger
    ) {
        let origin = configuredOrigin.map(WebPushEndpoint.normalized)
        let admission = RouteAdmission(admits: { head, responder in
            guard isDraining() else { return true }
            refuse(Refusal(.shutdown, "the gateway is shutting down; retry in a moment"), responder, counters, logger)
            return false
        })
        router.addPrefix(
            "POST",
            WebPushEndpoint.pathPrefix,
            protocols: .http1AndHTTP2,
            role: .provider,
            admission: admission
        ) { request, responder in
            guard let token = WebPushRequestValidator.token(inPath: request.path) else {
                refuse(Refusal(.notFound, "no subscription has this endpoint"), responder, counters, logger)
                return
            }
            let connection = request.connection
            let endpointOrigin = origin ?? WebPushEndpoint.origin(of: request) ?? ""
            let verified = connection.attachment(VerifiedVAPIDTokens.self) { VerifiedVAPIDTokens() }
            let submission = validator.validate(
                token: token,
                fields: WebPushHeaderFields(request.headers),
                body: request.body,
                origin: endpointOrigin,
                nowMillis: nowMillis(),
                verify: verified.verify
            )
            acceptor.acceptWebPush(submission).hop(to: connection.eventLoop).whenComplete { result in
                switch result {
                case .success(let accepted):
                    counters.received.add(.webpush)
                    connection.markAuthenticated()
                    var headers = HTTPHeaders()
                    headers.add(name: "location", value: endpointOrigin + "/webpush/messages/" + accepted.messageID)
                    headers.add(name: "ttl", value: String(accepted.ttlSeconds))
                    headers.add(name: "pushgate-disposition", value: accepted.disposition.rawValue)
                    responder.respond(HTTPServerResponse(status: 201, headers: headers))
                case .failure(let error):
                    var refusal = Refusal(error)
                    // Senders such as Mastodon drop a subscription on most 4xx: a full queue
                    // says when to come back.
                    if refusal.reason == .tooManyRequests, refusal.retryAfterSeconds == nil {
                        refusal.retryAfterSeconds = retryAfterSeconds
                    }
                    refuse(refusal, responder, counters, logger)
                }
            }
        }
    }

    /// `retry-after` of a 429: the device's queue waits for its agent's acks or for expiry.
    static let retryAfterSeconds = 30

    private static func refuse(
        _ refusal: Refusal,
        _ responder: HTTPResponder,
        _ counters: ProviderCounters,
        _ logger: Logger
    ) {
        // Not the detail: it may repeat what the request said.
        logger.debug(
            "web push refused",
            metadata: ["push.reason": "\(refusal.reason.name)", "push.status": "\(refusal.status)"]
        )
        counters.rejected.add(refusal.reason)
        responder.respond(.refusal(refusal))
    }
}

/// VAPID authorizations a connection's senders proved valid (taken apart, structure and
/// signature), by the header's text, with their keys and claims: a sender reuses one token for
/// many pushes, and taking it apart and its ES256 verification are most of the cost of checking
/// it. Its claims are checked again on every push (the origin, the clock). Confined to the
/// connection's event loop, like every connection attachment.
final class VerifiedVAPIDTokens {
    private var verified: [String: VerifiedVAPID] = [:]
    /// Kept per connection; a sender rotating more tokens than this on one connection pays a
    /// verification per new one.
    static let capacity = 16

    func verify(_ authorization: String) -> Result<VerifiedVAPID, Refusal> {
        if let known = verified[authorization] { return .success(known) }
        let result = VAPIDCredential.verified(authorization)
        if case .success(let known) = result {
            if verified.count >= Self.capacity { verified.removeAll(keepingCapacity: true) }
            verified[authorization] = known
        }
        return result
    }
}
