import Foundation
import GRDB
import KassaCore
@testable import KassaStore
import Testing
import Synchronization

/// Long event data is kept as an LZ4 block (EventData), on a real SQLite file through the store.
@Suite("Store: long event data kept compressed")
struct EventDataTests {
    /// An upstream answer's body as the log keeps it: operations whose hrefs share most of their text.
    static func answerBody(_ n: Int, marker: String) -> JSONValue {
        let operations = (0..<n).map { i -> JSONValue in
            ["href": .string("https://api.example/psp/paymentsessions/…000\(i)/methods/Method\(i)/expand"),
             "rel": "expand-method", "method": "POST", "contentType": "application/json"]
        }
        return ["operation": "view-paymentsession", "body": ["operations": .array(operations), "note": .string(marker)]]
    }

    /// Letters only: a run of digits would be masked as a possible card or phone number.
    static func randomLetters(_ count: Int) -> String {
        var generator = SeededRandom(seed: 0x1e77e5)
        return String((0..<count).map { _ in "abcdefghijklmnopqrstuvwxyz".randomElement(using: &generator)! })
    }

    @Test("long data is stored as a smaller BLOB and reads back as written; short and incompressible data stay text")
    func storedForms() async throws {
        let dir = TempDirectory()
        defer { dir.cleanup() }
        let store = try Store.open(path: dir.file("k.sqlite"))
        let long = Self.answerBody(20, marker: "Grüße, 東京")
        let short: JSONValue = ["status": "Initialized"]
        let noise: JSONValue = ["noise": .string(Self.randomLetters(1_200))]
        for (i, data) in [long, short, noise].enumerated() {
            store.eventLog.append(LogEvent(atMs: Int64(1_000 + i), sessionID: "s", kind: "test", summary: "event \(i)", data: data))
        }
        await store.eventLog.flush()
        let forms = try await store.pool.read { db in
            try Row.fetchAll(db, sql: "SELECT typeof(data) AS form, length(CAST(data AS BLOB)) AS bytes FROM events ORDER BY id")
                .map { ($0["form"] as String, $0["bytes"] as Int) }
        }
        #expect(forms.map(\.0) == ["blob", "text", "text"])
        #expect(forms[0].1 * 2 < long.bytes.count, "\(forms[0].1) stored bytes for \(long.bytes.count) of text")
        let read = try store.eventLog.events(sessionID: "s")
        #expect(read.map(\.data) == [long, short, noise])
        var all = Store.EventQuery()
        all.limit = 10
        #expect(try store.searchEvents(all).map(\.data) == [long, short, noise])
        await store.close()
    }

    @Test("support's free-text search finds text inside compressed data, with LIKE's characters taken literally")
    func searchInsideCompressedData() async throws {
        let dir = TempDirectory()
        defer { dir.cleanup() }
        let store = try Store.open(path: dir.file("k.sqlite"))
        store.eventLog.append(LogEvent(atMs: 1, kind: "test", summary: "first", data: Self.answerBody(20, marker: "needle_100%")))
        store.eventLog.append(LogEvent(atMs: 2, kind: "test", summary: "second", data: Self.answerBody(20, marker: "needle-1000")))
        await store.eventLog.flush()
        let blobs = try await store.pool.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM events WHERE typeof(data) = 'blob'") }
        #expect(blobs == 2)
        func found(_ text: String) throws -> [String] {
            var q = Store.EventQuery()
            q.text = text
            return try store.searchEvents(q).map(\.summary)
        }
        #expect(try found("needle_100%") == ["first"])
        #expect(try found("needle") == ["first", "second"])
        #expect(try found("Method19/expand") == ["first", "second"])
        #expect(try found("needle%1000") == [])
        #expect(try found("absent") == [])
        await store.close()
    }

    @Test("a damaged BLOB reads as an event without data and never traps; search passes over it")
    func damagedBlobs() async throws {
        let dir = TempDirectory()
        defer { dir.cleanup() }
        let store = try Store.open(path: dir.file("k.sqlite"))
        let text = Array(Self.answerBody(20, marker: "whole").bytes)
        let good = try #require(text.withUnsafeBufferPointer(EventData.compressed))
        var damaged: [[UInt8]] = [[], [EventData.lz4WithDictionary], Array(good.prefix(EventData.headerSize)), Array(good.dropLast(7)),
                                  [3] + good.dropFirst(), [EventData.lz4WithDictionary, 0xff, 0xff, 0xff, 0xff] + good.dropFirst(5),
                                  [EventData.lz4WithDictionary, 0x00, 0x00, 0x10, 0x00] + good.dropFirst(5)]
        var random = SeededRandom(seed: 0xda7a)
        for _ in 0..<400 {
            var copy = good
            for _ in 0..<(1 + random.next() % 4) { copy[Int(random.next() % UInt64(copy.count))] ^= UInt8(1 << (random.next() % 8)) }
            damaged.append(copy)
        }
        let rows = [good] + damaged
        try await store.pool.write { db in
            for (i, blob) in rows.enumerated() {
                try db.execute(sql: "INSERT INTO events(at_ms, kind, level, summary, data) VALUES (?, 'test', 'info', ?, ?)",
                               arguments: [i, "row \(i)", Data(blob)])
            }
        }
        var all = Store.EventQuery()
        all.limit = 1_000
        let read = try store.searchEvents(all)
        #expect(read.count == damaged.count + 1)
        #expect(read.first?.data?.bytes == text, "the undamaged row reads whole")
        for (event, blob) in zip(read.dropFirst(), damaged) {
            // A flipped bit can leave a block that still decodes; what comes out is then the length it says.
            let decoded = blob.withUnsafeBytes(EventData.decompressed)
            #expect(decoded == nil || decoded?.count == Int(text.count), "\(event.summary)")
        }
        var q = Store.EventQuery()
        q.text = "whole"
        #expect(try store.searchEvents(q).first?.summary == "row 0")
        let nulls = try await store.pool.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM events WHERE kassa_event_data(data) IS NULL") }
        #expect((nulls ?? 0) >= 7, "the seven hand-made damages read as NULL")
        await store.close()
    }

    @Test("rows bound one after another from one reused buffer read back exactly, whatever their sizes")
    func rowsFromTheReusedBuffer() async throws {
        let dir = TempDirectory()
        defer { dir.cleanup() }
        let store = try Store.open(path: dir.file("k.sqlite"))
        // Text of every size class in turn: empty, inline in a Swift string (≤ 15 bytes), long,
        // past the buffer's kept size, then short again, so a row that reused a larger one's
        // buffer would show the other's bytes.
        let summaries = ["", "x", "fifteen bytes!!", "sixteen bytes!!!", Self.randomLetters(2_000),
                         Self.randomLetters(RawBinding.keptBytes + 1_000), "é", "", "after the large one"]
        let data: [JSONValue?] = [nil, ["k": "v"], Self.answerBody(40, marker: "a"), ["noise": .string(Self.randomLetters(3_000))],
                                  Self.answerBody(4_000, marker: "large"), nil, ["k": ""], Self.answerBody(5, marker: "b"), ["k": "w"]]
        var written: [LogEvent] = []
        for round in 0..<3 {
            for (i, summary) in summaries.enumerated() {
                let event = LogEvent(atMs: Int64(round * 100 + i), sessionID: i.isMultiple(of: 2) ? "s-\(i)" : nil, kind: "test.東\(i)",
                                     summary: summary, traceID: i == 3 ? "" : "t\(round)", data: data[i])
                store.eventLog.append(event)
                written.append(event)
            }
            // One round in one transaction, the next ones row by row.
            if round > 0 { await store.eventLog.flush() }
        }
        await store.eventLog.flush()
        let read = try store.eventLog.events(limit: 100)
        #expect(read.count == written.count)
        for (got, want) in zip(read, written) {
            #expect(got.atMs == want.atMs && got.sessionID == want.sessionID && got.kind == want.kind)
            #expect(got.summary == want.summary, "summary of \(want.atMs): \(got.summary.utf8.count) bytes for \(want.summary.utf8.count)")
            #expect(got.traceID == want.traceID && got.data == want.data, "row \(want.atMs)")
        }
        await store.close()
    }

    @Test("events inserted many to a statement get the ids their rows have, in order")
    func idsOfRowsInsertedTogether() async throws {
        let dir = TempDirectory()
        defer { dir.cleanup() }
        let store = try Store.open(path: dir.file("k.sqlite"))
        let observed = Mutex<[LogEvent]>([])
        store.eventLog.onCommit { batch in observed.withLock { $0 += batch } }
        // Queued faster than the writer takes them: batches of several statements' rows.
        let count = 5 * EventLog.rowsPerInsert + 3
        for i in 0..<count {
            store.eventLog.append(LogEvent(atMs: Int64(i), sessionID: "s-\(i % 3)", seq: Int64(i), kind: "test", summary: "event \(i)"))
        }
        await store.eventLog.flush()
        let rows = try await store.pool.read { db in
            try Row.fetchAll(db, sql: "SELECT id, at_ms, summary FROM events ORDER BY id").map { ($0["id"] as Int64, $0["at_ms"] as Int64, $0["summary"] as String) }
        }
        let seen = observed.withLock { $0 }
        #expect(rows.count == count && seen.count == count)
        #expect(rows.map(\.1) == (0..<Int64(count)).map { $0 }, "rows in the order queued")
        for (event, row) in zip(seen, rows) {
            #expect(event.id == row.0 && event.atMs == row.1 && event.summary == row.2, "event \(event.atMs) observed with id \(event.id ?? -1), row \(row.0)")
        }
        await store.close()
    }

    @Test("text under 64 bytes stays text; longer text LZ4 shrinks by an eighth comes back byte for byte")
    func roundTrip() {
        var random = SeededRandom(seed: 0x1234)
        let pieces = ["{\"rel\":", "\"abort-payment\"", "é東", ",", "0123", "…0001", "\"href\":\"https://api.example/psp/", "}"]
            .map { Array($0.utf8) }
        var kept = 0
        for size in stride(from: 0, through: 6_000, by: 37) {
            var text: [UInt8] = []
            while text.count < size { text += pieces[Int(random.next() % UInt64(pieces.count))] }
            text = Array(text.prefix(size))   // may end inside a character: the codec keeps bytes, not characters
            let stored = text.withUnsafeBufferPointer(EventData.compressed)
            if size < EventData.compressedFrom { #expect(stored == nil, "size \(size)") }
            guard let stored else { continue }
            kept += 1
            #expect(stored.count <= size - size / 8, "size \(size)")
            #expect(stored.withUnsafeBytes(EventData.decompressed) == text, "size \(size)")
        }
        #expect(kept > 100)
    }

    /// An upstream answer as the log keeps it, from a host the dictionary does not hold.
    static let viewPaymentSessionAnswer = #"{"contentType":"application/json","method":"GET","operation":"view-paymentsession","path":"/psp/paymentsessions/…7f3a91","body":{"operations":[{"contentType":"application/json","href":"https://api.internaltest.example/psp/paymentsessions/…7f3a91/prepare","method":"POST","next":true,"rel":"prepare-payment"},{"contentType":"application/json","href":"https://api.internaltest.example/psp/paymentsessions/…7f3a91/abort","method":"POST","rel":"abort-payment"},{"contentType":"application/json","href":"https://api.internaltest.example/psp/paymentsessions/…7f3a91/events","method":"POST","rel":"event-logging"}],"paymentSession":{"culture":"nb-NO","currency":"NOK","description":"Two tickets","id":"/psp/paymentorders/4f1c2a7e-93d0-4b8e-a5f1-0c6d2e8b7a31","instrumentModePaymentMethod":null,"methods":[{"amount":24900,"operations":[],"paymentMethod":"Vipps"},{"amount":24900,"cardBrands":["Visa","MasterCard"],"operations":[],"paymentMethod":"CreditCard","prefills":[{"cardBrand":"Visa","expiryDate":"[redacted]","maskedPan":"457110******0012","paymentToken":"[redacted]","rank":1}]}],"payeeName":"Ticket office","settings":{"enabledPaymentMethods":["Vipps","CreditCard"]},"urls":{"cancelUrl":"https://tickets.example/cancel","completeUrl":"https://tickets.example/done","hostUrls":["https://tickets.example"]}},"problem":null}}"#

    @Test("an upstream answer is compressed against the dictionary of the log's shapes: under a quarter of its text")
    func answerAgainstTheDictionary() throws {
        let text = Array(Self.viewPaymentSessionAnswer.utf8)
        let stored = try #require(text.withUnsafeBufferPointer(EventData.compressed))
        #expect(stored[0] == EventData.lz4WithDictionary)
        // LZ4 alone keeps ≈ 56 % of this body; against the dictionary ≈ 23 %.
        #expect(stored.count * 4 < text.count, "\(stored.count) stored bytes for \(text.count)")
        #expect(stored.withUnsafeBytes(EventData.decompressed) == text)
    }

    @Test("a block written before the dictionary (format 1, LZ4 alone) reads back as it was written")
    func blockWithoutTheDictionary() async throws {
        // Stored by the release before the dictionary, for a session.created event.
        let hex = "0116010000F0147B22636C69656E74446576696365223A66616C73652C2270617965655265666572656E1700F110224B61323163356531346362316437386131316535313066366332646633223100F3026D656E744F72646572223A222F7073702F1400106F140030732F633400A06430302D303030302D34050010610500000F00010200303163624900C06C6174666F726D223A22776511005276696577504A00F81153657373696F6E223A22687474703A2F2F3132372E302E302E313A3238303939760012732C0052732FE280A65D00C33F5F74635F7469643D3063308C000F02000050303030227D"
        let blob = stride(from: 0, to: hex.count, by: 2).map { i -> UInt8 in
            let start = hex.index(hex.startIndex, offsetBy: i)
            return UInt8(hex[start..<hex.index(start, offsetBy: 2)], radix: 16)!
        }
        let text = #"{"clientDevice":false,"payeeReference":"Ka21c5e14cb1d78a11e510f6c2df3","paymentOrder":"/psp/paymentorders/ca11ed00-0000-4000-a000-0000000001cb","platform":"web","viewPaymentSession":"http://127.0.0.1:28099/psp/paymentsessions/…0001cb?_tc_tid=0c0a11ed000000000000000000000000"}"#
        #expect(blob[0] == EventData.lz4)
        #expect(blob.withUnsafeBytes(EventData.decompressed) == Array(text.utf8))
        let dir = TempDirectory()
        defer { dir.cleanup() }
        let store = try Store.open(path: dir.file("k.sqlite"))
        try await store.pool.write { db in
            try db.execute(sql: "INSERT INTO events(at_ms, kind, level, summary, data) VALUES (1, 'session.created', 'info', 'old', ?)", arguments: [Data(blob)])
        }
        var q = Store.EventQuery()
        q.text = "paymentsessions/…0001cb"
        #expect(try store.searchEvents(q).map { $0.data?.bytes } == [Array(text.utf8)])
        await store.close()
    }

    @Test("the dictionary's bytes are the ones every stored block of its format was compressed against")
    func dictionaryUnchanged() {
        let bytes = EventData.LoadedDictionary.shared.bytes   // the bytes LZ4 was given
        // Changing them makes every row of format 2 unreadable: a new dictionary takes a new format byte.
        #expect(Hashing.sha256Hex(String(decoding: bytes, as: UTF8.self)) == "2d0658aa0bd10a8ce84861653e35f706f6b1b956ea4efae5e15525ef45a3d9c9")
        #expect(bytes.count < 64 * 1024, "LZ4 uses a dictionary's last 64 KB only")
    }
}

extension EventData {
    /// The stored form of `utf8` as an array of its own, or nil when it stays text (short, or not
    /// worth it): the codec alone, as the writer's buffer would hold it.
    static func compressed(_ utf8: UnsafeBufferPointer<UInt8>) -> [UInt8]? {
        guard let bound = storedBound(utf8.count) else { return nil }
        let stored = [UInt8](unsafeUninitializedCapacity: bound) { buffer, count in
            count = compress(utf8, into: buffer) ?? 0
        }
        return stored.isEmpty ? nil : stored
    }
}
