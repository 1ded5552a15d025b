import NIOCore
import PushgateDeviceClient
import PushgateModel
import PushgateTransport
import Testing

/// The device API from the device's side: what the agent, the bench and the gateway tests send.
@Suite("Device client requests")
struct DeviceRequestsTests {
    static let server = ServerURL("http://127.0.0.1:2197")!
    static let identity = DeviceIdentity(deviceId: "0123456789abcdef0123456789abcdef", secret: "s3cret")

    @Test(
        "gateway URLs: scheme, host, port (defaults 2197 and 443), IPv6 in brackets",
        arguments: [
            ("http://127.0.0.1:2197", false, "127.0.0.1", 2197),
            ("https://gw.example.com", true, "gw.example.com", 443),
            ("http://gw.example.com", false, "gw.example.com", 2197),
            ("https://[::1]:8443/", true, "::1", 8443),
        ]
    )
    func urls(text: String, tls: Bool, host: String, port: Int) throws {
        let url = try #require(ServerURL(text))
        #expect(url.isTLS == tls)
        #expect(url.host == host)
        #expect(url.port == port)
    }

    @Test(
        "not a gateway URL (a path would be dropped: the gateway is reached at its root)",
        arguments: [
            "127.0.0.1:2197", "ftp://x:1", "http://", "http://[::1", "http://x:99999", "https://[::1]:8443/some/prefix",
            "http://x:1/3/device",
        ]
    )
    func badURLs(text: String) {
        #expect(ServerURL(text) == nil)
    }

    @Test("each route with the device's secret; JSON bodies say so")
    func routes() {
        let requests = DeviceRequests(server: Self.server, identity: Self.identity)
        let base = "/v1/devices/0123456789abcdef0123456789abcdef/"
        let events = requests.events(lastEventID: 41)
        #expect(events.method == "GET")
        #expect(events.path == base + "events")
        #expect(events.headers.first(name: "last-event-id") == "41")
        #expect(events.headers.first(name: "authorization") == "bearer s3cret")
        #expect(requests.events().headers.first(name: "last-event-id") == nil)

        let ack = requests.ack(upTo: 7)
        #expect(ack.method == "POST")
        #expect(ack.path == base + "ack")
        #expect(ack.body.map { String(buffer: $0) } == #"{"upTo":7}"#)
        #expect(ack.headers.first(name: "content-type") == "application/json")
        #expect(
            requests.ack(upTo: 8).body.map { String(buffer: $0) } == #"{"upTo":8}"#,
            "the template is not changed by use"
        )

        let registration = requests.registration(topic: "com.example.\"app\"")
        #expect(registration.body.map { String(buffer: $0) } == #"{"topic":"com.example.\"app\""}"#)
        #expect(requests.keepalive.path == base + "keepalive")
        #expect(requests.state(#"{"power":"idle"}"#).method == "PUT")
        #expect(events.authority == "127.0.0.1:2197")
        #expect(events.scheme == "http")
    }

    @Test("fetch results: one object per seq, the result's word")
    func fetchResults() {
        let requests = DeviceRequests(server: Self.server, identity: Self.identity)
        let one = requests.fetchResults([FetchReport(seq: 12, result: .newData)])
        #expect(one.method == "POST")
        #expect(one.path == "/v1/devices/0123456789abcdef0123456789abcdef/fetch-results")
        #expect(one.headers.first(name: "authorization") == "bearer s3cret")
        #expect(one.headers.first(name: "content-type") == "application/json")
        #expect(one.body.map { String(buffer: $0) } == #"{"results":[{"seq":12,"result":"newData"}]}"#)
        let two = requests.fetchResults([FetchReport(seq: 3, result: .noData), FetchReport(seq: 4, result: .failed)])
        #expect(
            two.body.map { String(buffer: $0) }
                == #"{"results":[{"seq":3,"result":"noData"},{"seq":4,"result":"failed"}]}"#
        )
    }

    @Test("state reports: what is set, topics in order, intervals as words or a number of seconds")
    func stateReports() {
        let requests = DeviceRequests(server: Self.server, identity: Self.identity)
        let report = DeviceStateReport(
            power: .lowPower,
            apps: ["com.example.b": .background, "com.example.a": .terminated],
            fetchIntervals: ["com.example.z": .never, "com.example.\"q\"": .seconds(600), "com.example.m": .minimum]
        )
        #expect(
            report.json
                == #"{"power":"lowPower","apps":{"com.example.a":"terminated","com.example.b":"background"},"#
                + #""fetchIntervals":{"com.example.\"q\"":600,"com.example.m":"minimum","com.example.z":"never"}}"#
        )
        let state = requests.state(report)
        #expect(state.method == "PUT")
        #expect(state.path == "/v1/devices/0123456789abcdef0123456789abcdef/state")
        #expect(state.body.map { String(buffer: $0) } == report.json)
        #expect(DeviceStateReport(fetchIntervals: ["t": .seconds(1)]).json == #"{"fetchIntervals":{"t":1}}"#)
        #expect(DeviceStateReport(power: .idle).json == #"{"power":"idle"}"#)
        #expect(DeviceStateReport().isEmpty)
        #expect(DeviceStateReport().json == "{}")
        #expect(!DeviceStateReport(fetchIntervals: ["t": .minimum]).isEmpty)
    }

    @Test("429 and 5xx are worth another try; other refusals are final and say why")
    func refusals() {
        #expect(
            RetryableRefusal.refusal(of: "the event stream", status: 503, body: "{\"reason\":\"x\"}\n", failure: "f")
                is RetryableRefusal
        )
        #expect(
            RetryableRefusal.refusal(of: "the event stream", status: 429, body: "", failure: "f") is RetryableRefusal
        )
        let final = RetryableRefusal.refusal(
            of: "the event stream",
            status: 404,
            body: "no\nroute",
            failure: "event stream refused"
        )
        #expect((final as? ClientFailure)?.description == "event stream refused: 404 no route")
    }
}
