import ArgumentParser

/// `work`'s result, or nil when `limit` passes first. `work` is then cancelled and waited for:
/// `whenLate` runs before that wait, to end work that ignores cancellation.
func firstWithin<T: Sendable>(
    _ limit: Duration,
    _ work: @escaping @Sendable () async throws -> T,
    whenLate: () async -> Void = {}
) async throws -> T? {
    try await withThrowingTaskGroup(of: Outcome<T>.self) { group in
        group.addTask { .done(try await work()) }
        group.addTask {
            try await Task.sleep(for: limit)
            return .late
        }
        defer { group.cancelAll() }
        guard case .done(let value) = try await group.next() else {
            await whenLate()
            return nil
        }
        return value
    }
}

private enum Outcome<T: Sendable>: Sendable {
    case done(T)
    case late
}

/// `--request-timeout`, which the agent and send share: a second to an hour.
enum RequestTimeout {
    static func check(_ seconds: Int) throws {
        if !(1...3600).contains(seconds) {
            throw ValidationError("--request-timeout must be 1 to 3600 seconds, got \(seconds)")
        }
    }
}
