/// A small gzip (RFC 1952) reader: stored, fixed-Huffman and dynamic-Huffman DEFLATE blocks
/// (RFC 1951), written from the RFCs.
///
/// The Expo adapter uses it for gzip-encoded responses and the simulator for gzip-encoded
/// requests. It is not fast; it is bounded (`maxOutput`) and checks the CRC-32 and length.
package enum Gunzip {
    package struct Failure: Error, CustomStringConvertible {
        package var description: String
        init(_ description: String) { self.description = description }
    }

    /// The decompressed bytes of one gzip member; throws on malformed input or beyond `maxOutput` bytes.
    package static func decompress(_ input: [UInt8], maxOutput: Int = 16 * 1024 * 1024) throws -> [UInt8] {
        guard input.count >= 18, input[0] == 0x1f, input[1] == 0x8b, input[2] == 8 else {
            throw Failure("not a gzip stream")
        }
        let flags = input[3]
        var pos = 10
        if flags & 0x04 != 0 {  // FEXTRA
            guard pos + 2 <= input.count else { throw Failure("truncated header") }
            pos += 2 + Int(input[pos]) + Int(input[pos + 1]) << 8
        }
        for flag: UInt8 in [0x08, 0x10] where flags & flag != 0 {  // FNAME, FCOMMENT: zero-terminated
            while pos < input.count, input[pos] != 0 { pos += 1 }
            pos += 1
        }
        if flags & 0x02 != 0 { pos += 2 }  // FHCRC
        guard pos < input.count - 8 else { throw Failure("truncated header") }
        var reader = BitReader(bytes: input, position: pos)
        let output = try inflate(&reader, maxOutput: maxOutput)
        let trailer = reader.alignedPosition
        guard trailer + 8 <= input.count else { throw Failure("truncated trailer") }
        let crc =
            UInt32(input[trailer]) | UInt32(input[trailer + 1]) << 8 | UInt32(input[trailer + 2]) << 16
            | UInt32(input[trailer + 3]) << 24
        let size =
            UInt32(input[trailer + 4]) | UInt32(input[trailer + 5]) << 8 | UInt32(input[trailer + 6]) << 16
            | UInt32(input[trailer + 7]) << 24
        guard crc == CRC32.checksum(output), size == UInt32(truncatingIfNeeded: output.count) else {
            throw Failure("checksum mismatch")
        }
        return output
    }

    private struct BitReader {
        let bytes: [UInt8]
        var position: Int
        var bitBuffer: UInt32 = 0
        var bitCount = 0

        init(bytes: [UInt8], position: Int) {
            self.bytes = bytes
            self.position = position
        }

        mutating func bits(_ n: Int) throws -> Int {
            while bitCount < n {
                guard position < bytes.count else { throw Failure("truncated deflate stream") }
                bitBuffer |= UInt32(bytes[position]) << UInt32(bitCount)
                position += 1
                bitCount += 8
            }
            let value = Int(bitBuffer & ((1 << UInt32(n)) - 1))
            bitBuffer >>= UInt32(n)
            bitCount -= n
            return value
        }

        /// Drops the bits left in the current byte.
        mutating func alignToByte() {
            bitBuffer = 0
            bitCount = 0
        }

        /// The byte position after the last consumed bit, rounded up to a byte.
        var alignedPosition: Int { position - bitCount / 8 }
    }

    /// A canonical Huffman code as counts per length and symbols ordered by code.
    private struct Huffman {
        var counts = [Int](repeating: 0, count: 16)
        var symbols: [Int] = []

        init(lengths: [Int]) throws {
            for l in lengths { counts[l] += 1 }
            counts[0] = 0
            var offsets = [Int](repeating: 0, count: 16)
            for l in 1..<16 { offsets[l] = offsets[l - 1] + counts[l - 1] }
            symbols = [Int](repeating: 0, count: lengths.count)
            for (symbol, l) in lengths.enumerated() where l != 0 {
                symbols[offsets[l]] = symbol
                offsets[l] += 1
            }
        }

        func decode(_ reader: inout BitReader) throws -> Int {
            var code = 0
            var first = 0
            var index = 0
            for length in 1..<16 {
                code |= try reader.bits(1)
                let count = counts[length]
                if code - count < first { return symbols[index + (code - first)] }
                index += count
                first += count
                first <<= 1
                code <<= 1
            }
            throw Failure("invalid Huffman code")
        }
    }

    private static let lengthBase = [
        3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 15, 17, 19, 23, 27, 31, 35, 43, 51, 59, 67, 83, 99, 115, 131, 163, 195, 227,
        258,
    ]
    private static let lengthExtra = [
        0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0,
    ]
    private static let distanceBase = [
        1, 2, 3, 4, 5, 7, 9, 13, 17, 25, 33, 49, 65, 97, 129, 193, 257, 385, 513, 769, 1025, 1537, 2049, 3073, 4097,
        6145, 8193, 12289, 16385, 24577,
    ]
    private static let distanceExtra = [
        0, 0, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7, 8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13,
    ]
    private static let codeLengthOrder = [16, 17, 18, 0, 8, 7, 9, 6, 10, 5, 11, 4, 12, 3, 13, 2, 14, 1, 15]

    private static func inflate(_ reader: inout BitReader, maxOutput: Int) throws -> [UInt8] {
        var out: [UInt8] = []
        var final = false
        while !final {
            final = try reader.bits(1) == 1
            switch try reader.bits(2) {
            case 0:
                reader.alignToByte()
                let p = reader.position
                guard p + 4 <= reader.bytes.count else { throw Failure("truncated stored block") }
                let len = Int(reader.bytes[p]) | Int(reader.bytes[p + 1]) << 8
                let nlen = Int(reader.bytes[p + 2]) | Int(reader.bytes[p + 3]) << 8
                guard len == (~nlen & 0xffff), p + 4 + len <= reader.bytes.count else {
                    throw Failure("bad stored block")
                }
                guard out.count + len <= maxOutput else { throw Failure("output too large") }
                out.append(contentsOf: reader.bytes[(p + 4)..<(p + 4 + len)])
                reader.position = p + 4 + len
            case 1:
                var lengths = [Int](repeating: 8, count: 288)
                for i in 144..<256 { lengths[i] = 9 }
                for i in 256..<280 { lengths[i] = 7 }
                let literal = try Huffman(lengths: lengths)
                let distance = try Huffman(lengths: [Int](repeating: 5, count: 30))
                try codes(&reader, literal: literal, distance: distance, out: &out, maxOutput: maxOutput)
            case 2:
                let nlen = try reader.bits(5) + 257
                let ndist = try reader.bits(5) + 1
                let ncode = try reader.bits(4) + 4
                guard nlen <= 286, ndist <= 30 else { throw Failure("bad dynamic block header") }
                var codeLengths = [Int](repeating: 0, count: 19)
                for i in 0..<ncode { codeLengths[codeLengthOrder[i]] = try reader.bits(3) }
                let lengthCode = try Huffman(lengths: codeLengths)
                var lengths: [Int] = []
                while lengths.count < nlen + ndist {
                    let symbol = try lengthCode.decode(&reader)
                    switch symbol {
                    case 0..<16:
                        lengths.append(symbol)
                    case 16:
                        guard let previous = lengths.last else { throw Failure("repeat without a length") }
                        lengths += [Int](repeating: previous, count: 3 + (try reader.bits(2)))
                    case 17:
                        lengths += [Int](repeating: 0, count: 3 + (try reader.bits(3)))
                    default:
                        lengths += [Int](repeating: 0, count: 11 + (try reader.bits(7)))
                    }
                }
                guard lengths.count == nlen + ndist else { throw Failure("too many code lengths") }
                let literal = try Huffman(lengths: Array(lengths[0..<nlen]))
                let distance = try Huffman(lengths: Array(lengths[nlen...]))
                try codes(&reader, literal: literal, distance: distance, out: &out, maxOutput: maxOutput)
            default:
                throw Failure("reserved block type")
            }
        }
        return out
    }

    private static func codes(
        _ reader: inout BitReader, literal: Huffman, distance: Huffman, out: inout [UInt8], maxOutput: Int
    ) throws {
        while true {
            let symbol = try literal.decode(&reader)
            if symbol < 256 {
                guard out.count < maxOutput else { throw Failure("output too large") }
                out.append(UInt8(symbol))
            } else if symbol == 256 {
                return
            } else {
                let index = symbol - 257
                guard index < 29 else { throw Failure("bad length symbol") }
                let length = lengthBase[index] + (try reader.bits(lengthExtra[index]))
                let d = try distance.decode(&reader)
                guard d < 30 else { throw Failure("bad distance symbol") }
                let dist = distanceBase[d] + (try reader.bits(distanceExtra[d]))
                guard dist <= out.count else { throw Failure("distance too far back") }
                guard out.count + length <= maxOutput else { throw Failure("output too large") }
                let start = out.count - dist
                for k in 0..<length { out.append(out[start + k]) }
            }
        }
    }
}
