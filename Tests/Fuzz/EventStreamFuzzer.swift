// Fuzz target 5: the device API's event stream and keep-alive encoders, against a reference
// decoder written here from the SSE specification (Tests/Fuzz/run.sh event-stream).
//
// Input: one to three APNs notifications field by field (seq, apns-id, token, topic, push type,
// priority, collapse id, payload, acceptedAt, delivery kind, carrier, fetch window), a chunk size,
// then bytes of any kind. A payload the provider API would refuse (the encoder is only ever
// given validated payloads) is replaced by `{}`.
//
// Checked: the notifications encoded as events (with heartbeats between them and the shutdown
// event after) decode, per the specification, to one `notification` event each whose id is the
// seq and whose data is one JSON object carrying every field exactly (payload: the same JSON
// value); the keep-alive body lists the same objects. The gateway's own SSE reader
// (PushgateTransport's EventStreamParser, used by the agent and the bench) reads the same events
// (ids, types and data) from those bytes, and from the arbitrary bytes, fed in chunks of the given size.
import Foundation
import NIOCore
import PushgateDelivery
import PushgateModel
import PushgateTransport

@testable import PushgateDeviceAPI
@testable import PushgateProviderAPI

/// The APNs push types: a Web Push message is another event (`event: webpush`) with a JSON shape
/// of its own, which the checks here do not describe.
private let apnsPushTypes = PushType.allCases.filter { $0 != .webpush }

private struct Notification {
    var record: AcceptedPush
    var delivery: DeliveryKind
    var carrier: String?
    var fetchWindowSeconds: Int?
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    var reader = FuzzReader(UnsafeBufferPointer(start: data, count: size))
    var notifications: [Notification] = []
    for _ in 0...(reader.byte() % 3) { notifications.append(readNotification(&reader)) }
    let chunkSize = 1 + Int(reader.byte() % 64)
    let arbitrary = reader.rest()

    var stream = ByteBuffer()
    for notification in notifications {
        stream.writeImmutableBuffer(EventStreamEncoder.heartbeat)
        EventStreamEncoder.writeNotification(
            notification.record,
            delivery: notification.delivery,
            carrier: notification.carrier,
            fetchWindowSeconds: notification.fetchWindowSeconds,
            into: &stream
        )
    }
    stream.writeImmutableBuffer(EventStreamEncoder.shutdown)
    let bytes = Array(stream.readableBytesView)

    let reference = ReferenceSSEDecoder.decode(bytes)
    check(
        reference.events.count == notifications.count + 1,
        "\(reference.events.count) events for \(notifications.count) notifications: \(String(decoding: bytes, as: UTF8.self))"
    )
    check(reference.retry == 1000, "the shutdown event's retry: \(String(describing: reference.retry))")
    for (event, notification) in zip(reference.events, notifications) {
        check(same(event.type, "notification"), "event type \(event.type)")
        check(
            same(event.id, String(notification.record.seq ?? 0)) && event.idSetInEvent,
            "event id \(String(describing: event.id))"
        )
        check(!event.data.contains("\n"), "an event's data is one line")
        checkJSON(Array(event.data.utf8), notification)
    }
    if let shutdown = reference.events.last {
        check(
            same(shutdown.type, "shutdown") && same(shutdown.data, #"{"reason":"Shutdown","retryMs":1000}"#),
            "shutdown event \(shutdown)"
        )
    }
    compareWithParser(bytes, chunkSize: chunkSize, reference: reference)
    compareWithParser(arbitrary, chunkSize: chunkSize, reference: ReferenceSSEDecoder.decode(arbitrary))

    let releases = notifications.map {
        KeepaliveRelease(notification: $0.record, fetchWindowSeconds: $0.fetchWindowSeconds)
    }
    let body = Array(EventStreamEncoder.keepaliveBody(releases).readableBytesView)
    guard case .object(let members)? = (try? JSONDocument(body))?.root.value, members.count == 1,
        members[0].key == "notifications",
        case .array(let objects) = members[0].value.value, objects.count == notifications.count
    else { fail("keep-alive body: \(String(decoding: body, as: UTF8.self))") }
    let foundation =
        ((try? JSONSerialization.jsonObject(with: Data(body))) as? [String: Any])?["notifications"] as? [[String: Any]]
    check(foundation?.count == notifications.count, "Foundation reads the keep-alive body")
    for (index, notification) in notifications.enumerated() {
        // A keep-alive delivers what it released itself: delivery keepalive, no carrier.
        checkNode(
            objects[index],
            foundation?[index],
            notification,
            delivery: .keepalive,
            carrier: nil,
            text: String(decoding: body, as: UTF8.self)
        )
    }
    return 0
}

private func readNotification(_ reader: inout FuzzReader) -> Notification {
    let seq: UInt64? = reader.bool() ? reader.uint64() : nil
    let apnsID = reader.string()
    let token = reader.string()
    let topic = reader.string()
    let pushType = apnsPushTypes[Int(reader.byte()) % apnsPushTypes.count]
    let priority: PushPriority = [.low, .normal, .high][Int(reader.byte()) % 3]
    let collapseID: String? = reader.bool() ? reader.string() : nil
    var payload = reader.bytes()
    let valid = payload.withUnsafeBytes { bytes in
        if case .success = PayloadScanner.scan(bytes) { return true }
        return false
    }
    if !valid || (try? JSONSerialization.jsonObject(with: Data(payload))) == nil { payload = Array("{}".utf8) }
    let acceptedAt = Int64(bitPattern: reader.uint64())
    let delivery = DeliveryKind.allCases[Int(reader.byte()) % DeliveryKind.allCases.count]
    let carrier: String? = reader.bool() ? reader.string() : nil
    let fetchWindowSeconds: Int? = reader.bool() ? Int(truncatingIfNeeded: Int64(bitPattern: reader.uint64())) : nil
    let push = Push(
        deviceToken: token,
        apnsID: apnsID,
        topic: topic,
        pushType: pushType,
        priority: priority,
        collapseID: collapseID,
        payload: payload
    )
    let record = AcceptedPush(
        acceptanceID: 1,
        deviceID: "d",
        push: push,
        acceptedAt: acceptedAt,
        expiresAt: .max,
        seq: seq
    )
    return Notification(record: record, delivery: delivery, carrier: carrier, fetchWindowSeconds: fetchWindowSeconds)
}

/// One event's data: a JSON object (for JSONDocument, which keeps numbers as written and strings
/// exactly, and for Foundation) with every field of the notification.
private func checkJSON(_ data: [UInt8], _ notification: Notification) {
    let text = String(decoding: data, as: UTF8.self)
    guard let root = try? JSONDocument(data).root else { fail("event data is not JSON: \(text)") }
    let foundation = (try? JSONSerialization.jsonObject(with: Data(data))) as? [String: Any]
    check(foundation != nil, "Foundation reads event data: \(text)")
    checkNode(
        root,
        foundation,
        notification,
        delivery: notification.delivery,
        carrier: notification.carrier,
        text: text
    )
}

/// `node` is the object as JSONDocument reads it, `foundation` as Foundation does (the payload
/// is compared as a JSON value).
private func checkNode(
    _ node: JSONNode,
    _ foundation: [String: Any]?,
    _ notification: Notification,
    delivery: DeliveryKind,
    carrier: String?,
    text: String
) {
    guard case .object(let members) = node.value else { fail("not an object: \(text)") }
    let record = notification.record
    let push = record.push
    // Swift compares Strings by grapheme and canonical equivalence; these compare scalars, as
    // JSON and SSE do.
    enum Expected {
        case number(String)
        case string(String)
        case null, payload
    }
    var expected: [(String, Expected)] = [
        ("seq", .number("\(record.seq ?? 0)")), ("apnsId", .string(push.apnsID)), ("token", .string(push.deviceToken)),
        ("topic", .string(push.topic)), ("pushType", .string(push.pushType.rawValue)),
        ("priority", .number("\(push.priority.rawValue)")),
        ("collapseId", push.collapseID.map(Expected.string) ?? .null), ("payload", .payload),
        ("acceptedAt", .number("\(record.acceptedAt)")),
        ("delivery", .string(delivery.rawValue)), ("carrier", carrier.map(Expected.string) ?? .null),
    ]
    if let window = notification.fetchWindowSeconds {
        expected.append(("fetchWindowSeconds", .number("\(max(0, window))")))
    }
    check(
        members.map { Array($0.key.unicodeScalars) } == expected.map { Array($0.0.unicodeScalars) },
        "keys \(members.map(\.key)): \(text)"
    )
    for (member, (key, value)) in zip(members, expected) {
        switch (member.value.value, value) {
        case (.number(let written), .number(let number)):
            check(
                Array(written.unicodeScalars) == Array(number.unicodeScalars),
                "\(key): \(written), expected \(number)"
            )
        case (.string(let string), .string(let original)):
            check(
                Array(string.unicodeScalars) == Array(original.unicodeScalars),
                "\(key): \(string.debugDescription), expected \(original.debugDescription)"
            )
        case (.null, .null):
            break
        case (_, .payload):
            let original = try? JSONSerialization.jsonObject(with: Data(push.payload))
            let decoded = foundation?["payload"]
            check(
                original != nil && decoded != nil && (original as? NSObject)?.isEqual(decoded) == true,
                "payload \(String(decoding: push.payload, as: UTF8.self)) came back as \(String(describing: decoded)): \(text)"
            )
        default:
            fail("\(key): \(member.value.kindName), expected \(value): \(text)")
        }
    }
}

/// The gateway's SSE reader, fed `bytes` in chunks, against the reference decoder: the same
/// events, each with the same type, data and last event id.
private func compareWithParser(_ bytes: [UInt8], chunkSize: Int, reference: ReferenceSSEDecoder.Result) {
    var parser = EventStreamParser()
    var events: [EventStreamParser.Event] = []
    var start = 0
    while start < bytes.count {
        let end = min(start + chunkSize, bytes.count)
        events += parser.feed(ByteBuffer(bytes: bytes[start..<end]))
        start = end
    }
    check(
        events.count == reference.events.count,
        "parser read \(events.count) events, the specification \(reference.events.count): \(bytes)"
    )
    for (event, expected) in zip(events, reference.events) {
        check(
            same(event.type, expected.type),
            "event type \(event.type.debugDescription), specification \(expected.type.debugDescription): \(bytes)"
        )
        check(
            same(event.data, expected.data),
            "data \(event.data.debugDescription), specification \(expected.data.debugDescription): \(bytes)"
        )
        check(
            same(event.id, expected.id),
            "id \(String(describing: event.id)), specification \(String(describing: expected.id)): \(bytes)"
        )
    }
}

/// Equal scalar by scalar (String's == also equates canonically equivalent text).
private func same(_ a: String?, _ b: String?) -> Bool {
    guard let a, let b else { return a == nil && b == nil }
    return a.unicodeScalars.elementsEqual(b.unicodeScalars)
}

/// Server-sent events as the WHATWG HTML specification reads them ("Parsing an event stream",
/// "Interpreting an event stream"), written from its text and nothing else.
enum ReferenceSSEDecoder {
    struct Event {
        var type: String
        var data: String
        /// The last event ID buffer when the event was dispatched.
        var id: String?
        /// Whether a field of this event's own block set it.
        var idSetInEvent: Bool
    }

    struct Result {
        var events: [Event] = []
        var retry: Int?
    }

    static func decode(_ bytes: [UInt8]) -> Result {
        // The stream is UTF-8, decoded with replacement; one leading BOM is dropped.
        var scalars = Array(String(decoding: bytes, as: UTF8.self).unicodeScalars)
        if scalars.first == "\u{FEFF}" { scalars.removeFirst() }
        var result = Result()
        var data = ""
        var type = ""
        var lastEventID: String?
        var idSet = false
        var line: [Unicode.Scalar] = []
        var index = 0
        while index < scalars.count {
            let scalar = scalars[index]
            index += 1
            guard scalar == "\r" || scalar == "\n" else {
                line.append(scalar)
                continue
            }
            // CRLF, LF or CR ends a line.
            if scalar == "\r", index < scalars.count, scalars[index] == "\n" { index += 1 }
            defer { line = [] }
            if line.isEmpty {
                // Dispatch.
                defer {
                    idSet = false
                }
                if data.isEmpty {
                    type = ""
                    continue
                }
                // The LF after the last data line.
                data.unicodeScalars.removeLast()
                result.events.append(
                    Event(type: type.isEmpty ? "message" : type, data: data, id: lastEventID, idSetInEvent: idSet)
                )
                data = ""
                type = ""
                continue
            }
            if line.first == ":" { continue }
            // Field names are compared code point by code point.
            let field: ArraySlice<Unicode.Scalar>
            let value: String
            if let colon = line.firstIndex(of: ":") {
                field = line[..<colon]
                var rest = line[(colon + 1)...]
                if rest.first == " " { rest = rest.dropFirst() }
                value = String(String.UnicodeScalarView(rest))
            } else {
                field = line[...]
                value = ""
            }
            if field.elementsEqual("event".unicodeScalars) {
                type = value
            } else if field.elementsEqual("data".unicodeScalars) {
                data += value + "\n"
            } else if field.elementsEqual("id".unicodeScalars) {
                if !value.unicodeScalars.contains("\0") {
                    lastEventID = value
                    idSet = true
                }
            } else if field.elementsEqual("retry".unicodeScalars) {
                if !value.isEmpty, value.unicodeScalars.allSatisfy({ ("0"..."9").contains($0) }) {
                    result.retry = Int(value)
                }
            }
        }
        // An incomplete event at the end of the stream is discarded.
        return result
    }
}
