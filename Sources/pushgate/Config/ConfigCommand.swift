import ArgumentParser
import Foundation
import Logging
import PushgateGateway

struct ConfigCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "config",
        abstract: "Check the gateway's configuration.",
        subcommands: [CheckCommand.self, ReferenceCommand.self]
    )
}

/// `pushgate config reference`: the settings table in Markdown, for docs/configuration.md's Reference
/// section (a test fails while the two differ).
struct ReferenceCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "reference",
        abstract: "Print the table of settings in Markdown (docs/configuration.md's Reference)."
    )

    func run() {
        print(Settings.markdownReference)
    }
}

/// `pushgate config check`: what `serve` would run with, and everything that would stop it
/// before it binds (no port is bound, the store is not opened).
struct CheckCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "check",
        abstract:
            "Print the effective configuration, secrets redacted, with where each value comes from; exit 1 on any error.",
        discussion: """
            Takes serve's settings (flags, PUSHGATE_* variables, --config FILE or PUSHGATE_CONFIG) and \
            checks them as serve would: each error names its flag, variable, or the file's line, \
            column and key.
            """
    )

    @Argument(parsing: .captureForPassthrough, help: "serve's settings, as flags.")
    var settings: [String] = []

    func run() throws {
        let resolved = try SettingsArguments.settings(settings, for: Self.self)
        print(Self.table(resolved))
        for warning in resolved.warnings { FileHandle.standardError.write(Data("warning: \(warning)\n".utf8)) }
        var errors = resolved.problems.map(\.description)
        // Every scheduler value out of range, not only the first (prepare stops at that one).
        errors += resolved.configuration.policy.scheduler.problems().map(resolved.locate)
        if errors.isEmpty {
            var configuration = resolved.configuration
            do {
                _ = try configuration.prepare(logger: Logger(label: "pushgate") { _ in SwiftLogNoOpLogHandler() })
            } catch {
                errors.append(resolved.locate(error))
            }
        }
        guard errors.isEmpty else {
            for error in errors { FileHandle.standardError.write(Data("error: \(error)\n".utf8)) }
            throw ExitCode.failure
        }
        print("configuration OK")
    }

    /// One line per setting: key, value, and where the value came from.
    static func table(_ resolved: ResolvedSettings) -> String {
        let rows = resolved.entries.map { entry in
            (
                entry.setting.key, entry.value,
                entry.origins.isEmpty ? "default" : entry.origins.map(\.description).joined(separator: ", ")
            )
        }
        let keyWidth = rows.map(\.0.count).max() ?? 0
        let valueWidth = min(rows.map(\.1.count).max() ?? 0, 48)
        func pad(_ text: String, _ width: Int) -> String {
            text + String(repeating: " ", count: max(0, width - text.count))
        }
        return
            ([(pad("setting", keyWidth), pad("value", valueWidth), "from")]
            + rows.map { (pad($0.0, keyWidth), pad($0.1, valueWidth), $0.2) })
            .map { "\($0.0)  \($0.1)  \($0.2)" }
            .joined(separator: "\n")
    }
}
