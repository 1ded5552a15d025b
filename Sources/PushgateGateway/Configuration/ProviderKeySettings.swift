import Foundation
import PushgateModel
import PushgateProviderAuth

extension SettingValue {
    /// `providerKeys`: in a flag or the environment `TEAM:KEYID:FILE:TOPIC[,TOPIC...]` (FILE: the
    /// `.p8`, or a PEM public key), in the file objects as `ProviderKeyConfiguration` documents.
    func providerKeys() throws(SettingError) -> [ProviderKeyConfiguration] {
        switch input {
        case .strings:
            var keys: [ProviderKeyConfiguration] = []
            for item in try list() { keys.append(try providerKey(flagForm: item)) }
            return keys
        case .node(let node):
            guard case .array(let elements) = node.value else {
                throw problem("must be an array of key objects, not \(node.kindName)")
            }
            var keys: [ProviderKeyConfiguration] = []
            for (index, element) in elements.enumerated() {
                var object = try object(element, key: "\(setting.key)[\(index)]")
                var key = ProviderKeyConfiguration(
                    teamID: try object.required("teamId") { object, field throws(SettingError) in try object.text(field)
                    },
                    keyID: try object.required("keyId") { object, field throws(SettingError) in try object.text(field)
                    },
                    publicKeyFile: try object.text("publicKeyFile"),
                    privateKeyFile: try object.text("privateKeyFile"),
                    publicKey: try object.text("publicKey"),
                    topics: try object.required("topics") { object, field throws(SettingError) in
                        try object.strings(field)
                    },
                    environment: try object.text("environment")
                )
                try object.finish()
                key.publicKeyFile = key.publicKeyFile.map(resolve)
                key.privateKeyFile = key.privateKeyFile.map(resolve)
                keys.append(key)
            }
            return keys
        }
    }

    private func providerKey(flagForm item: String) throws(SettingError) -> ProviderKeyConfiguration {
        let parts = item.split(separator: ":", maxSplits: 3, omittingEmptySubsequences: false).map(String.init)
        guard parts.count == 4, parts.allSatisfy({ !$0.isEmpty }) else {
            throw problem("\"\(item)\" is not TEAM:KEYID:FILE:TOPIC[,TOPIC...]")
        }
        // Which half the file holds decides the field; a file that cannot be read is reported
        // by the key's own loading, naming it.
        let contents =
            (try? BoundedFile.read(parts[2], limit: ProviderKeyConfiguration.maxKeyFileBytes)).map {
                String(decoding: $0, as: UTF8.self)
            } ?? ""
        let isPublic = contents.contains("-----BEGIN PUBLIC KEY-----")
        return ProviderKeyConfiguration(
            teamID: parts[0],
            keyID: parts[1],
            publicKeyFile: isPublic ? parts[2] : nil,
            privateKeyFile: isPublic ? nil : parts[2],
            topics: parts[3].split(separator: ",").map(String.init)
        )
    }
}
