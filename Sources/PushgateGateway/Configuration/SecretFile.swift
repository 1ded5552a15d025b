import Foundation
import PushgateModel

/// A secret read from a file, as platforms deliver them (Docker and Kubernetes secrets, systemd
/// credentials): surrounding blanks and the final newline are not part of it. The one reader of
/// secret files, for `serve`'s `*-file` settings and the client commands' alike, so that a file
/// one accepts the other does too, with the same words when it cannot.
public enum SecretFile {
    /// A token or a secret is at most a few hundred bytes; a file of more is not one.
    public static let maxBytes = 64 * 1024

    /// Why a secret file cannot be used, said after the place that named it: `PATH is empty`.
    public struct Unusable: Error, Equatable, CustomStringConvertible {
        public var description: String
    }

    public static func read(_ path: String) throws(Unusable) -> String {
        let data: [UInt8]
        do {
            data = try BoundedFile.read(path, limit: maxBytes)
        } catch {
            throw Unusable(description: "\(path) \(error)")
        }
        let secret = String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        if secret.isEmpty { throw Unusable(description: "\(path) is empty") }
        return secret
    }
}
