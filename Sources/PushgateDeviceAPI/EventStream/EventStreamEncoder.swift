import NIOCore
import PushgateCrypto
import PushgateDelivery
import PushgateModel

/// The device API's wire format of notifications: server-sent events on the event stream, and
/// the same JSON object in keep-alive responses (PRODUCT.md section 3).
enum EventStreamEncoder {
    /// `id: <seq>`, `event: notification` (`event: webpush` for a Web Push message), `data: <one
    /// JSON object>`.
    static func writeNotification(
        _ record: AcceptedPush,
        delivery: DeliveryKind,
        carrier: String?,
        fetchWindowSeconds: Int?,
        into buffer: inout ByteBuffer
    ) {
        buffer.writeStaticString("id: ")
        writeDecimal(record.seq ?? 0, into: &buffer)
        if record.push.pushType == .webpush {
            buffer.writeStaticString("\nevent: webpush\ndata: ")
        } else {
            buffer.writeStaticString("\nevent: notification\ndata: ")
        }
        writeJSON(record, delivery: delivery, carrier: carrier, fetchWindowSeconds: fetchWindowSeconds, into: &buffer)
        buffer.writeStaticString("\n\n")
    }

    /// Room for one event: the payload and the ids around it (a buffer this size rarely grows).
    static func estimatedSize(of record: AcceptedPush) -> Int {
        // A Web Push body goes as base64url: four characters for three bytes.
        record.push.payload.count * (record.push.pushType == .webpush ? 4 : 3) / 3 + record.push.deviceToken.utf8.count
            + record.push.topic.utf8.count + 320
    }

    /// The notification as the JSON object carried in events and keep-alive responses; a silent
    /// push's also says how long its app has to report its fetch result.
    static func writeJSON(
        _ record: AcceptedPush,
        delivery: DeliveryKind,
        carrier: String?,
        fetchWindowSeconds: Int?,
        into buffer: inout ByteBuffer
    ) {
        let push = record.push
        if push.pushType == .webpush {
            writeWebPushJSON(
                record,
                delivery: delivery,
                carrier: carrier,
                fetchWindowSeconds: fetchWindowSeconds,
                into: &buffer
            )
            return
        }
        buffer.writeStaticString("{\"seq\":")
        writeDecimal(record.seq ?? 0, into: &buffer)
        buffer.writeStaticString(",\"apnsId\":")
        writeString(push.apnsID, into: &buffer)
        buffer.writeStaticString(",\"token\":")
        writeString(push.deviceToken, into: &buffer)
        buffer.writeStaticString(",\"topic\":")
        writeString(push.topic, into: &buffer)
        buffer.writeStaticString(",\"pushType\":")
        writeString(push.pushType.rawValue, into: &buffer)
        buffer.writeStaticString(",\"priority\":")
        writeDecimal(UInt64(push.priority.rawValue), into: &buffer)
        buffer.writeStaticString(",\"collapseId\":")
        if let collapseID = push.collapseID {
            writeString(collapseID, into: &buffer)
        } else {
            buffer.writeStaticString("null")
        }
        buffer.writeStaticString(",\"payload\":")
        // The payload is a validated JSON object. SSE ends a data line at CR or LF; in valid
        // JSON those only occur as whitespace between tokens, so a space is equivalent.
        if push.payload.contains(where: { $0 == 0x0A || $0 == 0x0D }) {
            for byte in push.payload {
                buffer.writeInteger(byte == 0x0A || byte == 0x0D ? 0x20 : byte)
            }
        } else {
            buffer.writeBytes(push.payload)
        }
        writeEnd(record, delivery: delivery, carrier: carrier, fetchWindowSeconds: fetchWindowSeconds, into: &buffer)
    }

    /// A Web Push message as the device gets it: `{"seq", "pushType": "webpush", "token" (its
    /// endpoint's), "name" (its subscription's), "messageId", "body" (base64url, as the
    /// application server sent it: encrypted, or empty), "acceptedAt", "delivery", "carrier"}`.
    /// Never its urgency, `Topic` or VAPID token (RFC 8030 section 5.3 and 5.4, RFC 8292
    /// section 4.2).
    private static func writeWebPushJSON(
        _ record: AcceptedPush,
        delivery: DeliveryKind,
        carrier: String?,
        fetchWindowSeconds: Int?,
        into buffer: inout ByteBuffer
    ) {
        let push = record.push
        buffer.writeStaticString("{\"seq\":")
        writeDecimal(record.seq ?? 0, into: &buffer)
        buffer.writeStaticString(",\"pushType\":\"webpush\",\"token\":")
        writeString(push.deviceToken, into: &buffer)
        buffer.writeStaticString(",\"name\":")
        writeString(push.topic, into: &buffer)
        buffer.writeStaticString(",\"messageId\":")
        writeString(push.apnsID, into: &buffer)
        buffer.writeStaticString(",\"body\":\"")
        buffer.writeString(Base64URL.encode(push.payload))
        buffer.writeInteger(UInt8(ascii: "\""))
        writeEnd(record, delivery: delivery, carrier: carrier, fetchWindowSeconds: fetchWindowSeconds, into: &buffer)
    }

    /// The fields every notification ends with, and its closing brace.
    private static func writeEnd(
        _ record: AcceptedPush,
        delivery: DeliveryKind,
        carrier: String?,
        fetchWindowSeconds: Int?,
        into buffer: inout ByteBuffer
    ) {
        buffer.writeStaticString(",\"acceptedAt\":")
        if record.acceptedAt < 0 { buffer.writeInteger(UInt8(ascii: "-")) }
        writeDecimal(record.acceptedAt.magnitude, into: &buffer)
        buffer.writeStaticString(",\"delivery\":\"")
        buffer.writeString(delivery.rawValue)
        buffer.writeStaticString("\",\"carrier\":")
        if let carrier { writeString(carrier, into: &buffer) } else { buffer.writeStaticString("null") }
        if let fetchWindowSeconds {
            buffer.writeStaticString(",\"fetchWindowSeconds\":")
            writeDecimal(UInt64(max(0, fetchWindowSeconds)), into: &buffer)
        }
        buffer.writeInteger(UInt8(ascii: "}"))
    }

    static let heartbeat = ByteBuffer(string: ": heartbeat\n\n")

    /// The last bytes of a stream the gateway ends as it drains, right after its GOAWAY: SSE's own
    /// `retry:` field (an EventSource waits that long before it reconnects) and an event that says
    /// why, for agents that read events rather than fields. One second: by then the load balancer
    /// has seen `/readyz` fail for the whole grace period; agents add jitter, so that a drained
    /// gateway's devices do not all reconnect at once.
    static let shutdown = ByteBuffer(
        string: "retry: 1000\nevent: shutdown\ndata: {\"reason\":\"Shutdown\",\"retryMs\":1000}\n\n"
    )

    /// A keep-alive's response body, `{"notifications": [...]}`: what it released, in order.
    static func keepaliveBody(_ released: [KeepaliveRelease]) -> ByteBuffer {
        var body = ByteBuffer(string: "{\"notifications\":[")
        for (index, release) in released.enumerated() {
            if index > 0 { body.writeInteger(UInt8(ascii: ",")) }
            writeJSON(
                release.notification,
                delivery: .keepalive,
                carrier: nil,
                fetchWindowSeconds: release.fetchWindowSeconds,
                into: &body
            )
        }
        body.writeString("]}")
        return body
    }

    /// Decimal digits straight into the buffer: string interpolation would allocate a String
    /// for each number of each event.
    static func writeDecimal(_ value: UInt64, into buffer: inout ByteBuffer) {
        var digits: (UInt64, UInt64, UInt64) = (0, 0, 0)  // 24 bytes: UInt64.max has 20 digits
        withUnsafeMutableBytes(of: &digits) { bytes in
            var remaining = value
            var index = bytes.count
            repeat {
                index -= 1
                bytes[index] = UInt8(ascii: "0") + UInt8(remaining % 10)
                remaining /= 10
            } while remaining > 0
            buffer.writeBytes(UnsafeRawBufferPointer(rebasing: bytes[index...]))
        }
    }

    /// A JSON string literal.
    static func writeString(_ string: String, into buffer: inout ByteBuffer) {
        buffer.writeInteger(UInt8(ascii: "\""))
        // Ids, tokens and topics never need escaping: copy them whole.
        if !string.utf8.contains(where: { $0 < 0x20 || $0 == UInt8(ascii: "\"") || $0 == UInt8(ascii: "\\") }) {
            buffer.writeString(string)
            buffer.writeInteger(UInt8(ascii: "\""))
            return
        }
        for byte in string.utf8 {
            switch byte {
            case UInt8(ascii: "\""): buffer.writeString("\\\"")
            case UInt8(ascii: "\\"): buffer.writeString("\\\\")
            case 0x0A: buffer.writeString("\\n")
            case 0x0D: buffer.writeString("\\r")
            case 0x09: buffer.writeString("\\t")
            case 0..<0x20:
                let hex = Array("0123456789abcdef".utf8)
                buffer.writeString("\\u00")
                buffer.writeInteger(hex[Int(byte >> 4)])
                buffer.writeInteger(hex[Int(byte & 0x0F)])
            default: buffer.writeInteger(byte)
            }
        }
        buffer.writeInteger(UInt8(ascii: "\""))
    }
}
