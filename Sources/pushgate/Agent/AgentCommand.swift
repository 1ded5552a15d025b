import ArgumentParser
import Foundation
import NIOPosix
import PushgateCrypto
import PushgateDeviceClient
import PushgateModel

struct AgentCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "agent",
        abstract: "Run a device agent: hold the event stream, print and acknowledge notifications.",
        discussion: """
            Creates the device on first run and keeps its id and secret in --identity (mode 0600). \
            Prints one JSON line per event on stdout: {"type":"registered",...} for each topic, \
            {"type":"connected"} when the event stream is open, {"type":"state",...} when a state \
            report was accepted, {"type":"fetch",...} when a fetch ended (below), and each \
            notification's JSON object as the gateway sent it (its "delivery" says how it came: \
            immediate, stored, piggyback with "carrier", keepalive, budget, online). Reconnects \
            with jittered back-off (after a draining gateway's retry: hint, that long plus \
            jitter), resuming with Last-Event-ID so nothing acknowledged is sent \
            again; exits 1 with the reason on a failure no retry can fix (a certificate that does \
            not verify, a refused TLS handshake, the wrong scheme for the port, a 4xx answer but 429; \
            --retry-forever retries the connection failures among them). Reports --power, --app-state and --fetch-interval on every connect, sends a \
            keep-alive every --keepalive seconds, and takes commands on stdin while it runs, one \
            per line:
              power idle|awake|lowPower
              app TOPIC foreground|background|terminated
              keepalive
              unsubscribe NAME

            Web Push: --webpush NAME subscribes the device (again on each start: the same name \
            and key give the same endpoint), with a P-256 key pair and auth secret made here and \
            kept in --identity, never sent; it prints {"type":"subscription","name":NAME, \
            "subscription":{"endpoint","expirationTime","keys":{"p256dh","auth"}}}, the JSON an \
            application server stores. --webpush-vapid-key KEY after it restricts the subscription \
            to that application server key. Each message is decrypted and printed as \
            {"type":"webpush","name":NAME,"seq":N,"data":TEXT} ("dataBase64" when the plaintext is \
            not UTF-8, "error" when it does not decrypt), then acknowledged; the command \
            unsubscribe NAME deletes the subscription (its endpoint answers 410 from then on).

            Background fetch: each silent push (pushType "background") gives its app a fetch \
            window of the notification's fetchWindowSeconds (30 when it has none), counted from \
            its arrival. With --fetch-command CMD the agent runs /bin/sh -c CMD for it, beside the \
            stream, in a process group of its own: on stdin the notification's JSON object as \
            printed, a newline, then EOF; in the environment PUSHGATE_TOPIC, PUSHGATE_SEQ and \
            PUSHGATE_APNS_ID; its stdout and stderr go to the agent's stderr. Exit 0 reports \
            newData, exit 1 noData, any other exit or a death by signal failed. Still running a \
            second before the window ends (half-way through a window of 2 s or less: the gateway \
            opened it when it sent the push, and the report must reach it in time), its process \
            group is killed (SIGKILL) and nothing is reported: the gateway counts the timeout. At most 16 commands run at once; the others wait their \
            turn, their windows running. Without --fetch-command each silent push is reported as \
            newData at once. A silent push sent again within its window is not fetched again.

            Each fetch ends with one line, {"type":"fetch","seq":N,"topic":"T","result":R,...}: \
            with "exitStatus" and "durationMs" when the command exited, "signal" and "durationMs" \
            when a signal ended it, "killedAfterMs" when it was killed (R is then "timeout"), \
            "waitedMs" when the window ended before its turn (R "timeout" too), "error" when it \
            could not run; durations count from the notification's arrival. Web Push messages run \
            the command too (the printed line on stdin, PUSHGATE_TOPIC the subscription's name, \
            PUSHGATE_APNS_ID the message's id); the result is reported only for those the gateway \
            opened a window for (urgency low and very-low). A report the gateway \
            refuses adds "refused":{"status","reason","detail"}, one that found no connection \
            before the window ended adds "unreported" with why; neither stops the agent.
            """
    )

    @OptionGroup var client: ClientOptions

    @Option(help: "File holding this device's id and secret; created if missing.")
    var identity: String

    @Option(help: "Register this topic (an app's bundle id). Repeatable.")
    var topic: [String] = []

    @Option(
        help:
            "Power state to report: awake, idle or lowPower (default: report none, which the gateway treats as awake)."
    )
    var power: String?

    @Option(
        name: .customLong("app-state"),
        help: "An app's state to report, TOPIC=foreground|background|terminated. Repeatable."
    )
    var appStates: [String] = []

    @Option(help: "Send a keep-alive (a wake event) every this many seconds (at most 86400); 0: never.")
    var keepalive: Int = 0

    @Option(
        name: .customLong("fetch-command"),
        help:
            "Run this with /bin/sh -c for each silent push, within its fetch window: exit 0 reports newData, 1 noData, anything else failed; killed at the window's end, unreported (see below). Default: report newData."
    )
    var fetchCommand: String?

    @Option(
        name: .customLong("fetch-interval"),
        help:
            "An app's fetch interval to report, TOPIC=minimum|never|SECONDS (1 to 604800): how often the gateway may release its held silent pushes on budget. Repeatable.",
        transform: { argument in try FetchIntervalSetting.parse(argument) }
    )
    var fetchIntervals: [(topic: String, interval: FetchInterval)] = []

    @Option(
        name: .customLong("request-timeout"),
        help:
            "Seconds (1 to 3600) to wait for the answer to each request (device creation, registration, state report, the event stream's head, an ack, a keep-alive) before taking the connection as dead and reconnecting."
    )
    var requestTimeout: Int = 30

    @Option(
        name: .customLong("webpush"),
        help:
            "Subscribe to Web Push as NAME (letters, digits, '.', '-', '_'): print its subscription, decrypt and print its messages. Repeatable."
    )
    var webpush: [String] = []

    @Option(
        name: .customLong("webpush-vapid-key"),
        help:
            "Restrict the --webpush just before it to this application server key (base64url, as VAPID's k): pushes to it then need VAPID signed by that key."
    )
    var webpushVapidKeys: [String] = []

    @OptionGroup var deviceCreation: DeviceCreationOptions

    @Flag(
        name: .customLong("retry-forever"),
        help:
            "Retry with back-off also the connection failures that end the agent otherwise (exit 1), because retrying alone cannot fix them: a gateway certificate that does not verify against --cacert or does not name the host in --server, a TLS handshake the gateway refuses (a client certificate it requires), http:// given for a TLS port or https:// for a cleartext one. For an agent under a supervisor that would restart it into the same failure, while the gateway's side may be fixed meanwhile. A gateway that cannot be reached, resets, drains or answers 5xx or 429 is retried either way; a 401 (the device is gone) or another 4xx still ends the agent."
    )
    var retryForever = false

    func validate() throws {
        if let power, DevicePower(rawValue: power) == nil {
            throw ValidationError(
                "--power must be one of \(DevicePower.allCases.map(\.rawValue).joined(separator: ", "))"
            )
        }
        for entry in appStates where Self.appState(entry) == nil {
            throw ValidationError("--app-state must be TOPIC=foreground|background|terminated, got \(entry)")
        }
        // A day at most: far larger values overflowed the interval's Duration and trapped.
        if !(0...86_400).contains(keepalive) {
            throw ValidationError("--keepalive must be 0 to 86400 seconds, got \(keepalive)")
        }
        try RequestTimeout.check(requestTimeout)
        _ = try Self.webPushSubscriptions(CommandLine.arguments)
    }

    func run() async throws {
        let group = MultiThreadedEventLoopGroup.singleton
        var state = DeviceStateReport(power: power.flatMap(DevicePower.init))
        for entry in appStates {
            if let (topic, value) = Self.appState(entry) { state.apps[topic] = value }
        }
        for (topic, interval) in fetchIntervals { state.fetchIntervals[topic] = interval }
        let agent = Agent(
            client: client,
            identityPath: identity,
            topics: topic,
            state: state,
            keepaliveSeconds: keepalive,
            requestTimeout: .seconds(requestTimeout),
            fetchCommand: fetchCommand,
            registrationSecret: try deviceCreation.registrationSecret(),
            retryForever: retryForever,
            webPush: try Self.webPushSubscriptions(CommandLine.arguments),
            group: group
        )
        try await agent.run()
    }
}

extension AgentCommand {
    /// `--webpush NAME [--webpush-vapid-key KEY]`, in the order given: each key restricts the
    /// subscription named just before it (the parser keeps each option's values apart, not
    /// their order).
    static func webPushSubscriptions(_ arguments: [String]) throws -> [AgentWebPush.Wanted] {
        var wanted: [AgentWebPush.Wanted] = []
        var index = arguments.startIndex
        func value(_ flag: String) throws -> String? {
            let argument = arguments[index]
            if argument.hasPrefix(flag + "=") { return String(argument.dropFirst(flag.count + 1)) }
            guard argument == flag else { return nil }
            index += 1
            guard index < arguments.endIndex else { throw ValidationError("\(flag) needs a value") }
            return arguments[index]
        }
        while index < arguments.endIndex {
            if let name = try value("--webpush") {
                guard TopicRules.isValid(name) else {
                    throw ValidationError(
                        "--webpush NAME: \(TopicRules.explain(name).replacingOccurrences(of: "topic", with: "name"))"
                    )
                }
                guard !wanted.contains(where: { $0.name == name }) else {
                    throw ValidationError("--webpush \(name) is given twice")
                }
                wanted.append(AgentWebPush.Wanted(name: name))
            } else if let key = try value("--webpush-vapid-key") {
                guard let last = wanted.indices.last, wanted[last].applicationServerKey == nil else {
                    throw ValidationError(
                        "--webpush-vapid-key restricts the --webpush NAME just before it; give one after each"
                    )
                }
                guard let point = Base64URL.decode(key.filter { $0 != "=" }),
                    ES256PublicKey(uncompressedPoint: point) != nil
                else {
                    throw ValidationError(
                        "--webpush-vapid-key must be a P-256 public key (65 bytes, uncompressed) in base64url, as VAPID's k"
                    )
                }
                wanted[last].applicationServerKey = Base64URL.encode(point)
            }
            index += 1
        }
        return wanted
    }

    /// `TOPIC=foreground|background|terminated`.
    static func appState(_ entry: String) -> (String, AppState)? {
        guard let equals = entry.lastIndex(of: "="), equals != entry.startIndex,
            let state = AppState(rawValue: String(entry[entry.index(after: equals)...]))
        else { return nil }
        return (String(entry[..<equals]), state)
    }
}
