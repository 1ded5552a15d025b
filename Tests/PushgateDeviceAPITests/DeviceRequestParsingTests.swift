import NIOCore
import NIOHTTP1
import Testing

@testable import PushgateDeviceAPI

/// The parsing on the device API's hot path: the path after `/v1/devices/` and the `{"upTo":N}`
/// of every ack (anything else goes to the full JSON decoder).
@Suite("Device request parsing")
struct DeviceRequestParsingTests {
    @Test(
        "paths: the device id, then what is asked of it",
        arguments: [
            ("abc", "abc", DeviceAction.device),
            ("abc/ack", "abc", .ack),
            ("abc/keepalive", "abc", .keepalive),
            ("abc/state", "abc", .state),
            ("abc/events", "abc", .events),
            ("abc/registrations", "abc", .registrations),
            ("abc/registrations/tok", "abc", .registration("tok")),
            ("abc/registrations/", "abc", .registration("")),
            ("abc/registrations/a/b", "abc", .unknown),
            ("abc/subscriptions", "abc", .subscriptions),
            ("abc/subscriptions/AB12", "abc", .subscription("ab12")),
            ("abc/subscriptions/a/b", "abc", .unknown),
            ("abc/", "abc", .unknown),
            ("abc/ack/", "abc", .unknown),
            ("abc/acks", "abc", .unknown),
            ("", "", .device),
        ]
    )
    func paths(rest: String, deviceID: String, action: DeviceAction) {
        let parsed = DevicePath.parse(rest[...])
        #expect(parsed.deviceID == deviceID)
        #expect(parsed.action == action)
    }

    @Test(
        "ack bodies: the usual shape is parsed directly; everything else falls back",
        arguments: [
            (#"{"upTo":5}"#, UInt64?.some(5)),
            (#" { "upTo" : 12 } "#, 12),
            ("{\"upTo\":\n0}", 0),
            (#"{"upTo":18446744073709551615}"#, UInt64.max),
            (#"{"upTo":18446744073709551616}"#, nil),
            (#"{"upTo":05}"#, nil),
            (#"{"upTo":-1}"#, nil),
            (#"{"upTo":1,"extra":2}"#, nil),
            (#"{"upTo":1.5}"#, nil),
            (#"{"upto":1}"#, nil),
            (#"{"upTo":1}x"#, nil),
            ("", nil),
        ]
    )
    func fastAck(body: String, expected: UInt64?) {
        #expect(DeviceBodies.AckBody.fastUpTo(ByteBuffer(string: body)) == expected)
    }
}
