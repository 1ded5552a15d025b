import Foundation
import PushgateDeviceClient
import PushgateModel
import Testing

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Real `/bin/sh -c` commands: their exits, their input and environment, and the kill at the
/// deadline, which must reach what the shell started. Serialized: each test's pipe is meant for
/// its own commands only.
@Suite("Fetch commands: exits, input, environment, the deadline's kill, turns", .serialized)
struct FetchCommandRunnerTests {
    static var later: ContinuousClock.Instant { .now + .seconds(60) }

    @Test(
        "exit 0, 1 and 3: newData, noData, failed",
        arguments: [(Int32(0), FetchResult.newData), (1, .noData), (3, .failed)]
    )
    func exits(status: Int32, result: FetchResult) async {
        let runner = FetchCommandRunner(command: "cat > /dev/null; exit \(status)")
        let outcome = await runner.run(input: "{}", environment: [:], deadline: Self.later)
        #expect(outcome == .exited(status: status))
        #expect(outcome.result == result)
    }

    @Test("a command a signal ends failed")
    func signalled() async {
        let runner = FetchCommandRunner(command: "kill -KILL $$")
        let outcome = await runner.run(input: "{}", environment: [:], deadline: Self.later)
        #expect(outcome == .signalled(SIGKILL))
        #expect(outcome.result == .failed)
    }

    @Test("stdin is the input, a newline, then EOF; the environment is this process's and the given variables")
    func inputAndEnvironment() async throws {
        let output = try CommandOutput()
        let runner = FetchCommandRunner(
            command: #"cat; printf '%s|%s|%s|%s\n' "$PUSHGATE_TOPIC" "$PUSHGATE_SEQ" "$PUSHGATE_APNS_ID" "$PATH""#,
            output: output.writeEnd
        )
        let json = #"{"seq":12,"topic":"com.example.app","payload":{"aps":{"content-available":1}}}"#
        let outcome = await runner.run(
            input: json,
            environment: ["PUSHGATE_TOPIC": "com.example.app", "PUSHGATE_SEQ": "12", "PUSHGATE_APNS_ID": "6f1c-1"],
            deadline: Self.later
        )
        output.closeWriteEnd()
        #expect(outcome == .exited(status: 0))
        let path = try #require(ProcessInfo.processInfo.environment["PATH"])
        #expect(await output.readToEnd(within: 10) == json + "\n" + "com.example.app|12|6f1c-1|\(path)\n")
    }

    @Test("input beyond a pipe's capacity reaches a command that reads it, and one that does not read it still ends")
    func largeInput() async throws {
        let input = String(repeating: "x", count: 300_000)
        let output = try CommandOutput()
        let reads = FetchCommandRunner(command: "wc -c", output: output.writeEnd)
        #expect(await reads.run(input: input, environment: [:], deadline: Self.later) == .exited(status: 0))
        output.closeWriteEnd()
        #expect(await output.readToEnd(within: 10)?.trimmingCharacters(in: .whitespacesAndNewlines) == "300001")
        // Writing on after it exited fails with EPIPE; a SIGPIPE would have ended this test process.
        let ignores = FetchCommandRunner(command: "exit 1")
        #expect(await ignores.run(input: input, environment: [:], deadline: Self.later) == .exited(status: 1))
    }

    @Test("still running at the deadline: killed with what the shell started, and no result")
    func killedAtDeadline() async throws {
        let output = try CommandOutput()
        let runner = FetchCommandRunner(command: "sleep 30 & wait", output: output.writeEnd)
        let start = ContinuousClock.now
        let outcome = await runner.run(input: "{}", environment: [:], deadline: start + .milliseconds(200))
        output.closeWriteEnd()
        #expect(outcome == .killedAtDeadline)
        #expect(outcome.result == nil)
        #expect(start.duration(to: .now) >= .milliseconds(200))
        // sleep holds the pipe's write end: the pipe ends once it is dead too, not 30 s on.
        #expect(await output.readToEnd(within: 10) == "")
    }

    @Test("beyond the limit commands wait their turn; one whose deadline passes meanwhile never runs")
    func turns() async throws {
        let output = try CommandOutput()
        let runner = FetchCommandRunner(
            command: #"if [ "$PUSHGATE_SEQ" = 1 ]; then echo started; sleep 30 & wait; fi; echo "ran $PUSHGATE_SEQ""#,
            concurrency: 1,
            output: output.writeEnd
        )
        // Room for a slow machine to start sh and print before the kill.
        let firstDeadline = ContinuousClock.now + .seconds(2)
        async let first = runner.run(input: "{}", environment: ["PUSHGATE_SEQ": "1"], deadline: firstDeadline)
        #expect(await output.readLine(within: 10) == "started")
        // The first holds the only turn until its deadline's kill, after the second's deadline.
        async let second = runner.run(
            input: "{}",
            environment: ["PUSHGATE_SEQ": "2"],
            deadline: firstDeadline - .seconds(1)
        )
        async let third = runner.run(input: "{}", environment: ["PUSHGATE_SEQ": "3"], deadline: Self.later)
        #expect(await first == .killedAtDeadline)
        #expect(await second == .expiredBeforeItsTurn)
        #expect(await third == .exited(status: 0))
        output.closeWriteEnd()
        #expect(await output.readToEnd(within: 10) == "ran 3\n")
    }
}

/// A pipe for commands' stdout and stderr, read until every writer is gone. Reads block on a
/// thread of their own, and give up after a few seconds (nil): a writer that was not killed
/// would otherwise hold the test for as long as it lives.
private final class CommandOutput: Sendable {
    let writeEnd: Int32
    private let readEnd: Int32

    init() throws {
        var ends: [Int32] = [-1, -1]
        guard pipe(&ends) == 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
        // Only the commands given `writeEnd` hold it, by their stdout and stderr.
        _ = fcntl(ends[0], F_SETFD, FD_CLOEXEC)
        _ = fcntl(ends[1], F_SETFD, FD_CLOEXEC)
        readEnd = ends[0]
        writeEnd = ends[1]
    }

    deinit {
        close(readEnd)
    }

    func closeWriteEnd() {
        close(writeEnd)
    }

    /// Everything until EOF.
    func readToEnd(within seconds: Int) async -> String? {
        await collect(within: seconds, upTo: nil)
    }

    /// One line, without its newline; nothing after it is consumed.
    func readLine(within seconds: Int) async -> String? {
        await collect(within: seconds, upTo: UInt8(ascii: "\n"))
    }

    private func collect(within seconds: Int, upTo end: UInt8?) async -> String? {
        let fd = readEnd
        return await withCheckedContinuation { continuation in
            Thread {
                let deadline = ContinuousClock.now + .seconds(seconds)
                var bytes: [UInt8] = []
                var byte: UInt8 = 0
                while true {
                    let left = ContinuousClock.now.duration(to: deadline).components
                    var ready = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
                    let timeout = Int32(max(0, left.seconds * 1000 + left.attoseconds / 1_000_000_000_000_000))
                    let polled = poll(&ready, 1, timeout)
                    if polled < 0, errno == EINTR { continue }
                    guard polled > 0 else { break }
                    // A byte at a time, so that a line read leaves the rest in the pipe.
                    guard read(fd, &byte, 1) == 1 else {
                        continuation.resume(returning: end == nil ? String(decoding: bytes, as: UTF8.self) : nil)
                        return
                    }
                    if byte == end {
                        continuation.resume(returning: String(decoding: bytes, as: UTF8.self))
                        return
                    }
                    bytes.append(byte)
                }
                continuation.resume(returning: nil)
            }.start()
        }
    }
}
