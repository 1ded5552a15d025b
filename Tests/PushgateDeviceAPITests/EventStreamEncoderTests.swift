import Foundation
import NIOCore
import PushgateDelivery
import PushgateModel
import Testing

@testable import PushgateDeviceAPI

/// The device API's wire format (PRODUCT.md section 3): one SSE event per notification, the
/// same JSON object in keep-alive responses.
@Suite("Event stream encoding")
struct EventStreamEncoderTests {
    static func notification(payload: String = #"{"aps":{"alert":"hi"}}"#, collapseID: String? = nil) -> AcceptedPush {
        let push = Push(
            deviceToken: String(repeating: "ab", count: 32),
            apnsID: "123e4567-e89b-12d3-a456-4266554400a0",
            topic: "com.example.app",
            pushType: .alert,
            priority: .high,
            collapseID: collapseID,
            payload: Array(payload.utf8)
        )
        return AcceptedPush(
            acceptanceID: 9,
            deviceID: "d",
            push: push,
            acceptedAt: 1_700_000_000_123,
            expiresAt: .max,
            seq: 42
        )
    }

    @Test("numbers are written as decimal digits", arguments: [0, 7, 10, 1_700_000_000_123, UInt64.max])
    func decimal(_ value: UInt64) {
        var buffer = ByteBuffer()
        EventStreamEncoder.writeDecimal(value, into: &buffer)
        #expect(String(buffer: buffer) == String(value))
    }

    @Test("an event: id is the seq, event: notification, data: the JSON object on one line")
    func event() throws {
        var buffer = ByteBuffer()
        EventStreamEncoder.writeNotification(
            Self.notification(),
            delivery: .piggyback,
            carrier: "carrier-id",
            fetchWindowSeconds: nil,
            into: &buffer
        )
        let text = String(buffer: buffer)
        #expect(text.hasPrefix("id: 42\nevent: notification\ndata: {"))
        #expect(text.hasSuffix("}\n\n"))
        let data = try #require(text.split(separator: "\n").first { $0.hasPrefix("data: ") }?.dropFirst(6))
        let object = try #require(try JSONSerialization.jsonObject(with: Data(data.utf8)) as? [String: Any])
        #expect(object["seq"] as? Int == 42)
        #expect(object["apnsId"] as? String == "123e4567-e89b-12d3-a456-4266554400a0")
        #expect(object["token"] as? String == String(repeating: "ab", count: 32))
        #expect(object["topic"] as? String == "com.example.app")
        #expect(object["pushType"] as? String == "alert")
        #expect(object["priority"] as? Int == 10)
        #expect(object["collapseId"] is NSNull)
        #expect((object["payload"] as? [String: Any])?["aps"] != nil)
        #expect(object["acceptedAt"] as? Int == 1_700_000_000_123)
        #expect(object["delivery"] as? String == "piggyback")
        #expect(object["carrier"] as? String == "carrier-id")
        #expect(object["fetchWindowSeconds"] == nil, "only a silent push's event has one")
    }

    @Test("a silent push's event says how long its app has to report its fetch result")
    func fetchWindow() throws {
        var buffer = ByteBuffer()
        EventStreamEncoder.writeNotification(
            Self.notification(),
            delivery: .budget,
            carrier: nil,
            fetchWindowSeconds: 30,
            into: &buffer
        )
        let data = try #require(
            String(buffer: buffer).split(separator: "\n").first { $0.hasPrefix("data: ") }?.dropFirst(6)
        )
        let object = try #require(try JSONSerialization.jsonObject(with: Data(data.utf8)) as? [String: Any])
        #expect(object["fetchWindowSeconds"] as? Int == 30)
    }

    @Test("line breaks inside the payload become spaces: an SSE data line ends at CR or LF")
    func lineBreaks() throws {
        var buffer = ByteBuffer()
        let payload = "{\"aps\":\r\n{\"alert\":\"hi\"}\n}"
        EventStreamEncoder.writeNotification(
            Self.notification(payload: payload),
            delivery: .immediate,
            carrier: nil,
            fetchWindowSeconds: nil,
            into: &buffer
        )
        let lines = String(buffer: buffer).split(separator: "\n", omittingEmptySubsequences: false)
        #expect(lines.count == 5, "id, event, data, and the blank line ending the event: \(lines)")
        #expect(!String(buffer: buffer).contains("\r"))
    }

    @Test("a keep-alive's body lists what it released, each delivered by keepalive")
    func keepaliveBody() throws {
        let body = EventStreamEncoder.keepaliveBody([
            KeepaliveRelease(notification: Self.notification(), fetchWindowSeconds: nil),
            KeepaliveRelease(notification: Self.notification(collapseID: "c\"1"), fetchWindowSeconds: 30),
        ])
        let object = try #require(
            try JSONSerialization.jsonObject(with: Data(body.readableBytesView)) as? [String: Any]
        )
        let notifications = try #require(object["notifications"] as? [[String: Any]])
        #expect(notifications.count == 2)
        #expect(notifications.allSatisfy { $0["delivery"] as? String == "keepalive" && $0["carrier"] is NSNull })
        #expect(notifications[1]["collapseId"] as? String == "c\"1")
        #expect(notifications.map { $0["fetchWindowSeconds"] as? Int } == [nil, 30])
        #expect(String(buffer: EventStreamEncoder.keepaliveBody([])) == #"{"notifications":[]}"#)
    }
}
