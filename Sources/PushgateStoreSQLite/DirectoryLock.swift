import PushgateStore

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// One process owns a store directory: `pushgate.lock` in it, held with `flock` while the store
/// is open, released by the kernel when the process ends however it ends. A second gateway on
/// the same directory, or a restore into it, fails at once naming the holder's pid, instead of
/// two writers failing every commit with SQLITE_BUSY. SQLite's own exclusive locking mode would
/// do the same but also shut out `pushgate backup`, which reads the database from another
/// process while the gateway runs.
final class DirectoryLock: Sendable {
    static let fileName = "pushgate.lock"

    private let descriptor: Int32
    let path: String

    /// Takes the lock or fails, naming the process that holds it. Writes this process's pid into
    /// the file for the next one's message.
    init(directory: String, purpose: String) throws(StoreError) {
        let path = Directory.join(directory, Self.fileName)
        let descriptor = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else {
            let code = errno
            throw StoreError(
                .database,
                "cannot \(purpose): cannot open \(path): \(String(cString: strerror(code))) (errno \(code))"
            )
        }
        if flock(descriptor, LOCK_EX | LOCK_NB) != 0 {
            let code = errno
            let holder = Self.readPID(descriptor).map { " (pid \($0))" } ?? ""
            _ = close(descriptor)
            guard code == EWOULDBLOCK else {
                throw StoreError(
                    .database,
                    "cannot \(purpose): cannot lock \(path): \(String(cString: strerror(code))) (errno \(code))"
                )
            }
            throw StoreError(
                .database,
                """
                cannot \(purpose): another Pushgate process\(holder) is using \(directory) (it holds \(path)); \
                stop it first, or choose another data directory
                """
            )
        }
        // Made by root (a restore run by an operator), the file must still open for the
        // gateway's own user.
        var owner = stat()
        if geteuid() == 0, stat(directory, &owner) == 0 { _ = fchown(descriptor, owner.st_uid, owner.st_gid) }
        let pid = Array("\(getpid())\n".utf8)
        _ = ftruncate(descriptor, 0)
        _ = pid.withUnsafeBytes { pwrite(descriptor, $0.baseAddress, $0.count, 0) }
        self.descriptor = descriptor
        self.path = path
    }

    /// Releases the lock. The file stays: removing it would race with the next holder.
    func release() {
        _ = close(descriptor)
    }

    private static func readPID(_ descriptor: Int32) -> Int32? {
        var buffer = [UInt8](repeating: 0, count: 32)
        let count = buffer.withUnsafeMutableBytes { pread(descriptor, $0.baseAddress, $0.count, 0) }
        guard count > 0 else { return nil }
        let text = String(decoding: buffer[..<count], as: UTF8.self)
        return Int32(text.split(separator: "\n").first ?? "")
    }
}
