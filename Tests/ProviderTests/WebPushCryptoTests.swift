import Crypto
import Foundation
import HeraldCore
import Testing

@testable import Providers

/// RFC 8291 Appendix A, as published in the RFC (all base64url).
private enum Vector {
    static let plaintext = "V2hlbiBJIGdyb3cgdXAsIEkgd2FudCB0byBiZSBhIHdhdGVybWVsb24"
    static let asPrivate = "yfWPiYE-n46HLnH0KqZOF1fJJU3MYrct3AELtAQ-oRw"
    static let asPublic = "BP4z9KsN6nGRTbVYI_c7VJSPQTBtkgcy27mlmlMoZIIgDll6e3vCYLocInmYWAmS6TlzAC8wEqKK6PBru3jl7A8"
    static let uaPrivate = "q1dXpw3UpT5VOmu_cf_v6ih07Aems3njxI-JWgLcM94"
    static let uaPublic = "BCVxsr7N_eNgVRqvHtD0zTZsEc6-VV-JvLexhqUzORcxaOzi6-AYWXvTBHm4bjyPjs7Vd8pZGH6SRpkNtoIAiw4"
    static let authSecret = "BTBZMqHH6r4Tts7J_aSIgg"
    static let salt = "DGv6ra1nlYgDCS1FRnbzlw"
    static let ecdhSecret = "kyrL1jIIOHEzg3sM2ZWRHDRB62YACZhhSlknJ672kSs"
    static let keyInfo =
        "V2ViUHVzaDogaW5mbwAEJXGyvs3942BVGq8e0PTNNmwRzr5VX4m8t7GGpTM5FzFo7OLr4BhZe9MEebhuPI-OztV3ylkYfpJGmQ22ggCLDgT-M_SrDepxkU21WCP3O1SUj0EwbZIHMtu5pZpTKGSCIA5Zent7wmC6HCJ5mFgJkuk5cwAvMBKiiujwa7t45ewP"
    static let prkKey = "Snr3JMxaHVDXHWJn5wdC52WjpCtd2EIEGBykDcZW32k"
    static let ikm = "S4lYMb_L0FxCeq0WhDx813KgSYqU26kOyzWUdsXYyrg"
    static let prk = "09_eUZGrsvxChDCGRCdkLiDXrReGOEVeSCdCcPBSJSc"
    static let cek = "oIhVW04MRdy2XN9CiKLxTg"
    static let nonce = "4h_95klXJ5E_qnoN"
    static let header =
        "DGv6ra1nlYgDCS1FRnbzlwAAEABBBP4z9KsN6nGRTbVYI_c7VJSPQTBtkgcy27mlmlMoZIIgDll6e3vCYLocInmYWAmS6TlzAC8wEqKK6PBru3jl7A8"
    static let ciphertext = "8pfeW0KbunFT06SuDKoJH9Ql87S1QUrdirN6GcG7sFz1y1sqLgVi1VhjVkHsUoEsbI_0LpXMuGvnzQ"
    static let body =
        "DGv6ra1nlYgDCS1FRnbzlwAAEABBBP4z9KsN6nGRTbVYI_c7VJSPQTBtkgcy27mlmlMoZIIgDll6e3vCYLocInmYWAmS6TlzAC8wEqKK6PBru3jl7A_yl95bQpu6cVPTpK4Mqgkf1CXztLVBSt2Ks3oZwbuwXPXLWyouBWLVWGNWQexSgSxsj_Qulcy4a-fN"
}

private func bytes(_ base64url: String) throws -> Data { try #require(Base64URL.decode(base64url)) }

@Suite struct WebPushCryptoTests {
    private func asKey() throws -> P256.KeyAgreement.PrivateKey {
        try P256.KeyAgreement.PrivateKey(rawRepresentation: bytes(Vector.asPrivate))
    }

    private func uaKey() throws -> P256.KeyAgreement.PrivateKey {
        try P256.KeyAgreement.PrivateKey(rawRepresentation: bytes(Vector.uaPrivate))
    }

    @Test func vectorKeysMatchTheirPublicHalves() throws {
        #expect(Base64URL.encode(try asKey().publicKey.x963Representation) == Vector.asPublic)
        #expect(Base64URL.encode(try uaKey().publicKey.x963Representation) == Vector.uaPublic)
    }

    @Test func keyScheduleMatchesRFC8291AppendixA() throws {
        let shared = try asKey().sharedSecretFromKeyAgreement(with: try uaKey().publicKey)
        let ecdh = shared.withUnsafeBytes { Data($0) }
        #expect(Base64URL.encode(ecdh) == Vector.ecdhSecret)
        #expect(
            ecdh.map { String(format: "%02x", $0) }.joined()
                == "932acbd63208387133837b0cd995911c3441eb66000998614a592727aef6912b"
        )

        let schedule = WebPushCrypto.keySchedule(
            ecdhSecret: ecdh,
            authSecret: try bytes(Vector.authSecret),
            salt: try bytes(Vector.salt),
            userAgentPublicKey: try bytes(Vector.uaPublic),
            applicationServerPublicKey: try bytes(Vector.asPublic)
        )
        #expect(Base64URL.encode(schedule.ecdhSecret) == Vector.ecdhSecret)
        #expect(schedule.keyInfo.count == 144)
        #expect(Base64URL.encode(schedule.keyInfo) == Vector.keyInfo)
        #expect(Base64URL.encode(schedule.prkKey) == Vector.prkKey)
        #expect(Base64URL.encode(schedule.ikm) == Vector.ikm)
        #expect(Base64URL.encode(schedule.prk) == Vector.prk)
        #expect(Base64URL.encode(schedule.cek) == Vector.cek)
        #expect(Base64URL.encode(schedule.nonce) == Vector.nonce)
    }

    @Test func encryptionMatchesRFC8291AppendixAByteForByte() throws {
        let body = try WebPushCrypto.encrypt(
            plaintext: try bytes(Vector.plaintext),
            userAgentPublicKey: try bytes(Vector.uaPublic),
            authSecret: try bytes(Vector.authSecret),
            salt: try bytes(Vector.salt),
            applicationServerKey: try asKey(),
            recordSize: 4096
        )
        #expect(body.count == 144)
        #expect(Base64URL.encode(body.prefix(WebPushCrypto.headerLength)) == Vector.header)
        #expect(Base64URL.encode(body.dropFirst(WebPushCrypto.headerLength)) == Vector.ciphertext)
        #expect(Base64URL.encode(body) == Vector.body)
    }

    @Test func decryptsTheRFCBody() throws {
        let plaintext = try WebPushCrypto.decrypt(
            body: try bytes(Vector.body),
            userAgentPrivateKey: try uaKey(),
            authSecret: try bytes(Vector.authSecret)
        )
        #expect(String(decoding: plaintext, as: UTF8.self) == "When I grow up, I want to be a watermelon")
    }

    @Test(arguments: [0, 1, 100, WebPushCrypto.maxPlaintextLength])
    func roundTripWithEphemeralKeys(length: Int) throws {
        let ua = P256.KeyAgreement.PrivateKey()
        let auth = Data((0..<16).map { _ in UInt8.random(in: 0...255) })
        let plaintext = Data((0..<length).map { _ in UInt8.random(in: 0...255) })
        let body = try WebPushCrypto.encrypt(
            plaintext: plaintext,
            userAgentPublicKey: ua.publicKey.x963Representation,
            authSecret: auth
        )
        #expect(body.count == WebPushCrypto.headerLength + length + 1 + WebPushCrypto.tagLength)
        #expect(body.count <= WebPushCrypto.maxBodyLength)
        #expect(try WebPushCrypto.decrypt(body: body, userAgentPrivateKey: ua, authSecret: auth) == plaintext)

        // Fresh salt and ephemeral key per message: the same plaintext never encrypts the same way.
        let again = try WebPushCrypto.encrypt(
            plaintext: plaintext,
            userAgentPublicKey: ua.publicKey.x963Representation,
            authSecret: auth
        )
        #expect(again.prefix(16) != body.prefix(16))
        #expect(again[21..<86] != body[21..<86])
    }

    @Test func plaintextTooLargeForOneRecordIsRefused() throws {
        let ua = P256.KeyAgreement.PrivateKey()
        #expect(throws: WebPushCrypto.CryptoError.self) {
            try WebPushCrypto.encrypt(
                plaintext: Data(count: WebPushCrypto.maxPlaintextLength + 1 + 86),
                userAgentPublicKey: ua.publicKey.x963Representation,
                authSecret: Data(count: 16)
            )
        }
    }

    @Test(arguments: [WebPushCrypto.headerLength + 3, 100, 143])
    func tamperedCiphertextFails(offset: Int) throws {
        var body = try bytes(Vector.body)
        body[offset] ^= 0x01
        #expect(throws: WebPushCrypto.CryptoError.self) {
            try WebPushCrypto.decrypt(
                body: body,
                userAgentPrivateKey: try uaKey(),
                authSecret: try bytes(Vector.authSecret)
            )
        }
    }

    @Test func wrongKeysAndMalformedHeadersFail() throws {
        let body = try bytes(Vector.body)
        let auth = try bytes(Vector.authSecret)
        // Wrong user-agent key, wrong auth secret, tampered salt.
        #expect(throws: WebPushCrypto.CryptoError.self) {
            try WebPushCrypto.decrypt(body: body, userAgentPrivateKey: P256.KeyAgreement.PrivateKey(), authSecret: auth)
        }
        #expect(throws: WebPushCrypto.CryptoError.self) {
            try WebPushCrypto.decrypt(body: body, userAgentPrivateKey: try uaKey(), authSecret: Data(count: 16))
        }
        var salted = body
        salted[0] ^= 0xFF
        #expect(throws: WebPushCrypto.CryptoError.self) {
            try WebPushCrypto.decrypt(body: salted, userAgentPrivateKey: try uaKey(), authSecret: auth)
        }
        // idlen other than 65, rs < 18, a truncated body.
        var idlen = body
        idlen[20] = 64
        #expect(throws: WebPushCrypto.CryptoError.self) {
            try WebPushCrypto.decrypt(body: idlen, userAgentPrivateKey: try uaKey(), authSecret: auth)
        }
        var rs = body
        rs[16..<20] = Data([0, 0, 0, 17])
        #expect(throws: WebPushCrypto.CryptoError.self) {
            try WebPushCrypto.decrypt(body: rs, userAgentPrivateKey: try uaKey(), authSecret: auth)
        }
        #expect(throws: WebPushCrypto.CryptoError.self) {
            try WebPushCrypto.decrypt(body: body.prefix(90), userAgentPrivateKey: try uaKey(), authSecret: auth)
        }
        // A body whose record is longer than rs (more than one record).
        var small = body
        small[16..<20] = Data([0, 0, 0, 40])
        #expect(throws: WebPushCrypto.CryptoError.self) {
            try WebPushCrypto.decrypt(body: small, userAgentPrivateKey: try uaKey(), authSecret: auth)
        }
    }

    @Test func errorsNameNoKeyBytes() throws {
        let auth = try bytes(Vector.authSecret)
        do {
            _ = try WebPushCrypto.encrypt(
                plaintext: Data("x".utf8),
                userAgentPublicKey: Data(count: 65),
                authSecret: auth
            )
            Issue.record("an all-zero point must be refused")
        } catch {
            #expect(!"\(error)".contains(Vector.authSecret))
            #expect("\(error)".contains("P-256"))
        }
        do {
            _ = try WebPushCrypto.decrypt(
                body: try bytes(Vector.body),
                userAgentPrivateKey: P256.KeyAgreement.PrivateKey(),
                authSecret: auth
            )
        } catch {
            #expect("\(error)" == "record failed authentication")
        }
    }

    /// Base64url against Foundation's base64 with the alphabet swapped, for every length mod 3.
    @Test func base64URLRoundTripsAndAcceptsWhatBrowsersHandOver() throws {
        for length in 0..<40 {
            let bytes = Data((0..<length).map { UInt8(truncatingIfNeeded: $0 &* 37 &+ 250) })
            let standard = bytes.base64EncodedString()
            let url = Base64URL.encode(bytes)
            #expect(
                url
                    == standard.replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
                    .replacingOccurrences(of: "=", with: "")
            )
            #expect(Base64URL.decode(url) == bytes)
            #expect(Base64URL.decode(standard) == bytes)  // standard alphabet, padded
            #expect(Base64URL.decode(" \(url)\n") == bytes)  // pasted with whitespace
        }
        #expect(Base64URL.decode("a") == nil)
        #expect(Base64URL.decode("ab$d") == nil)
        #expect(Base64URL.decode("äbcd") == nil)
    }

    /// The per-message key: a valid pair (both sides agree on the secret), different every time.
    @Test func ephemeralKeysAreValidPairsAndNeverRepeat() throws {
        let peer = P256.KeyAgreement.PrivateKey()
        var seen: Set<Data> = []
        for _ in 0..<200 {
            let key = try WebPushCrypto.ephemeralKey()
            let ours = try key.sharedSecretFromKeyAgreement(with: peer.publicKey)
            let theirs = try peer.sharedSecretFromKeyAgreement(with: key.publicKey)
            #expect(ours == theirs)
            _ = try P256.KeyAgreement.PublicKey(x963Representation: key.publicKey.x963Representation)  // on the curve
            seen.insert(key.rawRepresentation)
        }
        #expect(seen.count == 200)
    }

    /// The pool behind every message's salt and key: across several refills (4 KiB each) no
    /// draw repeats, and the whole run is not biased to a byte value (each value 0–255 appears).
    @Test func randomPoolDrawsNeverRepeat() {
        var seen: Set<[UInt8]> = []
        var counts = [Int](repeating: 0, count: 256)
        for _ in 0..<1_000 {
            let drawn = RandomPool.shared.draw(48)
            #expect(drawn.count == 48)
            seen.insert(drawn)
            for byte in drawn { counts[Int(byte)] += 1 }
        }
        #expect(seen.count == 1_000)
        #expect(counts.allSatisfy { $0 > 0 }, "48,000 random bytes cover every value")
    }

    /// The pool is filled 4 KiB at a time (one read of the kernel's generator), not eight bytes at
    /// a time: 850 draws of a message's 48 bytes (40,800 bytes) fill it 10 or 11 times.
    @Test func randomPoolFillsFourKibibytesAtATime() {
        let pool = RandomPool()
        for _ in 0..<850 { _ = pool.draw(48) }
        #expect((10...11).contains(pool.refills))
        let drawn = pool.draw(4096)
        #expect(drawn.count == 4096 && Set(drawn).count > 200, "a whole pool of random bytes")
    }

    /// The key schedule's HMAC, written on SHA-256, agrees with swift-crypto's for every key length
    /// it accepts (0–64 bytes) and inputs split into one, two or three parts.
    @Test func hmacAgreesWithSwiftCrypto() {
        var generator = SystemRandomNumberGenerator()
        for keyLength in 0...64 {
            let key = Data((0..<keyLength).map { _ in UInt8.random(in: 0...255, using: &generator) })
            let parts = (0..<3).map { _ in
                Data(
                    (0..<Int.random(in: 0...200, using: &generator)).map { _ in
                        UInt8.random(in: 0...255, using: &generator)
                    }
                )
            }
            var reference = HMAC<SHA256>(key: SymmetricKey(data: key))
            for part in parts { reference.update(data: part) }
            #expect(WebPushCrypto.hmac(key: key, parts[0], parts[1], parts[2]) == Data(reference.finalize()))
            #expect(
                WebPushCrypto.hmac(key: key, parts[0] + parts[1])
                    == Data(
                        HMAC<SHA256>.authenticationCode(
                            for: parts[0] + parts[1],
                            using: SymmetricKey(data: key)
                        )
                    )
            )
        }
    }
}
