import ArgumentParser
import Foundation
import KassaCore
import KassaStore

/// Benchmarks run by the scripts in bench/ (not part of the test suite).
struct Bench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Benchmarks (see bench/README.md).",
        shouldDisplay: false,
        subcommands: [EventLogBench.self, RedactionBench.self]
    )
}

/// Sustained append rate, then timeline and payee-reference query latency with millions of rows.
struct EventLogBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "eventlog")

    @Option(help: "Database file to create (it is deleted first).")
    var db: String
    @Option(help: "Events to append.")
    var events: Int = 5_000_000
    @Option(help: "Events per session.")
    var perSession: Int = 25
    @Option(help: "Sessions active at once: events go round-robin over them, and a finished one is replaced by a new one.")
    var concurrent: Int = 2_000
    @Option(help: "Query samples per query kind.")
    var samples: Int = 2_000

    func run() async throws {
        for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: db + suffix) }
        let store = try Store.open(path: db)
        let sessions = max(events / perSession, 1)
        // Time-ordered ids, as the gateway makes them (creation ms, then random digits).
        let ids = (0..<sessions).map { String(format: "%010x", 1_790_000_000_000 + $0) + String(format: "%022x", UInt64.random(in: 0...UInt64.max) >> 8) }
        let start0 = Int64(Date().timeIntervalSince1970 * 1000) - Int64(events)
        let data: JSONValue = ["method": "POST", "path": "/psp/paymentsessions/…a1b2c3/methods/Swish/attempts", "operation": "start-payment-attempt",
                               "body": ["msisdn": "…0001", "culture": "sv-SE", "client": ["userAgent": "Kassa/0.1", "clientType": "Native"]]]

        // Sessions rows for the payee-reference search.
        let sessionsStarted = ContinuousClock.now
        try await store.pool.write { db in
            for (i, id) in ids.enumerated() {
                let reference = "K\(String(format: "%028x", i))", order = "/psp/paymentorders/\(i)", createdAtMs = start0 + Int64(i * perSession)
                try db.execute(sql: """
                    INSERT INTO sessions(id, client_token_sha256, view_href, payee_reference, payment_order_id, phase, created_at_ms, updated_at_ms)
                    VALUES (?, '', '', ?, ?, 'completed', ?, ?)
                    """, arguments: [id, reference, order, createdAtMs, start0])
                // The search finds a session through its payment order's row (v19).
                try db.execute(sql: "INSERT INTO payment_orders(payee_reference, payment_order_id, created_at_ms, session_id) VALUES (?, ?, ?, ?)",
                               arguments: [reference, order, createdAtMs, id])
            }
        }
        let sessionsSeconds = sessionsStarted.duration(to: .now).inSeconds

        // Appends as the gateway makes them: queued, committed in batches by the writer thread.
        let appendStarted = ContinuousClock.now
        // Session k is active from event (k / concurrent) * concurrent * perSession on, for `concurrent * perSession` events.
        let window = max(min(concurrent, sessions), 1)
        for i in 0..<events {
            let round = i / (window * perSession)
            let session = min(round * window + i % window, sessions - 1)
            store.eventLog.append(LogEvent(atMs: start0 + Int64(i), sessionID: ids[session], seq: nil, kind: "upstream.request",
                                           summary: "POST /psp/paymentsessions/…a1b2c3/methods/Swish/attempts (start-payment-attempt)",
                                           traceID: "4bf92f3577b34da6a3ce929d0e0e4736", data: data))
            if i % 100_000 == 99_999 {
                // Keep the queue bounded like a live gateway would see it: wait for the writer to catch up.
                while store.eventLog.pendingCount > 200_000 { try await Task.sleep(for: .milliseconds(1)) }
            }
        }
        await store.eventLog.flush()
        let appendSeconds = appendStarted.duration(to: .now).inSeconds

        var random = SystemRandomNumberGenerator()
        var timeline: [Double] = [], byReference: [Double] = []
        for _ in 0..<samples {
            let i = Int.random(in: 0..<sessions, using: &random)
            let t0 = ContinuousClock.now
            let rows = try store.timeline(sessionID: ids[i])
            timeline.append(t0.duration(to: .now).inMilliseconds)
            precondition(rows.count == perSession || events < perSession * sessions, "timeline returned \(rows.count)")
            var q = Store.SessionQuery()
            q.payeeReference = "K\(String(format: "%028x", i))"
            let t1 = ContinuousClock.now
            let found = try store.searchSessions(q)
            byReference.append(t1.duration(to: .now).inMilliseconds)
            precondition(found.count == 1)
        }
        let size = (try? FileManager.default.attributesOfItem(atPath: db)[.size] as? Int) ?? 0
        let report: JSONValue = [
            "events": .number(Double(events)), "sessions": .number(Double(sessions)), "databaseBytes": .number(Double(size)),
            "appendSeconds": .number(appendSeconds), "appendEventsPerSecond": .number((Double(events) / appendSeconds).rounded()),
            "batches": .number(Double(store.eventLog.batchCount)), "sessionInsertSeconds": .number(sessionsSeconds),
            "timelineMs": percentiles(timeline), "payeeReferenceSearchMs": percentiles(byReference),
        ]
        print(report.text)
        await store.close()
    }

    func percentiles(_ samples: [Double]) -> JSONValue {
        let sorted = samples.sorted()
        func p(_ q: Double) -> JSONValue { .number((sorted[min(sorted.count - 1, Int(Double(sorted.count) * q))] * 1000).rounded() / 1000) }
        return ["p50": p(0.5), "p90": p(0.9), "p99": p(0.99), "max": .number(((sorted.last ?? 0) * 1000).rounded() / 1000)]
    }
}

/// What the gateway does with upstream answers, in ns a byte over the given documents
/// (bench/redaction.sh saves the canned upstream's answers for it): the event log's redacted copy
/// (`Redaction.redactJSON`), a parse into a tree for scale, and a session call's `PaymentOutput`,
/// from that tree or decoded from the bytes.
struct RedactionBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "redaction")

    @Argument(help: "JSON documents to copy.")
    var files: [String]
    @Option(help: "Seconds per measurement.")
    var seconds: Double = 2
    @Option(help: "Rounds over the documents per measurement instead of seconds: the same work for every build compared.")
    var rounds: Int?
    @Flag(help: "Measure only the event log's redacted copy.")
    var redactionOnly = false

    func validate() throws {
        guard seconds > 0, rounds.map({ $0 > 0 }) ?? true else { throw ValidationError("--seconds and --rounds must be above 0") }
    }

    func run() async throws {
        let bodies = try files.map { [UInt8](try Data(contentsOf: URL(fileURLWithPath: $0))) }
        guard !bodies.isEmpty, bodies.allSatisfy({ Redaction.redactJSON($0) != nil }) else {
            throw ValidationError("every file must hold one JSON document")
        }
        let bytes = bodies.reduce(0) { $0 + $1.count }
        /// ns a byte of `work` over every body, repeated for `seconds` (or `rounds` times).
        func measure(_ work: ([UInt8]) -> Int) -> Double {
            var done = 0, sink = 0
            let started = ContinuousClock.now
            while rounds.map({ done < $0 }) ?? (started.duration(to: .now) < .milliseconds(Int64(seconds * 1000))) {
                for body in bodies { sink &+= work(body) }
                done += 1
            }
            precondition(sink != 0)
            return started.duration(to: .now).inSeconds * 1e9 / Double(max(done, 1) * bytes)
        }
        func figure(_ ns: Double) -> JSONValue { .number((ns * 100).rounded() / 100) }
        var report: [String: JSONValue] = ["documents": .number(Double(bodies.count)), "bytes": .number(Double(bytes)),
                                           "redactJSONNsPerByte": figure(measure { Redaction.redactJSON($0)?.count ?? 0 })]
        if !redactionOnly {
            report["parseNsPerByte"] = figure(measure { (try? JSONValue.parse($0)) == nil ? 0 : 1 })
            report["outputFromTreeNsPerByte"] = figure(measure { ((try? JSONValue.parse($0)).flatMap(PaymentOutput.parse)?.allOperations.count ?? 0) + 1 })
            report["outputDecodedNsPerByte"] = figure(measure { (PaymentOutput.decode($0)?.allOperations.count ?? 0) + 1 })
        }
        print(JSONValue.object(report).text)
    }
}
