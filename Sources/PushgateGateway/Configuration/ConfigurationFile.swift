import Foundation
import PushgateModel

/// The configuration file (`--config`, `PUSHGATE_CONFIG`): one JSON object with a key for every
/// setting of `Settings.all` (`scheduler.appBurst` is `{"scheduler": {"appBurst": 3}}`), and a
/// `...File` key beside each secret. Every key is checked: one the table does not know is an
/// error naming its line, not a setting silently ignored. Relative file names are resolved
/// against the file's own directory.
///
/// ```json
/// {
///   "listen": ["127.0.0.1:2197"],
///   "providerKeys": [
///     {"teamId": "TEAM123456", "keyId": "KEY1234567", "privateKeyFile": "AuthKey_KEY1234567.p8",
///      "topics": ["com.example.app"], "environment": "production"}
///   ],
///   "registrationSecretFile": "/run/secrets/pushgate-registration-secret",
///   "scheduler": {"appBurst": 3, "topics": {"com.example.news": {"appBurst": 6}}}
/// }
/// ```
public struct ConfigurationFile: Sendable {
    public let path: String
    /// Where relative file names in it are resolved.
    let directory: String
    let members: [JSONNode.Member]

    /// Far more than any configuration needs (a topic's settings are a few lines).
    static let maxBytes = 1 << 20

    public static func load(path: String) throws(SettingError) -> ConfigurationFile {
        let data: [UInt8]
        do {
            data = try BoundedFile.read(path, limit: maxBytes)
        } catch {
            throw SettingError(place: path, problem: "\(error)")
        }
        let root: JSONNode
        do {
            root = try JSONDocument(data).root
        } catch {
            throw SettingError(place: "\(path):\(error.position)", problem: "not valid JSON: \(error.problem)")
        }
        guard case .object(let members) = root.value else {
            throw SettingError(
                place: "\(path):\(root.position)",
                problem: "must be a JSON object ({...}), not \(root.kindName)"
            )
        }
        return ConfigurationFile(
            path: path,
            directory: URL(fileURLWithPath: path).deletingLastPathComponent().path,
            members: members
        )
    }

    /// The member at a dotted key (`scheduler.appBurst`); nil when the file does not have it
    /// (or has something other than an object on the way, which `unknownKeys` reports).
    func member(at key: String) -> JSONNode.Member? {
        var found = JSONNode.Member(
            key: "",
            keyPosition: TextPosition(line: 1, column: 1),
            value: JSONNode(value: .object(members), position: TextPosition(line: 1, column: 1))
        )
        for component in key.split(separator: ".") {
            guard let member = found.value.member(String(component)) else { return nil }
            found = member
        }
        return found
    }

    func origin(of member: JSONNode.Member, key: String) -> SettingOrigin {
        .file(path: path, key: key, line: member.value.position.line, column: member.value.position.column)
    }

    /// Keys given twice in one object, anywhere in the file: JSON leaves it to the reader which
    /// one counts, and a second `appBurst` silently won over the first.
    func duplicateKeys() -> [SettingError] {
        var problems: [SettingError] = []
        func walk(_ node: JSONNode, _ path: String) {
            switch node.value {
            case .object(let members):
                var first: [String: TextPosition] = [:]
                for member in members {
                    let dotted = path.isEmpty ? member.key : path + "." + member.key
                    if let earlier = first[member.key] {
                        problems.append(
                            SettingError(
                                place: "\(self.path):\(member.keyPosition): \(dotted)",
                                problem: "given twice (first at line \(earlier.line)); give each key once"
                            )
                        )
                    } else {
                        first[member.key] = member.keyPosition
                    }
                    walk(member.value, dotted)
                }
            case .array(let items):
                for (index, item) in items.enumerated() { walk(item, "\(path)[\(index)]") }
            default:
                break
            }
        }
        walk(JSONNode(value: .object(members), position: TextPosition(line: 1, column: 1)), "")
        return problems
    }

    /// Keys that no setting has, in the top-level object and in the objects that group settings
    /// (`scheduler`), each with the closest known key when one is close; and such an object
    /// given as something else.
    func unknownKeys(known keys: [String]) -> [SettingError] {
        let groups = Dictionary(grouping: keys) { key in key.split(separator: ".").dropLast().joined(separator: ".") }
        var problems: [(line: Int?, error: SettingError)] = []
        for (group, keysInGroup) in groups.sorted(by: { $0.key < $1.key }) {
            let members: [JSONNode.Member]
            if group.isEmpty {
                members = self.members
            } else {
                guard let member = member(at: group) else { continue }
                guard case .object(let inner) = member.value.value else {
                    let at = member.value.position
                    problems.append(
                        (
                            at.line,
                            SettingError(
                                place: "\(path):\(at): \(group)",
                                problem: "must be an object ({...}), not \(member.value.kindName)"
                            )
                        )
                    )
                    continue
                }
                members = inner
            }
            let names = keysInGroup.map { String($0.split(separator: ".").last ?? "") }
            let nested = Set(
                groups.keys.filter { !$0.isEmpty }.compactMap { $0.split(separator: ".").first.map(String.init) }
            )
            for member in members where !names.contains(member.key) && !(group.isEmpty && nested.contains(member.key)) {
                problems.append(Self.unknown(member, in: group, known: names, file: path))
            }
        }
        return problems.sorted { ($0.line ?? 0) < ($1.line ?? 0) }.map(\.error)
    }

    /// "unknown key", with the closest known one.
    static func unknown(
        _ member: JSONNode.Member,
        in group: String,
        known: [String],
        file: String
    ) -> (line: Int?, error: SettingError) {
        let key = group.isEmpty ? member.key : group + "." + member.key
        let hint = closestName(to: member.key, among: known).map { "; did you mean \"\($0)\"?" } ?? ""
        return (
            member.keyPosition.line,
            SettingError(place: "\(file):\(member.keyPosition): \(key)", problem: "unknown key\(hint)")
        )
    }
}

/// An object inside a structured setting (a provider key, a topic's overrides), read field by
/// field: a type error names its line, and a key that no field reads is unknown.
struct FileObject {
    private let members: [JSONNode.Member]
    private let position: TextPosition
    private let key: String
    private let file: String
    private var read: [String] = []

    init(_ node: JSONNode, key: String, file: String) throws(SettingError) {
        guard case .object(let members) = node.value else {
            throw SettingError(
                place: "\(file):\(node.position): \(key)",
                problem: "must be an object ({...}), not \(node.kindName)"
            )
        }
        self.members = members
        self.position = node.position
        self.key = key
        self.file = file
    }

    private mutating func node(_ field: String) -> (JSONNode, place: String)? {
        read.append(field)
        guard let member = members.last(where: { $0.key == field }) else { return nil }
        return (member.value, "\(file):\(member.value.position): \(key).\(field)")
    }

    mutating func text(_ field: String) throws(SettingError) -> String? {
        guard let (node, place) = node(field) else { return nil }
        guard case .string(let text) = node.value else {
            throw SettingError(place: place, problem: "must be a string, not \(node.kindName)")
        }
        return text
    }

    mutating func integer(_ field: String) throws(SettingError) -> Int? {
        guard let (node, place) = node(field) else { return nil }
        guard case .number(let written) = node.value else {
            throw SettingError(place: place, problem: "must be a whole number, not \(node.kindName)")
        }
        guard let number = Int(written) else {
            throw SettingError(place: place, problem: "\(written) is not a whole number")
        }
        return number
    }

    mutating func strings(_ field: String) throws(SettingError) -> [String]? {
        guard let (node, place) = node(field) else { return nil }
        guard case .array(let elements) = node.value else {
            throw SettingError(place: place, problem: "must be an array of strings, not \(node.kindName)")
        }
        var strings: [String] = []
        for element in elements {
            guard case .string(let string) = element.value else {
                throw SettingError(
                    place: "\(file):\(element.position): \(key).\(field)",
                    problem: "must be an array of strings; this item is \(element.kindName)"
                )
            }
            strings.append(string)
        }
        return strings
    }

    /// A required field: missing, it is an error at the object's place.
    mutating func required<T>(
        _ field: String,
        _ read: (inout FileObject, String) throws(SettingError) -> T?
    ) throws(SettingError) -> T {
        guard let value = try read(&self, field) else {
            // A key close to the field's name is most likely it, misspelt: say so.
            let unread = members.map(\.key).filter { !self.read.contains($0) }
            if let misspelt = unread.first(where: { closestName(to: $0, among: [field]) != nil }),
                let member = members.first(where: { $0.key == misspelt })
            {
                throw SettingError(
                    place: "\(file):\(member.keyPosition): \(key).\(misspelt)",
                    problem: "unknown key; did you mean \"\(field)\"? (\"\(field)\" is required)"
                )
            }
            throw SettingError(place: "\(file):\(position): \(key)", problem: "missing \"\(field)\"")
        }
        return value
    }

    /// Throws for the first key no field read.
    func finish() throws(SettingError) {
        for member in members where !read.contains(member.key) {
            throw ConfigurationFile.unknown(member, in: key, known: read, file: file).error
        }
    }
}
