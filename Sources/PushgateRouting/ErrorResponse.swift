import NIOCore
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

/// Minimal JSON text for small, flat, string-valued objects (error bodies), without Foundation.
public enum JSONText {
    public static func object(_ fields: KeyValuePairs<String, String>) -> String {
        var out = "{"
        var first = true
        for (key, value) in fields {
            if !first { out += "," }
            first = false
            out += quote(key) + ":" + quote(value)
        }
        return out + "}"
    }

    public static func quote(_ string: String) -> String {
        var out = "\""
        for scalar in string.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case _ where scalar.value < 0x20:
                let hex = String(scalar.value, radix: 16)
                out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out + "\""
    }
}
