import Foundation
import HeraldCore

/// Provider JWTs (ES256), one per signing key, shared by every request that uses the key.
///
/// A token is re-minted when it is older than the configured lifetime, or when APNs answered
/// `ExpiredProviderToken` for it. Each minted token has a generation number so that many
/// concurrent `ExpiredProviderToken` answers for the same token cause one re-mint, not many
/// (APNs answers 429 `TooManyProviderTokenUpdates` to a token changed too often).
actor APNsTokenCache {
    struct Key: Sendable {
        var teamID: String
        var keyID: String
        var signingKey: JWT.SigningKey
    }

    private struct Minted {
        var token: String
        var issuedAt: Date
        var generation: Int
    }

    private let keys: [String: Key]  // by key id
    private let lifetime: TimeInterval
    private let now: @Sendable () -> Date
    private var minted: [String: Minted] = [:]
    private var generations = 0

    init(keys: [String: Key], lifetime: Duration, now: @escaping @Sendable () -> Date) {
        self.keys = keys
        self.lifetime = Double(lifetime.components.seconds) + Double(lifetime.components.attoseconds) / 1e18
        self.now = now
    }

    /// The current token for `keyID` and its generation, minting one when none is fresh.
    func token(keyID: String) throws -> (token: String, generation: Int) {
        let date = now()
        if let current = minted[keyID], date.timeIntervalSince(current.issuedAt) < lifetime {
            return (current.token, current.generation)
        }
        guard let key = keys[keyID] else { throw JWT.KeyError(description: "no signing key with this key id") }
        let iat = Int(date.timeIntervalSince1970)
        let token = try JWT.sign(
            header: ["kid": key.keyID],
            claims: ["iss": key.teamID, "iat": iat],
            key: key.signingKey
        )
        generations += 1
        minted[keyID] = Minted(token: token, issuedAt: date, generation: generations)
        return (token, generations)
    }

    /// Forgets the token of `generation` (APNs called it expired); a newer one is kept.
    func expire(keyID: String, generation: Int) {
        if minted[keyID]?.generation == generation { minted[keyID] = nil }
    }
}
