import Foundation

/// The files of the repository the tests read, located once for every test target: the test CA
/// and the certificates `Tests/Fixtures/tls/make-fixtures.sh` made from it, scripts, the API
/// description and the deployment files.
public enum TestFixtures {
    /// The repository's root: the directory holding Package.swift.
    public static let repository = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent()
        .deletingLastPathComponent()
        .deletingLastPathComponent()

    /// A file or directory of the repository, by its path from the root (`openapi.yaml`,
    /// `Benchmarks/abuse.py`).
    public static func file(_ path: String) -> URL { repository.appendingPathComponent(path) }

    public static let tlsDirectory = file("Tests/Fixtures/tls")

    public static func tls(_ name: String) -> String { tlsDirectory.appendingPathComponent(name).path }
}
