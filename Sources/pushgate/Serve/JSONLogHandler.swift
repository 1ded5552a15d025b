import Foundation
import Logging
import PushgateGateway
import PushgateModel

/// `--log-format json`: one JSON object per line on stderr, for log collectors: `timestamp`
/// (RFC 3339, UTC, milliseconds), `level`, `label`, `message`, then the metadata as top-level
/// fields (a nested dictionary as dotted keys; a key that would shadow one of those four keeps
/// a `metadata.` prefix).
struct JSONLogHandler: LogHandler {
    let label: String
    var logLevel: Logger.Level
    var metadata: Logger.Metadata = [:]
    var metadataProvider: Logger.MetadataProvider?

    init(label: String, level: Logger.Level) {
        self.label = label
        self.logLevel = level
    }

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        var merged = metadata
        if let provided = metadataProvider?.get() { merged.merge(provided) { $1 } }
        if let given = event.metadata { merged.merge(given) { $1 } }
        var fields: [(String, String)] = [
            ("timestamp", JSONText.quote(Self.timestamp())),
            ("level", JSONText.quote(event.level.rawValue)),
            ("label", JSONText.quote(label)),
            ("message", JSONText.quote(event.message.description)),
        ]
        let reserved = Set(fields.map(\.0))
        for (key, value) in Self.flatten(merged, prefix: "").sorted(by: { $0.key < $1.key }) {
            fields.append((reserved.contains(key) ? "metadata." + key : key, value))
        }
        let line = "{" + fields.map { JSONText.quote($0.0) + ":" + $0.1 }.joined(separator: ",") + "}\n"
        // One write per line, so that lines of concurrent loggers never interleave.
        FileHandle.standardError.write(Data(line.utf8))
    }

    /// Metadata values as JSON: strings and string-convertibles as strings, arrays as arrays,
    /// dictionaries flattened into dotted keys.
    private static func flatten(_ metadata: Logger.Metadata, prefix: String) -> [String: String] {
        var fields: [String: String] = [:]
        for (key, value) in metadata {
            let name = prefix + key
            switch value {
            case .dictionary(let inner): fields.merge(flatten(inner, prefix: name + ".")) { $1 }
            default: fields[name] = json(value)
            }
        }
        return fields
    }

    private static func json(_ value: Logger.Metadata.Value) -> String {
        switch value {
        case .string(let string): JSONText.quote(string)
        case .stringConvertible(let convertible): JSONText.quote(convertible.description)
        case .array(let values): "[" + values.map(json).joined(separator: ",") + "]"
        case .dictionary(let inner):
            "{"
                + inner.sorted { $0.key < $1.key }.map { JSONText.quote($0.key) + ":" + json($0.value) }.joined(
                    separator: ","
                ) + "}"
        }
    }

    private static func timestamp() -> String {
        Date().formatted(Date.ISO8601FormatStyle(includingFractionalSeconds: true))
    }
}

extension LoggingSystem {
    /// The gateway's log output: `format` on stderr, from `level` up.
    static func bootstrap(format: LogFormat, level: Logger.Level) {
        bootstrap { label in
            switch format {
            case .json:
                return JSONLogHandler(label: label, level: level)
            case .text:
                var handler = StreamLogHandler.standardError(label: label)
                handler.logLevel = level
                return handler
            }
        }
    }
}
