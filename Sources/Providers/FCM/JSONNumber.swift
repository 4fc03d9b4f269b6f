import Foundation
import HeraldCore

/// Reads a number out of a JSONSerialization result, whichever type Foundation chose for it
/// (Int, Double or NSNumber differ between platforms).
package enum JSONNumber {
    package static func double(_ value: Any?) -> Double? {
        switch value {
        case let v as Int: return Double(v)
        case let v as Double: return v
        case let v as Int64: return Double(v)
        case let v as NSNumber: return v.doubleValue
        default: return nil
        }
    }
}
