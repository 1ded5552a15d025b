import ArgumentParser
import Foundation
import PushgateGateway
import PushgateProviderAuth

/// The `--config` file: JSON, for what is too structured for flags. Flags given on the command
/// line win over the file.
///
/// ```json
/// {
///   "providerKeys": [
///     {"teamId": "TEAM123456", "keyId": "KEY1234567", "privateKeyFile": "AuthKey_KEY1234567.p8",
///      "topics": ["com.example.app"], "environment": "production"}
///   ],
///   "environment": "production",
///   "registrationSecret": "a long random string",
///   "maxConsecutiveProviderErrors": 100
/// }
/// ```
/// Relative key file names are resolved against the file's own directory.
struct GatewayConfigurationFile: Decodable {
    var providerKeys: [ProviderKeyConfiguration]?
    /// The APNs environment this gateway stands for ("development" or "production"): keys
    /// configured for the other one are refused with `BadEnvironmentKeyIdInToken`.
    var environment: String?
    var registrationSecret: String?
    var maxConsecutiveProviderErrors: Int?

    static func load(path: String) throws(ConfigurationFileError) -> GatewayConfigurationFile {
        let data: Data
        do {
            data = try Data(contentsOf: URL(fileURLWithPath: path))
        } catch {
            throw ConfigurationFileError(path: path, problem: "cannot be read (\(error.localizedDescription))")
        }
        do {
            return try JSONDecoder().decode(GatewayConfigurationFile.self, from: data)
        } catch let DecodingError.keyNotFound(key, context) {
            throw ConfigurationFileError(path: path, problem: "missing \"\(Self.path(context.codingPath + [key]))\"")
        } catch let DecodingError.typeMismatch(_, context) {
            throw ConfigurationFileError(path: path, problem: "wrong type at \"\(Self.path(context.codingPath))\": \(context.debugDescription)")
        } catch let DecodingError.valueNotFound(_, context) {
            throw ConfigurationFileError(path: path, problem: "null at \"\(Self.path(context.codingPath))\"")
        } catch {
            throw ConfigurationFileError(path: path, problem: "is not valid JSON (\(error))")
        }
    }

    private static func path(_ keys: [any CodingKey]) -> String {
        keys.map { $0.intValue.map { "[\($0)]" } ?? $0.stringValue }.joined(separator: ".")
    }
}

struct ConfigurationFileError: Error, CustomStringConvertible {
    var path: String
    var problem: String
    var description: String { "configuration file \(path): \(problem)" }
}

/// `--provider-key TEAM:KEYID:FILE:TOPIC[,TOPIC...]`: one token-signing key on the command line.
/// FILE is the `.p8` private key or a PEM public key.
struct ProviderKeyFlag: ExpressibleByArgument {
    var configuration: ProviderKeyConfiguration

    init?(argument: String) {
        let parts = argument.split(separator: ":", maxSplits: 3, omittingEmptySubsequences: false).map(String.init)
        guard parts.count == 4, !parts[0].isEmpty, !parts[1].isEmpty, !parts[2].isEmpty, !parts[3].isEmpty else {
            return nil
        }
        let topics = parts[3].split(separator: ",").map(String.init)
        let contents = (try? String(contentsOfFile: parts[2], encoding: .utf8)) ?? ""
        let isPublic = contents.contains("-----BEGIN PUBLIC KEY-----")
        configuration = ProviderKeyConfiguration(
            teamID: parts[0],
            keyID: parts[1],
            publicKeyFile: isPublic ? parts[2] : nil,
            privateKeyFile: isPublic ? nil : parts[2],
            topics: topics
        )
    }
}
