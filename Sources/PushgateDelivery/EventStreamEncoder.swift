import NIOCore
import PushgateStore

/// Server-sent events as PRODUCT.md section 3 defines them.
enum EventStreamEncoder {
    /// `id: <seq>`, `event: notification`, `data: <one JSON object>`.
    static func writeNotification(_ record: NotificationRecord, delivery: DeliveryKind, into buffer: inout ByteBuffer) {
        let seq = record.seq ?? 0
        buffer.writeString("id: \(seq)\nevent: notification\ndata: ")
        writeJSON(record, delivery: delivery, into: &buffer)
        buffer.writeString("\n\n")
    }

    /// The notification as the JSON object carried in events and keep-alive responses.
    static func writeJSON(_ record: NotificationRecord, delivery: DeliveryKind, into buffer: inout ByteBuffer) {
        buffer.writeString("{\"seq\":\(record.seq ?? 0),\"apnsId\":")
        writeString(record.apnsID, into: &buffer)
        buffer.writeString(",\"token\":")
        writeString(record.token, into: &buffer)
        buffer.writeString(",\"topic\":")
        writeString(record.topic, into: &buffer)
        buffer.writeString(",\"pushType\":")
        writeString(record.pushType, into: &buffer)
        buffer.writeString(",\"priority\":\(record.priority),\"collapseId\":")
        if let collapseID = record.collapseID { writeString(collapseID, into: &buffer) } else { buffer.writeString("null") }
        buffer.writeString(",\"payload\":")
        // The payload is a validated JSON object. SSE ends a data line at CR or LF; in valid
        // JSON those only occur as whitespace between tokens, so a space is equivalent.
        if record.payload.contains(where: { $0 == 0x0A || $0 == 0x0D }) {
            for byte in record.payload {
                buffer.writeInteger(byte == 0x0A || byte == 0x0D ? 0x20 : byte)
            }
        } else {
            buffer.writeBytes(record.payload)
        }
        buffer.writeString(",\"acceptedAt\":\(record.acceptedAt),\"delivery\":\"\(delivery.label.rawValue)\",\"carrier\":")
        if let carrier = delivery.carrier { writeString(carrier, into: &buffer) } else { buffer.writeString("null") }
        buffer.writeInteger(UInt8(ascii: "}"))
    }

    static let heartbeat = ByteBuffer(string: ": heartbeat\n\n")

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
