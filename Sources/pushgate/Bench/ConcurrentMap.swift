extension Array where Element: Sendable {
    /// `transform` of every element, at most `width` running at once; results in completion order.
    func concurrentMap<T: Sendable>(
        width: Int,
        _ transform: @escaping @Sendable (Element) async throws -> T
    ) async throws -> [T] {
        try await withThrowingTaskGroup(of: T.self) { group in
            var results: [T] = []
            results.reserveCapacity(count)
            var next = 0
            while next < Swift.min(width, count) {
                let element = self[next]
                group.addTask { try await transform(element) }
                next += 1
            }
            while let result = try await group.next() {
                results.append(result)
                if next < count {
                    let element = self[next]
                    group.addTask { try await transform(element) }
                    next += 1
                }
            }
            return results
        }
    }
}

extension Sequence {
    func asyncMap<T>(_ transform: (Element) async throws -> T) async rethrows -> [T] {
        var out: [T] = []
        for element in self { out.append(try await transform(element)) }
        return out
    }
}
