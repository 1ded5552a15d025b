import PushgateCrypto

/// Device ids and device tokens carry their shard in their first byte, so any event loop can
/// route a request to the shard that owns the device without a shared index or a lock.
///
/// Both are random: a device id is 16 random bytes; a token is the device's shard byte followed
/// by 31 random bytes. The byte names one of 256 virtual shards, mapped onto however many event
/// loops run, so that ids stay valid when the thread count changes between restarts.
enum Identifiers {
    static func newDeviceID() throws -> String {
        try SecureRandom.bytes(16).hexString
    }

    static func newSecret() throws -> String {
        try SecureRandom.bytes(32).hexString
    }

    static func newToken(forDevice deviceID: String) throws -> String {
        guard let shard = virtualShard(ofHex: deviceID) else { preconditionFailure("device ids are hex") }
        return ([UInt8(shard)] + (try SecureRandom.bytes(31))).hexString
    }

    /// The virtual shard named by the first byte of a hex id or token; nil if it is not hex.
    static func virtualShard(ofHex text: String) -> Int? {
        var iterator = text.utf8.makeIterator()
        guard let high = iterator.next().flatMap(hexValue), let low = iterator.next().flatMap(hexValue) else {
            return nil
        }
        return Int(high << 4 | low)
    }

    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return byte - UInt8(ascii: "a") + 10
        default: return nil
        }
    }

    /// 32 lowercase hex characters.
    static func isDeviceID(_ text: String) -> Bool {
        text.utf8.count == 32 && text.utf8.allSatisfy { hexValue($0) != nil }
    }
}
