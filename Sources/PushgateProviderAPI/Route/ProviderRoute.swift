import Logging
import NIOCore
import NIOHTTP1
import PushgateModel
import PushgateDelivery
import PushgateProviderAuth
import PushgateHTTP
import PushgateTransport

/// `POST /3/device/{token}`: APNs' provider endpoint (PRODUCT.md section 2), HTTP/2 only.
///
/// Validation is pure and runs on the connection's event loop; the push then goes to its
/// device's shard, and the 200 is sent only once the store has committed it. Every response,
/// error or not, carries `apns-id`, as APNs' does: some client libraries wait for it. A refusal
/// is logged (debug) with its `apns-id`; an accepted push is not (the hot path logs nothing).
public enum ProviderRoute {
    public static func register(
        on router: inout Router,
        core: DeliveryCore,
        validator: ProviderRequestValidator,
        gate: ProviderGate,
        logger: Logger
    ) {
        // Any method: a wrong one is answered in APNs' own terms (405 MethodNotAllowed).
        router.addPrefix(nil, "/3/", protocols: .http2Only, role: .provider) { request, responder in
            handle(request, responder, core: core, validator: validator, gate: gate, logger: logger)
        }
    }

    /// Draining, then authentication, then validation, then the push's shard: a provider that
    /// has not proven who it is learns nothing about tokens (not even whether one exists).
    static func handle(
        _ request: HTTPServerRequest,
        _ responder: HTTPResponder,
        core: DeliveryCore,
        validator: ProviderRequestValidator,
        gate: ProviderGate,
        logger: Logger
    ) {
        let connection = request.connection
        let state = connection.attachment(ProviderConnectionState.self) {
            ProviderConnectionState(providers: gate.providers, peerCertificate: connection.peerCertificate)
        }
        state.follow(gate.providers)
        if gate.isDraining() {
            let apnsID = validator.responseAPNsID(requestHeader: request.headers.first(name: "apns-id"))
            let refusal = Refusal(.shutdown, "the gateway is shutting down; retry on a new connection")
            answer(refusal: refusal, apnsID: apnsID, state: state, connection: connection, gate: gate, responder: responder, logger: logger)
            return
        }

        let topic = request.headers.first(name: "apns-topic")
        let authorized = state.authenticator.authorize(
            certificate: state.certificate,
            authorization: request.headers.first(name: "authorization"),
            topic: topic,
            connection: &state.auth,
            nowMillis: gate.nowMillis()
        )
        // Idempotent, and one atomic load once granted.
        if state.certificate != nil || state.auth.hasValidToken { connection.grantFullConcurrency() }
        var headers = request.headers
        switch authorized {
        case .failure(let refusal):
            let apnsID = validator.responseAPNsID(requestHeader: request.headers.first(name: "apns-id"))
            answer(refusal: refusal, apnsID: apnsID, state: state, connection: connection, gate: gate, responder: responder, logger: logger)
            return
        case .success(let provider):
            // A single-app certificate implies its topic when the request names none (APNs).
            if topic == nil { headers.add(name: "apns-topic", value: provider.topic) }
        }

        let outcome = validator.validate(
            method: request.method,
            path: request.path,
            headers: headers,
            body: request.body
        )
        switch outcome {
        case .rejected(let refusal, let apnsID):
            answer(refusal: refusal, apnsID: apnsID, state: state, connection: connection, gate: gate, responder: responder, logger: logger)
        case .accepted(let push, let expiration):
            let boundState = NIOLoopBound(state, eventLoop: connection.eventLoop)
            core.accept(push, expiration: expiration).hop(to: connection.eventLoop).whenComplete { result in
                let state = boundState.value
                switch result {
                case .success(let disposition):
                    gate.counters.received.add(push.pushType)
                    state.consecutiveErrors = 0
                    var headers = HTTPHeaders()
                    headers.add(name: "apns-id", value: push.apnsID)
                    headers.add(name: "pushgate-disposition", value: disposition.rawValue)
                    responder.respond(HTTPServerResponse(status: 200, headers: headers))
                case .failure(let error):
                    answer(refusal: Refusal(error), apnsID: push.apnsID, state: state, connection: connection, gate: gate, responder: responder, logger: logger)
                }
            }
        }
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
            metadata: [LogMetadataKey.apnsID: "\(apnsID)", "push.reason": "\(refusal.reason.name)", "push.status": "\(refusal.status)"]
        )
        responder.respond(.refusal(refusal, apnsID: apnsID))
        gate.counters.rejected.add(refusal.reason)
        // 410 is not an error condition at APNs, and the gateway's own limits are not the
        // provider misbehaving (429 TooManyProviderTokenUpdates is).
        guard (400..<500).contains(refusal.status), refusal.reason != .unregistered, !refusal.reason.isGatewayLimit else { return }
        state.consecutiveErrors += 1
        if gate.maxConsecutiveErrors > 0, state.consecutiveErrors >= gate.maxConsecutiveErrors {
            connection.goAway(debugData: Array(JSONText.object(["reason": refusal.reason.name]).utf8))
        }
    }
}
