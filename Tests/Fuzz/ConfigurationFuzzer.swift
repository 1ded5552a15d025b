// Fuzz target 4: the configuration file (Tests/Fuzz/run.sh configuration).
//
// Input: the file's bytes. It is written to a directory of its own, beside a provider key
// (`AuthKey.p8`, the fixture key Tests/Fixtures/tls/client-key.pem) and a secret file
// (`secret.txt`), so that relative file names in it can be read; then it goes through what
// `pushgate config check` does: the settings resolved from it, every problem described, and,
// when there is none, `prepare` (TLS files, provider keys, the scheduler's policy, exposure).
// Nothing is bound or opened.
//
// Checked beyond "does not crash": every problem the file causes names the file, and a file the
// settings accept without problems is a JSON object Foundation reads too.
import Foundation
import Logging
import PushgateGateway

private let directory: String = {
    // In memory where there is /dev/shm: the file is rewritten for every input.
    let base =
        FileManager.default.fileExists(atPath: "/dev/shm")
        ? URL(fileURLWithPath: "/dev/shm") : FileManager.default.temporaryDirectory
    let path = base.appendingPathComponent("pushgate-fuzz-configuration-\(getpid())").path
    try? FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    FileManager.default.createFile(atPath: path + "/AuthKey.p8", contents: Data(fixture("tls/client-key.pem").utf8))
    FileManager.default.createFile(atPath: path + "/secret.txt", contents: Data("fuzz-secret\n".utf8))
    atexit { try? FileManager.default.removeItem(atPath: directory) }
    return path
}()
private let quiet = Logger(label: "fuzz") { _ in SwiftLogNoOpLogHandler() }

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    // Foundation (Swift 6.3.1) leaks the 4 KiB buffer FileManager.contents(atPath:) reads an
    // empty file with (Data+Reading.swift's path for files whose size is 0): not ours to find
    // at every run. The gateway reads an empty file only to refuse it.
    guard size > 0 else { return 0 }
    let text = Data(bytes: data, count: size)
    let path = directory + "/pushgate.json"
    // Written in place: createFile's atomic write syncs the disk each time.
    do { try text.write(to: URL(fileURLWithPath: path)) } catch { fail("cannot write \(path): \(error)") }

    let resolved = ResolvedSettings(arguments: ["--config", path], environment: [:])
    for problem in resolved.problems {
        check(problem.description.hasPrefix(path), "a problem of the file that does not name it: \(problem)")
    }
    for entry in resolved.entries { _ = entry.value }
    guard resolved.problems.isEmpty else { return 0 }

    check(
        (try? JSONSerialization.jsonObject(with: text)) is [String: Any],
        "settings taken from a file Foundation does not read as a JSON object: \(String(decoding: text, as: UTF8.self))"
    )
    var configuration = resolved.configuration
    do {
        _ = try configuration.prepare(logger: quiet)
    } catch {
        _ = resolved.locate(error)
    }
    return 0
}
