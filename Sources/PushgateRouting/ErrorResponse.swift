import NIOCore
import PushgateCore
import PushgateTransport

extension HTTPServerResponse {
    /// A JSON error body in the gateway's one format: `{"reason": ..., "detail": ...}`; `reason`
    /// is a stable machine-readable word (APNs' where one exists), `detail` says what to fix.
    public static func error(status: Int, reason: String, detail: String) -> HTTPServerResponse {
        HTTPServerResponse(
            status: status,
            headers: ["content-type": "application/json"],
            body: ByteBuffer(string: JSONText.object(["reason": reason, "detail": detail]))
        )
    }

    public static func json(status: Int = 200, _ text: String) -> HTTPServerResponse {
        HTTPServerResponse(status: status, headers: ["content-type": "application/json"], body: ByteBuffer(string: text))
    }
}
