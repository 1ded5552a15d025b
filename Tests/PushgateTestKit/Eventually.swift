import Foundation

/// A wait for a condition that did not come in time.
public struct TimedOut: Error, CustomStringConvertible {
    public var what: String
    public var description: String { "timed out waiting for \(what)" }

    public init(what: String) { self.what = what }
}

/// Waits for a state the test cannot be told about (a connection's end reaching its device's
/// shard, the store's writer thread catching up), checking it again after each short pause;
/// throws `TimedOut` after `within`.
public func eventually(
    _ what: String,
    within: Duration = .seconds(10),
    _ condition: () async throws -> Bool
) async throws {
    let deadline = ContinuousClock.now + within
    while try await !condition() {
        guard ContinuousClock.now < deadline else { throw TimedOut(what: what) }
        try await Task.sleep(for: .milliseconds(5))
    }
}

/// `eventually` for a test that blocks its thread on other processes: what another process's
/// clock decides (the gateway's fetch window), which no line of its output announces.
public func waitUntil(_ what: String, seconds: Double = 30, _ condition: () throws -> Bool) throws {
    let deadline = Date().addingTimeInterval(seconds)
    while try !condition() {
        guard Date() < deadline else { throw TimedOut(what: what) }
        usleep(20_000)
    }
}
