import Foundation
import NIOConcurrencyHelpers
import PushgateTestFixtures
import Testing

/// Code nobody here wrote, talking to `pushgate serve` over cleartext HTTP/2 (h2c, prior
/// knowledge): curl as an APNs provider, Python's httpx (Debian's python3-httpx with python3-h2)
/// as a provider and as a device agent reading the SSE event stream.
@Suite("Python httpx and curl clients against pushgate serve", .serialized, .timeLimit(.minutes(5)))
struct PythonClientTests {
    @Test("curl as a provider: 200 with apns-id and pushgate-disposition, 400 BadDeviceToken with a JSON body")
    func curlProvider() throws {
        let gateway = try GatewayProcess(arguments: ["--listen", "127.0.0.1:0"], listeners: 1)
        let url = gateway.urls[0]
        let device = try PythonClient.json(DeviceInfo.self, "device_setup.py", [url, "com.example.curl"])

        let apnsID = UUID().uuidString.lowercased()
        let accepted = try curlPush(
            url,
            token: device.token,
            topic: device.topic,
            apnsID: apnsID,
            body: #"{"aps":{"alert":"hello"}}"#
        )
        #expect(accepted.httpVersion == "HTTP/2", "\(accepted.raw)")
        #expect(accepted.status == 200, "\(accepted.raw)")
        #expect(accepted.headers["apns-id"] == apnsID, "\(accepted.raw)")
        // Nobody holds the device's stream: the push waits on disk.
        #expect(accepted.headers["pushgate-disposition"] == "stored", "\(accepted.raw)")
        #expect(accepted.body.isEmpty, "\(accepted.raw)")

        // Without apns-id the gateway makes one up: a lowercase canonical UUID.
        let generated = try curlPush(
            url,
            token: device.token,
            topic: device.topic,
            apnsID: nil,
            body: #"{"aps":{"alert":"hi"}}"#
        )
        #expect(generated.status == 200, "\(generated.raw)")
        #expect(isLowercaseUUID(generated.headers["apns-id"]), "\(generated.raw)")
        #expect(generated.headers["pushgate-disposition"] == "stored", "\(generated.raw)")

        let badID = UUID().uuidString.lowercased()
        let bad = try curlPush(
            url,
            token: "0123-not-a-token",
            topic: device.topic,
            apnsID: badID,
            body: #"{"aps":{"alert":"x"}}"#
        )
        #expect(bad.status == 400, "\(bad.raw)")
        #expect(bad.headers["apns-id"] == badID, "\(bad.raw)")
        #expect(bad.headers["pushgate-disposition"] == nil, "\(bad.raw)")
        #expect(bad.headers["content-type"]?.hasPrefix("application/json") == true, "\(bad.raw)")
        let body = try? JSONDecoder().decode(ErrorBody.self, from: Data(bad.body.utf8))
        #expect(body?.reason == "BadDeviceToken", "\(bad.raw)")
        #expect(body?.detail.isEmpty == false, "\(bad.raw)")
        #expect(body?.timestamp == nil, "timestamp belongs on 410 only: \(bad.raw)")

        // A well-formed token nobody registered is just as bad.
        let unknown = try curlPush(
            url,
            token: String(repeating: "cd", count: 32),
            topic: device.topic,
            apnsID: nil,
            body: #"{"aps":{"alert":"x"}}"#
        )
        #expect(unknown.status == 400, "\(unknown.raw)")
        #expect(
            (try? JSONDecoder().decode(ErrorBody.self, from: Data(unknown.body.utf8)))?.reason == "BadDeviceToken",
            "\(unknown.raw)"
        )
        #expect(isLowercaseUUID(unknown.headers["apns-id"]), "every response carries apns-id: \(unknown.raw)")

        #expect(gateway.stop(signal: SIGTERM) == 0)
    }

    @Test(
        "h2 as a device and as a provider: a device's connection is told to keep no header table and works on; a provider's keeps it"
    )
    func headerTables() throws {
        struct Report: Decodable {
            struct Side: Decodable {
                var announced: [Int]
                var tableSize: Int
                var entries: Int
                var statuses: [Int]
            }
            var device: Side
            var provider: Side
        }
        let gateway = try GatewayProcess(arguments: ["--listen", "127.0.0.1:0"], listeners: 1)
        let report = try PythonClient.json(Report.self, "header_table.py", [gateway.urls[0], "com.example.table"])
        // Created, registered, streaming, acked: the requests after the SETTINGS carried h2's
        // table size update, which nghttp2 refuses a connection for leaving out.
        #expect(report.device.statuses == [201, 201, 200, 204], "\(report.device)")
        #expect(report.device.announced == [0], "\(report.device)")
        #expect(report.device.tableSize == 0 && report.device.entries == 0, "\(report.device)")
        #expect(report.provider.statuses == [200, 200, 200], "\(report.provider)")
        #expect(report.provider.announced.isEmpty, "\(report.provider)")
        #expect(report.provider.tableSize == 4096 && report.provider.entries > 0, "\(report.provider)")
        #expect(gateway.stop(signal: SIGTERM) == 0)
    }

    @Test("httpx (HTTP/2 prior knowledge) as a provider: statuses, apns-id, disposition and APNs error bodies")
    func httpxProvider() throws {
        let gateway = try GatewayProcess(arguments: ["--listen", "127.0.0.1:0"], listeners: 1)
        let result = try PythonClient.json(ProviderChecks.self, "provider_checks.py", [gateway.urls[0]])
        let cases = result.cases

        for (name, answer) in cases.sorted(by: { $0.key < $1.key }) {
            #expect(answer.httpVersion == "HTTP/2", "\(name): \(answer)")
            #expect(isLowercaseUUID(answer.apnsId), "\(name): every response carries a lowercase apns-id: \(answer)")
            if answer.status == 200 {
                #expect(answer.body.isEmpty, "\(name): a 200 has an empty body: \(answer)")
            } else {
                #expect(answer.contentType?.hasPrefix("application/json") == true, "\(name): \(answer)")
                #expect(answer.json?.reason?.isEmpty == false, "\(name): APNs error body with a reason: \(answer)")
                #expect(answer.json?.detail?.isEmpty == false, "\(name): Pushgate's detail: \(answer)")
                #expect(answer.disposition == nil, "\(name): no disposition on an error: \(answer)")
            }
        }

        func expectCase(_ name: String, _ status: Int, _ reason: String?, disposition: String? = nil) {
            guard let answer = cases[name] else {
                Issue.record("provider_checks.py reported no case \(name)")
                return
            }
            #expect(answer.status == status, "\(name): \(answer)")
            #expect(answer.json?.reason == reason, "\(name): \(answer)")
            if let disposition { #expect(answer.disposition == disposition, "\(name): \(answer)") }
            if let sent = answer.sentApnsId, isLowercaseUUID(sent.lowercased()) {
                #expect(answer.apnsId == sent.lowercased(), "\(name): the request's apns-id, lowercased: \(answer)")
            }
        }
        expectCase("accepted", 200, nil, disposition: "stored")
        expectCase("generatedId", 200, nil, disposition: "stored")
        expectCase("collapse", 200, nil, disposition: "stored")
        expectCase("expireNowOffline", 200, nil, disposition: "discarded")
        expectCase("malformedToken", 400, "BadDeviceToken")
        expectCase("unknownToken", 400, "BadDeviceToken")
        expectCase("wrongTopic", 400, "DeviceTokenNotForTopic")
        expectCase("missingTopic", 400, "MissingTopic")
        expectCase("backgroundPriority10", 400, "BadPriority")
        expectCase("notJSON", 400, "BadPayload")
        expectCase("tooLarge", 413, "PayloadTooLarge")
        expectCase("badApnsId", 400, "BadMessageId")
        expectCase("unregistered", 410, "Unregistered")
        // 410 carries the unregistration time in milliseconds; no other error has a timestamp.
        if let timestamp = cases["unregistered"]?.json?.timestamp {
            #expect(
                timestamp >= result.unregisteredWindow[0] && timestamp <= result.unregisteredWindow[1] + 1,
                "\(timestamp) vs \(result.unregisteredWindow)"
            )
        } else {
            Issue.record("410 Unregistered without timestamp: \(String(describing: cases["unregistered"]))")
        }
        for (name, answer) in cases where name != "unregistered" {
            #expect(answer.json?.timestamp == nil, "\(name): \(answer)")
        }
        #expect(cases["badApnsId"]?.apnsId != "not-a-uuid")

        // 50 concurrent streams on one connection: all stored, each echoing its own apns-id.
        #expect(result.concurrent.statuses == ["200": 50], "\(result.concurrent)")
        #expect(result.concurrent.dispositions == ["stored": 50], "\(result.concurrent)")
        #expect(result.concurrent.echoed == 50, "\(result.concurrent)")

        #expect(gateway.stop(signal: SIGTERM) == 0)
    }

    @Test("httpx as a device agent: SSE events for curl's pushes, ack, reconnect with and without last-event-id")
    func httpxDeviceStream() throws {
        let gateway = try GatewayProcess(arguments: ["--listen", "127.0.0.1:0"], listeners: 1)
        let url = gateway.urls[0]
        let topic = "com.example.stream"
        let pushes = (0..<5).map { _ in UUID().uuidString.lowercased() }
        let marker1 = UUID().uuidString.lowercased()
        let marker2 = UUID().uuidString.lowercased()
        let session = try PythonSession(
            "device_session.py",
            [
                "--url", url, "--topic", topic, "--pushes", pushes.joined(separator: ","), "--ack-through", pushes[2],
                "--marker1", marker1, "--marker2", marker2,
            ]
        )

        let registered = try session.next()
        try #require(registered.step == "registered", "\(registered)")
        let token = try #require(registered.token)
        #expect(registered.topic == topic)
        #expect(token.count == 64 && token.allSatisfy { "0123456789abcdef".contains($0) }, "\(token)")

        let open1 = try session.next()
        try #require(open1.step == "open" && open1.stream == 1, "\(open1)")
        #expect(open1.status == 200 && open1.httpVersion == "HTTP/2", "\(open1)")
        #expect(open1.contentType?.hasPrefix("text/event-stream") == true, "\(open1)")

        // The payloads curl sends, one per push; the events must carry them back unchanged.
        func body(_ index: Int) -> String {
            #"{"aps":{"alert":{"title":"t\#(index)","body":"b"}},"n":\#(index),"nested":{"list":[1,2.5,"x"],"null":null}}"#
        }

        // The first push may race the stream's attachment on the server (the 200 on GET .../events
        // can reach the client before the device counts as online): delivered or stored, it must
        // arrive. Once it has arrived the device is online, and the rest must be "delivered".
        var events: [SessionLine] = []
        let first = try curlPush(
            url,
            token: token,
            topic: topic,
            apnsID: pushes[0],
            body: body(0),
            headers: ["apns-collapse-id": "c0"]
        )
        #expect(first.status == 200, "\(first.raw)")
        #expect(["delivered", "stored"].contains(first.headers["pushgate-disposition"] ?? ""), "\(first.raw)")
        events.append(try session.next())
        for index in 1..<pushes.count {
            let answer = try curlPush(
                url,
                token: token,
                topic: topic,
                apnsID: pushes[index],
                body: body(index),
                headers: ["apns-priority": "5"]
            )
            #expect(answer.status == 200, "\(answer.raw)")
            #expect(answer.headers["apns-id"] == pushes[index], "\(answer.raw)")
            #expect(answer.headers["pushgate-disposition"] == "delivered", "the device's stream is open: \(answer.raw)")
        }
        for _ in 1..<pushes.count { events.append(try session.next()) }

        #expect(events.map(\.step) == Array(repeating: "event", count: pushes.count), "\(events)")
        #expect(events.map(\.apnsId) == pushes, "events in the order the pushes were accepted: \(events.map(\.apnsId))")
        let seqs = events.compactMap(\.seq)
        #expect(
            seqs.count == pushes.count && zip(seqs, seqs.dropFirst()).allSatisfy { $0 < $1 },
            "strictly increasing: \(seqs)"
        )
        for (index, event) in events.enumerated() {
            #expect(event.stream == 1)
            #expect(event.sseId == event.seq.map(String.init), "SSE id is the seq: \(event)")
            #expect(event.token == token && event.topic == topic, "\(event)")
            #expect(event.pushType == "alert", "\(event)")
            #expect(event.priority == (index == 0 ? 10 : 5), "\(event)")
            #expect(event.collapseId == (index == 0 ? "c0" : nil), "\(event)")
            #expect(event.delivery != nil, "\(event)")
            #expect(event.acceptedAt.map { $0 > 1_600_000_000_000 } == true, "acceptedAt in milliseconds: \(event)")
            let sent = try JSONDecoder().decode(JSONValue.self, from: Data(body(index).utf8))
            #expect(event.payload == sent, "payload round trip: \(event)")
            for key in [
                "seq", "apnsId", "token", "topic", "pushType", "priority", "collapseId", "payload", "acceptedAt",
                "delivery",
            ] {
                #expect(event.keys?.contains(key) == true, "\(key) missing from \(event)")
            }
        }

        // httpx acks through the third push; the script then closes the stream and reopens it
        // without last-event-id: only the unacked fourth and fifth come again, then marker1.
        let acked = try session.next()
        #expect(acked.step == "acked" && acked.status == 204 && acked.upTo == seqs.dropFirst(2).first, "\(acked)")
        let open2 = try session.next()
        try #require(open2.step == "open" && open2.stream == 2 && open2.status == 200, "\(open2)")
        let m1 = try curlPush(url, token: token, topic: topic, apnsID: marker1, body: #"{"aps":{"alert":"m1"}}"#)
        #expect(m1.status == 200, "\(m1.raw)")
        let second = try session.events(until: marker1)
        #expect(
            second.map(\.apnsId) == Array(pushes[3...]) + [marker1],
            "after ack through push 3: \(second.map(\.apnsId))"
        )
        #expect(second.allSatisfy { $0.stream == 2 })
        #expect(second.dropLast().map(\.seq) == Array(seqs[3...]), "resent with their original seqs: \(second)")
        #expect((second.last?.seq ?? 0) > (seqs.last ?? .max), "\(second)")

        // Reopened with last-event-id = the fifth push's seq: that acks the fourth and fifth;
        // marker1 (never acked) comes again, then marker2.
        let open3 = try session.next()
        try #require(open3.step == "open" && open3.stream == 3 && open3.status == 200, "\(open3)")
        #expect(open3.lastEventId == seqs.last.map(String.init), "\(open3)")
        let m2 = try curlPush(url, token: token, topic: topic, apnsID: marker2, body: #"{"aps":{"alert":"m2"}}"#)
        #expect(m2.status == 200, "\(m2.raw)")
        let third = try session.events(until: marker2)
        #expect(
            third.map(\.apnsId) == [marker1, marker2],
            "after last-event-id \(seqs.last ?? 0): \(third.map(\.apnsId))"
        )
        #expect(third.first?.seq == second.last?.seq, "marker1 keeps its seq: \(third) vs \(second)")

        let done = try session.next()
        #expect(done.step == "done", "\(done)")
        let exit = session.waitForExit()
        #expect(exit.status == 0, "device_session.py: \(exit.stderr)")
        #expect(gateway.stop(signal: SIGTERM) == 0)
    }
}

// MARK: - Python clients

/// Runs the scripts in `Tests/PushgateCLITests/python` with Debian's Python, which is where
/// `.ci/run` installs httpx and h2 (`apt-get install python3-httpx python3-h2`). A pyenv or venv
/// `python3` earlier on PATH would not have them, hence the absolute path.
enum PythonClient {
    static let interpreter = "/usr/bin/python3"
    static let directory = TestFixtures.file("Tests/PushgateCLITests/python")

    static func path(_ script: String) -> String { directory.appendingPathComponent(script).path }

    struct Failed: Error, CustomStringConvertible {
        var script: String
        var status: Int32
        var stdout: String
        var stderr: String
        var description: String {
            "\(script) exited \(status)\nstderr: \(stderr.suffix(4000))\nstdout: \(stdout.suffix(2000))"
        }
    }

    struct NotInstalled: Error, CustomStringConvertible {
        var description: String {
            "\(PythonClient.interpreter) is missing: .ci/run installs it (apt-get install python3-httpx python3-h2)"
        }
    }

    /// Runs `script` to completion (every script has its own hard timeout); fails unless it exits 0.
    static func run(_ script: String, _ arguments: [String]) throws -> ToolRun {
        guard FileManager.default.isExecutableFile(atPath: interpreter) else { throw NotInstalled() }
        // -B: no __pycache__ in the source tree
        let result = try PushgateCLITests.run("python3", ["-B", path(script)] + arguments)
        guard result.status == 0 else {
            throw Failed(script: script, status: result.status, stdout: result.stdout, stderr: result.stderr)
        }
        return result
    }

    /// Runs `script` and decodes the last line it printed.
    static func json<T: Decodable>(_ type: T.Type, _ script: String, _ arguments: [String]) throws -> T {
        let result = try run(script, arguments)
        guard let line = result.stdout.split(separator: "\n").last else {
            throw Failed(script: script, status: 0, stdout: result.stdout, stderr: "no output; " + result.stderr)
        }
        do {
            return try JSONDecoder().decode(T.self, from: Data(line.utf8))
        } catch {
            throw Failed(
                script: script,
                status: 0,
                stdout: String(line.prefix(2000)),
                stderr: "undecodable output (\(error)); " + result.stderr
            )
        }
    }
}

/// A Python script that runs alongside the test, printing JSON lines the test reads one at a time.
final class PythonSession: @unchecked Sendable {
    private let process = Process()
    private let output = Pipe()
    private let errors = Pipe()
    private let script: String
    private var pending = Data()
    private let errorData = NIOLockedValueBox(Data())
    private let errorsDone = DispatchSemaphore(value: 0)

    init(_ script: String, _ arguments: [String]) throws {
        guard FileManager.default.isExecutableFile(atPath: PythonClient.interpreter) else {
            throw PythonClient.NotInstalled()
        }
        self.script = script
        process.executableURL = URL(fileURLWithPath: PythonClient.interpreter)
        process.arguments = ["-B", PythonClient.path(script)] + arguments
        process.standardOutput = output
        process.standardError = errors
        try process.run()
        let handle = errors.fileHandleForReading
        Thread { [errorData, errorsDone] in
            let data = handle.readDataToEndOfFile()
            errorData.withLockedValue { $0 = data }
            errorsDone.signal()
        }.start()
    }

    /// The next line the script printed, decoded. Blocks until it comes; when the script exits
    /// instead (it has a hard timeout of its own), throws with its stderr.
    func next() throws -> SessionLine {
        while true {
            if let newline = pending.firstIndex(of: UInt8(ascii: "\n")) {
                let line = pending[pending.startIndex..<newline]
                pending = Data(pending[(newline + 1)...])
                do {
                    return try JSONDecoder().decode(SessionLine.self, from: line)
                } catch {
                    throw PythonClient.Failed(
                        script: script,
                        status: -1,
                        stdout: String(decoding: line, as: UTF8.self),
                        stderr: "undecodable line: \(error)"
                    )
                }
            }
            let chunk = output.fileHandleForReading.availableData
            if chunk.isEmpty {
                let exit = waitForExit()
                throw PythonClient.Failed(
                    script: script,
                    status: exit.status,
                    stdout: String(decoding: pending, as: UTF8.self),
                    stderr: exit.stderr
                )
            }
            pending.append(chunk)
        }
    }

    /// Events until (and including) the one with `apnsID`; fails on any other kind of line.
    func events(until apnsID: String) throws -> [SessionLine] {
        var events: [SessionLine] = []
        while true {
            let line = try next()
            guard line.step == "event" else {
                throw PythonClient.Failed(
                    script: script,
                    status: -1,
                    stdout: "\(line)",
                    stderr: "expected events until \(apnsID), got \(events) then this"
                )
            }
            events.append(line)
            if line.apnsId == apnsID { return events }
        }
    }

    func waitForExit() -> (status: Int32, stderr: String) {
        process.waitUntilExit()
        errorsDone.wait()
        errorsDone.signal()  // later calls must not block
        return (process.terminationStatus, String(decoding: errorData.withLockedValue { $0 }, as: UTF8.self))
    }

    deinit {
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
    }
}

/// One line of `device_session.py`'s output (fields depend on `step`).
struct SessionLine: Decodable, CustomStringConvertible {
    var step: String
    var stream: Int?
    var status: Int?
    var contentType: String?
    var httpVersion: String?
    var lastEventId: String?
    var deviceId: String?
    var token: String?
    var topic: String?
    var upTo: Int?
    var sseId: String?
    var seq: Int?
    var apnsId: String?
    var pushType: String?
    var priority: Int?
    var collapseId: String?
    var payload: JSONValue?
    var acceptedAt: Int64?
    var delivery: String?
    var keys: [String]?

    var description: String {
        [
            "step=\(step)", stream.map { "stream=\($0)" }, status.map { "status=\($0)" }, seq.map { "seq=\($0)" },
            apnsId.map { "apnsId=\($0)" }, delivery.map { "delivery=\($0)" }, upTo.map { "upTo=\($0)" },
            lastEventId.map { "lastEventId=\($0)" },
        ].compactMap { $0 }.joined(separator: " ")
    }
}

struct DeviceInfo: Decodable {
    var deviceId: String
    var secret: String
    var token: String
    var topic: String
}

/// A notification as the Python readers summarize it (see pgcommon.notification_from).
struct StreamNotification: Decodable {
    var sseId: String?
    var seq: Int?
    var apnsId: String?
    var token: String?
    var topic: String?
    var pushType: String?
    var priority: Int?
    var collapseId: String?
    var payload: JSONValue?
    var acceptedAt: Int64?
    var delivery: String?
}

struct ErrorBody: Decodable {
    var reason: String
    var detail: String
    var timestamp: Int64?
}

struct ProviderChecks: Decodable {
    struct Answer: Decodable, CustomStringConvertible {
        struct Body: Decodable {
            var reason: String?
            var detail: String?
            var timestamp: Int64?
        }
        var status: Int
        var httpVersion: String
        var apnsId: String?
        var disposition: String?
        var contentType: String?
        var body: String
        var json: Body?
        var sentApnsId: String?
        var description: String {
            "\(status) apns-id=\(apnsId ?? "nil") disposition=\(disposition ?? "nil") sent=\(sentApnsId ?? "nil") \(httpVersion) body=\(body.prefix(300))"
        }
    }
    struct Concurrent: Decodable {
        var count: Int
        var statuses: [String: Int]
        var dispositions: [String: Int]
        var echoed: Int
    }
    var device: DeviceInfo
    var cases: [String: Answer]
    var unregisteredWindow: [Int64]
    var concurrent: Concurrent
}

/// Any JSON value, for comparing payloads structurally.
enum JSONValue: Decodable, Equatable, CustomStringConvertible {
    case null
    case bool(Bool)
    case number(Double)
    case string(String)
    case array([JSONValue])
    case object([String: JSONValue])

    init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if container.decodeNil() {
            self = .null
        } else if let value = try? container.decode(Bool.self) {
            self = .bool(value)
        } else if let value = try? container.decode(Double.self) {
            self = .number(value)
        } else if let value = try? container.decode(String.self) {
            self = .string(value)
        } else if let value = try? container.decode([JSONValue].self) {
            self = .array(value)
        } else {
            self = .object(try container.decode([String: JSONValue].self))
        }
    }

    subscript(key: String) -> JSONValue? {
        if case .object(let object) = self { return object[key] }
        return nil
    }

    var description: String {
        switch self {
        case .null: "null"
        case .bool(let value): "\(value)"
        case .number(let value): "\(value)"
        case .string(let value): "\"\(value)\""
        case .array(let values): "[" + values.map(\.description).joined(separator: ",") + "]"
        case .object(let object):
            "{" + object.sorted { $0.key < $1.key }.map { "\"\($0.key)\":\($0.value)" }.joined(separator: ",") + "}"
        }
    }
}

// MARK: - curl as a provider

struct CurlResponse {
    var httpVersion: String
    var status: Int
    /// Lowercased names.
    var headers: [String: String]
    var body: String
    var raw: String
}

/// `POST /3/device/{token}` with curl over h2c (prior knowledge).
func curlPush(
    _ baseURL: String,
    token: String,
    topic: String,
    apnsID: String?,
    pushType: String = "alert",
    body: String,
    headers extra: [String: String] = [:]
) throws -> CurlResponse {
    var arguments = [
        "-sS", "-i", "--http2-prior-knowledge", "--max-time", "30", "-X", "POST",
        "-H", "apns-topic: \(topic)", "-H", "apns-push-type: \(pushType)",
        "-H", "content-type: application/json",
    ]
    if let apnsID { arguments += ["-H", "apns-id: \(apnsID)"] }
    for (name, value) in extra.sorted(by: { $0.key < $1.key }) { arguments += ["-H", "\(name): \(value)"] }
    arguments += ["--data-binary", body, "\(baseURL)/3/device/\(token)"]
    let result = try run("curl", arguments)
    guard result.status == 0 else {
        throw PythonClient.Failed(
            script: "curl \(arguments.joined(separator: " "))",
            status: result.status,
            stdout: result.stdout,
            stderr: result.stderr
        )
    }
    return parseCurl(result.stdout)
}

func parseCurl(_ output: String) -> CurlResponse {
    let normalized = output.replacingOccurrences(of: "\r\n", with: "\n")
    let (head, body): (Substring, Substring)
    if let split = normalized.range(of: "\n\n") {
        (head, body) = (normalized[..<split.lowerBound], normalized[split.upperBound...])
    } else {
        (head, body) = (normalized[...], "")
    }
    var lines = head.split(separator: "\n")
    let statusLine = lines.isEmpty ? [] : lines.removeFirst().split(separator: " ")
    var headers: [String: String] = [:]
    for line in lines {
        guard let colon = line.firstIndex(of: ":") else { continue }
        headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
    }
    return CurlResponse(
        httpVersion: statusLine.first.map(String.init) ?? "",
        status: statusLine.count > 1 ? Int(statusLine[1]) ?? 0 : 0,
        headers: headers,
        body: String(body),
        raw: output
    )
}

// MARK: - Small helpers

func isLowercaseUUID(_ value: String?) -> Bool {
    guard let value, value.count == 36, UUID(uuidString: value) != nil else { return false }
    return value == value.lowercased()
}

/// A fresh directory under the system temporary directory, owned by the user pushgate processes
/// run as: a gateway's store, an agent's identity file.
func scratchDirectory() throws -> String {
    let url = FileManager.default.temporaryDirectory.appendingPathComponent("pushgate-cli-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    try Unprivileged.handOver(url.path)
    return url.path
}
