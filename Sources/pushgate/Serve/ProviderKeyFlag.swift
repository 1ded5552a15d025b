import ArgumentParser
import Foundation
import PushgateProviderAuth

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
