import Foundation
import PushgateTestTools
import Testing

@testable import PushgateCrypto

/// RFC 8291 message encryption: RFC 8291's own example, and http_ece (PyPI `http-ece`, on pyca's
/// cryptography, which pywebpush encrypts with) in both directions.
@Suite("Web Push message encryption (RFC 8291, aes128gcm)")
final class WebPushEncryptionTests {
    /// RFC 8291 appendix A.
    enum Example {
        static let plaintext = Array("When I grow up, I want to be a watermelon".utf8)
        static let userAgentPrivate = b64("q1dXpw3UpT5VOmu_cf_v6ih07Aems3njxI-JWgLcM94")
        static let userAgentPublic = b64(
            "BCVxsr7N_eNgVRqvHtD0zTZsEc6-VV-JvLexhqUzORcxaOzi6-AYWXvTBHm4bjyPjs7Vd8pZGH6SRpkNtoIAiw4"
        )
        static let serverPrivate = b64("yfWPiYE-n46HLnH0KqZOF1fJJU3MYrct3AELtAQ-oRw")
        static let authSecret = b64("BTBZMqHH6r4Tts7J_aSIgg")
        static let salt = b64("DGv6ra1nlYgDCS1FRnbzlw")
        static let body = b64(
            "DGv6ra1nlYgDCS1FRnbzlwAAEABBBP4z9KsN6nGRTbVYI_c7VJSPQTBtkgcy27mlmlMoZIIgDll6e3vCYLocInmYWAmS6TlzAC8wEqKK6PBru3jl7A_yl95bQpu6cVPTpK4Mqgkf1CXztLVBSt2Ks3oZwbuwXPXLWyouBWLVWGNWQexSgSxsj_Qulcy4a-fN"
        )
    }

    static let python = "/usr/bin/python3"
    let tools: ToolRunner

    init() throws {
        tools = try ToolRunner()
    }

    deinit {
        tools.remove()
    }

    @Test("RFC 8291's example decrypts, and encrypting it again with its keys and salt gives its body")
    func rfcExample() throws {
        let userAgent = try P256KeyAgreementKey(der: sec1(Example.userAgentPrivate))
        #expect(userAgent.publicKey == Example.userAgentPublic)
        let plaintext = try WebPushEncryption.decrypt(
            Example.body,
            userAgentKey: userAgent,
            authSecret: Example.authSecret
        )
        #expect(plaintext == Example.plaintext)
        let body = try WebPushEncryption.encrypt(
            Example.plaintext,
            userAgentPublicKey: Example.userAgentPublic,
            authSecret: Example.authSecret,
            serverKey: P256KeyAgreementKey(der: sec1(Example.serverPrivate)),
            salt: Example.salt
        )
        #expect(body == Example.body)
    }

    @Test("a body opens only with its subscription's key and auth secret, and unchanged")
    func refusals() throws {
        let key = try P256KeyAgreementKey.generate()
        let auth = try SecureRandom.bytes(16)
        let body = try WebPushEncryption.encrypt([1, 2, 3], userAgentPublicKey: key.publicKey, authSecret: auth)
        #expect(body.count == 3 + WebPushEncryption.overhead)
        #expect(try WebPushEncryption.decrypt(body, userAgentKey: key, authSecret: auth) == [1, 2, 3])
        let other = try P256KeyAgreementKey.generate()
        #expect(throws: WebPushDecryptionError.authentication) {
            try WebPushEncryption.decrypt(body, userAgentKey: other, authSecret: auth)
        }
        #expect(throws: WebPushDecryptionError.authentication) {
            try WebPushEncryption.decrypt(body, userAgentKey: key, authSecret: [UInt8](repeating: 0, count: 16))
        }
        var changed = body
        changed[changed.count - 20] ^= 1
        #expect(throws: WebPushDecryptionError.authentication) {
            try WebPushEncryption.decrypt(changed, userAgentKey: key, authSecret: auth)
        }
        #expect(throws: WebPushDecryptionError.tooShort(50)) {
            try WebPushEncryption.decrypt(Array(body.prefix(50)), userAgentKey: key, authSecret: auth)
        }
        var badKey = body
        badKey[22] ^= 0xFF  // inside the key id: no longer a point on the curve
        #expect(throws: WebPushDecryptionError.serverKey) {
            try WebPushEncryption.decrypt(badKey, userAgentKey: key, authSecret: auth)
        }
        var smallRecords = body
        smallRecords[16...19] = [0, 0, 0, 18]
        #expect(throws: WebPushDecryptionError.severalRecords(recordSize: 18, bytes: 20)) {
            try WebPushEncryption.decrypt(smallRecords, userAgentKey: key, authSecret: auth)
        }
    }

    @Test("a key pair survives its DER, as the agent keeps it")
    func derRoundTrip() throws {
        let key = try P256KeyAgreementKey.generate()
        let again = try P256KeyAgreementKey(der: key.derRepresentation)
        #expect(again.publicKey == key.publicKey)
        let peer = try P256KeyAgreementKey.generate()
        #expect(try again.sharedSecret(with: peer.publicKey) == peer.sharedSecret(with: key.publicKey))
        #expect(throws: P256KeyError.notAPoint) { try key.sharedSecret(with: [4] + [UInt8](repeating: 1, count: 64)) }
        #expect(throws: (any Error).self) { try P256KeyAgreementKey(der: [0x30, 0x00]) }
        #expect(ES256PublicKey(uncompressedPoint: key.publicKey) != nil)
        #expect(ES256PublicKey(uncompressedPoint: key.publicKey.prefix(64)) == nil)
    }

    @Test("http_ece decrypts what this encrypts, and this decrypts what http_ece encrypts, up to 3993 bytes")
    func httpECE() throws {
        let key = try P256KeyAgreementKey.generate()
        let auth = try SecureRandom.bytes(16)
        let plaintext = (0..<3993).map { UInt8(truncatingIfNeeded: $0 &* 7) }
        let ours = try WebPushEncryption.encrypt(plaintext, userAgentPublicKey: key.publicKey, authSecret: auth)
        #expect(ours.count == 4096)
        try tools.write("key.der", key.derRepresentation)
        try tools.write("auth", auth)
        try tools.write("ours", ours)
        try tools.write("plaintext", plaintext)
        let script = """
            import http_ece
            from cryptography.hazmat.primitives import serialization
            from cryptography.hazmat.primitives.asymmetric import ec
            key = serialization.load_der_private_key(open("key.der", "rb").read(), password=None)
            auth = open("auth", "rb").read()
            plain = open("plaintext", "rb").read()
            assert http_ece.decrypt(open("ours", "rb").read(), private_key=key, auth_secret=auth,
                                    version="aes128gcm") == plain
            server = ec.generate_private_key(ec.SECP256R1())
            body = http_ece.encrypt(plain, private_key=server, dh=key.public_key(), auth_secret=auth,
                                    version="aes128gcm")
            open("theirs", "wb").write(body)
            print("ok")
            """
        try tools.write("script.py", Array(script.utf8))
        let (status, output) = try tools.run(Self.python, ["script.py"])
        #expect(status == 0, "python3 with http_ece (PyPI http-ece): \(output)")
        let theirs = try tools.read("theirs")
        #expect(try WebPushEncryption.decrypt(theirs, userAgentKey: key, authSecret: auth) == plaintext)
    }
}

/// A SEC 1 `ECPrivateKey` of a P-256 scalar, without its public key (OpenSSL computes it).
func sec1(_ scalar: [UInt8]) -> [UInt8] {
    [0x30, 0x31, 0x02, 0x01, 0x01, 0x04, 0x20] + scalar
        + [0xA0, 0x0A, 0x06, 0x08, 0x2A, 0x86, 0x48, 0xCE, 0x3D, 0x03, 0x01, 0x07]
}

private func b64(_ text: String) -> [UInt8] { Base64URL.decode(text)! }
