import Foundation

/// Runs a command-line tool (openssl) to completion in a scratch directory of its own.
struct ToolRunner {
    struct Failure: Error, CustomStringConvertible {
        var description: String
    }

    let directory: URL

    init() throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("pushgate-crypto-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    }

    func path(_ name: String) -> String { directory.appendingPathComponent(name).path }

    func write(_ name: String, _ bytes: [UInt8]) throws {
        try Data(bytes).write(to: directory.appendingPathComponent(name))
    }

    func read(_ name: String) throws -> [UInt8] {
        Array(try Data(contentsOf: directory.appendingPathComponent(name)))
    }

    func text(_ name: String) throws -> String {
        String(decoding: try read(name), as: UTF8.self)
    }

    /// Runs `arguments` in ``directory``; stdout and stderr go to files so neither pipe can fill up.
    @discardableResult
    func run(_ executable: String, _ arguments: [String]) throws -> (status: Int32, output: String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        process.currentDirectoryURL = directory
        let outputURL = directory.appendingPathComponent("output-\(UUID().uuidString)")
        guard FileManager.default.createFile(atPath: outputURL.path, contents: nil) else {
            throw Failure(description: "cannot create \(outputURL.path)")
        }
        let output = try FileHandle(forWritingTo: outputURL)
        process.standardOutput = output
        process.standardError = output
        try process.run()
        process.waitUntilExit()
        try output.close()
        return (process.terminationStatus, String(decoding: try Data(contentsOf: outputURL), as: UTF8.self))
    }

    /// Runs openssl and fails unless it exits 0.
    func openssl(_ arguments: String...) throws {
        let (status, output) = try run("/usr/bin/openssl", arguments)
        guard status == 0 else {
            throw Failure(description: "openssl \(arguments.joined(separator: " ")) exited \(status): \(output)")
        }
    }

    func remove() {
        try? FileManager.default.removeItem(at: directory)
    }
}
