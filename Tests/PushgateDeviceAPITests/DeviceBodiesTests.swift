import Foundation
import NIOCore
import PushgateDelivery
import PushgateModel
import Testing

@testable import PushgateDeviceAPI

/// The device API's validation alone: bodies and headers to values or refusals, no device, no
/// secret, no store; and the state route's answer.
@Suite("Device request bodies")
struct DeviceBodiesTests {
    private func body(_ text: String) -> ByteBuffer { ByteBuffer(string: text) }

    private func reason<T>(_ result: Result<T, Refusal>) -> String? {
        if case .failure(let refusal) = result { refusal.reason.rawValue } else { nil }
    }

    private func detail<T>(_ result: Result<T, Refusal>) -> String {
        if case .failure(let refusal) = result { refusal.detail } else { "" }
    }

    @Test("a registration's topic: checked by the topic rules, the body's shape said when wrong")
    func topics() throws {
        #expect(try DeviceBodies.topic(body(#"{"topic":"com.example.app"}"#)).get() == "com.example.app")
        #expect(reason(DeviceBodies.topic(body(#"{"topic":"no spaces allowed"}"#))) == "BadTopic")
        #expect(detail(DeviceBodies.topic(body(#"{"name":"x"}"#))).contains(#"missing field "topic""#))
        #expect(detail(DeviceBodies.topic(body("{"))).contains("not valid JSON"))
    }

    @Test("a Web Push subscription: its name by the topic rules, its key a P-256 point in base64url, padded or not")
    func subscriptions() throws {
        // py-vapid's public key for a fixed private key, as `k` and applicationServerKey carry it.
        let key = "BCVxsr7N_eNgVRqvHtD0zTZsEc6-VV-JvLexhqUzORcxaOzi6-AYWXvTBHm4bjyPjs7Vd8pZGH6SRpkNtoIAiw4"
        let plain = try DeviceBodies.subscription(body(#"{"name":"inbox"}"#)).get()
        #expect(plain == DeviceBodies.Subscription(name: "inbox"))
        #expect(try DeviceBodies.subscription(body(#"{"name":"inbox","applicationServerKey":null}"#)).get() == plain)
        let restricted = try DeviceBodies.subscription(body(#"{"name":"inbox","applicationServerKey":"\#(key)="}"#))
            .get()
        #expect(restricted.applicationServerKey?.count == 65)
        #expect(reason(DeviceBodies.subscription(body(#"{"name":"no spaces"}"#))) == "BadRequest")
        for bad in ["AAAA", String(key.dropLast(2)), key.replacingOccurrences(of: "BCV", with: "BCW")] {
            #expect(
                detail(DeviceBodies.subscription(body(#"{"name":"x","applicationServerKey":"\#(bad)"}"#))).contains(
                    "P-256"
                )
            )
        }
    }

    @Test("an ack: the usual shape, other valid shapes, and sequence numbers out of range")
    func acks() throws {
        #expect(try DeviceBodies.ackUpTo(body(#"{"upTo":7}"#)).get() == 7)
        #expect(try DeviceBodies.ackUpTo(body(#"{"upTo":7,"extra":true}"#)).get() == 7)
        #expect(reason(DeviceBodies.ackUpTo(body(#"{"upTo":-1}"#))) == "BadRequest")
        #expect(detail(DeviceBodies.ackUpTo(body(#"{"upTo":18446744073709551615}"#))).contains("upTo must be"))
    }

    @Test("a state report: power, apps and intervals in topic order; each bad value named")
    func states() throws {
        let report = try DeviceBodies.state(
            body(#"{"power":"idle","apps":{"b.app":"terminated","a.app":"background"},"fetchIntervals":{"a.app":600}}"#)
        ).get()
        #expect(report.power == .idle)
        #expect(report.apps.map(\.topic) == ["a.app", "b.app"])
        #expect(report.apps.map(\.state) == [.background, .terminated])
        #expect(report.fetchIntervals.map(\.interval) == [.seconds(600)])
        #expect(try DeviceBodies.state(body(#"{"power":null}"#)).get().power == nil)
        #expect(detail(DeviceBodies.state(body(#"{"power":"asleep"}"#))).contains("power must be awake"))
        #expect(detail(DeviceBodies.state(body(#"{"apps":{"a.app":"gone"}}"#))).contains("apps.a.app must be"))
        #expect(detail(DeviceBodies.state(body(#"{"fetchIntervals":{"a.app":0}}"#))).contains("fetchIntervals.a.app"))
    }

    @Test("fetch results: known results only, a seq in range, at most 256")
    func fetchResults() throws {
        let results = try DeviceBodies.fetchResults(body(#"{"results":[{"seq":3,"result":"newData"}]}"#)).get()
        #expect(results.map(\.seq) == [3] && results.map(\.result) == [.newData])
        #expect(
            detail(DeviceBodies.fetchResults(body(#"{"results":[{"seq":3,"result":"timeout"}]}"#))).contains(
                "must be newData"
            )
        )
        let many = (1...257).map { #"{"seq":\#($0),"result":"noData"}"# }.joined(separator: ",")
        #expect(detail(DeviceBodies.fetchResults(body(#"{"results":[\#(many)]}"#))).contains("at most 256"))
    }

    @Test("last-event-id: absent, a sequence number, or refused")
    func lastEventIDs() throws {
        #expect(try DeviceBodies.lastEventID(nil).get() == nil)
        #expect(try DeviceBodies.lastEventID(" 12 ").get() == 12)
        #expect(reason(DeviceBodies.lastEventID("twelve")) == "BadLastEventId")
    }

    @Test("the state route's answer: the state in force, and the reported one with its reason only where they differ")
    func stateAnswer() {
        let applied = AppliedState(
            power: .lowPower,
            apps: [
                AppliedState.App(topic: "a.app", reported: .foreground, state: .foreground),
                AppliedState.App(topic: "b.app", reported: .background, state: .terminated),
            ]
        )
        let text = DeviceResponses.state(applied)
        #expect(
            text.hasPrefix(
                #"{"power":"lowPower","apps":{"a.app":{"state":"foreground"},"b.app":{"state":"terminated","reported":"background","reason":"#
            )
        )
        #expect(text.contains("until it reports foreground"))
    }
}
