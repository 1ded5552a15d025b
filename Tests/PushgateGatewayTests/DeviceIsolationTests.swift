import Foundation
import PushgateTestFixtures
import PushgateTestKit
import Testing

/// No route answers a device's data to another device's secret, nor changes it (issue 24,
/// "secrets and access"). The routes are read from openapi.yaml, so that a route added there is
/// walked too.
@Suite("Device isolation: every device route with another device's secret", .timeLimit(.minutes(1)))
struct DeviceIsolationTests {
    static let topic = "com.example.isolation"

    /// Every operation on a path under `/v1/devices/{deviceId}` in openapi.yaml, as (method, path
    /// template).
    static func deviceOperations() throws -> [(method: String, path: String)] {
        let url = TestFixtures.file("openapi.yaml")
        let lines = try String(contentsOf: url, encoding: .utf8).split(
            separator: "\n",
            omittingEmptySubsequences: false
        )
        var operations: [(String, String)] = []
        var path: String?
        for line in lines {
            if line.hasPrefix("  /") && line.hasSuffix(":") {
                let candidate = String(line.dropFirst(2).dropLast())
                path = candidate.hasPrefix("/v1/devices/{deviceId}") ? candidate : nil
            } else if let path, line.hasPrefix("    "), !line.hasPrefix("     "),
                let method = ["get", "put", "post", "delete", "patch"].first(where: { line == "    \($0):" })
            {
                operations.append((method.uppercased(), path))
            }
        }
        return operations
    }

    /// A body each route would accept from its own device.
    static func body(for path: String) -> String? {
        switch path.split(separator: "/").last.map(String.init) {
        case "ack": #"{"upTo":1}"#
        case "registrations": #"{"topic":"\#(topic).other"}"#
        case "state": #"{"power":"lowPower","apps":{"\#(topic)":"terminated"}}"#
        case "fetch-results": #"{"results":[{"seq":1,"result":"newData"}]}"#
        case "keepalive": "{}"
        default: nil
        }
    }

    /// A body each route refuses from its own device (400), to show that the secret is judged first.
    static func badBody(for path: String) -> String? {
        switch path.split(separator: "/").last.map(String.init) {
        case "ack": #"{"upTo":-1}"#
        case "registrations": "{}"
        case "state": #"{"power":"zzz"}"#
        case "fetch-results": #"{"results":[{"seq":1,"result":"maybe"}]}"#
        default: nil
        }
    }

    @Test(
        "a body the route refuses, with a wrong secret: 401, never what is wrong with the body; with the right secret, the 400"
    )
    func wrongSecretBeforeBadBody() async throws {
        let operations = try Self.deviceOperations().filter { Self.badBody(for: $0.path) != nil }
        #expect(operations.count == 4, "\(operations)")
        try await withGateway { gateway in
            let api = try await API(gateway)
            let (device, _) = try await api.registeredDevice(topic: Self.topic)
            let (intruder, _) = try await api.registeredDevice(topic: Self.topic)
            for (method, template) in operations {
                for deviceID in [device.id, String(repeating: "f", count: 32)] {
                    let path = template.replacingOccurrences(of: "{deviceId}", with: deviceID)
                    for secret in [intruder.secret, String(repeating: "0", count: 64)] {
                        let reply = try await api.send(
                            method,
                            path,
                            headers: [("authorization", "bearer \(secret)")],
                            body: Self.badBody(for: template)
                        )
                        #expect(reply.status == 401, "\(method) \(path): \(reply.status) \(reply.text)")
                        #expect(reply.json["reason"] as? String == "Unauthorized")
                    }
                }
                let path = template.replacingOccurrences(of: "{deviceId}", with: device.id)
                let own = try await api.send(
                    method,
                    path,
                    headers: [("authorization", "bearer \(device.secret)")],
                    body: Self.badBody(for: template)
                )
                #expect(own.status == 400, "\(method) \(path) with its own secret: \(own.status) \(own.text)")
            }
        }
    }

    @Test(
        "another device's secret, a wrong one or none: the same 401 on every route for an existing and an unknown device, and the device's data is untouched"
    )
    func wrongSecretOnEveryRoute() async throws {
        let operations = try Self.deviceOperations()
        // Delete, registrations (add, remove), events, ack, keepalive, state, fetch results.
        #expect(operations.count >= 8, "\(operations)")
        try await withGateway { gateway in
            let api = try await API(gateway)
            let (victim, token) = try await api.registeredDevice(topic: Self.topic)
            let (intruder, _) = try await api.registeredDevice(topic: Self.topic)
            #expect(try await api.push(token: token, topic: Self.topic).status == 200)

            let credentials: [(String, String?)] = [
                ("another device's secret", intruder.secret),
                ("a wrong secret", String(repeating: "0", count: 64)),
                ("no secret", nil),
            ]
            var bodies: Set<String> = []
            for (method, template) in operations {
                for deviceID in [victim.id, String(repeating: "f", count: 32)] {
                    let path = template.replacingOccurrences(of: "{deviceId}", with: deviceID)
                        .replacingOccurrences(of: "{token}", with: token)
                    for (what, secret) in credentials {
                        let headers = secret.map { [("authorization", "bearer \($0)")] } ?? []
                        let reply = try await api.send(method, path, headers: headers, body: Self.body(for: template))
                        #expect(reply.status == 401, "\(method) \(path) with \(what): \(reply.status) \(reply.text)")
                        #expect(reply.json["reason"] as? String == "Unauthorized")
                        #expect(!reply.text.contains(token) && !reply.text.contains(Self.topic), "\(reply.text)")
                        bodies.insert(reply.text)
                    }
                }
            }
            // One answer for all: it tells neither whether the device exists nor why.
            #expect(bodies.count == 1, "\(bodies)")

            // The victim still has its registration, its state and its queued push.
            let events = try await api.openEvents(victim)
            let delivered = try await events.nextNotification()
            #expect(delivered.topic == Self.topic)
            // Neither lowPower nor terminated took: a silent push goes out at once.
            let silent = try await api.push(
                token: token,
                topic: Self.topic,
                headers: [("apns-push-type", "background"), ("apns-priority", "5")],
                payload: #"{"aps":{"content-available":1}}"#
            )
            #expect(silent.status == 200)
            #expect(silent.disposition == "delivered", "\(String(describing: silent.disposition))")
            #expect(try await events.nextNotification().pushType == "background")
            await api.close()
        }
    }
}
