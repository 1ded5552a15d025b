import Foundation
import NIOConcurrencyHelpers

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Runs an app's fetch: `/bin/sh -c COMMAND` in a process group of its own, with the
/// notification on its stdin, at most `concurrency` at a time (the others wait their turn, in
/// arrival order), each killed with its whole group if it is still running at its deadline.
///
/// Not Foundation's `Process`: it reaps its children on a thread of its own, so a kill at the
/// deadline could reach a process group whose leader was reaped and whose id was reused. Here
/// the child is reaped under the same lock the kill takes.
public final class FetchCommandRunner: Sendable {
    private let command: String
    private let turns: Turns
    private let output: Int32

    /// `output` receives the command's stdout and stderr: the agent's stderr, so that what a
    /// command prints never mixes with the agent's JSON lines.
    public init(command: String, concurrency: Int = 16, output: Int32 = STDERR_FILENO) {
        precondition(concurrency > 0, "a runner that runs nothing")
        self.command = command
        self.turns = Turns(concurrency)
        self.output = output
    }

    /// Waits for a turn, then runs the command with `input` and a newline on its stdin, then
    /// EOF, and `environment` added to this process's own. Returns when the command has exited
    /// or was killed at `deadline`; its children may live on if it exited by itself.
    public func run(
        input: String,
        environment: [String: String],
        deadline: ContinuousClock.Instant
    ) async -> FetchCommandOutcome {
        await turns.take()
        defer { turns.give() }
        guard ContinuousClock.now < deadline else { return .expiredBeforeItsTurn }
        let child: ChildProcess
        do {
            child = try ChildProcess.spawn(
                ["/bin/sh", "-c", command],
                environment: ProcessInfo.processInfo.environment.merging(environment) { $1 },
                input: Array((input + "\n").utf8),
                output: output
            )
        } catch {
            return .failedToRun(error.description)
        }
        let killer = Task {
            do { try await Task.sleep(until: deadline, clock: .continuous) } catch { return }
            child.killGroupIfRunning()
        }
        let outcome = await child.outcome
        killer.cancel()
        return outcome
    }
}

/// A spawned command until it is reaped: its outcome, and the kill of its group.
private final class ChildProcess: Sendable {
    struct SpawnFailure: Error, CustomStringConvertible {
        var description: String
    }

    /// Held from creating a stdin pipe to spawning with it. A pipe is not close-on-exec when
    /// created, and a command spawned meanwhile would hold the other command's write end: that
    /// command's stdin would not end until the unrelated one exits.
    private static let spawning = NIOLock()

    private struct State {
        var outcome: FetchCommandOutcome?
        var killed = false
        var waiter: CheckedContinuation<FetchCommandOutcome, Never>?
    }

    private let pid: pid_t
    private let state = NIOLockedValueBox(State())

    private init(pid: pid_t) {
        self.pid = pid
    }

    static func spawn(
        _ arguments: [String],
        environment: [String: String],
        input: [UInt8],
        output: Int32
    ) throws(SpawnFailure) -> ChildProcess {
        let argv = CStrings(arguments)
        let envp = CStrings(environment.map { "\($0.key)=\($0.value)" })
        var pipeEnds: [Int32] = [-1, -1]
        let pid: pid_t
        do {
            pid = try spawning.withLock { () -> Result<pid_t, SpawnFailure> in
                guard pipe(&pipeEnds) == 0 else {
                    return .failure(SpawnFailure(description: "cannot make a pipe: \(errorText())"))
                }
                _ = fcntl(pipeEnds[0], F_SETFD, FD_CLOEXEC)
                _ = fcntl(pipeEnds[1], F_SETFD, FD_CLOEXEC)
                return Result { () throws(SpawnFailure) in
                    try posixSpawn(argv, envp, stdin: pipeEnds[0], output: output)
                }
            }.get()
        } catch {
            for end in pipeEnds where end >= 0 { close(end) }
            throw error
        }
        // Only the child may hold the read end: once it is gone, a write to a command that
        // does not read its stdin fails instead of blocking.
        close(pipeEnds[0])
        let child = ChildProcess(pid: pid)
        let stdin = pipeEnds[1]
        // waitid blocks: a thread of its own, not a slot of the cooperative pool.
        Thread {
            feed(input, to: stdin)
            close(stdin)
            child.waitAndReap()
        }.start()
        return child
    }

    /// The command's end; killed means it was still running at its deadline.
    var outcome: FetchCommandOutcome {
        get async {
            await withCheckedContinuation { continuation in
                let known = state.withLockedValue { state -> FetchCommandOutcome? in
                    if state.outcome == nil { state.waiter = continuation }
                    return state.outcome
                }
                if let known { continuation.resume(returning: known) }
            }
        }
    }

    func killGroupIfRunning() {
        state.withLockedValue { state in
            guard state.outcome == nil else { return }
            // The leader is not reaped yet, so the group id is still its own.
            kill(-pid, SIGKILL)
            state.killed = true
        }
    }

    /// Waits for the exit without reaping, then reaps under the lock: until then the pid (the
    /// process group's id) cannot be reused, so a kill can never reach another group.
    private func waitAndReap() {
        var info = siginfo_t()
        var waited: Int32
        repeat { waited = waitid(P_PID, id_t(pid), &info, WEXITED | WNOWAIT) } while waited != 0 && errno == EINTR
        let failure = waited == 0 ? nil : "cannot wait for the command: \(errorText())"
        let (outcome, waiter) = state.withLockedValue { state in
            var outcome: FetchCommandOutcome
            if let failure {
                outcome = .failedToRun(failure)
            } else {
                _ = waitid(P_PID, id_t(pid), &info, WEXITED)
                outcome = Self.outcome(of: info)
            }
            if state.killed { outcome = .killedAtDeadline }
            state.outcome = outcome
            defer { state.waiter = nil }
            return (outcome, state.waiter)
        }
        waiter?.resume(returning: outcome)
    }

    private static func outcome(of info: siginfo_t) -> FetchCommandOutcome {
        #if canImport(Glibc)
        let status = info._sifields._sigchld.si_status
        #else
        let status = info.si_status
        #endif
        return info.si_code == CLD_EXITED ? .exited(status: status) : .signalled(status)
    }

    private static func posixSpawn(
        _ argv: CStrings,
        _ envp: CStrings,
        stdin: Int32,
        output: Int32
    ) throws(SpawnFailure) -> pid_t {
        #if canImport(Glibc)
        var actions = posix_spawn_file_actions_t()
        var attributes = posix_spawnattr_t()
        #else
        var actions: posix_spawn_file_actions_t? = nil
        var attributes: posix_spawnattr_t? = nil
        #endif
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, stdin, STDIN_FILENO)
        posix_spawn_file_actions_adddup2(&actions, output, STDOUT_FILENO)
        posix_spawn_file_actions_adddup2(&actions, output, STDERR_FILENO)
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        // A group of its own (so the kill reaches what sh started), with the signal mask and
        // dispositions a freshly started shell expects, whatever this process blocks or ignores.
        posix_spawnattr_setflags(
            &attributes,
            Int16(POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF)
        )
        posix_spawnattr_setpgroup(&attributes, 0)
        var none = sigset_t()
        sigemptyset(&none)
        posix_spawnattr_setsigmask(&attributes, &none)
        var all = sigset_t()
        sigfillset(&all)
        posix_spawnattr_setsigdefault(&attributes, &all)
        var pid = pid_t()
        let failed = posix_spawn(&pid, argv.pointers[0]!, &actions, &attributes, argv.pointers, envp.pointers)
        guard failed == 0 else {
            throw SpawnFailure(description: "cannot start /bin/sh: \(String(cString: strerror(failed)))")
        }
        return pid
    }
}

/// Writes all of `bytes`, giving up when the command no longer reads (it exited, or closed its
/// stdin): the command decides whether to read its input.
private func feed(_ bytes: [UInt8], to fd: Int32) {
    // A write to a pipe nobody reads raises SIGPIPE, which would end the agent: blocked on
    // this thread, it stays pending here and is dropped when the thread ends, and the write
    // fails with EPIPE instead.
    var pipeSignal = sigset_t()
    sigemptyset(&pipeSignal)
    sigaddset(&pipeSignal, SIGPIPE)
    pthread_sigmask(SIG_BLOCK, &pipeSignal, nil)
    bytes.withUnsafeBytes { buffer in
        var offset = 0
        while offset < buffer.count {
            let written = write(fd, buffer.baseAddress! + offset, buffer.count - offset)
            if written < 0, errno == EINTR { continue }
            guard written > 0 else { return }
            offset += written
        }
    }
}

private func errorText() -> String { String(cString: strerror(errno)) }

/// NUL-terminated C strings and the nil-terminated array of them that exec takes, alive as
/// long as this is.
private final class CStrings {
    let pointers: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>
    private let count: Int

    init(_ strings: [String]) {
        count = strings.count
        pointers = .allocate(capacity: count + 1)
        for (index, string) in strings.enumerated() { pointers[index] = strdup(string) }
        pointers[count] = nil
    }

    deinit {
        for index in 0..<count { free(pointers[index]) }
        pointers.deallocate()
    }
}

/// Turns for at most `limit` holders at once, given in the order they were asked for.
private final class Turns: Sendable {
    private struct State {
        var free: Int
        var waiting: [CheckedContinuation<Void, Never>] = []
    }

    private let state: NIOLockedValueBox<State>

    init(_ limit: Int) {
        state = NIOLockedValueBox(State(free: limit))
    }

    func take() async {
        await withCheckedContinuation { continuation in
            let granted = state.withLockedValue { state -> Bool in
                guard state.free == 0 else {
                    state.free -= 1
                    return true
                }
                state.waiting.append(continuation)
                return false
            }
            if granted { continuation.resume() }
        }
    }

    func give() {
        let next = state.withLockedValue { state -> CheckedContinuation<Void, Never>? in
            guard !state.waiting.isEmpty else {
                state.free += 1
                return nil
            }
            return state.waiting.removeFirst()
        }
        next?.resume()
    }
}
