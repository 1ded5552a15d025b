import ArgumentParser
import Foundation
import NIOCore
import NIOPosix
import PushgateDeviceClient
import PushgateTLS
import PushgateTransport

struct BenchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "bench",
        abstract: "End-to-end load: devices holding event streams, providers sending pushes.",
        discussion: """
            Creates --devices devices (one HTTP/2 connection and event stream each, acking what
            they receive), then sends --pushes pushes over --providers provider connections,
            spread evenly over the devices, at --rate pushes/s or flat out. Measures accept latency
            (request to 200) and delivery latency (request to receipt on the device's stream),
            counts lost pushes (accepted, never received) and duplicates. A progress line goes to
            stderr every second; the result is a table and one JSON line on stdout.

            The nodes of a cluster: --server given more than once spreads the devices over them
            (device i on the i-th in turn); --provider-server, given once or more, is where the
            providers send (provider j to the j-th in turn; the --server list unless given).
            Devices on one node and providers on the others measure delivery across nodes.
            """
    )

    @OptionGroup var client: ClientOptions

    @Option(help: "Devices holding an event stream.")
    var devices: Int = 1000

    @Option(help: "Provider connections.")
    var providers: Int = 4

    @Option(
        name: .customLong("provider-server"),
        help: ArgumentHelp("A gateway the providers send to, in turn (default: the --server list).", valueName: "URL")
    )
    var providerServers: [ServerURL] = []

    @Option(help: "Pushes to send.")
    var pushes: Int = 100_000

    @Option(help: "Target pushes per second over all providers (default: flat out).")
    var rate: Int?

    @Option(name: .customLong("in-flight"), help: "Concurrent requests per provider connection.")
    var inFlight: Int = 128

    @Option(help: "Topic the devices register.")
    var topic: String = "com.example.bench"

    @Option(
        name: .customLong("silent-percent"),
        help:
            "Percentage of silent pushes (background, priority 5); the rest are alerts. Held ones are collected with one keep-alive per device at the end."
    )
    var silentPercent: Int = 0

    @Option(
        name: .customLong("ack-delay"),
        help:
            "Milliseconds a device waits before acking, so that what arrives meanwhile shares the ack (0: ack at once; events arriving while an ack is in flight share the next one either way)."
    )
    var ackDelay: Int = 0

    @OptionGroup var deviceCreation: DeviceCreationOptions

    @Option(name: .customLong("payload-bytes"), help: "Approximate payload size.")
    var payloadBytes: Int = 128

    @Option(name: .customLong("drain-seconds"), help: "How long to wait for the last deliveries.")
    var drainSeconds: Int = 15

    @Option(
        name: .customLong("idle-seconds"),
        help: "Hold the open, idle streams this long before sending (to measure the gateway's memory per idle device)."
    )
    var idleSeconds: Int = 0

    @Flag(
        help:
            "Reconnect storm: send the pushes while no device is connected (they are stored), run --then-run's command if given (a gateway restart), then open every event stream at --concurrent-connects at a time; reports how long until every stream is open and every stored push is delivered."
    )
    var backlog = false

    @Option(
        name: .customLong("then-run"),
        help: "With --backlog: a shell command run after the pushes and before the streams open; it must exit 0."
    )
    var thenRun: String?

    @Option(name: .customLong("concurrent-connects"), help: "Event streams being opened at once.")
    var concurrentConnects: Int = 256

    @Option(
        name: .customLong("server-pid"),
        help:
            "The gateway's process id, when it runs on this machine: the bench then reports the gateway's CPU-seconds per 100k delivered pushes, from the first push sent to the last received (read from /proc)."
    )
    var serverPID: Int32?

    @Option(
        name: .customLong("server-pid-file"),
        help:
            "With --backlog: a file holding the gateway's process id, read once --then-run has run (a restart writes the new one there); the bench then reports the gateway's CPU-seconds over the storm, from the first stream opened until every stored push is delivered, and per connection (read from /proc)."
    )
    var serverPIDFile: String?

    @OptionGroup var signing: ProviderSigningOptions

    @OptionGroup var certificate: ProviderCertificateOptions

    func validate() throws {
        let all = client.servers + providerServers
        if Set(all.map(\.isTLS)).count > 1 {
            throw ValidationError("--server and --provider-server must all be http:// or all https://")
        }
        guard devices >= 1, providers >= 1, pushes >= 1, inFlight >= 1 else {
            throw ValidationError("--devices, --providers, --pushes and --in-flight must be at least 1")
        }
        if let rate, rate < 1 { throw ValidationError("--rate must be at least 1") }
        if concurrentConnects < 1 { throw ValidationError("--concurrent-connects must be at least 1") }
        if thenRun != nil, !backlog { throw ValidationError("--then-run needs --backlog") }
        if serverPIDFile != nil, !backlog { throw ValidationError("--server-pid-file needs --backlog") }
        if backlog, silentPercent > 0 || idleSeconds > 0 || serverPID != nil {
            throw ValidationError(
                "--backlog measures delivery of stored alerts: not with --silent-percent, --idle-seconds or --server-pid"
            )
        }
        if !(0...60_000).contains(ackDelay) { throw ValidationError("--ack-delay must be 0 to 60000 milliseconds") }
        if !(0...100).contains(silentPercent) { throw ValidationError("--silent-percent must be 0 to 100") }
        // Unchecked, -1 or a huge value trapped computing the deadline, after every push was sent.
        if !(0...86_400).contains(drainSeconds) { throw ValidationError("--drain-seconds must be 0 to 86400") }
        try certificate.check(for: client.server)
        if let serverPID {
            do { _ = try ProcessCPU.sample(pid: serverPID) } catch { throw ValidationError("--server-pid: \(error)") }
        }
    }

    func run() async throws {
        let group = MultiThreadedEventLoopGroup.singleton
        // Only the providers present the certificate: a device proves who it is with its secret.
        let deviceTLS = try client.tlsContext()
        let providerTLS =
            certificate.certificateFile == nil ? deviceTLS : try client.tlsContext(presenting: certificate)
        let connect = { @Sendable (server: ServerURL, tls: TLSContext?) async throws -> HTTP2ClientConnection in
            try await HTTP2ClientConnection.connect(host: server.host, port: server.port, tls: tls, group: group)
        }
        var authorization: String?
        if let key = try signing.signingKey() {
            // One token for the whole run, as a provider would use one for its hour.
            authorization = "bearer \(key.sign(nowMillis: Int64(Date().timeIntervalSince1970 * 1000)))"
        }
        let bench = BenchRun(
            options: self,
            connect: { try await connect($0, deviceTLS) },
            connectProvider: { try await connect($0, providerTLS) },
            authorization: authorization,
            registrationSecret: try deviceCreation.registrationSecret()
        )
        try await bench.run()
    }
}
