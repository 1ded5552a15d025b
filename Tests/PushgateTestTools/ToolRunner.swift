import Foundation

/// Runs a command-line tool (openssl, python3) to completion in a scratch directory of its own.
/// Shared by the test targets that check interoperability with code nobody here wrote.
public struct ToolRunner {
    public struct Failure: Error, CustomStringConvertible {
        public var description: String

        public init(description: String) {
            self.description = description
        }
    }

    public let directory: URL

    public init() throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("pushgate-tools-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    }

    public func path(_ name: String) -> String { directory.appendingPathComponent(name).path }

    public func write(_ name: String, _ bytes: [UInt8]) throws {
        try Data(bytes).write(to: directory.appendingPathComponent(name))
    }

    public func read(_ name: String) throws -> [UInt8] {
        Array(try Data(contentsOf: directory.appendingPathComponent(name)))
    }

    public func text(_ name: String) throws -> String {
        String(decoding: try read(name), as: UTF8.self)
    }

    /// Runs `arguments` in ``directory``; stdout and stderr go to files so neither pipe can fill up.
    @discardableResult
    public func run(_ executable: String, _ arguments: [String]) throws -> (status: Int32, output: String) {
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
    public func openssl(_ arguments: String...) throws {
        let (status, output) = try run("/usr/bin/openssl", arguments)
        guard status == 0 else {
            throw Failure(description: "openssl \(arguments.joined(separator: " ")) exited \(status): \(output)")
        }
    }

    public func remove() {
        try? FileManager.default.removeItem(at: directory)
    }
}
