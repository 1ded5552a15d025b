import Foundation

/// The table of settings as people read it: `serve --help` and the README's Configuration
/// section, both made from `Settings.all`.
extension Settings {
    /// For `--help`: each setting's flag, variable, file key and default, then its help.
    public static var helpText: String {
        var lines = [
            "SETTINGS (flag > PUSHGATE_* environment variable > configuration file key > default):"
        ]
        for setting in all {
            let names = [setting.flag.map { "\($0)\(setting.placeholder.isEmpty ? "" : " " + setting.placeholder)" }, setting.environmentVariable, setting.fileKey.map { "file: \($0)" }]
            lines.append("  " + names.compactMap { $0 }.joined(separator: ", ") + "  (default: \(setting.defaultValue))")
            var help = setting.help
            if setting.kind == .list { help += " Repeatable." }
            if let fileFlag = setting.secretFileFlag, let fileVariable = setting.secretFileEnvironmentVariable, let fileKey = setting.secretFileKey {
                help += " From a file: \(fileFlag) FILE, \(fileVariable) or \(fileKey)."
            }
            lines.append("      " + help)
        }
        return lines.joined(separator: "\n")
    }

    /// The README's reference table (Markdown), one row per setting.
    public static var markdownReference: String {
        func code(_ names: [String?]) -> String {
            let given = names.compactMap { $0 }
            return given.isEmpty ? "—" : given.map { "`\($0)`" }.joined(separator: ", ")
        }
        var lines = ["| file key | flag | environment | default | meaning |", "|---|---|---|---|---|"]
        for setting in all {
            let flag = setting.flag.map { setting.placeholder.isEmpty || setting.kind == .toggle ? $0 : "\($0) \(setting.placeholder)" }
            let fileFlag = setting.secretFileFlag.map { "\($0) FILE" }
            var meaning = setting.help
            if setting.kind == .list { meaning += " Repeatable (spaces between items in the environment, an array in the file)." }
            if setting.isSecret { meaning += " Never printed nor logged." }
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
