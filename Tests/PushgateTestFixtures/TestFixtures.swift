import Foundation

/// The files under `Tests/Fixtures`, located once for every test target: the test CA and the
/// certificates `Tests/Fixtures/tls/make-fixtures.sh` made from it.
public enum TestFixtures {
    public static let tlsDirectory = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent()
        .deletingLastPathComponent()
        .appendingPathComponent("Fixtures/tls")

    public static func tls(_ name: String) -> String { tlsDirectory.appendingPathComponent(name).path }
}
