import Foundation
import GRDB
import KassaCore

/// How an event's row keeps its session id and trace id. Kassa's session ids and W3C trace ids
/// are 32 lower-case hex digits; such an id is kept as its 16 bytes (a BLOB), half its text. A
/// payment's ≈ 20 events hold two ids each, and `session_events` copies the session's, so that is
/// ≈ 1 KB fewer a payment, written twice (WAL, then checkpoint). Any other id stays text, so every
/// id reads back as it was given. Rows written before are text: a query for an id asks for both
/// forms (`forms`), and SQLite never takes a BLOB for equal to a TEXT.
enum StoredID {
    static let byteCount = 16

    /// Writes the bytes `id`'s hex digits spell into `buffer` and says how many (16); nil, with
    /// nothing meant, when `id` is not 32 lower-case hex digits.
    static func bytes(of id: String, into buffer: UnsafeMutableBufferPointer<UInt8>) -> Int? {
        guard buffer.count >= byteCount else { return nil }
        var id = id
        return id.withUTF8 { digits -> Int? in
            guard digits.count == 2 * byteCount else { return nil }
            for k in 0..<byteCount {
                guard let high = nibble(digits[2 * k]), let low = nibble(digits[2 * k + 1]) else { return nil }
                buffer[k] = high << 4 | low
            }
            return byteCount
        }
    }

    /// An id as a row holds it, as text: 16 bytes as lower-case hex, text as it is.
    static func text(_ value: DatabaseValue) -> String? {
        switch value.storage {
        case .string(let text): return text
        case .blob(let bytes) where bytes.count == byteCount: return Hashing.hex(Array(bytes))
        default: return nil
        }
    }

    /// The two forms a row may hold `id` in, for `IN (?, ?)`: its text, and the form the writer
    /// keeps it in now (the same text when that is not bytes).
    static func forms(_ id: String) -> StatementArguments {
        var stored = [UInt8](repeating: 0, count: byteCount)
        let isBytes = stored.withUnsafeMutableBufferPointer { bytes(of: id, into: $0) } != nil
        return [id, isBytes ? Data(stored).databaseValue : id.databaseValue]
    }

    /// Lower-case digits only: an id written with capitals stays text, and reads back with them.
    private static func nibble(_ c: UInt8) -> UInt8? {
        switch c {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return c - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return c - UInt8(ascii: "a") + 10
        default: return nil
        }
    }
}

extension RawBinding {
    /// A session id or a trace id in the form `StoredID` keeps it.
    mutating func bind(id: String?) {
        guard let id, bind(blobOfAtMost: StoredID.byteCount, { StoredID.bytes(of: id, into: $0) }) else { return bind(id) }
    }
}
