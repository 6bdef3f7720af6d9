import Foundation
import KassaCore
import KassaEdge
import KassaUpstream
import Testing

@Suite("CLI: kassa")
struct CLITests {
    @Test("--version prints the version")
    func version() async throws {
        let p = try KassaProcess(["--version"])
        let status = try await onThread { p.waitForExit() }
        #expect(status == 0)
        #expect(p.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == KassaVersion.string)
    }

    @Test("bench redaction times a fixed number of rounds when asked, only the redacted copy if asked, and refuses no work")
    func benchRedactionRounds() async throws {
        let dir = TempDirectory()
        defer { dir.cleanup() }
        let answer = dir.file("answer.json")
        try Data(#"{"paymentSession":{"id":"/psp/paymentsessions/5a17c24e-d459-4567-bbad-aa0f17a76119","msisdn":"+46739000001"}}"#.utf8)
            .write(to: URL(fileURLWithPath: answer))
        let p = try KassaProcess(["bench", "redaction", "--rounds", "50", "--redaction-only", answer])
        #expect(try await onThread { p.waitForExit() } == 0)
        let report = try JSONValue.parse(p.stdout.trimmingCharacters(in: .whitespacesAndNewlines))
        #expect((report["redactJSONNsPerByte"]?.doubleValue ?? 0) > 0)
        #expect(report["parseNsPerByte"] == nil, "only the redacted copy was asked for")
        #expect(report["documents"]?.intValue == 1)
        let none = try KassaProcess(["bench", "redaction", "--rounds", "0", answer])
        #expect(try await onThread { none.waitForExit() } != 0)
        #expect(none.stderr.contains("must be above 0"))
    }

    @Test("serve --help documents every option and its environment variable")
    func help() async throws {
        let p = try KassaProcess(["serve", "--help"])
        _ = try await onThread { p.waitForExit() }
        let help = p.stdout
        for item in ["--listen", "KASSA_LISTEN", "--db", "KASSA_DB", "--upstream-url", "KASSA_UPSTREAM_URL",
                     "--upstream-token", "KASSA_UPSTREAM_TOKEN", "--api-keys", "KASSA_API_KEYS",
                     "--admin-token", "KASSA_ADMIN_TOKEN", "--allowed-upstream-hosts", "KASSA_ALLOWED_UPSTREAM_HOSTS",
                     "--max-body-bytes", "--max-frame-bytes", "--max-outbound-bytes", "--idle-timeout",
                     "--upstream-connections", "KASSA_UPSTREAM_CONNECTIONS"] {
            #expect(help.contains(item), "help lacks \(item)")
        }
    }

    @Test("serve logs JSON, answers /healthz, and stops cleanly on SIGTERM and SIGINT", arguments: [SIGTERM, SIGINT])
    func serveAndStop(_ signal: Int32) async throws {
        let dir = TempDirectory()
        defer { dir.cleanup() }
        let db = dir.file("kassa.sqlite")
        let p = try KassaProcess(["serve", "--listen", "127.0.0.1:0", "--db", db],
                                 environment: ["KASSA_API_KEYS": "cli-key", "KASSA_ADMIN_TOKEN": "cli-admin",
                                               "KASSA_UPSTREAM_URL": "http://127.0.0.1:1/", "KASSA_LOG_LEVEL": "debug"])
        let listening = try await onThread { p.waitForLog(message: "listening") }
        let address = try #require(listening?["address"]?.stringValue)
        #expect(listening?["level"]?.stringValue == "info")
        #expect(listening?["at"]?.stringValue?.hasSuffix("Z") == true)
        let port = try #require(address.split(separator: ":").last.flatMap { Int($0) })
        #expect(port > 0)

        let client = UpstreamClient()
        let health = try await client.send(UpstreamRequest(url: "http://127.0.0.1:\(port)/healthz"))
        #expect(health.status == 200)
        // A WebSocket upgrade to an unknown route is refused, not crashed on.
        let refused = try await onThread { try RawSocket(port: port).upgrade(path: "/nowhere").status }
        #expect(refused == 404)

        p.signal(signal)
        let status = try await onThread { p.waitForExit() }
        #expect(status == 0)
        #expect(p.stdout.contains("\"message\":\"stopped\""))
        // Keys given by the environment are never printed.
        #expect(!p.stdout.contains("cli-key") && !p.stderr.contains("cli-key"))
        #expect(!p.stdout.contains("cli-admin"))

        let store = try KassaStoreProbe(path: db)
        #expect(store.kinds.contains("node.start"))
        #expect(store.kinds.contains("node.stop"), "the event log was flushed before exit")
    }

    @Test("a corrupt database fails at start with a clear message and exit status 1")
    func corruptDatabase() async throws {
        let dir = TempDirectory()
        defer { dir.cleanup() }
        let db = dir.file("bad.sqlite")
        try Data(repeating: 0x41, count: 4096).write(to: URL(fileURLWithPath: db))
        let p = try KassaProcess(["serve", "--listen", "127.0.0.1:0", "--db", db, "--api-keys", "k", "--admin-token", "a"])
        let status = try await onThread { p.waitForExit() }
        #expect(status == 1)
        #expect(p.stderr.contains("not a Kassa database or is corrupt"))
    }

    @Test("a short or weak cluster secret is refused at start-up with a clear message")
    func weakClusterSecret() async throws {
        let dir = TempDirectory()
        defer { dir.cleanup() }
        for secret in ["s3cret", String(repeating: "ab", count: 20)] {
            let p = try KassaProcess(["serve", "--listen", "127.0.0.1:0", "--db", dir.file("k.sqlite"), "--api-keys", "k",
                                      "--admin-token", "a", "--cluster-secret", secret])
            let status = try await onThread { p.waitForExit() }
            #expect(status == 1)
            #expect(p.stderr.contains("cluster secret 1"))
            #expect(!p.stderr.contains(secret), "the secret itself is never printed")
        }
        #expect(!FileManager.default.fileExists(atPath: dir.file("k.sqlite")), "nothing started")
    }

    @Test("generated secrets are printed once to the terminal, not to the log")
    func generatedSecrets() async throws {
        let dir = TempDirectory()
        defer { dir.cleanup() }
        let p = try KassaProcess(["serve", "--listen", "127.0.0.1:0", "--db", dir.file("k.sqlite"), "--upstream-url", "http://127.0.0.1:1/"])
        _ = try await onThread { p.waitForLog(message: "listening") }
        p.signal(SIGTERM)
        _ = try await onThread { p.waitForExit() }
        let keyLine = try #require(p.stderr.split(separator: "\n").first { $0.contains("generated Merchant API key") })
        let key = String(keyLine.split(separator: " ").last ?? "")
        #expect(key.count == 32)
        #expect(!p.stdout.contains(key))
    }

    @Test("log lines are written off the caller's thread, each whole, and the last ones before exit are not lost")
    func logLinesAtExit() async throws {
        let dir = TempDirectory()
        defer { dir.cleanup() }
        let p = try KassaProcess(["serve", "--listen", "127.0.0.1:0", "--db", dir.file("k.sqlite"), "--upstream-url", "http://127.0.0.1:1/",
                                  "--api-keys", "k", "--admin-token", "a"])
        _ = try await onThread { p.waitForLog(message: "listening") }
        p.signal(SIGTERM)
        #expect(try await onThread { p.waitForExit() } == 0)
        // "stopped" is logged just before the process exits: the writer thread has no time to
        // write it, so it is there only if what waits is written at exit.
        let lines = p.stdout.split(separator: "\n")
        #expect(lines.allSatisfy { (try? JSONValue.parse(String($0)))?["message"] != nil }, "\(p.stdout)")
        #expect(lines.compactMap { (try? JSONValue.parse(String($0)))?["message"]?.stringValue }.suffix(2) == ["stopping", "stopped"],
                "\(p.stdout)")
    }

    @Test("kassa serve prints where to go next: the demo and admin URLs with the generated key and token, and the events command")
    func welcome() async throws {
        let dir = TempDirectory()
        defer { dir.cleanup() }
        let p = try KassaProcess(["serve", "--listen", "127.0.0.1:0", "--db", dir.file("k.sqlite")])
        let listening = try await onThread { p.waitForLog(message: "listening") }
        let port = try #require(listening?["address"]?.stringValue?.split(separator: ":").last.flatMap { Int($0) })
        try await Task.sleep(for: .milliseconds(100))
        let terminal = p.stderr
        let key = try #require(terminal.split(separator: "\n").first { $0.contains("generated Merchant API key") }?.split(separator: " ").last)
        let admin = try #require(terminal.split(separator: "\n").first { $0.contains("generated admin token") }?.split(separator: " ").last)
        let base = "http://127.0.0.1:\(port)"
        #expect(terminal.contains("ready at \(base), paying against the embedded Swedbank Pay simulator"), "\(terminal)")
        #expect(terminal.contains("\(base)/demo/   API key \(key)"))
        #expect(terminal.contains("\(base)/admin/  admin token \(admin)"))
        #expect(terminal.contains("kassa events --db \(dir.file("k.sqlite"))"))
        // The printed places answer, and the printed key creates a session there.
        let client = UpstreamClient()
        #expect(try await client.send(UpstreamRequest(url: base + "/demo/")).status == 200)
        #expect(try await client.send(UpstreamRequest(url: base + "/admin/")).status == 200)
        let created = try await SessionClient(base: base, port: port).createResponse(["paymentOrder": SessionClient.order()], key: String(key))
        #expect(created.status == 201)
        #expect(!p.stdout.contains(String(key)) && !p.stdout.contains(String(admin)), "never in the log")
        p.signal(SIGTERM)
        _ = try await onThread { p.waitForExit() }
    }
}

import GRDB

/// Reads a stopped node's database directly.
struct KassaStoreProbe {
    let kinds: [String]
    init(path: String) throws {
        let queue = try DatabaseQueue(path: path)
        kinds = try queue.read { db in try String.fetchAll(db, sql: "SELECT kind FROM events ORDER BY id") }
    }
}

@Suite("Crash recovery (kill -9)")
struct CrashRecoveryTests {
    func port(_ p: KassaProcess) async throws -> Int {
        let listening = try await onThread { p.waitForLog(message: "listening") }
        return try #require(listening?["address"]?.stringValue?.split(separator: ":").last.flatMap { Int($0) })
    }

    @Test("kill -9 mid-flow: after a restart the client replays exactly what it missed and the payment completes")
    func killNine() async throws {
        let dir = TempDirectory()
        defer { dir.cleanup() }
        // The simulator runs on its own, as Swedbank Pay would: it outlives the gateway.
        let sim = try KassaProcess(["sim", "--listen", "127.0.0.1:0"])
        let simPort = try await port(sim)
        let arguments = ["serve", "--listen", "127.0.0.1:0", "--db", dir.file("k.sqlite"), "--api-keys", "k", "--admin-token", "a",
                         "--upstream-url", "http://127.0.0.1:\(simPort)", "--upstream-token", "kassa-simulator-token"]
        let first = try KassaProcess(arguments)
        let c1 = SessionClient(base: "http://127.0.0.1:\(try await port(first))", port: try await port(first))
        let session = try await c1.create(key: "k")
        let stream = try await c1.stream(session)
        _ = try await stream.event(.paymentSessionFetched)
        try await stream.send(["id": "1", "type": "attempt", "instrument": ["type": "CreditCard", "paymentToken": "sim-card-challenge"]])
        _ = try await stream.event(.show3DSecure)
        first.signal(SIGKILL)
        _ = try await onThread { first.waitForExit() }

        let second = try KassaProcess(arguments)
        let p2 = try await port(second)
        let c2 = SessionClient(base: "http://127.0.0.1:\(p2)", port: p2)
        // The client had seq 1 when the connection dropped: it asks for what came after.
        let resumed = try await c2.stream(session, since: 1)
        let replayed = try await resumed.event(.show3DSecure)
        #expect(replayed["seq"]?.intValue == 2, "the acknowledged Show3DSecure survived the crash")
        try await resumed.send(["id": "2", "type": "3ds", "cres": "ok"])
        _ = try await resumed.event(.paymentSessionComplete)
        #expect(resumed.seqs == [2, 3, 4])
        #expect(resumed.types == ["Show3DSecure", "Dismiss3DSecure", "PaymentSessionComplete"])
        second.signal(SIGTERM)
        #expect(try await onThread { second.waitForExit() } == 0)
        sim.signal(SIGTERM)
        _ = try await onThread { sim.waitForExit() }
    }
}
