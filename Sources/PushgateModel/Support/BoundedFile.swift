#if canImport(Glibc)
import Glibc
#endif

/// The one way the gateway reads a file whole: its configuration file, secret files, provider
/// keys, at start and at every reload. Read up to a limit, and only a regular file: a path to
/// the wrong thing (a 3 GB log or disk image, `/dev/zero`, a pipe nobody writes) is refused at
/// once with its reason, where reading it whole took all the memory, or waited forever.
public enum BoundedFile {
    public enum ReadError: Error, Equatable, CustomStringConvertible {
        /// The system's reason (`No such file or directory`, `Permission denied`).
        case cannotOpen(String)
        case notRegularFile
        case tooLarge(limit: Int)

        /// Follows the path in a message: "<path> cannot be read: Permission denied".
        public var description: String {
            switch self {
            case .cannotOpen(let reason): "cannot be read: \(reason)"
            case .notRegularFile: "is not a regular file (a directory, a device or a pipe); name the file itself"
            case .tooLarge(let limit): "holds more than \(limit) bytes, the limit for this file: is it the right one?"
            }
        }
    }

    public static func read(_ path: String, limit: Int) throws(ReadError) -> [UInt8] {
        // Non-blocking, so that opening a FIFO without a writer returns instead of waiting.
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK)
        guard fd >= 0 else { throw .cannotOpen(String(cString: strerror(errno))) }
        defer { close(fd) }
        var status = stat()
        guard fstat(fd, &status) == 0 else { throw .cannotOpen(String(cString: strerror(errno))) }
        guard status.st_mode & S_IFMT == S_IFREG else { throw .notRegularFile }
        guard status.st_size <= limit else { throw .tooLarge(limit: limit) }
        // The size again as it is read: the file may grow between fstat and the last read.
        var bytes = [UInt8](repeating: 0, count: limit + 1)
        var count = 0
        while count <= limit {
            let got = bytes.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress! + count, limit + 1 - count) }
            if got < 0 {
                if errno == EINTR { continue }
                throw .cannotOpen(String(cString: strerror(errno)))
            }
            if got == 0 { break }
            count += got
        }
        guard count <= limit else { throw .tooLarge(limit: limit) }
        bytes.removeSubrange(count...)
        return bytes
    }
}
