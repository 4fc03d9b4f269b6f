import Foundation
import HeraldCore

extension Dispatcher {
    /// The in-app copy of a job no push device took, for the local-fallback recorder.
    ///
    /// A visible job that ends without any device accepting it (dead letter after retries or a
    /// provider refusal, or suppressed because the user has no working device) is still recorded
    /// in `herald.local_notifications` so the app can show it (seed 004 "fallback to local
    /// notification"). The message targets device id 0, which stands for "no device: fallback".
    /// Jobs finished by a rule (quiet hours, preferences, limits, expiry) get no fallback: the
    /// rule decided the user should not be notified.
    package func fallback(for settlement: Settlement, job: Job, rules: CategoryRules?, now: Date) -> PushMessage? {
        guard let rules, !(job.options.silent ?? rules.silent) else { return nil }
        guard settlement.accepted.isEmpty, job.acceptedDevices.isEmpty else { return nil }
        // A job recorded when its deadline passed is not recorded again.
        guard job.alertedAt == nil else { return nil }
        switch settlement.state {
        case .pending where settlement.alert:
            break  // its deadline passed: recorded now, push keeps retrying
        case .dead where settlement.error != .unknownCategory:
            break
        case .suppressed where settlement.error == .suppressed(.noActiveDevice):
            break
        default:
            return nil
        }
        let device = Device(id: 0, userID: job.userID, provider: .local, token: "", appID: rules.appID)
        return render(job, rules: rules, device: device, now: now)
    }
}
