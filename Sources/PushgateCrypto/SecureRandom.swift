import COpenSSL
import NIOPosix

/// Cryptographically secure random bytes from OpenSSL's CSPRNG (seeded by the kernel).
public enum SecureRandom {
    public struct Failure: Error, CustomStringConvertible {
        public var description: String {
            "OpenSSL's random generator failed (RAND_bytes); the system has no usable entropy source"
        }
    }

    public static func bytes(_ count: Int) throws(Failure) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: count)
        guard bytes.withUnsafeMutableBytes(fill) else { throw Failure() }
        return bytes
    }

    /// 128 random bits for an identifier (a generated `apns-id`), from the calling thread's
    /// pool of OpenSSL output. A `RAND_bytes` call costs nearly as much for 16 bytes as for
    /// 2,048 (the DRBG's locking and cipher setup dominate), a visible share of a push's CPU on
    /// the provider path; the pool amortizes a call over 128 identifiers. (The standard library's
    /// `SystemRandomNumberGenerator` would make a `getrandom` system call every 64 bits.) Secrets
    /// do not come from here: `bytes(_:)` asks OpenSSL each time.
    public static func uint64Pair() throws(Failure) -> (UInt64, UInt64) {
        try IdentifierPool.current().next()
    }

    fileprivate static func fill(_ buffer: UnsafeMutableRawBufferPointer) -> Bool {
        buffer.isEmpty || RAND_bytes(buffer.baseAddress!.assumingMemoryBound(to: UInt8.self), Int32(buffer.count)) == 1
    }
}

/// A thread's buffer of OpenSSL output for identifiers: thread-local, so the event loops draw
/// from it without a lock.
final class IdentifierPool: @unchecked Sendable {  // confined to its thread (see `current`)
    private static let size = 2048
    private let bytes = UnsafeMutableRawBufferPointer.allocate(byteCount: size, alignment: 16)
    private var offset = size

    deinit { bytes.deallocate() }

    func next() throws(SecureRandom.Failure) -> (UInt64, UInt64) {
        if offset == Self.size {
            guard SecureRandom.fill(bytes) else { throw SecureRandom.Failure() }
            offset = 0
        }
        let pair = (
            bytes.load(fromByteOffset: offset, as: UInt64.self), bytes.load(fromByteOffset: offset + 8, as: UInt64.self)
        )
        // Used bits are wiped: no identifier's bits stay in memory after it was handed out.
        (bytes.baseAddress! + offset).initializeMemory(as: UInt8.self, repeating: 0, count: 16)
        offset += 16
        return pair
    }

    private static let perThread = ThreadSpecificVariable<IdentifierPool>()

    static func current() -> IdentifierPool {
        if let pool = perThread.currentValue { return pool }
        let pool = IdentifierPool()
        perThread.currentValue = pool
        return pool
    }
}

/// SHA-256 on libcrypto.
public enum SHA256 {
    /// Fetched once: `EVP_sha256()` makes every digest look the algorithm up in the default
    /// provider again (a name lookup under a lock), several times the hashing of a device
    /// secret, which every device request pays. A fetched `EVP_MD` is immutable and may be
    /// shared by threads.
    nonisolated(unsafe) private static let algorithm: OpaquePointer = {
        guard let algorithm = EVP_MD_fetch(nil, "SHA256", nil) else {
            preconditionFailure("libcrypto has no SHA-256 in its default provider")
        }
        return algorithm
    }()

    public static func hash(_ data: some Collection<UInt8>) -> [UInt8] {
        var digest = [UInt8](repeating: 0, count: 32)
        var length: UInt32 = 0
        let hashed: Int32? = data.withContiguousStorageIfAvailable { input in
            digest.withUnsafeMutableBufferPointer { out in
                EVP_Digest(input.baseAddress, input.count, out.baseAddress, &length, algorithm, nil)
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
