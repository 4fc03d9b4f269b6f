import Crypto
import Foundation
import HeraldCore
import Testing
import _CryptoExtras

@testable import Providers

@Suite struct JWTTests {
    @Test func es256RoundTrip() throws {
        let privateKey = P256.Signing.PrivateKey()
        let key = try JWT.es256Key(pem: Secret(privateKey.pemRepresentation))
        let token = try JWT.sign(
            header: ["kid": "ABC123DEFG"],
            claims: ["iss": "TEAMID1234", "iat": 1_700_000_000],
            key: key
        )
        let decoded = try #require(JWT.decode(token))
        #expect(decoded.header["kid"] == "ABC123DEFG")
        #expect(decoded.header["alg"] == "ES256")
        #expect(decoded.claims["iss"] as? String == "TEAMID1234")
        #expect(JWT.verifyES256(decoded, publicKey: privateKey.publicKey))
        #expect(!JWT.verifyES256(decoded, publicKey: P256.Signing.PrivateKey().publicKey))
    }

    @Test func rs256RoundTrip() throws {
        let privateKey = try _RSA.Signing.PrivateKey(keySize: .bits2048)
        let key = try JWT.rs256Key(pem: Secret(privateKey.pemRepresentation))
        let token = try JWT.sign(claims: ["iss": "svc@example.iam.gserviceaccount.com"], key: key)
        let decoded = try #require(JWT.decode(token))
        #expect(JWT.verifyRS256(decoded, publicKey: privateKey.publicKey))
    }

    @Test func badKeyErrorNamesNoBytes() {
        let garbage = "-----BEGIN PRIVATE KEY-----\nc2VjcmV0LWJ5dGVz\n-----END PRIVATE KEY-----"
        #expect(throws: JWT.KeyError.self) { try JWT.es256Key(pem: Secret(garbage)) }
        do {
            _ = try JWT.es256Key(pem: Secret(garbage))
        } catch {
            #expect(!"\(error)".contains("c2VjcmV0"))
        }
        #expect("\(Secret("hunter2"))" == "<redacted>")
    }
}
