import Foundation
import Testing

@testable import PushgateCrypto

@Suite("libcrypto helpers")
struct CryptoTests {
    @Test("SHA-256 matches the FIPS 180-2 test vectors")
    func sha256Vectors() {
        #expect(
            SHA256.hash(Array("abc".utf8)).hexString
                == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        )
        #expect(SHA256.hash([UInt8]()).hexString == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
        #expect(SHA256.hash("abc".utf8).hexString == SHA256.hash(Array("abc".utf8)).hexString)
    }

    @Test("random bytes have the asked length and differ between calls")
    func randomBytes() throws {
        let a = try SecureRandom.bytes(32)
        let b = try SecureRandom.bytes(32)
        #expect(a.count == 32)
        #expect(a != b)
        #expect(try SecureRandom.bytes(0).isEmpty)
    }

    @Test("random 128-bit pairs fill both halves and differ between calls, across refills of a thread's pool")
    func randomPairs() throws {
        // 1,000 pairs: a thread's pool holds 128, so this crosses seven refills.
        let pairs = try (0..<1000).map { _ in try SecureRandom.uint64Pair() }
        #expect(Set(pairs.map { "\($0.0)-\($0.1)" }).count == 1000)
        // A half left at zero in every pair would mean it is not written.
        #expect(pairs.contains { $0.0 != 0 } && pairs.contains { $0.1 != 0 })
    }

    @Test("each thread draws from a pool of its own: the same pool on one thread, another on another thread")
    func randomPoolPerThread() {
        let here = ObjectIdentifier(IdentifierPool.current())
        #expect(ObjectIdentifier(IdentifierPool.current()) == here)
        // This thread's pool stays alive, so another thread's cannot have its address.
        final class Drawn: @unchecked Sendable { var pool: ObjectIdentifier? }
        let drawn = Drawn()
        let done = DispatchSemaphore(value: 0)
        Thread {
            drawn.pool = ObjectIdentifier(IdentifierPool.current())
            done.signal()
        }.start()
        done.wait()
        #expect(drawn.pool != nil && drawn.pool != here)
    }

    @Test("constant-time comparison")
    func comparison() {
        #expect(constantTimeEquals([1, 2, 3], [1, 2, 3]))
        #expect(!constantTimeEquals([1, 2, 3], [1, 2, 4]))
        #expect(!constantTimeEquals([1, 2, 3], [1, 2]))
        #expect(constantTimeEquals([], []))
    }

    @Test("hex is lowercase, two digits per byte")
    func hex() {
        #expect([0x00, 0x0f, 0xa0, 0xff].hexString == "000fa0ff")
    }
}
