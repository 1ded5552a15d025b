import Foundation
import PushgateTestTools
import Testing

@testable import PushgateCrypto

@Suite("ES256 keys, signatures and their encodings")
struct ES256Tests {
    /// The order of P-256's base point (FIPS 186-4 D.1.2.3): r and s must lie in 1 ..< n.
    static let order: [UInt8] = hex("ffffffff00000000ffffffffffffffffbce6faada7179e84f3b9cac2fc632551")
    static let message = Array("eyJhbGciOiJFUzI1NiJ9.eyJpc3MiOiJURUFNIn0".utf8)

    @Test("a signature verifies with the key's public half and with nothing else")
    func roundTrip() throws {
        let key = try ES256PrivateKey.generate()
        let other = try ES256PrivateKey.generate()
        let signature = key.sign(Self.message)
        #expect(signature.count == 64)
        #expect(key.publicKey.verify(signature: signature, message: Self.message))
        #expect(!other.publicKey.verify(signature: signature, message: Self.message))
        #expect(!key.publicKey.verify(signature: signature, message: Self.message + [0]))
        var flipped = signature
        flipped[40] ^= 0x01
        #expect(!key.publicKey.verify(signature: flipped, message: Self.message))
        // ECDSA is randomised: two signatures of one message differ, both verify.
        let again = key.sign(Self.message)
        #expect(again != signature)
        #expect(key.publicKey.verify(signature: again, message: Self.message))
        #expect(key.publicKey.verify(signature: key.sign([UInt8]()), message: [UInt8]()))
    }

    @Test("hostile signatures are false, never a crash")
    func hostileSignatures() throws {
        let key = try ES256PrivateKey.generate()
        let valid = key.sign(Self.message)
        let zero = [UInt8](repeating: 0, count: 32)
        let one = [UInt8](repeating: 0, count: 31) + [1]
        let ones = [UInt8](repeating: 0xFF, count: 32)
        let hostile: [[UInt8]] = [
            [], Array(valid.prefix(63)), valid + [0], Array(valid.prefix(32)),
            zero + zero, zero + Array(valid.suffix(32)), Array(valid.prefix(32)) + zero,
            Self.order + Array(valid.suffix(32)), Array(valid.prefix(32)) + Self.order,
            ones + ones, one + one, Self.order + Self.order,
            try #require(ECDSASignatureEncoding.der(fromRaw: valid)),  // DER where raw is expected
        ]
        for signature in hostile {
            #expect(!key.publicKey.verify(signature: signature, message: Self.message), "\(signature.hexString)")
        }
        #expect(openSSLErrorQueueIsEmpty(), "failed verifications leave nothing in OpenSSL's error queue")
    }

    @Test("raw r||s to DER keeps INTEGERs minimal and positive")
    func derEncoding() throws {
        let highBit = [UInt8](repeating: 0x80, count: 32)
        let leadingZeros = [UInt8](repeating: 0, count: 30) + [0x01, 0x02]
        let der = try #require(ECDSASignatureEncoding.der(fromRaw: highBit + leadingZeros))
        #expect(der == [0x30, 0x27, 0x02, 0x21, 0x00] + highBit + [0x02, 0x02, 0x01, 0x02])
        #expect(ECDSASignatureEncoding.raw(fromDER: der) == highBit + leadingZeros)
        #expect(ECDSASignatureEncoding.der(fromRaw: highBit) == nil)
        #expect(ECDSASignatureEncoding.raw(fromDER: [0x30, 0x03, 0x02, 0x01]) == nil)
    }

    @Test("interoperates with the openssl command: its keys load, each side verifies the other's signatures")
    func opensslInterop() throws {
        let tools = try ToolRunner()
        defer { tools.remove() }
        try tools.openssl("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", "key.p8")
        try tools.openssl("pkey", "-in", "key.p8", "-pubout", "-out", "public.pem")
        try tools.write("message", Self.message)
        let key = try ES256PrivateKey(pem: try tools.text("key.p8"))
        let publicKey = try ES256PublicKey(pem: try tools.text("public.pem"))
        #expect(key.publicKey == publicKey)
        #expect(try ES256PublicKey(pem: publicKey.pemRepresentation) == publicKey)
        #expect(publicKey.pemRepresentation == (try tools.text("public.pem")))

        for round in 0..<8 {
            let raw = key.sign(Self.message)
            try tools.write("ours.der", try #require(ECDSASignatureEncoding.der(fromRaw: raw)))
            let verified = try tools.run(
                "/usr/bin/openssl",
                ["dgst", "-sha256", "-verify", "public.pem", "-signature", "ours.der", "message"]
            )
            #expect(verified.status == 0, "round \(round): \(verified.output)")

            try tools.openssl("dgst", "-sha256", "-sign", "key.p8", "-out", "theirs.der", "message")
            let theirs = try #require(ECDSASignatureEncoding.raw(fromDER: try tools.read("theirs.der")))
            #expect(publicKey.verify(signature: theirs, message: Self.message), "round \(round)")
        }

        // The PKCS#8 we write is what openssl reads back as the same key.
        try tools.write("ours.p8", Array(key.pemRepresentation.utf8))
        try tools.openssl("pkey", "-in", "ours.p8", "-pubout", "-out", "ours-public.pem")
        #expect(try ES256PublicKey(pem: try tools.text("ours-public.pem")) == publicKey)
    }

    @Test("SEC 1 EC PRIVATE KEY PEM loads too")
    func sec1() throws {
        let tools = try ToolRunner()
        defer { tools.remove() }
        try tools.openssl("ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", "sec1.pem")
        #expect(try tools.text("sec1.pem").contains("BEGIN EC PRIVATE KEY"))
        let key = try ES256PrivateKey(pem: try tools.text("sec1.pem"))
        #expect(key.publicKey.verify(signature: key.sign(Self.message), message: Self.message))
    }

    @Test("keys that are not P-256 are refused, saying what they are")
    func wrongKeys() throws {
        let tools = try ToolRunner()
        defer { tools.remove() }
        try tools.openssl("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-384", "-out", "p384.pem")
        try tools.openssl(
            "genpkey",
            "-algorithm",
            "EC",
            "-pkeyopt",
            "ec_paramgen_curve:brainpoolP256r1",
            "-out",
            "brainpool.pem"
        )
        try tools.openssl("genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048", "-out", "rsa.pem")
        try tools.openssl("genpkey", "-algorithm", "ED25519", "-out", "ed25519.pem")
        try tools.openssl("pkey", "-in", "p384.pem", "-pubout", "-out", "p384-public.pem")
        try tools.openssl("pkey", "-in", "rsa.pem", "-pubout", "-out", "rsa-public.pem")

        #expect(throws: ES256KeyError.notP256(curve: "secp384r1")) {
            try ES256PrivateKey(pem: try tools.text("p384.pem"))
        }
        #expect(throws: ES256KeyError.notP256(curve: "brainpoolP256r1")) {
            try ES256PrivateKey(pem: try tools.text("brainpool.pem"))
        }
        #expect(throws: ES256KeyError.notEC(type: "RSA")) { try ES256PrivateKey(pem: try tools.text("rsa.pem")) }
        #expect(throws: ES256KeyError.notEC(type: "ED25519")) {
            try ES256PrivateKey(pem: try tools.text("ed25519.pem"))
        }
        #expect(throws: ES256KeyError.notP256(curve: "secp384r1")) {
            try ES256PublicKey(pem: try tools.text("p384-public.pem"))
        }
        #expect(throws: ES256KeyError.notEC(type: "RSA")) { try ES256PublicKey(pem: try tools.text("rsa-public.pem")) }
        #expect(ES256KeyError.notEC(type: "RSA").description.contains("P-256"))
    }

    @Test("encrypted, swapped and garbage PEM are refused with what was expected")
    func badPEM() throws {
        let tools = try ToolRunner()
        defer { tools.remove() }
        try tools.openssl(
            "genpkey",
            "-algorithm",
            "EC",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-aes-128-cbc",
            "-pass",
            "pass:secret",
            "-out",
            "encrypted.p8"
        )
        #expect(throws: ES256KeyError.encrypted) { try ES256PrivateKey(pem: try tools.text("encrypted.p8")) }

        let key = try ES256PrivateKey.generate()
        for (text, expected) in [
            (key.publicKey.pemRepresentation, "-----BEGIN PRIVATE KEY-----"),
            ("not a key", "-----BEGIN PRIVATE KEY-----"),
            ("", "-----BEGIN PRIVATE KEY-----"),
        ] {
            do {
                _ = try ES256PrivateKey(pem: text)
                Issue.record("loaded \(text)")
            } catch {
                guard case .notPEM(let said, _) = error else {
                    Issue.record("\(error)")
                    continue
                }
                #expect(said == expected)
                #expect(error.description.contains(expected))
            }
        }
        do {
            _ = try ES256PublicKey(pem: key.pemRepresentation)
            Issue.record("a private key loaded as a public key")
        } catch {
            guard case .notPEM(let said, _) = error else {
                Issue.record("\(error)")
                return
            }
            #expect(said == "-----BEGIN PUBLIC KEY-----")
        }
        #expect(openSSLErrorQueueIsEmpty())
    }

    @Test("keys are usable from many threads at once")
    func concurrentUse() async throws {
        let key = try ES256PrivateKey.generate()
        let publicKey = key.publicKey
        let results = await withTaskGroup(of: Bool.self, returning: [Bool].self) { group in
            for index in 0..<32 {
                group.addTask {
                    let message = Array("message \(index)".utf8)
                    return publicKey.verify(signature: key.sign(message), message: message)
                }
            }
            return await group.reduce(into: []) { $0.append($1) }
        }
        #expect(results == Array(repeating: true, count: 32))
    }

    private static func hex(_ text: String) -> [UInt8] {
        var bytes: [UInt8] = []
        var index = text.startIndex
        while index < text.endIndex {
            let next = text.index(index, offsetBy: 2)
            bytes.append(UInt8(text[index..<next], radix: 16)!)
            index = next
        }
        return bytes
    }
}

/// Whether this thread's OpenSSL error queue is empty.
private func openSSLErrorQueueIsEmpty() -> Bool {
    OpenSSLErrorQueue.drain().isEmpty
}
