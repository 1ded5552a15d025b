import Logging
import NIOCore
import NIOHTTP1
import PushgateDelivery
import PushgateHTTP
import PushgateModel
import PushgateProviderAuth
import PushgateTransport

/// `POST /3/device/{token}`: APNs' provider endpoint (PRODUCT.md section 2), HTTP/2 only.
///
/// Draining, the method and authentication are decided on the request's head, before its body
/// is read: a client without valid credentials cannot make the gateway hold a byte of body,
/// and a body larger than any push may carry is refused while it arrives. Validation is pure
/// and runs on the connection's event loop once the body is in; the push then goes to its
/// device's shard, and the 200 is sent only once the store has committed it. Every response,
/// error or not, carries `apns-id`, as APNs' does: some client libraries wait for it. A refusal
/// is logged (debug) with its `apns-id`; an accepted push is not (the hot path logs nothing).
public enum ProviderRoute {
    public static func register(
        on router: inout Router,
        acceptor: any PushAcceptor,
        validator: ProviderRequestValidator,
        gate: ProviderGate,
        logger: Logger
    ) {
        let admission = RouteAdmission(
            maxBodySize: ProviderRequestValidator.maxBodyBytes,
            admits: { head, responder in
                let draining = gate.isDraining()
                if !draining, let refusal = ProviderRequestValidator.methodRefusal(head.method) {
                    refuseHead(head, refusal, responder, validator: validator, gate: gate, logger: logger)
                    return false
                }
                // Two fields of the head: looked up where they lie, without copying the others.
                let (authorization, topic) = (
                    head.headers.first(name: "authorization"), head.headers.first(name: "apns-topic")
                )
                return authorize(
                    head,
                    authorization: authorization,
                    topic: topic,
                    draining: draining,
                    responder,
                    validator: validator,
                    gate: gate,
                    logger: logger
                ) != nil
            },
            refuse: { head, refusal, responder in
                var refusal = refusal
                if refusal.reason == .payloadTooLarge {
                    refusal.detail =
                        "the payload is larger than \(ProviderRequestValidator.maxBodyBytes) bytes, the limit of voip pushes (\(ProviderRequestValidator.defaultMaxPayloadBytes) for the others)"
                }
                refuseHead(head, refusal, responder, validator: validator, gate: gate, logger: logger)
            }
        )
        // Any method: a wrong one is answered in APNs' own terms (405 MethodNotAllowed).
        let context = Context(acceptor: acceptor, validator: validator, gate: gate, logger: logger)
        router.addPrefix(nil, "/3/", protocols: .http2Only, role: .provider, admission: admission) {
            request,
            responder in
            handle(request, responder, context)
        }
    }

    /// Authentication, then validation, then the push's shard: a provider that has not proven
    /// who it is learns nothing about tokens (not even whether one exists).
    static func handle(_ request: HTTPServerRequest, _ responder: HTTPResponder, _ context: Context) {
        // Checked again now that the body is in: a reload or the token's age may have changed the
        // verdict since the head (a token already seen costs a string compare). Not a drain: a
        // request admitted before it is in flight, and in-flight requests are finished.
        // One pass over the fields for authentication and validation.
        var fields = ProviderHeaderFields(request.headers)
        guard
            let (state, provider) = authorize(
                request,
                authorization: fields.authorization,
                topic: fields.topic,
                draining: false,
                responder,
                validator: context.validator,
                gate: context.gate,
                logger: context.logger
            )
        else { return }
        let connection = request.connection
        // A single-app certificate implies its topic when the request names none (APNs).
        if fields.topic == nil { fields.topic = provider.topic }

        let outcome = context.validator.validate(
            method: request.method,
            path: request.path,
            fields: fields,
            body: request.body
        )
        switch outcome {
        case .rejected(let refusal, let apnsID):
            answer(
                refusal: refusal,
                apnsID: apnsID,
                state: state,
                connection: connection,
                gate: context.gate,
                responder: responder,
                logger: context.logger
            )
        case .accepted(let push, let expiration):
            let boundState = NIOLoopBound(state, eventLoop: connection.eventLoop)
            // The answer needs two of the push's fields: captured alone, not the whole push
            // (each of its strings and its payload retained and released again per request).
            let apnsID = push.apnsID
            let pushType = push.pushType
            context.acceptor.accept(push, expiration: expiration).hop(to: connection.eventLoop).whenComplete { result in
                let state = boundState.value
                switch result {
                case .success(let disposition):
                    context.gate.counters.received.add(pushType)
                    state.consecutiveErrors = 0
                    var headers = HTTPHeaders()
                    headers.add(name: "apns-id", value: apnsID)
                    headers.add(name: "pushgate-disposition", value: disposition.rawValue)
                    responder.respond(HTTPServerResponse(status: 200, headers: headers))
                case .failure(let error):
                    answer(
                        refusal: Refusal(error),
                        apnsID: apnsID,
                        state: state,
                        connection: connection,
                        gate: context.gate,
                        responder: responder,
                        logger: context.logger
                    )
                }
            }
        }
    }

    /// What handling a request needs, behind one reference: the closure that answers each push
    /// retains this object instead of the dozen references the gate and the logger hold (each
    /// retained and released per push, often from the shard's thread).
    final class Context: Sendable {
        let acceptor: any PushAcceptor
        let validator: ProviderRequestValidator
        let gate: ProviderGate
        let logger: Logger

        init(acceptor: any PushAcceptor, validator: ProviderRequestValidator, gate: ProviderGate, logger: Logger) {
            self.acceptor = acceptor
            self.validator = validator
            self.gate = gate
            self.logger = logger
        }
    }

    /// Draining, then authentication, from the request's head alone: the provider and its
    /// connection's state, or nil once the refusal is answered.
    private static func authorize(
        _ request: HTTPServerRequest,
        authorization: String?,
        topic: String?,
        draining: Bool,
        _ responder: HTTPResponder,
        validator: ProviderRequestValidator,
        gate: ProviderGate,
        logger: Logger
    ) -> (ProviderConnectionState, AuthorizedProvider)? {
        let connection = request.connection
        let state = state(of: connection, gate)
        if draining {
            let apnsID = validator.responseAPNsID(requestHeader: request.headers.first(name: "apns-id"))
            responder.respond(
                .refusal(Refusal(.shutdown, "the gateway is shutting down; retry on a new connection"), apnsID: apnsID)
            )
            gate.counters.rejected.add(.shutdown)
            return nil
        }
        let authorized = state.authenticator.authorize(
            certificate: state.certificate,
            authorization: authorization,
            topic: topic,
            connection: &state.auth,
            nowMillis: gate.nowMillis()
        )
        // Idempotent, and one atomic load once done. A gateway that authenticates no provider
        // (it then serves loopback only) takes every provider as known.
        if state.certificate != nil || state.auth.hasValidToken || state.authenticator.isUnauthenticated {
            connection.markAuthenticated()
        }
        switch authorized {
        case .failure(let refusal):
            let apnsID = validator.responseAPNsID(requestHeader: request.headers.first(name: "apns-id"))
            answer(
                refusal: refusal,
                apnsID: apnsID,
                state: state,
                connection: connection,
                gate: gate,
                responder: responder,
                logger: logger
            )
            return nil
        case .success(let provider):
            return (state, provider)
        }
    }

    /// A refusal decided on the request's head: with the request's apns-id (or a new one),
    /// counted and logged as every refusal is.
    private static func refuseHead(
        _ head: HTTPServerRequest,
        _ refusal: Refusal,
        _ responder: HTTPResponder,
        validator: ProviderRequestValidator,
        gate: ProviderGate,
        logger: Logger
    ) {
        let apnsID = validator.responseAPNsID(requestHeader: head.headers.first(name: "apns-id"))
        answer(
            refusal: refusal,
            apnsID: apnsID,
            state: state(of: head.connection, gate),
            connection: head.connection,
            gate: gate,
            responder: responder,
            logger: logger
        )
    }

    /// The connection's provider state, following the keys in force.
    private static func state(of connection: ConnectionInfo, _ gate: ProviderGate) -> ProviderConnectionState {
        let state = connection.attachment(ProviderConnectionState.self) {
            ProviderConnectionState(providers: gate.providers, peerCertificate: connection.peerCertificate)
        }
        state.follow(gate.providers)
        return state
    }

    /// Sends the error, counts it and logs it; past the limit the connection is ended as APNs
    /// ends it. Runs on the connection's event loop.
    private static func answer(
        refusal: Refusal,
        apnsID: String,
        state: ProviderConnectionState,
        connection: ConnectionInfo,
        gate: ProviderGate,
        responder: HTTPResponder,
        logger: Logger
    ) {
        // Before the answer, so that a provider that has it finds the line written. Not the
        // detail: some repeat what the request said (a key id, a topic).
        logger.debug(
            "push refused",
            metadata: [
                LogMetadataKey.apnsID: "\(apnsID)", "push.reason": "\(refusal.reason.name)",
                "push.status": "\(refusal.status)",
            ]
        )
        responder.respond(.refusal(refusal, apnsID: apnsID))
        gate.counters.rejected.add(refusal.reason)
        // 410 is not an error condition at APNs, and the gateway's own limits are not the
        // provider misbehaving (429 TooManyProviderTokenUpdates is).
        guard (400..<500).contains(refusal.status), refusal.reason != .unregistered, !refusal.reason.isGatewayLimit
        else { return }
        state.consecutiveErrors += 1
        if gate.maxConsecutiveErrors > 0, state.consecutiveErrors >= gate.maxConsecutiveErrors {
            connection.goAway(debugData: Array(JSONText.object(["reason": refusal.reason.name]).utf8))
        }
    }
}
