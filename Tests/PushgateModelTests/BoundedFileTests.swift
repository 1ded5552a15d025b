import Foundation
import PushgateModel
import Testing

@Suite("BoundedFile: a file read whole, up to a limit, regular files only")
struct BoundedFileTests {
    let directory: URL

    init() throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("bounded-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    }

    private func file(_ name: String, bytes: Int) throws -> String {
        let path = directory.appendingPathComponent(name).path
        #expect(FileManager.default.createFile(atPath: path, contents: Data(repeating: 0x61, count: bytes)))
        return path
    }

    @Test("up to the limit the whole file, one byte more refused")
    func limit() throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        #expect(try BoundedFile.read(try file("empty", bytes: 0), limit: 16) == [])
        #expect(try BoundedFile.read(try file("full", bytes: 16), limit: 16) == [UInt8](repeating: 0x61, count: 16))
        #expect(throws: BoundedFile.ReadError.tooLarge(limit: 16)) {
            try BoundedFile.read(try file("over", bytes: 17), limit: 16)
        }
    }

    @Test("a huge file is refused from its size, before a byte is read")
    func huge() throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = try file("huge", bytes: 0)
        let handle = try #require(FileHandle(forWritingAtPath: path))
        try handle.truncate(atOffset: 3 << 30)  // sparse: no disk used
        try handle.close()
        #expect(throws: BoundedFile.ReadError.tooLarge(limit: 65536)) { try BoundedFile.read(path, limit: 65536) }
    }

    @Test("a device, a pipe without a writer and a directory are refused at once; a missing file names why")
    func notRegular() throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let fifo = directory.appendingPathComponent("fifo").path
        #expect(mkfifo(fifo, 0o600) == 0)
        for path in ["/dev/zero", fifo, directory.path] {
            #expect(throws: BoundedFile.ReadError.notRegularFile) { try BoundedFile.read(path, limit: 65536) }
        }
        #expect(throws: BoundedFile.ReadError.cannotOpen("No such file or directory")) {
            try BoundedFile.read(directory.appendingPathComponent("missing").path, limit: 16)
        }
        #expect("\(BoundedFile.ReadError.cannotOpen("Permission denied"))" == "cannot be read: Permission denied")
    }
}
