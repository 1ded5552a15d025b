import Testing

/// The real `pushgate agent` against a stand-in gateway that refuses its event stream: a
/// gateway starting or draining, or a proxy in front of one that is restarting, answers 5xx
/// for a while, and the agent must ride that out; a 4xx will not change by retrying, and the
/// agent must stop and say why.
@Suite("pushgate agent: refused event streams", .serialized, .timeLimit(.minutes(2)))
struct AgentRefusalTests {
    @Test("a 503 or 502 on the event stream makes the agent back off and reconnect, not exit", arguments: [503, 502])
    func serverErrorIsRetried(status: Int) async throws {
        try await withStandInGateway(streamRefusals: [status]) { gateway, agent async throws in
            #expect(try agent.next()["type"] as? String == "registered")
            #expect(try agent.next(timeout: .seconds(20))["type"] as? String == "connected")
            #expect(gateway.lastEventIDs.count == 2)
        }
    }

    @Test(
        "--keepalive outside 0...86400 is refused before the agent connects",
        arguments: ["-1", "86401", "9223372036854775807"]
    )
    func keepaliveRange(value: String) throws {
        let refused = try runPushgate([
            "agent", "--server", "http://127.0.0.1:1", "--identity", "/nonexistent/device.json", "--topic",
            "com.example.app",
            "--keepalive=\(value)",
        ])
        #expect(refused.status != 0)
        #expect(refused.stderr.contains("--keepalive must be 0 to 86400 seconds, got \(value)"), "\(refused.stderr)")
    }

    @Test("a 503 on registration makes the agent back off and register again, not exit")
    func registrationServerErrorIsRetried() async throws {
        try await withStandInGateway(registrationRefusals: [503]) { gateway, agent async throws in
            #expect(try agent.next(timeout: .seconds(20))["type"] as? String == "registered")
            #expect(try agent.next()["type"] as? String == "connected")
            #expect(gateway.registrations == 2)
        }
    }

    @Test(
        "a registration left unanswered for --request-timeout makes the agent give the connection up and register again"
    )
    func unansweredRegistrationIsGivenUp() async throws {
        // A gateway that took the connection and then went silent: without a limit the agent
        // would wait for TCP to give up, minutes later, or for ever behind a middlebox.
        let arguments = ["--request-timeout", "2"]
        try await withStandInGateway(unansweredRegistrations: 1, agentArguments: arguments, capturingErrors: true) {
            gateway,
            agent async throws in
            #expect(try agent.next(timeout: .seconds(20))["type"] as? String == "registered")
            #expect(try agent.next()["type"] as? String == "connected")
            // Two at least: a loaded machine may time the second out as well.
            #expect(gateway.registrations >= 2)
            let messages = agent.exitMessages()
            #expect(
                messages.contains(
                    "the gateway did not answer registering com.example.acks within 2 s (--request-timeout)"
                ),
                "\(messages)"
            )
        }
    }

    @Test(
        "a 401 on registration (the gateway no longer has the identity file's device) ends the agent saying to delete the file, as a 401 on the stream does"
    )
    func unknownDeviceOnRegistration() async throws {
        try await withStandInGateway(registrationRefusals: [401], capturingErrors: true) {
            gateway,
            agent async throws in
            #expect(throws: AgentProcess.AgentExited.self) { try agent.next(timeout: .seconds(20)) }
            let messages = agent.exitMessages()
            #expect(
                messages.contains("the gateway does not know this device or its secret (401); delete "),
                "\(messages)"
            )
            #expect(messages.contains("to start as a new device"), "\(messages)")
            #expect(gateway.registrations == 1)
        }
    }

    @Test("a 404 on the event stream ends the agent with the status and the gateway's detail")
    func clientErrorEndsTheAgent() async throws {
        try await withStandInGateway(streamRefusals: [404], capturingErrors: true) { gateway, agent async throws in
            #expect(try agent.next()["type"] as? String == "registered")
            #expect(throws: AgentProcess.AgentExited.self) { try agent.next(timeout: .seconds(20)) }
            let messages = agent.exitMessages()
            #expect(messages.contains("event stream refused: 404"), "\(messages)")
            #expect(messages.contains("refused by the stand-in"), "\(messages)")
            #expect(gateway.lastEventIDs.count == 1)
        }
    }
}
