/// What is wrong with the configuration, said so that a person can fix it: where the value was
/// given (a flag, an environment variable, or the file's line, column and key) and what is
/// allowed. `serve` stops at the first; `config check` lists them all.

/// One value that cannot be used, at its place: `pushgate.json:7:5: scheduler.appBrust: unknown
/// key; did you mean appBurst?`, `PUSHGATE_THREADS: "two" is not a whole number`.
public struct SettingError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The flag, the environment variable, or `FILE:LINE:COLUMN: KEY`.
    public var place: String
    public var problem: String

    public init(place: String, problem: String) {
        self.place = place
        self.problem = problem
    }

    public var description: String { "\(place): \(problem)" }
}

/// Every problem found reading the settings, in the order of the table (the file's own, such as
/// unknown keys, first).
public struct ConfigurationProblems: Error, Sendable, CustomStringConvertible {
    public var problems: [SettingError]
    public var description: String { problems.map(\.description).joined(separator: "\n") }
}

/// A setting that cannot run, said in the terms `serve` was given it.
public struct GatewayConfigurationError: Error, Equatable, CustomStringConvertible {
    public var description: String

    public init(_ description: String) {
        self.description = description
    }
}

/// The known name closest to `name`, when it is close enough to be a likely misspelling:
/// for "did you mean ...?".
func closestName(to name: String, among known: [String]) -> String? {
    let lowered = Array(name.lowercased())
    let scored = known.map { candidate in (candidate, editDistance(lowered, Array(candidate.lowercased()))) }
    guard let best = scored.min(by: { $0.1 < $1.1 }) else { return nil }
    return best.1 <= max(2, lowered.count / 3) ? best.0 : nil
}

private func editDistance(_ a: [Character], _ b: [Character]) -> Int {
    var previous = Array(0...b.count)
    for (i, x) in a.enumerated() {
        var current = [i + 1]
        for (j, y) in b.enumerated() {
            current.append(min(previous[j + 1] + 1, current[j] + 1, previous[j] + (x == y ? 0 : 1)))
        }
        previous = current
    }
    return previous[b.count]
}
