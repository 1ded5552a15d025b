// Shared by every fuzz target (compiled into each): a failed check aborts, so that libFuzzer
// keeps the input as a crash.
import Foundation

func check(
    _ condition: @autoclosure () -> Bool,
    _ message: @autoclosure () -> String,
    file: StaticString = #fileID,
    line: UInt = #line
) {
    if !condition() { fail(message(), file: file, line: line) }
}

func fail(_ message: String, file: StaticString = #fileID, line: UInt = #line) -> Never {
    FileHandle.standardError.write(Data("fuzz check failed at \(file):\(line): \(message)\n".utf8))
    abort()
}

/// A request in the seeds' text form: METHOD LF PATH LF (NAME ":" VALUE LF)* LF BODY.
struct FuzzRequest {
    var method = ""
    var path = ""
    var headers: [(name: String, value: String)] = []
    var body: [UInt8] = []

    init(_ input: UnsafeBufferPointer<UInt8>) {
        var lines: [String] = []
        var start = 0
        var index = 0
        while index < input.count {
            if input[index] == 0x0A {
                if index == start {
                    body = Array(input[(index + 1)...])
                    break
                }
                lines.append(String(decoding: input[start..<index], as: UTF8.self))
                start = index + 1
            }
            index += 1
        }
        if index == input.count, start < input.count {
            lines.append(String(decoding: input[start...], as: UTF8.self))
        }
        if !lines.isEmpty { method = lines.removeFirst() }
        if !lines.isEmpty { path = lines.removeFirst() }
        for line in lines {
            if let colon = line.firstIndex(of: ":") {
                var value = line[line.index(after: colon)...]
                if value.first == " " { value = value.dropFirst() }
                headers.append((String(line[..<colon]), String(value)))
            } else {
                headers.append((line, ""))
            }
        }
    }
}

/// Takes typed values off the front of the fuzz input; past its end every value is zero or empty,
/// so that any input decodes to something.
struct FuzzReader {
    private let bytes: UnsafeBufferPointer<UInt8>
    private var index = 0

    init(_ bytes: UnsafeBufferPointer<UInt8>) { self.bytes = bytes }

    var isAtEnd: Bool { index >= bytes.count }

    mutating func byte() -> UInt8 {
        guard index < bytes.count else { return 0 }
        defer { index += 1 }
        return bytes[index]
    }

    mutating func bool() -> Bool { byte() & 1 == 1 }

    mutating func uint64() -> UInt64 {
        var value: UInt64 = 0
        for _ in 0..<8 { value = value << 8 | UInt64(byte()) }
        return value
    }

    /// A length byte, then that many bytes.
    mutating func bytes(maxCount: Int = 255) -> [UInt8] {
        let count = min(Int(byte()), maxCount, bytes.count - min(index, bytes.count))
        defer { index += count }
        return Array(bytes[index..<(index + count)])
    }

    /// Length-prefixed bytes read as UTF-8 (invalid sequences become U+FFFD, as a header value
    /// or a JSON text would arrive as a Swift String).
    mutating func string() -> String { String(decoding: bytes(), as: UTF8.self) }

    /// Everything not read yet.
    mutating func rest() -> [UInt8] {
        guard index < bytes.count else { return [] }
        defer { index = bytes.count }
        return Array(bytes[index...])
    }
}

/// A file of the repository's test fixtures (Tests/Fixtures), found from this source file's path.
func fixture(_ relativePath: String) -> String {
    let fuzzDirectory = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
    let url = fuzzDirectory.deletingLastPathComponent().appendingPathComponent("Fixtures").appendingPathComponent(
        relativePath
    )
    guard let text = try? String(contentsOf: url, encoding: .utf8) else { fail("cannot read the fixture \(url.path)") }
    return text
}
