import COpenSSL

/// Cryptographically secure random bytes from OpenSSL's CSPRNG (seeded by the kernel).
public enum SecureRandom {
    public struct Failure: Error, CustomStringConvertible {
        public var description: String { "OpenSSL's random generator failed (RAND_bytes); the system has no usable entropy source" }
    }

    public static func bytes(_ count: Int) throws(Failure) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: count)
        guard bytes.withUnsafeMutableBytes(fill) else { throw Failure() }
        return bytes
    }

    /// 128 random bits in one call. OpenSSL's generator runs in user space once seeded, where
    /// the standard library's `SystemRandomNumberGenerator` makes a `getrandom` system call for
    /// every 64 bits: a provider that leaves out `apns-id` gets one generated per push.
    public static func uint64Pair() throws(Failure) -> (UInt64, UInt64) {
        var pair: (UInt64, UInt64) = (0, 0)
        guard withUnsafeMutableBytes(of: &pair, fill) else { throw Failure() }
        return pair
    }

    private static func fill(_ buffer: UnsafeMutableRawBufferPointer) -> Bool {
        buffer.isEmpty || RAND_bytes(buffer.baseAddress!.assumingMemoryBound(to: UInt8.self), Int32(buffer.count)) == 1
    }
}

/// SHA-256 on libcrypto.
public enum SHA256 {
    public static func hash(_ data: some Collection<UInt8>) -> [UInt8] {
        var digest = [UInt8](repeating: 0, count: 32)
        var length: UInt32 = 0
        let hashed: Int32? = data.withContiguousStorageIfAvailable { input in
            digest.withUnsafeMutableBufferPointer { out in
                EVP_Digest(input.baseAddress, input.count, out.baseAddress, &length, EVP_sha256(), nil)
            }
        }
        if hashed == nil {
            let copy = Array(data)
            return hash(copy)
        }
        // EVP_Digest with SHA-256 only fails on allocation failure, which Swift treats as fatal too.
        precondition(hashed == 1 && length == 32, "EVP_Digest(SHA-256) failed")
        return digest
    }
}

/// Compares secrets without leaking, through timing, how much of them matched.
public func constantTimeEquals(_ a: [UInt8], _ b: [UInt8]) -> Bool {
    guard a.count == b.count else { return false }
    return a.withUnsafeBufferPointer { x in
        b.withUnsafeBufferPointer { y in CRYPTO_memcmp(x.baseAddress, y.baseAddress, x.count) == 0 }
    }
}

extension Array where Element == UInt8 {
    /// Lowercase hexadecimal.
    public var hexString: String {
        let digits = Array("0123456789abcdef".utf8)
        var out = [UInt8]()
        out.reserveCapacity(count * 2)
        for byte in self {
            out.append(digits[Int(byte >> 4)])
            out.append(digits[Int(byte & 0x0F)])
        }
        return String(decoding: out, as: UTF8.self)
    }
}
