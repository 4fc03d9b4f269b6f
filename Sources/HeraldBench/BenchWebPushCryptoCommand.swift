import ArgumentParser
import Crypto
import Foundation
import HeraldCore
import Providers

/// `herald-bench webpush-crypto`: what one Web Push message costs before it leaves, step by step
/// (CPU on one thread, no database, no sockets): the subscription's keys decoded and checked, the
/// endpoint parsed (or all three taken from the subscription cache), the payload written, the RFC 8291 encryption (an ephemeral key, ECDH, the key
/// schedule, AES-GCM), the `Topic`. One JSON line, microseconds per message.
struct BenchWebPushCryptoCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "webpush-crypto",
        abstract: "CPU per Web Push message, step by step (no I/O)."
    )

    @Option(help: "Messages per step.") var messages = 20_000

    func run() async throws {
        let userAgent = P256.KeyAgreement.PrivateKey()
        let p256dhBytes = userAgent.publicKey.x963Representation
        let authBytes = Data((0..<16).map { _ in UInt8.random(in: 0...255) })
        let p256dh = Base64URL.encode(p256dhBytes)
        let auth = Base64URL.encode(authBytes)
        let endpoint = "https://updates.push.example.net/wpush/v2/gAAAAABk-example-subscription-0123456789abcdef"
        let message = PushMessage(
            jobID: 42,
            device: Device(id: 1, userID: "u1", provider: .webpush, token: endpoint, p256dh: p256dh, auth: auth),
            title: "Platform change",
            body: "Your 08:12 to Uppsala now leaves from platform 4.",
            data: ["eventType": "delay"],
            priority: .high,
            collapseID: "journey-42",
            expiresAt: Date(timeIntervalSince1970: 0)
        )
        let parsed = try WebPushCrypto.parsePublicKey(p256dhBytes)
        let plaintext = WebPushProvider.plaintext(for: message)
        let n = messages

        func time(_ body: () throws -> Void) rethrows -> Double {
            let start = ContinuousClock.now
            for _ in 0..<n { try body() }
            return (ContinuousClock.now - start).seconds * 1e6 / Double(n)
        }
        var sink = 0
        let decode = time { sink &+= (Base64URL.decode(p256dh)?.count ?? 0) + (Base64URL.decode(auth)?.count ?? 0) }
        let parse = try time { sink &+= try WebPushCrypto.parsePublicKey(p256dhBytes).x963Representation.count }
        let target = time { sink &+= WebPushProvider.target(of: endpoint)?.path.count ?? 0 }
        // What a message to a device sent to before pays instead of the three steps above.
        let cache = WebPushSubscriptionCache()
        let cached = time { sink &+= (try? cache.subscription(of: message.device).get())?.path.count ?? 0 }
        let payload = time { sink &+= WebPushProvider.plaintext(for: message).count }
        let ephemeral = try time { sink &+= try WebPushCrypto.ephemeralKey().rawRepresentation.count }
        let key = try WebPushCrypto.ephemeralKey()
        let ecdh = try time { sink &+= try key.sharedSecretFromKeyAgreement(with: parsed).withUnsafeBytes { $0.count } }
        let secret = try key.sharedSecretFromKeyAgreement(with: parsed).withUnsafeBytes { Data($0) }
        let salt = Data(repeating: 7, count: 16)
        let asPublic = key.publicKey.x963Representation
        let schedule = time {
            sink &+=
                WebPushCrypto.keySchedule(
                    ecdhSecret: secret,
                    authSecret: authBytes,
                    salt: salt,
                    userAgentPublicKey: p256dhBytes,
                    applicationServerPublicKey: asPublic
                ).cek.count
        }
        let cek = SymmetricKey(size: .bits128)
        let seal = try time {
            sink &+= try AES.GCM.seal(plaintext, using: cek, nonce: AES.GCM.Nonce()).ciphertext.count
        }
        let encrypt = try time {
            sink &+= try WebPushCrypto.encrypt(
                plaintext: plaintext,
                userAgent: parsed,
                userAgentPublicKey: p256dhBytes,
                authSecret: authBytes
            ).count
        }
        let topic = time { sink &+= WebPushProvider.topic(collapseID: message.collapseID)?.count ?? 0 }
        func us(_ value: Double) -> String { String(format: "%.1f", value) }
        print(
            #"{"bench":"webpush-crypto","messages":\#(n),"us_per_message":{"decode_keys":\#(us(decode)),"#
                + #""parse_point":\#(us(parse)),"target":\#(us(target)),"subscription_cached":\#(us(cached)),"payload":\#(us(payload)),"#
                + #""ephemeral_key":\#(us(ephemeral)),"ecdh":\#(us(ecdh)),"key_schedule":\#(us(schedule)),"#
                + #""aes_gcm":\#(us(seal)),"encrypt_total":\#(us(encrypt)),"topic":\#(us(topic))},"checksum":\#(sink % 1000)}"#
        )
    }
}
