import Crypto
import Foundation
import HeraldCore
import Synchronization

/// Web Push message encryption: RFC 8291 key agreement on top of the RFC 8188 `aes128gcm`
/// content coding, both the sending (application server) and receiving (user agent) side.
///
/// A body is `salt(16) ‖ rs(uint32 BE) ‖ idlen(1) = 65 ‖ keyid = as_public(65) ‖ one record`, where
/// the record is AES-128-GCM over `plaintext ‖ 0x02` (the last-record delimiter, no padding).
///
/// - Important: production callers leave `salt` and `applicationServerKey` nil so both are fresh
///   per message; fixing them exists only to reproduce the RFC 8291 Appendix A test vector.
package enum WebPushCrypto {
    /// Bytes before the record: salt 16 + rs 4 + idlen 1 + keyid 65.
    package static let headerLength = 86
    /// Bytes AES-GCM adds to a record.
    package static let tagLength = 16
    /// The record size Herald writes (what the reference libraries send).
    package static let defaultRecordSize = 4096
    /// The body size every push service must accept (RFC 8030 §7.2).
    package static let maxBodyLength = 4096
    /// The largest plaintext that still fits `maxBodyLength`: 4096 − 86 − 1 − 16 = 3993.
    package static let maxPlaintextLength = maxBodyLength - headerLength - 1 - tagLength

    /// An encryption or decryption failure. Its text names the problem, never key or payload bytes.
    package struct CryptoError: Error, Hashable, CustomStringConvertible {
        package var description: String
        package init(_ description: String) { self.description = description }
    }

    /// Every intermediate value of the RFC 8291 / RFC 8188 key schedule, exposed for test vectors.
    package struct KeySchedule: Sendable, Hashable {
        /// ECDH(as_private, ua_public): the 32-byte x-coordinate.
        package var ecdhSecret: Data
        /// HKDF-Extract(salt: auth_secret, IKM: ecdh_secret).
        package var prkKey: Data
        /// `"WebPush: info" ‖ 0x00 ‖ ua_public ‖ as_public` (144 bytes).
        package var keyInfo: Data
        /// HKDF-Expand(PRK_key, key_info, 32): the input keying material for RFC 8188.
        package var ikm: Data
        /// HKDF-Extract(salt: salt, IKM: ikm).
        package var prk: Data
        /// The 16-byte content encryption key.
        package var cek: Data
        /// The 12-byte nonce of record 0 (Web Push has exactly one record).
        package var nonce: Data
    }

    /// Derives the key schedule from an ECDH secret and both public keys (65-byte uncompressed points).
    package static func keySchedule(
        ecdhSecret: Data,
        authSecret: Data,
        salt: Data,
        userAgentPublicKey: Data,
        applicationServerPublicKey: Data
    ) -> KeySchedule {
        // Every HKDF-Expand here asks for at most one SHA-256 block, which is one HMAC over
        // `info ‖ 0x01`; so the schedule is five HMACs over the bytes themselves.
        let prkKey = hmac(key: authSecret, ecdhSecret)
        var keyInfo = Data(capacity: 144)
        keyInfo.append(contentsOf: Self.keyInfoLabel)
        keyInfo.append(userAgentPublicKey)
        keyInfo.append(applicationServerPublicKey)
        let ikm = hmac(key: prkKey, keyInfo, Self.one)
        let prk = hmac(key: salt, ikm)
        let cek = hmac(key: prk, Self.cekInfo, Self.one).prefix(16)
        let nonce = hmac(key: prk, Self.nonceInfo, Self.one).prefix(12)
        return KeySchedule(
            ecdhSecret: ecdhSecret,
            prkKey: prkKey,
            keyInfo: keyInfo,
            ikm: ikm,
            prk: prk,
            cek: Data(cek),
            nonce: Data(nonce)
        )
    }

    /// HMAC-SHA-256 (RFC 2104) of the concatenated `parts` under a key of at most one block (every
    /// key here is 16 or 32 bytes), written on SHA-256 itself: swift-crypto's `HMAC` copies the key
    /// into a `SymmetricKey` and pads it on the heap, which made the five HMACs of a message cost
    /// about as much as its ephemeral key.
    static func hmac(key: Data, _ parts: Data...) -> Data {
        precondition(key.count <= 64, "an HMAC key here is at most one SHA-256 block")
        var inner = SHA256()
        var outer = SHA256()
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 128) { pads in
            for i in 0..<64 {
                pads[i] = 0x36
                pads[64 + i] = 0x5C
            }
            for (i, byte) in key.enumerated() {
                pads[i] ^= byte
                pads[64 + i] ^= byte
            }
            inner.update(bufferPointer: UnsafeRawBufferPointer(rebasing: UnsafeRawBufferPointer(pads)[0..<64]))
            outer.update(bufferPointer: UnsafeRawBufferPointer(rebasing: UnsafeRawBufferPointer(pads)[64..<128]))
        }
        for part in parts { inner.update(data: part) }
        inner.finalize().withUnsafeBytes { outer.update(bufferPointer: $0) }
        return outer.finalize().withUnsafeBytes { Data($0) }
    }

    private static let one = Data([0x01])
    private static let keyInfoLabel = Data("WebPush: info".utf8) + [0x00]
    private static let cekInfo = Data("Content-Encoding: aes128gcm".utf8) + [0x00]
    private static let nonceInfo = Data("Content-Encoding: nonce".utf8) + [0x00]

    /// Encrypts `plaintext` for one subscription and returns the complete `aes128gcm` body.
    ///
    /// - Parameters:
    ///   - userAgentPublicKey: the subscription's `p256dh`, a 65-byte uncompressed P-256 point.
    ///   - authSecret: the subscription's `auth`, 16 bytes.
    ///   - salt: 16 bytes; random when nil.
    ///   - applicationServerKey: the sender's ECDH key; a fresh ephemeral key when nil.
    ///   - recordSize: the `rs` header field; must exceed `plaintext.count + 1 + 16`. Default 4096.
    package static func encrypt(
        plaintext: Data,
        userAgentPublicKey: Data,
        authSecret: Data,
        salt: Data? = nil,
        applicationServerKey: P256.KeyAgreement.PrivateKey? = nil,
        recordSize: Int = defaultRecordSize
    ) throws -> Data {
        try encrypt(
            plaintext: plaintext,
            userAgent: try parsePublicKey(userAgentPublicKey),
            userAgentPublicKey: userAgentPublicKey,
            authSecret: authSecret,
            salt: salt,
            applicationServerKey: applicationServerKey,
            recordSize: recordSize
        )
    }

    /// The same for a subscription key already parsed (by ``parsePublicKey(_:)``): `userAgent` is
    /// the parsed form of the 65 bytes `userAgentPublicKey`, so the point is checked once per message.
    package static func encrypt(
        plaintext: Data,
        userAgent uaPublic: P256.KeyAgreement.PublicKey,
        userAgentPublicKey: Data,
        authSecret: Data,
        salt: Data? = nil,
        applicationServerKey: P256.KeyAgreement.PrivateKey? = nil,
        recordSize: Int = defaultRecordSize
    ) throws -> Data {
        guard userAgentPublicKey.count == 65 else {
            throw CryptoError("public key is not a 65-byte uncompressed P-256 point")
        }
        guard authSecret.count == 16 else { throw CryptoError("auth secret must be 16 bytes") }
        // A fresh salt and key pair draw their 48 bytes from the pool at once.
        let fresh = salt == nil || applicationServerKey == nil ? RandomPool.shared.draw(48) : []
        let salt = salt ?? Data(fresh[0..<16])
        guard salt.count == 16 else { throw CryptoError("salt must be 16 bytes") }
        guard recordSize >= 18, recordSize <= Int(UInt32.max) else { throw CryptoError("record size out of range") }
        guard plaintext.count + 1 + tagLength <= recordSize else {
            throw CryptoError("plaintext does not fit one record")
        }

        let asKey = try applicationServerKey ?? ephemeralKey(scalar: fresh[16..<48])
        let asPublic = asKey.publicKey.x963Representation
        let shared = try asKey.sharedSecretFromKeyAgreement(with: uaPublic)
        let schedule = keySchedule(
            ecdhSecret: shared.withUnsafeBytes { Data($0) },
            authSecret: authSecret,
            salt: salt,
            userAgentPublicKey: userAgentPublicKey,
            applicationServerPublicKey: asPublic
        )

        var record = plaintext
        record.append(0x02)
        let sealed = try AES.GCM.seal(
            record,
            using: SymmetricKey(data: schedule.cek),
            nonce: try AES.GCM.Nonce(data: schedule.nonce)
        )

        var body = Data(capacity: headerLength + record.count + tagLength)
        body.append(salt)
        let rs = UInt32(recordSize)
        body.append(contentsOf: [UInt8(rs >> 24), UInt8((rs >> 16) & 0xFF), UInt8((rs >> 8) & 0xFF), UInt8(rs & 0xFF)])
        body.append(UInt8(asPublic.count))
        body.append(asPublic)
        body.append(sealed.ciphertext)
        body.append(sealed.tag)
        return body
    }

    /// Decrypts an `aes128gcm` Web Push body as the user agent does (the simulator and tests use it).
    ///
    /// Rejects a header that is not Web Push shaped (keyid other than a 65-byte point, `rs` < 18),
    /// more than one record, a failed tag, and a missing or wrong (≠ 0x02) padding delimiter.
    package static func decrypt(
        body: Data,
        userAgentPrivateKey: P256.KeyAgreement.PrivateKey,
        authSecret: Data
    ) throws -> Data {
        let body = Data(body)  // re-base indices at 0
        guard body.count >= headerLength else { throw CryptoError("body shorter than the aes128gcm header") }
        let salt = body[0..<16]
        let rs = body[16..<20].reduce(0) { ($0 << 8) | Int($1) }
        let idlen = Int(body[20])
        guard rs >= 18 else { throw CryptoError("record size below 18") }
        guard idlen == 65 else { throw CryptoError("key id is not a 65-byte public key") }
        let asPublicBytes = body[21..<(21 + idlen)]
        let asPublic = try parsePublicKey(Data(asPublicBytes))
        let record = body[(21 + idlen)...]
        guard record.count > tagLength else { throw CryptoError("record shorter than the authentication tag") }
        guard record.count <= rs else { throw CryptoError("more than one record") }
        guard authSecret.count == 16 else { throw CryptoError("auth secret must be 16 bytes") }

        let shared = try userAgentPrivateKey.sharedSecretFromKeyAgreement(with: asPublic)
        let schedule = keySchedule(
            ecdhSecret: shared.withUnsafeBytes { Data($0) },
            authSecret: authSecret,
            salt: Data(salt),
            userAgentPublicKey: userAgentPrivateKey.publicKey.x963Representation,
            applicationServerPublicKey: asPublic.x963Representation
        )

        let padded: Data
        do {
            let box = try AES.GCM.SealedBox(
                nonce: try AES.GCM.Nonce(data: schedule.nonce),
                ciphertext: record.dropLast(tagLength),
                tag: record.suffix(tagLength)
            )
            padded = try AES.GCM.open(box, using: SymmetricKey(data: schedule.cek))
        } catch {
            throw CryptoError("record failed authentication")
        }
        guard let delimiter = padded.lastIndex(where: { $0 != 0 }) else {
            throw CryptoError("record has no padding delimiter")
        }
        guard padded[delimiter] == 0x02 else { throw CryptoError("last record delimiter is not 0x02") }
        return Data(padded[padded.startIndex..<delimiter])
    }

    /// A fresh P-256 key pair for one message, from 32 bytes of the kernel's CSPRNG (``RandomPool``;
    /// drawn again in the 2⁻³² case that they are not a valid scalar below the group order).
    ///
    /// swift-crypto's `P256.KeyAgreement.PrivateKey()` runs BoringSSL's FIPS pairwise test on
    /// every key it generates (a key check, an ECDSA signature and its verification): about four
    /// scalar multiplications besides the one that makes the public key, which more than doubled
    /// the crypto cost of a Web Push message. The key here is the same random scalar and its public
    /// point, with the point checked on the curve when it is set.
    /// The random bytes come from ``RandomPool``; `scalar` (32 bytes) is tried first when given.
    package static func ephemeralKey(scalar: ArraySlice<UInt8>? = nil) throws -> P256.KeyAgreement.PrivateKey {
        if let scalar,
            let key = try? scalar.withUnsafeBytes({ try P256.KeyAgreement.PrivateKey(rawRepresentation: $0) })
        {
            return key
        }
        for _ in 0..<8 {
            let scalar = RandomPool.shared.draw(32)
            if let key = try? scalar.withUnsafeBytes({ try P256.KeyAgreement.PrivateKey(rawRepresentation: $0) }) {
                return key
            }
        }
        throw CryptoError("could not draw an ephemeral key")
    }

    /// Parses a 65-byte uncompressed P-256 point.
    package static func parsePublicKey(_ bytes: Data) throws -> P256.KeyAgreement.PublicKey {
        guard bytes.count == 65, bytes.first == 0x04 else {
            throw CryptoError("public key is not a 65-byte uncompressed P-256 point")
        }
        do {
            return try P256.KeyAgreement.PublicKey(x963Representation: bytes)
        } catch {
            throw CryptoError("public key is not a point on P-256")
        }
    }
}

/// Random bytes for the per-message salt and ephemeral key, from the kernel 4 KiB at a time.
///
/// swift-crypto's `SymmetricKey(size:)` fills its bytes from `SystemRandomNumberGenerator` eight
/// at a time, one `getrandom` system call each: six calls for a message's 48 bytes. The pool is
/// filled with one `read` of `/dev/urandom` (one system call per 85 messages). Bytes handed out
/// are zeroed in the pool, so none is handed out twice or kept after use.
package final class RandomPool: Sendable {
    package static let shared = RandomPool()
    private static let size = 4096
    private let state = Mutex<(bytes: [UInt8], next: Int, refills: Int)>(
        ([UInt8](repeating: 0, count: RandomPool.size), RandomPool.size, 0)
    )
    /// Times the pool was filled (for tests).
    package var refills: Int { state.withLock { $0.refills } }

    package init() {}

    /// `count` (at most 4,096) random bytes.
    package func draw(_ count: Int) -> [UInt8] {
        precondition(count <= Self.size, "a draw is at most one pool")
        return state.withLock { state in
            if state.next + count > state.bytes.count {
                state.bytes.withUnsafeMutableBytes { Self.fill($0) }
                state.refills += 1
                state.next = 0
            }
            let range = state.next..<(state.next + count)
            let drawn = Array(state.bytes[range])
            _ = state.bytes.withUnsafeMutableBytes { $0[range].initializeMemory(as: UInt8.self, repeating: 0) }
            state.next += count
            return drawn
        }
    }

    /// `/dev/urandom`, opened once (-1 where it cannot be opened).
    private static let urandom: Int32 = {
        #if canImport(Glibc)
        return open("/dev/urandom", O_RDONLY | O_CLOEXEC)
        #else
        return -1
        #endif
    }()

    /// Fills `buffer` from the kernel's CSPRNG: one `read` of `/dev/urandom` (the same generator
    /// as `getrandom(2)`, which Swift's Glibc module does not declare), looping on a short read;
    /// whatever that cannot give comes from `SystemRandomNumberGenerator`.
    private static func fill(_ buffer: UnsafeMutableRawBufferPointer) {
        var filled = 0
        #if canImport(Glibc)
        while urandom >= 0 && filled < buffer.count {
            let n = read(urandom, buffer.baseAddress! + filled, buffer.count - filled)
            if n > 0 {
                filled += n
            } else if n < 0 && errno == EINTR {
                continue
            } else {
                break
            }
        }
        #endif
        var generator = SystemRandomNumberGenerator()
        for i in filled..<buffer.count { buffer[i] = generator.next() }
    }
}
