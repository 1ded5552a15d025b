import Foundation
import NIOConcurrencyHelpers

/// One line on stdout, unbuffered. Not `print` + `fflush(nil)`: flushing every stream would
/// wait for stdin's lock, which the command reader holds while it blocks in `readLine`. Lines
/// come from the stream, stdin commands and fetches at once: the lock keeps each whole (a pipe
/// takes a long line in several writes).
func emit(_ line: String) {
    emitting.withLock { FileHandle.standardOutput.write(Data((line + "\n").utf8)) }
}

private let emitting = NIOLock()

func printError(_ message: String) {
    FileHandle.standardError.write(Data("pushgate agent: \(message)\n".utf8))
}
