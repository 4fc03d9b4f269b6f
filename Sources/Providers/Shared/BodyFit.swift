import HeraldCore

/// Fits a message into its provider's size limit by shortening the push body.
///
/// A push shows a preview of the body; the whole text stays in the user's inbox. So when the
/// bytes a provider would receive exceed its limit, the body is cut at a character boundary
/// and ends in "…" — the longest such preview that fits. Every other field is sent as given:
/// enqueue bounds them (`herald.check_payload`) so that an empty body always fits, and a payload
/// accepted at enqueue is never refused later as too large.
package enum BodyFit {
    /// The encoding of `message`, or of the longest body preview that fits; nil when not even an
    /// empty body does.
    ///
    /// - Parameter encode: the adapter's encoding, nil when the message is over its limit.
    package static func encode(_ message: PushMessage, _ encode: (PushMessage) -> [UInt8]?) -> [UInt8]? {
        if let bytes = encode(message) { return bytes }
        let characters = Array(message.body)
        var trial = message
        var low = 0
        var high = characters.count - 1
        var best: [UInt8]?
        // Binary search over preview lengths: only oversize messages pay for it (≈ 12 encodings).
        while low <= high {
            let mid = (low + high) / 2
            trial.body = mid == 0 ? "" : String(characters[..<mid]) + "…"
            if let bytes = encode(trial) {
                best = bytes
                low = mid + 1
            } else {
                high = mid - 1
            }
        }
        return best
    }
}
