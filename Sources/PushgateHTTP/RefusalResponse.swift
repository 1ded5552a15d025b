import NIOCore
import NIOHTTP1
import PushgateModel
import PushgateTransport

extension HTTPServerResponse {
    /// A refusal in the gateway's one error format, for every route: `{"reason": ..., "detail":
    /// ...}`, plus `"timestamp"` (milliseconds) on 410 as APNs sends it; `reason` is the
    /// catalog's stable word, `detail` says what to fix. Provider responses carry `apns-id`,
    /// as every APNs response does; a refusal worth retrying later says when (`retry-after`).
    public static func refusal(_ refusal: Refusal, apnsID: String? = nil) -> HTTPServerResponse {
        var body =
            "{\"reason\":" + JSONText.quote(refusal.reason.name) + ",\"detail\":" + JSONText.quote(refusal.detail)
        if let timestamp = refusal.timestamp { body += ",\"timestamp\":\(timestamp)" }
        body += "}"
        var headers = HTTPHeaders()
        if let apnsID { headers.add(name: "apns-id", value: apnsID) }
        if let seconds = refusal.retryAfterSeconds { headers.add(name: "retry-after", value: String(seconds)) }
        if let methods = refusal.allowedMethods { headers.add(name: "allow", value: methods.joined(separator: ", ")) }
        headers.add(name: "content-type", value: "application/json")
        return HTTPServerResponse(status: refusal.status, headers: headers, body: ByteBuffer(string: body))
    }

    /// `error` as a refusal (see `Refusal.init(_:)`).
    public static func refusal(for error: any Error, apnsID: String? = nil) -> HTTPServerResponse {
        refusal(Refusal(error), apnsID: apnsID)
    }

    public static func json(status: Int = 200, _ text: String) -> HTTPServerResponse {
        HTTPServerResponse(
            status: status,
            headers: ["content-type": "application/json"],
            body: ByteBuffer(string: text)
        )
    }
}

extension Refusal {
    /// What the transport refused, in the catalog's words.
    public init(transport refusal: TransportRefusal) {
        switch refusal {
        case .bodyTooLarge: self.init(.payloadTooLarge, refusal.detail)
        case .bodyBudgetExhausted:
            self.init(.serviceUnavailable, refusal.detail, retryAfterSeconds: refusal.retryAfterSeconds)
        case .headerListTooLarge: self.init(.requestHeaderFieldsTooLarge, refusal.detail)
        case .malformed: self.init(.badRequest, refusal.detail)
        }
    }
}
