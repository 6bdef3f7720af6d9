import CLZ4
import GRDB
import GRDBSQLite

/// How an event's data is kept in its row.
///
/// Short data is TEXT, as written. Data of `compressedFrom` bytes or more is a BLOB when that
/// saves an eighth or more: a format byte, the text's length in 4 bytes (little-endian), then an
/// LZ4 block of its UTF-8. The block is compressed against a fixed dictionary of the shapes the
/// log keeps (`dictionaryText`, format `lz4WithDictionary`): an upstream answer's body, ≈ 2 KB of
/// field names, `rel`s and paths that recur in every answer, shrinks ≈ 6× instead of ≈ 2×, and
/// every page is written twice (WAL, then checkpoint). Blocks of the earlier format (`lz4`, no
/// dictionary) and TEXT rows written before it read as before.
enum EventData {
    static let compressedFrom = 64
    /// An LZ4 block on its own: rows written before the dictionary.
    static let lz4: UInt8 = 1
    /// An LZ4 block compressed against `dictionaryText`.
    static let lz4WithDictionary: UInt8 = 2
    static let headerSize = 5
    /// SQLite's own default limit on a value: no row holds longer text.
    static let maxTextBytes = 1_000_000_000

    /// At most how many bytes the stored form of `count` bytes of text takes, or nil when text of
    /// that size stays text.
    static func storedBound(_ count: Int) -> Int? {
        guard count >= compressedFrom, count <= maxTextBytes else { return nil }
        return headerSize + Int(LZ4_compressBound(Int32(count)))
    }

    /// Writes the stored form of `utf8` into `buffer` (`storedBound` bytes) and says how many
    /// bytes it took, or nil when it stays text.
    static func compress(_ utf8: UnsafeBufferPointer<UInt8>, into buffer: UnsafeMutableBufferPointer<UInt8>) -> Int? {
        guard let bound = storedBound(utf8.count), buffer.count >= bound, let source = utf8.baseAddress, let target = buffer.baseAddress else { return nil }
        let length = Int32(utf8.count)
        let worthIt = utf8.count - utf8.count / 8 - headerSize
        buffer[0] = lz4WithDictionary
        withUnsafeBytes(of: UInt32(length).littleEndian) { for i in 0..<4 { buffer[1 + i] = $0[i] } }
        // A copy of the stream that has the dictionary loaded: loading it again would hash all of
        // its bytes for every row (LZ4's documented way to reuse one).
        let written = withUnsafeTemporaryAllocation(of: LZ4_stream_t.self, capacity: 1) { stream in
            stream.baseAddress!.initialize(from: LoadedDictionary.shared.loaded, count: 1)
            return (target + headerSize).withMemoryRebound(to: CChar.self, capacity: buffer.count - headerSize) {
                LZ4_compress_fast_continue(stream.baseAddress, UnsafeRawPointer(source).assumingMemoryBound(to: CChar.self), $0,
                                           length, Int32(buffer.count - headerSize), 1)
            }
        }
        return written > 0 && Int(written) <= worthIt ? headerSize + Int(written) : nil
    }

    /// The dictionary's bytes and an LZ4 stream with them loaded, made once and only read after:
    /// both stay where they are for the life of the process, as LZ4 needs.
    final class LoadedDictionary: @unchecked Sendable {
        static let shared = LoadedDictionary()
        let bytes: UnsafeRawBufferPointer
        let loaded: UnsafeMutablePointer<LZ4_stream_t>

        private init() {
            bytes = UnsafeRawBufferPointer(start: dictionaryText.utf8Start, count: dictionaryText.utf8CodeUnitCount)
            loaded = .allocate(capacity: 1)
            loaded.initialize(to: LZ4_stream_t())
            LZ4_loadDict(loaded, bytes.baseAddress!.assumingMemoryBound(to: CChar.self), Int32(bytes.count))
        }
    }

    /// The text a stored BLOB holds, or nil when it is not one this format wrote (a damaged row
    /// reads as an event without data; it never traps).
    static func decompressed(_ stored: UnsafeRawBufferPointer) -> [UInt8]? {
        guard stored.count > headerSize, stored[0] == lz4 || stored[0] == lz4WithDictionary, stored.count - headerSize <= Int32.max else { return nil }
        let length = Int(stored.loadUnaligned(fromByteOffset: 1, as: UInt32.self).littleEndian)
        // LZ4 expands a block at most ≈ 255 times: a damaged length cannot make a large allocation.
        guard length <= maxTextBytes, length <= (stored.count - headerSize) * 255 else { return nil }
        let block = stored.baseAddress!.advanced(by: headerSize).assumingMemoryBound(to: CChar.self)
        let blockSize = Int32(stored.count - headerSize)
        let text = [UInt8](unsafeUninitializedCapacity: length) { buffer, count in
            let read = buffer.withMemoryRebound(to: CChar.self) { target in
                if stored[0] == lz4 { return LZ4_decompress_safe(block, target.baseAddress, blockSize, Int32(length)) }
                let dictionary = LoadedDictionary.shared.bytes
                return LZ4_decompress_safe_usingDict(block, target.baseAddress, blockSize, Int32(length),
                                                     dictionary.baseAddress!.assumingMemoryBound(to: CChar.self), Int32(dictionary.count))
            }
            count = Int(read) == length ? length : 0
        }
        return text.count == length && length > 0 ? text : nil
    }

    /// The text a row's `data` column holds, whichever form it is in.
    static func text(_ value: DatabaseValue) -> String? {
        switch value.storage {
        case .string(let text): return text
        case .blob(let bytes): return bytes.withUnsafeBytes(decompressed).map { String(decoding: $0, as: UTF8.self) }
        default: return nil
        }
    }

    /// `kassa_event_data(data)`: the text of a `data` column in SQL, for support's free-text
    /// search. Registered on every connection the store opens.
    static func registerFunction(_ db: Database) throws {
        let flags = SQLITE_UTF8 | SQLITE_DETERMINISTIC | SQLITE_INNOCUOUS
        let code = sqlite3_create_function_v2(db.sqliteConnection, "kassa_event_data", 1, flags, nil, eventDataFunction, nil, nil, nil)
        guard code == SQLITE_OK else { throw DatabaseError(resultCode: ResultCode(rawValue: code), message: "cannot register kassa_event_data") }
    }
}

private func eventDataFunction(_ context: OpaquePointer?, _ count: Int32, _ values: UnsafeMutablePointer<OpaquePointer?>?) {
    guard let value = values?[0] else { return sqlite3_result_null(context) }
    guard sqlite3_value_type(value) == SQLITE_BLOB else { return sqlite3_result_value(context, value) }
    // The pointer first, then its length: SQLite's documented order.
    let start = sqlite3_value_blob(value)
    let stored = UnsafeRawBufferPointer(start: start, count: start == nil ? 0 : Int(sqlite3_value_bytes(value)))
    guard let text = EventData.decompressed(stored) else { return sqlite3_result_null(context) }
    text.withUnsafeBufferPointer { utf8 in
        utf8.withMemoryRebound(to: CChar.self) { sqlite3_result_text(context, $0.baseAddress, Int32($0.count), RawBinding.transient) }
    }
}

extension RawBinding {
    /// An event's data (its JSON text as UTF-8) in the form `EventData` keeps it.
    mutating func bind(eventData utf8: [UInt8]?) {
        guard let utf8, let bound = EventData.storedBound(utf8.count),
              utf8.withUnsafeBufferPointer({ text in bind(blobOfAtMost: bound) { EventData.compress(text, into: $0) } }) else { return bind(utf8: utf8) }
    }
}
