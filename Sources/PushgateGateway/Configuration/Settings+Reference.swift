import Foundation

/// The table of settings as people read it: `serve --help` and the README's Configuration
/// section, both made from `Settings.all`.
extension Settings {
    /// For `--help`: each setting's flag, variable, file key and default, then its help, wrapped
    /// to `width` columns with their indentation (the names at 2, going on at 4; the help at 6):
    /// the help screen would wrap them flush left, and a line it has to wrap breaks mid-sentence.
    public static func helpText(width: Int) -> String {
        var lines = wrap("SETTINGS (a flag wins over PUSHGATE_*, which wins over the file):", indent: 0, width: width)
        for setting in all {
            let flag = setting.flag.map {
                setting.placeholder.isEmpty || setting.kind == .toggle ? $0 : "\($0) \(setting.placeholder)"
            }
            let names = [flag, setting.environmentVariable, setting.fileKey.map { "file: \($0)" }].compactMap { $0 }
            lines += wrap(
                names.joined(separator: ", ") + " (default: \(setting.defaultValue))",
                indent: 2,
                then: 4,
                width: width
            )
            var help = setting.help
            if setting.kind == .list { help += " Repeatable." }
            if setting.reloads { help += " " + reloadNote }
            if let fileFlag = setting.secretFileFlag, let fileVariable = setting.secretFileEnvironmentVariable,
                let fileKey = setting.secretFileKey
            {
                help += " From a file: \(fileFlag) FILE, \(fileVariable) or \(fileKey)."
            }
            lines += wrap(help, indent: 6, width: width)
        }
        return lines.joined(separator: "\n")
    }

    private static let reloadNote = "Applied by a reload (SIGHUP)."

    /// `text` in lines of at most `width` columns, the first indented by `indent`, the others by
    /// `then` (`indent` unless given). A word longer than a line gets a line of its own.
    private static func wrap(_ text: String, indent: Int, then: Int? = nil, width: Int) -> [String] {
        var lines: [String] = []
        var line = String(repeating: " ", count: indent)
        var margin = indent
        for word in text.split(separator: " ") {
            if line.count > margin, line.count + 1 + word.count > width {
                lines.append(line)
                margin = then ?? indent
                line = String(repeating: " ", count: margin)
            }
            line += (line.count > margin ? " " : "") + word
        }
        return lines + [line]
    }

    /// The README's reference table (Markdown), one row per setting.
    public static var markdownReference: String {
        func code(_ names: [String?]) -> String {
            let given = names.compactMap { $0 }
            return given.isEmpty ? "—" : given.map { "`\($0)`" }.joined(separator: ", ")
        }
        var lines = ["| file key | flag | environment | default | meaning |", "|---|---|---|---|---|"]
        for setting in all {
            let flag = setting.flag.map {
                setting.placeholder.isEmpty || setting.kind == .toggle ? $0 : "\($0) \(setting.placeholder)"
            }
            let fileFlag = setting.secretFileFlag.map { "\($0) FILE" }
            var meaning = setting.help
            if setting.kind == .list {
                meaning += " Repeatable (spaces between items in the environment, an array in the file)."
            }
            if setting.isSecret { meaning += " Never printed nor logged." }
            if setting.reloads { meaning += " " + reloadNote }
            let row = [
                code([setting.fileKey, setting.secretFileKey]),
                code([flag, fileFlag]),
                code([setting.environmentVariable, setting.secretFileEnvironmentVariable]),
                setting.defaultValue,
                meaning.replacingOccurrences(of: "|", with: "\\|"),
            ]
            lines.append("| " + row.joined(separator: " | ") + " |")
        }
        return lines.joined(separator: "\n")
    }
}
