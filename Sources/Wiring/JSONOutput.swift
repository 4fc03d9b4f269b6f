import Delivery
import Foundation
import HeraldCore

/// Prints command results as one JSON document (`--json`), keys sorted.
package enum JSONOutput {
    package static func print(_ object: Any) {
        guard JSONSerialization.isValidJSONObject(object),
            let data = try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])
        else {
            Swift.print("{}")
            return
        }
        Swift.print(String(decoding: data, as: UTF8.self))
    }
}
