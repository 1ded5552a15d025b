/// "Did you mean" for a flag or an environment variable that names no setting.
extension Settings {
    /// The flags a mistaken `flag` likely meant, worded for "did you mean ...?"; nil when none is
    /// likely.
    static func suggestion(forFlag flag: String) -> String? {
        let candidates = all.flatMap { setting -> [Candidate] in
            guard let name = setting.flag else { return [] }
            let words = Setting.words(setting.key)
            var candidates = [Candidate(name: name, words: words, value: setting.placeholder)]
            if let fileFlag = setting.secretFileFlag {
                candidates.append(Candidate(name: fileFlag, words: words + ["file"], value: "FILE"))
            }
            return candidates
        }
        let words = flag.drop { $0 == "-" }.split(separator: "-").map { $0.lowercased() }
        return suggestion(for: flag, words: words, among: candidates, valueSeparator: " ")
    }

    /// `PUSHGATE_*` variables that are no `serve` setting but something else of Pushgate's reads,
    /// so that serve does not warn about them: `PUSHGATE_TOPIC`, `PUSHGATE_SEQ` and
    /// `PUSHGATE_APNS_ID`, which the agent sets for its fetch commands; the container's health
    /// check port; the build's allocator and sanitizer switches (Package.swift). The agent and
    /// bench read `PUSHGATE_REGISTRATION_SECRET` and `PUSHGATE_REGISTRATION_SECRET_FILE`, send
    /// reads none: those two are serve settings too.
    public static let otherVariables = [
        "PUSHGATE_TOPIC", "PUSHGATE_SEQ", "PUSHGATE_APNS_ID", "PUSHGATE_HEALTHCHECK_PORT", "PUSHGATE_SYSTEM_MALLOC",
        "PUSHGATE_SANITIZE",
    ]

    /// Every setting's variables, its secret file's included.
    static var variables: [String] {
        all.flatMap { [$0.environmentVariable, $0.secretFileEnvironmentVariable].compactMap { $0 } }
    }

    /// A warning for each `PUSHGATE_*` variable of `environment` that no setting and nothing in
    /// `otherVariables` reads, in name order.
    static func unknownVariables(in environment: [String: String]) -> [SettingError] {
        let settings = variables
        let known = Set(settings + otherVariables)
        return environment.keys.filter { $0.hasPrefix("PUSHGATE_") && !known.contains($0) }.sorted().map { variable in
            let hint = suggestion(forVariable: variable, among: settings).map { "; did you mean \($0)?" } ?? ""
            return SettingError(place: variable, problem: "no such setting, ignored\(hint)")
        }
    }

    /// The variables a mistaken `PUSHGATE_*` variable likely meant, among `known`, worded for
    /// "did you mean ...?"; nil when none is likely.
    static func suggestion(forVariable variable: String, among known: [String]) -> String? {
        func words(_ name: String) -> [String] {
            name.dropFirst("PUSHGATE_".count).split(separator: "_").map { $0.lowercased() }
        }
        let placeholders = Dictionary(
            all.compactMap { setting in setting.environmentVariable.map { ($0, setting.placeholder) } },
            uniquingKeysWith: { first, _ in first }
        )
        let candidates = known.map { Candidate(name: $0, words: words($0), value: placeholders[$0] ?? "") }
        return suggestion(for: variable, words: words(variable), among: candidates, valueSeparator: "=")
    }

    private struct Candidate {
        var name: String
        var words: [String]
        /// The value's placeholder (`HOST:PORT`), whose words a mistaken name may use.
        var value: String

        var valueWords: [String] { value.split { !$0.isLetter }.map { $0.lowercased() } }
    }

    /// Names, best first (three, and a pointer to the rest): the closest spelling when it is close enough
    /// (`--confg`: `--config`); else the names holding all of its words in order (`--tls-ca`:
    /// `--tls-client-ca`); else the settings whose value its words name, shown with their
    /// placeholder after `valueSeparator` (`--port`: `--listen HOST:PORT` and the other
    /// listeners; `PUSHGATE_PORT`: `PUSHGATE_LISTEN=HOST:PORT` ...).
    private static func suggestion(
        for name: String,
        words: [String],
        among candidates: [Candidate],
        valueSeparator: String
    ) -> String? {
        if let closest = closestName(to: name, among: candidates.map(\.name)) { return closest }
        guard !words.isEmpty else { return nil }
        let containing = candidates.filter { $0.words.containsInOrder(words) }.map(\.name)
        if !containing.isEmpty { return listed(containing) }
        let valued = candidates.filter { candidate in words.contains { candidate.valueWords.contains($0) } }
        // A word as common as FILE or SECONDS names half the table: no suggestion is better.
        guard !valued.isEmpty, valued.count <= 3 else { return nil }
        return listed(valued.map { $0.name + valueSeparator + $0.value })
    }

    private static func listed(_ names: [String]) -> String {
        if names.count > 3 { return names.prefix(3).joined(separator: ", ") + " or another of serve --help" }
        guard names.count > 1 else { return names[0] }
        return names.dropLast().joined(separator: ", ") + " or " + names.last!
    }
}

extension Array where Element == String {
    /// Whether `words` appear among these, in order, not necessarily side by side.
    fileprivate func containsInOrder(_ words: [String]) -> Bool {
        var rest = self[...]
        for word in words {
            guard let index = rest.firstIndex(of: word) else { return false }
            rest = rest[(index + 1)...]
        }
        return true
    }
}
