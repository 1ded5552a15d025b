import Foundation
import PushgateCrypto
import PushgateModel

/// A provider key as the operator writes it in the configuration file:
///
/// ```json
/// { "teamId": "ABC123DEFG", "keyId": "KEY1234567", "privateKeyFile": "AuthKey_KEY1234567.p8",
///   "topics": ["com.example.app"], "environment": "production" }
/// ```
///
/// The key itself comes from exactly one of `publicKeyFile` (PEM SubjectPublicKeyInfo),
/// `privateKeyFile` (the `.p8` Apple hands out; only its public half is kept) or `publicKey`
/// (the PEM inline). `environment` is optional: `"development"` or `"production"`.
public struct ProviderKeyConfiguration: Decodable, Sendable, Equatable {
    public var teamID: String
    public var keyID: String
    public var publicKeyFile: String?
    public var privateKeyFile: String?
    public var publicKey: String?
    public var topics: [String]
    public var environment: String?

    public init(
        teamID: String,
        keyID: String,
        publicKeyFile: String? = nil,
        privateKeyFile: String? = nil,
        publicKey: String? = nil,
        topics: [String],
        environment: String? = nil
    ) {
        self.teamID = teamID
        self.keyID = keyID
        self.publicKeyFile = publicKeyFile
        self.privateKeyFile = privateKeyFile
        self.publicKey = publicKey
        self.topics = topics
        self.environment = environment
    }

    private enum CodingKeys: String, CodingKey {
        case teamID = "teamId"
        case keyID = "keyId"
        case publicKeyFile, privateKeyFile, publicKey, topics, environment
    }

    /// Reads the key's PEM and checks every field. Relative file names are resolved against
    /// `directory` (the configuration file's directory) when given, else the working directory.
    public func load(relativeTo directory: String? = nil) throws(ProviderKeyConfigurationError) -> ProviderKey {
        let environment = try parsedEnvironment()
        let publicKey: ES256PublicKey
        switch (publicKeyFile, privateKeyFile, self.publicKey) {
        case (let file?, nil, nil):
            let path = Self.resolve(file, relativeTo: directory)
            publicKey = try publicKeyPEM(try read(path, field: "publicKeyFile"), field: "publicKeyFile", origin: path)
        case (nil, let file?, nil):
            let path = Self.resolve(file, relativeTo: directory)
            publicKey = try privateKeyPEM(try read(path, field: "privateKeyFile"), origin: path).publicKey
        case (nil, nil, let pem?):
            publicKey = try publicKeyPEM(pem, field: "publicKey", origin: nil)
        default:
            let given = [
                ("publicKeyFile", publicKeyFile), ("privateKeyFile", privateKeyFile), ("publicKey", self.publicKey),
            ]
            .compactMap { $0.1 == nil ? nil : $0.0 }
            throw error(
                field: "publicKeyFile/privateKeyFile/publicKey",
                given.isEmpty
                    ? "no key; give exactly one of publicKeyFile (PEM public key), privateKeyFile (the .p8) or publicKey (inline PEM)"
                    : "\(given.joined(separator: " and ")) given; give exactly one of them"
            )
        }
        return try ProviderKey(
            teamID: teamID,
            keyID: keyID,
            publicKey: publicKey,
            topics: topics,
            environment: environment
        )
    }

    private func parsedEnvironment() throws(ProviderKeyConfigurationError) -> ProviderEnvironment? {
        guard let environment else { return nil }
        guard let parsed = ProviderEnvironment(rawValue: environment) else {
            throw error(field: "environment", "\"\(environment)\" is neither \"development\" nor \"production\"")
        }
        return parsed
    }

    private func read(_ path: String, field: String) throws(ProviderKeyConfigurationError) -> String {
        do {
            return String(decoding: try BoundedFile.read(path, limit: Self.maxKeyFileBytes), as: UTF8.self)
        } catch .tooLarge(let limit) {
            throw self.error(
                field: field,
                "\(path) holds more than \(limit) bytes; a PEM key is a few hundred: name the key file"
            )
        } catch {
            throw self.error(field: field, "\(path) \(error)")
        }
    }

    /// A PEM key is a few hundred bytes. A path to something else (a large file, `/dev/zero`) is
    /// refused after this many instead of read whole: at start and at every reload, which must
    /// refuse and keep serving.
    public static let maxKeyFileBytes = 64 * 1024

    private func publicKeyPEM(
        _ pem: String,
        field: String,
        origin: String?
    ) throws(ProviderKeyConfigurationError) -> ES256PublicKey {
        do {
            return try ES256PublicKey(pem: pem)
        } catch {
            let hint = pem.contains("PRIVATE KEY-----") ? " (this is a private key: name it in privateKeyFile)" : ""
            throw self.error(field: field, "\(origin.map { "\($0): " } ?? "")\(error)\(hint)")
        }
    }

    private func privateKeyPEM(_ pem: String, origin: String) throws(ProviderKeyConfigurationError) -> ES256PrivateKey {
        do {
            return try ES256PrivateKey(pem: pem)
        } catch {
            let hint =
                pem.contains("-----BEGIN PUBLIC KEY-----") ? " (this is a public key: name it in publicKeyFile)" : ""
            throw self.error(field: "privateKeyFile", "\(origin): \(error)\(hint)")
        }
    }

    private func error(field: String, _ problem: String) -> ProviderKeyConfigurationError {
        ProviderKeyConfigurationError(keyID: keyID, field: field, problem: problem)
    }

    private static func resolve(_ file: String, relativeTo directory: String?) -> String {
        guard let directory, !file.hasPrefix("/") else { return file }
        return URL(fileURLWithPath: directory).appendingPathComponent(file).path
    }
}

/// A provider key that cannot be used, naming the key and the field at fault, e.g.
/// `provider key "KEY1234567": privateKeyFile: /etc/pushgate/AuthKey.p8: the key is RSA, but ES256
/// needs an EC key on curve P-256`.
public struct ProviderKeyConfigurationError: Error, Sendable, Equatable, CustomStringConvertible {
    public var keyID: String
    /// The configuration field: `keyId`, `teamId`, `topics`, `environment`, `publicKeyFile`, ...
    public var field: String
    public var problem: String

    public init(keyID: String, field: String, problem: String) {
        self.keyID = keyID
        self.field = field
        self.problem = problem
    }

    public var description: String { "provider key \"\(keyID)\": \(field): \(problem)" }
}
