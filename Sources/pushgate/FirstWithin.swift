/// `work`'s result, or nil when `limit` passes first. `work` is then cancelled and waited for:
/// `whenLate` runs before that wait, to end work that ignores cancellation.
func firstWithin<T: Sendable>(
    _ limit: Duration, _ work: @escaping @Sendable () async throws -> T, whenLate: () async -> Void = {}
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
