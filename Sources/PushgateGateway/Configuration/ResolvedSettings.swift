import Foundation
import PushgateModel
import PushgateProviderAuth
import PushgateScheduler

/// The settings of one `serve` (or `config check`), each taken from the first source that gives
/// it: flag, then environment, then the configuration file, then its default (`providerKeys`
/// adds up all three). Every problem is collected, each at its place, rather than only the first.
public struct ResolvedSettings: Sendable {
    /// One setting as resolved, for `config check` to print.
    public struct Entry: Sendable {
        public let setting: Setting
        /// Where the value came from; empty when it is the default.
        public let origins: [SettingOrigin]
        /// The value as given, or the default; a secret that is set shows as `<redacted>`.
        public let value: String
    }

    public private(set) var configuration = GatewayConfiguration()
    public private(set) var entries: [Entry] = []
    public private(set) var problems: [SettingError] = []
    /// `PUSHGATE_*` variables that are no setting (a misspelt one is otherwise ignored without a
    /// word), each with a likely meant one when there is one. Said, not refused: the variable
    /// may be meant for something else that shares the environment.
    public private(set) var warnings: [SettingError] = []
    /// The configuration file, when one was named and could be read.
    public private(set) var file: ConfigurationFile?

    /// `arguments`: the flags after the command's name (`--listen 127.0.0.1:2197 ...`).
    public init(arguments: [String], environment: [String: String]) {
        let flags = FlagValues(arguments)
        problems = flags.problems
        warnings = Settings.unknownVariables(in: environment)
        var sources = Sources(flags: flags, environment: environment, file: nil)
        for setting in Settings.all {
            var given: [SettingValue] = []
            do {
                given = try sources.values(of: setting)
            } catch {
                problems.append(error)
                continue
            }
            let used = setting.accumulates ? given : Array(given.prefix(1))
            for value in used {
                do {
                    try setting.apply(&configuration, value)
                } catch {
                    problems.append(error)
                }
            }
            entries.append(Entry(setting: setting, origins: used.map(\.origin), value: Self.display(setting, used)))
            // The file is read as soon as its own setting is known: every later one may be in it.
            if setting.key == "config", let value = used.first, let path = try? value.path() {
                do {
                    let file = try ConfigurationFile.load(path: path)
                    self.file = file
                    sources.file = file
                    let known = Settings.all.flatMap { [$0.fileKey, $0.secretFileKey].compactMap { $0 } }
                    problems += file.duplicateKeys() + file.unknownKeys(known: known)
                } catch {
                    problems.append(error)
                }
            }
        }
    }

    /// The configuration `serve` would run with; throws every problem found.
    public func checked() throws(ConfigurationProblems) -> GatewayConfiguration {
        guard problems.isEmpty else { throw ConfigurationProblems(problems: problems) }
        return configuration
    }

    /// An error of the checks that run on the resolved values (which no longer know their
    /// places), said at the place the value was given when it can be found: a scheduler value
    /// out of range, a provider key of the file that cannot be used.
    public func locate(_ error: any Error) -> String {
        switch error {
        case let error as SchedulerConfigurationError:
            if let topic = error.topic {
                if let file,
                    let field = file.member(at: "scheduler.topics")?.value.member(topic)?.value.member(error.field)
                {
                    return "\(file.path):\(field.value.position): scheduler.topics.\(topic).\(error.field): \(error)"
                }
            } else if let origin = entries.first(where: { $0.setting.key == "scheduler." + error.field })?.origins.first
            {
                return "\(origin.place): \(error)"
            }
        case let error as ProviderKeyConfigurationError:
            if let file, case .array(let keys)? = file.member(at: "providerKeys")?.value.value,
                let index = keys.lastIndex(where: { $0.member("keyId")?.value.displayText == error.keyID })
            {
                let field = keys[index].member(error.field)
                let position = field?.value.position ?? keys[index].position
                return
                    "\(file.path):\(position): providerKeys[\(index)]\(field == nil ? "" : "." + error.field): \(error)"
            }
        default: break
        }
        return "\(error)"
    }

    private static func display(_ setting: Setting, _ values: [SettingValue]) -> String {
        guard !values.isEmpty else { return setting.defaultValue }
        if setting.isSecret { return "<redacted>" }
        return values.map { value in
            switch value.input {
            case .strings(let strings): setting.kind == .list ? strings.joined(separator: " ") : strings.last ?? ""
            case .node(let node): node.displayText
            }
        }.joined(separator: " ")
    }
}

/// The flags as given, by setting.
private struct FlagValues {
    var values: [String: [String]] = [:]
    /// The file forms of secrets (`--admin-token-file`), by setting.
    var secretFiles: [String: [String]] = [:]
    var problems: [SettingError] = []

    init(_ arguments: [String]) {
        var index = 0
        while index < arguments.count {
            let argument = arguments[index]
            index += 1
            guard argument.hasPrefix("--") else {
                problems.append(
                    SettingError(
                        place: argument,
                        problem: "unexpected argument: every setting is a flag with a name (--listen HOST:PORT)"
                    )
                )
                continue
            }
            let parts = argument.split(separator: "=", maxSplits: 1).map(String.init)
            let name = parts[0]
            guard let (setting, isSecretFile) = Settings.setting(flag: name) else {
                let hint = Settings.suggestion(forFlag: name).map { "; did you mean \($0)?" } ?? ""
                problems.append(SettingError(place: name, problem: "unknown flag\(hint)"))
                // Its value is skipped unread: it may be a secret given to a misspelt flag.
                if parts.count == 1, index < arguments.count, !arguments[index].hasPrefix("--") { index += 1 }
                continue
            }
            let value: String
            if parts.count == 2 {
                value = parts[1]
            } else if setting.kind == .toggle, !isSecretFile {
                value = "true"
            } else if index < arguments.count {
                value = arguments[index]
                index += 1
            } else {
                problems.append(
                    SettingError(place: name, problem: "needs a value (\(isSecretFile ? "FILE" : setting.placeholder))")
                )
                continue
            }
            if isSecretFile {
                secretFiles[setting.key, default: []].append(value)
            } else {
                values[setting.key, default: []].append(value)
            }
        }
    }
}

/// Where values come from, in the order they win.
private struct Sources {
    let flags: FlagValues
    let environment: [String: String]
    var file: ConfigurationFile?

    /// What each source gives `setting`, flag first.
    func values(of setting: Setting) throws(SettingError) -> [SettingValue] {
        var values: [SettingValue] = []
        if let flag = setting.flag {
            let given = flags.values[setting.key]
            let secretFile = flags.secretFiles[setting.key]?.last
            if given != nil, secretFile != nil {
                throw SettingError(
                    place: "\(flag) and \(setting.secretFileFlag ?? "")",
                    problem: "give the \(setting.words) once"
                )
            }
            if let secretFile {
                values.append(try secret(setting, fromFile: secretFile, namedBy: .flag(setting.secretFileFlag ?? flag)))
            } else if let given {
                values.append(
                    SettingValue(setting: setting, input: .strings(given), origin: .flag(flag), baseDirectory: nil)
                )
            }
        }
        if let variable = setting.environmentVariable {
            let given = environment[variable]
            let fileVariable = setting.secretFileEnvironmentVariable
            let secretFile = fileVariable.flatMap { environment[$0] }
            if given != nil, secretFile != nil {
                throw SettingError(
                    place: "\(variable) and \(fileVariable ?? "")",
                    problem: "give the \(setting.words) once"
                )
            }
            if let secretFile {
                values.append(
                    try secret(setting, fromFile: secretFile, namedBy: .environment(fileVariable ?? variable))
                )
            } else if let given {
                values.append(
                    SettingValue(
                        setting: setting,
                        input: .strings([given]),
                        origin: .environment(variable),
                        baseDirectory: nil
                    )
                )
            }
        }
        if let file, let key = setting.fileKey {
            let given = file.member(at: key)
            let secretFile = setting.secretFileKey.flatMap { file.member(at: $0) }
            if let given, let secretFile {
                throw SettingError(
                    place: "\(file.path):\(secretFile.keyPosition): \(secretFile.key)",
                    problem:
                        "give the \(setting.words) once: \(key) (line \(given.keyPosition.line)) or \(secretFile.key)"
                )
            }
            if let secretFile, let secretKey = setting.secretFileKey {
                let named = SettingValue(
                    setting: setting,
                    input: .node(secretFile.value),
                    origin: file.origin(of: secretFile, key: secretKey),
                    baseDirectory: file.directory
                )
                values.append(try secret(setting, fromFile: try named.path(), namedBy: named.origin))
            } else if let given {
                values.append(
                    SettingValue(
                        setting: setting,
                        input: .node(given.value),
                        origin: file.origin(of: given, key: key),
                        baseDirectory: file.directory
                    )
                )
            }
        }
        return values
    }

    /// The secret in the file `path` (see `SecretFile`), said to come from it.
    private func secret(
        _ setting: Setting,
        fromFile path: String,
        namedBy: SettingOrigin
    ) throws(SettingError) -> SettingValue {
        let secret: String
        do {
            secret = try SecretFile.read(path)
        } catch {
            throw SettingError(place: namedBy.place, problem: error.description)
        }
        return SettingValue(
            setting: setting,
            input: .strings([secret]),
            origin: .secretFile(path: path, namedBy: namedBy),
            baseDirectory: nil
        )
    }
}

extension Setting {
    /// The setting in words, for messages: `the admin token`.
    var words: String { Self.words(key).joined(separator: " ") }
}

extension JSONNode {
    /// The value as `config check` prints it: scalars bare, arrays of strings spaced, objects
    /// as compact JSON.
    var displayText: String {
        switch value {
        case .null: "null"
        case .bool(let bool): "\(bool)"
        case .number(let number): number
        case .string(let string): string
        case .array(let elements) where elements.allSatisfy({ if case .string = $0.value { true } else { false } }):
            elements.map(\.displayText).joined(separator: " ")
        default: jsonText
        }
    }

    var jsonText: String {
        switch value {
        case .string(let string): JSONText.quote(string)
        case .array(let elements): "[" + elements.map(\.jsonText).joined(separator: ",") + "]"
        case .object(let members):
            "{" + members.map { JSONText.quote($0.key) + ":" + $0.value.jsonText }.joined(separator: ",") + "}"
        default: displayText
        }
    }
}
