import CompressNIO
import HeraldCore
import NIOCore

/// gzip (RFC 1952) through zlib, for Expo request bodies and for reading them back in the
/// simulator. Responses need none of this: the HTTP client decompresses them itself.
package enum Gzip {
    /// Why a body could not be read back.
    package enum Failure: Error, Equatable, CustomStringConvertible {
        /// It inflates to more than the limit.
        case tooLarge
        /// It is not a well-formed gzip member.
        case malformed

        package var description: String {
            switch self {
            case .tooLarge: "output too large"
            case .malformed: "malformed gzip data"
            }
        }
    }

    /// `bytes` as one gzip member (zlib's default level).
    package static func compress(_ bytes: [UInt8]) -> ByteBuffer {
        var input = ByteBuffer(bytes: bytes)
        do {
            return try input.compress(with: .gzip())
        } catch {
            // Compressing into a buffer sized by zlib's own bound cannot run out of room or
            // meet corrupt input; reaching this is a broken zlib.
            preconditionFailure("zlib failed to compress \(bytes.count) bytes: \(error)")
        }
    }

    /// The bytes `gzipped` inflates to, at most `maxOutput` of them.
    package static func decompress(_ gzipped: [UInt8], maxOutput: Int = 16 * 1024 * 1024) throws(Failure) -> [UInt8] {
        var input = ByteBuffer(bytes: gzipped)
        do {
            var output = try input.decompress(with: .gzip(), maxSize: maxOutput)
            return output.readBytes(length: output.readableBytes) ?? []
        } catch let error as CompressNIOError where error == .bufferOverflow {
            throw .tooLarge
        } catch {
            throw .malformed
        }
    }
}
