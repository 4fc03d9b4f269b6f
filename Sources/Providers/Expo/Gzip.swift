/// A minimal gzip (RFC 1952) writer for Expo request bodies.
///
/// Foundation on Linux has no compression API and Herald links no zlib, so this writes the
/// DEFLATE stream (RFC 1951) as *stored* blocks: valid gzip that every decoder accepts, framed
/// but not compressed. Expo only *optionally* accepts gzip, so the gain of real compression is
/// bandwidth alone; swapping in a compressing encoder later changes nothing else.
package enum Gzip {
    /// `bytes` wrapped in a gzip member of stored DEFLATE blocks, with CRC-32 and length trailer.
    package static func compress(_ bytes: [UInt8]) -> [UInt8] {
        // Header: magic, CM=8 (deflate), FLG=0, MTIME=0, XFL=0, OS=255 (unknown).
        var out: [UInt8] = [0x1f, 0x8b, 0x08, 0x00, 0, 0, 0, 0, 0x00, 0xff]
        out.reserveCapacity(bytes.count + bytes.count / 65_535 * 5 + 23)
        var offset = 0
        repeat {
            let length = min(65_535, bytes.count - offset)
            let final = offset + length == bytes.count
            // BFINAL bit, BTYPE=00 (stored); the rest of the byte is padding to the boundary.
            out.append(final ? 0x01 : 0x00)
            let len = UInt16(length)
            out.append(contentsOf: [UInt8(len & 0xff), UInt8(len >> 8), UInt8(~len & 0xff), UInt8(~len >> 8)])
            out.append(contentsOf: bytes[offset..<offset + length])
            offset += length
        } while offset < bytes.count
        appendLittleEndian(&out, CRC32.checksum(bytes))
        appendLittleEndian(&out, UInt32(truncatingIfNeeded: bytes.count))
        return out
    }

    private static func appendLittleEndian(_ out: inout [UInt8], _ value: UInt32) {
        out.append(contentsOf: [
            UInt8(value & 0xff), UInt8((value >> 8) & 0xff), UInt8((value >> 16) & 0xff), UInt8(value >> 24),
        ])
    }
}

/// CRC-32 (ISO 3309 / ITU-T V.42, reflected polynomial 0xEDB88320), as gzip trailers use it.
package enum CRC32 {
    private static let table: [UInt32] = (0..<256).map { n in
        var c = UInt32(n)
        for _ in 0..<8 { c = (c & 1) != 0 ? 0xEDB8_8320 ^ (c >> 1) : c >> 1 }
        return c
    }

    package static func checksum<C: Collection<UInt8>>(_ bytes: C) -> UInt32 {
        var crc: UInt32 = 0xFFFF_FFFF
        for byte in bytes { crc = table[Int((crc ^ UInt32(byte)) & 0xff)] ^ (crc >> 8) }
        return crc ^ 0xFFFF_FFFF
    }
}
