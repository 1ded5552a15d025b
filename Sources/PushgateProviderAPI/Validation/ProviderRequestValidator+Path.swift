import PushgateModel

// Rule 2: the path, and the device token in it.
extension ProviderRequestValidator {
    enum PathVerdict {
        case token(String)
        case failure(Refusal)
    }

    private static let devicePrefix = "/3/device"

    static func parsePath(_ path: String) -> PathVerdict {
        if let token = path.utf8.withContiguousStorageIfAvailable(wellFormedToken) ?? nil {
            return .token(token)
        }
        let expected = "expected /3/device/<64 hex digit device token>"
        if let mark = path.utf8.firstIndex(where: { $0 == UInt8(ascii: "?") || $0 == UInt8(ascii: "#") }) {
            return .failure(
                Refusal(
                    .badPath,
                    ":path must not carry a query or fragment, got \(Detail.quote(path[mark...])); \(expected)"
                )
            )
        }
        guard path.utf8.starts(with: devicePrefix.utf8) else {
            return .failure(Refusal(.badPath, ":path \(Detail.quote(path)) is not an APNs path; \(expected)"))
        }
        let rest = path.utf8.dropFirst(devicePrefix.utf8.count)
        if rest.isEmpty || rest.elementsEqual(CollectionOfOne(UInt8(ascii: "/"))) {
            return .failure(
                Refusal(.missingDeviceToken, ":path \(Detail.quote(path)) has no device token; \(expected)")
            )
        }
        guard rest.first == UInt8(ascii: "/") else {
            return .failure(Refusal(.badPath, ":path \(Detail.quote(path)) is not an APNs path; \(expected)"))
        }
        let tokenBytes = rest.dropFirst()
        if tokenBytes.contains(UInt8(ascii: "/")) {
            return .failure(
                Refusal(.badPath, ":path \(Detail.quote(path)) has more than one segment after /3/device/; \(expected)")
            )
        }
        let token = Substring(tokenBytes)
        if let problem = FieldSyntax.deviceTokenProblem(token) {
            return .failure(Refusal(.badDeviceToken, problem))
        }
        return .token(FieldSyntax.lowercasingHex(token))
    }

    /// Every push's path, so the usual one is checked on its bytes in one pass: exactly
    /// `/3/device/` and 64 hex digits gives the lowercased token; anything else `nil`, and the
    /// rules above find what is wrong.
    private static func wellFormedToken(_ path: UnsafeBufferPointer<UInt8>) -> String? {
        let prefix: StaticString = "/3/device/"
        let prefixCount = prefix.utf8CodeUnitCount
        guard path.count == prefixCount + 64,
            UnsafeBufferPointer(rebasing: path[..<prefixCount])
                .elementsEqual(UnsafeBufferPointer(start: prefix.utf8Start, count: prefixCount))
        else { return nil }
        // Checked and lowered in one pass; nil (and the partial string dropped) at a non-digit.
        var wellFormed = true
        let token = String(unsafeUninitializedCapacity: 64) { buffer in
            for i in 0..<64 {
                let byte = path[prefixCount + i]
                guard FieldSyntax.isHex(byte) else {
                    wellFormed = false
                    return 0
                }
                buffer[i] = FieldSyntax.isUpperHex(byte) ? byte | 0x20 : byte
            }
            return 64
        }
        return wellFormed ? token : nil
    }
}
