import NIOCore
import NIOHTTP1
import PushgateCore
import PushgateDelivery
import PushgateRouting
import PushgateTransport

/// `POST /3/device/{token}`: APNs' provider endpoint (PRODUCT.md section 2), HTTP/2 only.
///
/// Validation is pure and runs on the connection's event loop; the push then goes to its
/// device's shard, and the 200 is sent only once the store has committed it. Every response,
/// error or not, carries `apns-id`, as APNs' does: some client libraries wait for it.
public enum ProviderRoute {
    public static func register(on router: inout Router, core: DeliveryCore, validator: ProviderRequestValidator) {
        // Any method: a wrong one is answered in APNs' own terms (405 MethodNotAllowed).
        router.addPrefix(nil, "/3/", protocols: .http2Only) { request, responder in
            handle(request, responder, core: core, validator: validator)
        }
    }

    static func handle(_ request: HTTPServerRequest, _ responder: HTTPResponder, core: DeliveryCore, validator: ProviderRequestValidator) {
        let outcome = validator.validate(
            method: request.method,
            path: request.path,
            headers: request.headers.map { (name: $0.name, value: $0.value) },
            body: request.body
        )
        switch outcome {
        case .rejected(let rejection, let apnsID):
            responder.respond(response(status: rejection.status, reason: rejection.reason, detail: rejection.detail, apnsID: apnsID))
        case .accepted(let push):
            core.accept(push).whenComplete { result in
                switch result {
                case .success(let disposition):
                    var headers = HTTPHeaders()
                    headers.add(name: "apns-id", value: push.apnsID)
                    headers.add(name: "pushgate-disposition", value: disposition.rawValue)
                    responder.respond(HTTPServerResponse(status: 200, headers: headers))
                case .failure(let refusal as Refusal):
                    responder.respond(
                        response(
                            status: refusal.status,
                            reason: refusal.reason,
                            detail: refusal.detail,
                            apnsID: push.apnsID,
                            timestamp: refusal.timestamp
                        )
                    )
                case .failure(let error):
                    responder.respond(
                        response(status: 500, reason: "InternalServerError", detail: "\(error)", apnsID: push.apnsID)
                    )
                }
            }
        }
    }

    /// APNs' error body, `{"reason": ...}` (with `timestamp` on 410), plus Pushgate's `detail`.
    static func response(status: Int, reason: String, detail: String, apnsID: String, timestamp: Int64? = nil) -> HTTPServerResponse {
        var body = "{\"reason\":" + JSONText.quote(reason) + ",\"detail\":" + JSONText.quote(detail)
        if let timestamp { body += ",\"timestamp\":\(timestamp)" }
        body += "}"
        var headers = HTTPHeaders()
        headers.add(name: "apns-id", value: apnsID)
        headers.add(name: "content-type", value: "application/json")
        return HTTPServerResponse(status: status, headers: headers, body: ByteBuffer(string: body))
    }
}
