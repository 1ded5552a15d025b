import Foundation
import PushgateModel
import PushgateTransport

/// One `serve` setting, defined once: its key in the configuration file, from which its flag
/// (`idleTimeout`: `--idle-timeout`) and environment variable (`PUSHGATE_IDLE_TIMEOUT`) follow;
/// what it holds; its default and help as the README and `--help` show them; and where its value
/// goes in a `GatewayConfiguration`. `Settings.all` is the table of them.
public struct Setting: Sendable {
    /// What a setting holds, which decides how its flag is parsed and how the file must spell it.
    public enum Kind: Sendable, Equatable {
        /// A string (`"..."` in the file).
        case text
        /// A file or directory name; relative names in the configuration file are resolved
        /// against the file's directory.
        case path
        /// A whole number.
        case integer
        /// On or off: a flag without a value; `true`/`false` in the file and the environment.
        case toggle
        /// Repeatable: the flag once per item, an array of strings in the file, items separated
        /// by spaces in the environment.
        case list
        /// File only: an object or array too structured for a flag.
        case structured
    }

    /// The key in the configuration file: `logLevel`, or `scheduler.appBurst` inside an object.
    public let key: String
    public let kind: Kind
    /// What the value looks like in help: `HOST:PORT`, `SECONDS`.
    public let placeholder: String
    /// The default as people read it (`300`, `one per core`, `none`).
    public let defaultValue: String
    public let help: String
    /// Never printed nor logged; may also come from a file (`--admin-token-file`,
    /// `PUSHGATE_ADMIN_TOKEN_FILE`, `adminTokenFile`), as container platforms deliver secrets.
    public let isSecret: Bool
    /// Flags, the environment and the file all add to it, instead of the first one winning.
    public let accumulates: Bool
    /// A reload (SIGHUP, `POST /v1/admin/reload`) applies a new value; the others are read at
    /// start only (`ConfigurationReloader.restartOnly` names them, and a test holds the two
    /// lists together).
    public let reloads: Bool
    /// Sources it has besides the flag and the environment (`config` has no file key, the
    /// structured ones have only the file).
    public let sources: Set<Source>
    let apply: @Sendable (inout GatewayConfiguration, SettingValue) throws(SettingError) -> Void

    public enum Source: Sendable, Hashable { case flag, environment, file }

    init(
        _ key: String,
        _ kind: Kind,
        _ placeholder: String = "",
        default defaultValue: String,
        secret: Bool = false,
        accumulates: Bool = false,
        reloads: Bool = false,
        sources: Set<Source> = [.flag, .environment, .file],
        flag: String? = nil,
        help: String,
        apply: @escaping @Sendable (inout GatewayConfiguration, SettingValue) throws(SettingError) -> Void
    ) {
        self.key = key
        self.kind = kind
        self.placeholder = placeholder
        self.defaultValue = defaultValue
        self.isSecret = secret
        self.accumulates = accumulates
        self.reloads = reloads
        self.sources = kind == .structured ? [.file] : sources
        self.help = help
        self.apply = apply
        self.flagName = flag ?? "--" + Self.words(key).joined(separator: "-")
    }

    private let flagName: String

    /// `--idle-timeout`; nil when the setting has no flag.
    public var flag: String? { sources.contains(.flag) ? flagName : nil }

    /// `PUSHGATE_IDLE_TIMEOUT`; nil when the setting has no environment variable.
    public var environmentVariable: String? {
        guard sources.contains(.environment) else { return nil }
        return "PUSHGATE_" + Self.words(key).joined(separator: "_").uppercased()
    }

    /// The key in the file; nil when the setting has none.
    public var fileKey: String? { sources.contains(.file) ? key : nil }

    /// The file forms of a secret: `--admin-token-file`, `PUSHGATE_ADMIN_TOKEN_FILE`, `adminTokenFile`.
    public var secretFileFlag: String? { isSecret ? flag.map { $0 + "-file" } : nil }
    public var secretFileEnvironmentVariable: String? { isSecret ? environmentVariable.map { $0 + "_FILE" } : nil }
    public var secretFileKey: String? { isSecret ? fileKey.map { $0 + "File" } : nil }

    /// The key's words, lowercased: `scheduler.appBurst` is scheduler, app, burst; a run of
    /// capitals is one word (`tlsClientCA`: tls, client, ca).
    static func words(_ key: String) -> [String] {
        var words: [String] = []
        var current = ""
        let characters = Array(key)
        for (index, character) in characters.enumerated() {
            if character == "." {
                words.append(current)
                current = ""
                continue
            }
            let startsWord =
                character.isUppercase && !current.isEmpty
                && (!(characters[index - 1].isUppercase)
                    || (index + 1 < characters.count && characters[index + 1].isLowercase))
            if startsWord {
                words.append(current)
                current = ""
            }
            current += character.lowercased()
        }
        return words + [current]
    }
}

/// Where a setting's value came from; `config check` prints it beside the value.
public enum SettingOrigin: Sendable, Equatable, CustomStringConvertible {
    case defaultValue
    case flag(String)
    case environment(String)
    /// The file's key at `line` and `column` (of its value).
    case file(path: String, key: String, line: Int, column: Int)
    /// A secret read from the file a flag, variable or key named (`--admin-token-file` ...).
    indirect case secretFile(path: String, namedBy: SettingOrigin)

    public var description: String {
        switch self {
        case .defaultValue: "default"
        case .flag(let flag): flag
        case .environment(let variable): variable
        case .file(let path, _, let line, _): "\(path):\(line)"
        case .secretFile(let path, let namedBy): "\(path), named by \(namedBy)"
        }
    }

    /// The place an error names: the flag, the variable, or the file's line, column and key.
    var place: String {
        switch self {
        case .secretFile(_, let namedBy): namedBy.place
        case .file(let path, let key, let line, let column): "\(path):\(line):\(column): \(key)"
        default: description
        }
    }
}

/// A setting's value as one source gave it, before it is turned into the setting's type.
struct SettingValue: Sendable {
    enum Input: Sendable {
        /// From flags (one string per occurrence), the environment or a secret's file.
        case strings([String])
        case node(JSONNode)
    }

    let setting: Setting
    let input: Input
    let origin: SettingOrigin
    /// Where relative paths given in the file are resolved: the file's directory.
    let baseDirectory: String?

    /// A problem with this value, said at its place.
    func problem(_ problem: String) -> SettingError {
        SettingError(place: origin.place, problem: problem)
    }

    /// The admin token: what a client can send as `authorization: bearer TOKEN`, else no
    /// request could ever carry it and the operator would be locked out. The message never
    /// shows the token.
    func adminToken() throws(SettingError) -> String {
        let token = try text()
        let bytes = Array(token.utf8)
        if bytes.count > Self.maxAdminTokenBytes {
            throw problem(
                "is \(bytes.count) bytes; a token is at most \(Self.maxAdminTokenBytes) (it is sent in a header)"
            )
        }
        if let bad = bytes.firstIndex(where: { !(0x21...0x7E).contains($0) }) {
            throw problem(
                "has a space, a control or a non-ASCII character at byte \(bad + 1) of \(bytes.count); a token is visible ASCII only, as it is sent in `authorization: bearer TOKEN`"
            )
        }
        return token
    }

    static let maxAdminTokenBytes = 1024

    /// A PostgreSQL URL or connection string: libpq parses it when the store connects; here
    /// only what can never work is refused. The message never shows the value (a password).
    func databaseURL() throws(SettingError) -> String {
        let url = try text()
        if url.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty { throw problem("is empty") }
        if url.utf8.contains(0) { throw problem("holds a NUL byte") }
        return url
    }

    func text() throws(SettingError) -> String {
        switch input {
        case .strings(let strings): return strings.last ?? ""
        case .node(let node):
            guard case .string(let string) = node.value else { throw problem("must be a string, not \(node.kindName)") }
            return string
        }
    }

    func path() throws(SettingError) -> String {
        resolve(try text())
    }

    /// A file name as the file means it: relative to the file's directory.
    func resolve(_ path: String) -> String {
        guard let baseDirectory, case .node = input, !path.hasPrefix("/") else { return path }
        return URL(fileURLWithPath: baseDirectory).appendingPathComponent(path).path
    }

    func integer(in allowed: ClosedRange<Int> = Int.min...Int.max) throws(SettingError) -> Int {
        let written: String
        switch input {
        case .strings(let strings): written = strings.last ?? ""
        case .node(let node):
            guard case .number(let number) = node.value else {
                throw problem("must be a whole number, not \(node.kindName)")
            }
            written = number
        }
        guard let number = Int(written) else { throw problem("\"\(written)\" is not a whole number") }
        guard allowed.contains(number) else {
            let range =
                allowed.upperBound == Int.max
                ? "at least \(allowed.lowerBound)" : "\(allowed.lowerBound) to \(allowed.upperBound)"
            throw problem("is \(number); must be \(range)")
        }
        return number
    }

    func toggle() throws(SettingError) -> Bool {
        switch input {
        case .strings(let strings):
            switch (strings.last ?? "").lowercased() {
            case "true", "1", "yes", "on": return true
            case "false", "0", "no", "off": return false
            case let other: throw problem("\"\(other)\" is neither true nor false")
            }
        case .node(let node):
            guard case .bool(let value) = node.value else {
                throw problem("must be true or false, not \(node.kindName)")
            }
            return value
        }
    }

    func list() throws(SettingError) -> [String] {
        switch input {
        case .strings(let strings):
            guard case .environment = origin else { return strings }
            return strings.flatMap { $0.split(whereSeparator: \.isWhitespace).map(String.init) }
        case .node(let node):
            guard case .array(let elements) = node.value else {
                throw problem("must be an array of strings, not \(node.kindName)")
            }
            var strings: [String] = []
            for element in elements {
                guard case .string(let string) = element.value else {
                    throw problem("must be an array of strings; the item at \(element.position) is \(element.kindName)")
                }
                strings.append(string)
            }
            return strings
        }
    }

    /// One of a closed set of names (a log level, an APNs environment), all of them named in
    /// the error when it is none.
    func choice<Choice: CaseIterable & RawRepresentable>(_: Choice.Type) throws(SettingError) -> Choice
    where Choice.RawValue == String {
        let value = try text()
        guard let choice = Choice(rawValue: value) else {
            throw problem("\"\(value)\" is not one of \(Choice.allCases.map(\.rawValue).joined(separator: ", "))")
        }
        return choice
    }
}

extension SettingValue {
    /// Listener addresses, each `HOST:PORT`.
    func listenAddresses() throws(SettingError) -> [ListenAddress] {
        var addresses: [ListenAddress] = []
        for item in try list() {
            guard let address = ListenAddress(item) else {
                throw problem("\"\(item)\" is not HOST:PORT (IPv6 as [::1]:2197)")
            }
            addresses.append(address)
        }
        return addresses
    }

    /// The file's object at this setting, read field by field.
    func object(_ node: JSONNode, key: String) throws(SettingError) -> FileObject {
        guard case .file(let path, _, _, _) = origin else { preconditionFailure("a file value has a file origin") }
        return try FileObject(node, key: key, file: path)
    }
}
