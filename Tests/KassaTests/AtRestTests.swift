import Foundation
import KassaCore
@testable import KassaGateway
@testable import KassaSimulator
import KassaUpstream
import Testing
@testable import kassa

/// Personal data and secrets sent through every door a client, a merchant or support has:
/// none of them may reach the database, its WAL or the process log in a form that can be read.
@Suite("At rest: nothing sensitive in the files or the log")
struct AtRestTests {
    let client = UpstreamClient()

    static let email = "anna.svensson@example.se"
    static let phone = "+46701234567"
    static let card = "4111111111111111"
    static let secondCard = "5555555555554444"
    static let personnummer = "19811218-9876"
    static let fodselsnummer = "01010012356"
    static let password = "s3cr3t-Passw0rd-value", apiKey = "ak_live_4f3c2b1a9d", clientSecret = "cs_9a8b7c6d5e"

    /// Every form the values may take on the way: as sent, without separators, percent-encoded.
    static var forbidden: [String] {
        [email, "anna.svensson%40example.se", phone, "46701234567", "%2B46701234567", "+46 70 123 45 67", card, "4111 1111 1111 1111",
         secondCard, personnummer, "198112189876", "8112189876", fodselsnummer, password, apiKey, clientSecret]
    }

    func send(_ t: TestNode, _ method: String, _ path: String, _ body: JSONValue? = nil, headers: [(String, String)] = []) async throws -> UpstreamResponse {
        var all = headers
        if body != nil { all.append(("Content-Type", "application/json")) }
        return try await client.send(UpstreamRequest(method: method, url: t.base + path, headers: all, body: body?.bytes ?? []))
    }

    @Test("cards, phones, e-mails, national ids and secrets driven through every API are found nowhere in the database, WAL or log")
    func everyDoor() async throws {
        let t = try TestNode()
        let key = [("Your-Api-Key", "test-key")]
        // The merchant's order, with the payer's data in members whose names say it and in ones whose names do not.
        var order = SessionClient.order(description: "For \(Self.email)").objectValue!
        order["payer"] = ["email": .string(Self.email), "msisdn": .string(Self.phone),
                          "nationalIdentifier": ["socialSecurityNumber": "198112189876", "countryCode": "SE"]]
        order["metadata"] = ["note": .string("pnr \(Self.personnummer), fnr \(Self.fodselsnummer), tel +46 70 123 45 67, card 4111 1111 1111 1111"), "password": .string(Self.password),
                             "apiKey": .string(Self.apiKey), "clientSecret": .string(Self.clientSecret),
                             "contacts": [.string(Self.email), .number(Double(Self.secondCard)!)]]
        var urls = order["urls"]!.objectValue!
        urls["completeUrl"] = .string("https://shop.example/complete?email=anna.svensson%40example.se&pnr=\(Self.personnummer)")
        order["urls"] = .object(urls)
        let created = try await send(t, "POST", "/v1/sessions", ["paymentOrder": .object(order),
                                                                 "client": ["platform": "web", "userAgent": .string("Mozilla/5.0 (\(Self.email))")]],
                                     headers: key + [("Idempotency-Key", "order-\(Self.phone)")])
        #expect(created.status == 201, "\(created.text)")
        let doc = try JSONValue.parse(created.body)
        let session = SessionClient.Created(id: doc["id"]!.stringValue!, token: doc["clientToken"]!.stringValue!, streamUrl: doc["streamUrl"]!.stringValue!)
        let replay = try await send(t, "POST", "/v1/sessions", ["paymentOrder": .object(order),
                                                                "client": ["platform": "web", "userAgent": .string("Mozilla/5.0 (\(Self.email))")]],
                                    headers: key + [("Idempotency-Key", "order-\(Self.phone)")])
        #expect(replay.status == 201 && replay.header("idempotent-replayed") == "true")
        let replayedToken = try #require(try JSONValue.parse(replay.body)["clientToken"]?.stringValue)

        // The client: a refused command full of them, then a Swish payment with the phone number.
        let stream = try await t.sessions.stream(session)
        _ = try await stream.event(.paymentSessionFetched)
        try await stream.send(["id": .string("bad \(Self.email)"), "type": "attempt",
                               "instrument": ["type": "CreditCard", "paymentToken": "sim-card-frictionless", "note": .string(Self.secondCard)]])
        try await stream.send(["id": "1", "type": "attempt", "instrument": ["type": "Swish", "msisdn": .string(Self.phone)]])
        _ = try await stream.event(.paymentSessionComplete)
        let bearer = [("Authorization", "Bearer \(session.token)")]
        _ = try await send(t, "GET", "/v1/sessions/\(session.id)?email=anna.svensson%40example.se&card=\(Self.card)", headers: bearer)
        _ = try await send(t, "POST", "/v1/sessions/\(session.id)/abort", ["reason": .string(Self.email)], headers: bearer)

        // The Merchant Backend API, as the SDKs call it.
        _ = try await send(t, "POST", "/swedbank-pay-mobile/consumers",
                           ["operation": "initiate-consumer-session", "consumerCountryCode": "SE", "msisdn": .string(Self.phone),
                            "email": .string(Self.email), "nationalIdentifier": ["socialSecurityNumber": .string(Self.personnummer)]], headers: key)
        _ = try await send(t, "POST", "/swedbank-pay-mobile/paymentorders", ["paymentorder": .object(order)], headers: key)
        // Strangers and support, with the values in paths and queries.
        _ = try await send(t, "GET", "/nothing/\(Self.card)/\(Self.email)?phone=%2B46701234567")
        _ = try await send(t, "GET", "/v1/admin/events?q=\(Self.secondCard)", headers: [("Authorization", "Bearer test-admin")])
        _ = try await send(t, "POST", "/v1/sessions", ["viewPaymentSession": .string("https://evil.example/\(Self.email)")],
                           headers: [("Your-Api-Key", Self.apiKey)])

        await t.node.store.eventLog.flush()
        func files() -> Data {
            ["", "-wal", "-shm"].reduce(into: Data()) { all, suffix in
                all += (try? Data(contentsOf: URL(fileURLWithPath: t.dir.file("kassa.sqlite" + suffix)))) ?? Data()
            }
        }
        let whileRunning = files()
        let decoded = try t.decodedEvents().text
        await t.stop(keepDirectory: true)
        let everything = whileRunning + files() + Data(decoded.utf8) + Data(t.logs.text.utf8)
        #expect(everything.count > 10_000, "the scan read real files")
        // Swedbank Pay's session tokens (GUIDs in the session links' paths, seed 002) are credentials too.
        let upstreamTokens = t.simulator.state.withLock { Array($0.sessions.keys) }
        #expect(!upstreamTokens.isEmpty)
        for value in Self.forbidden + upstreamTokens + [session.token, replayedToken, "test-key", "test-admin"] {
            #expect(everything.range(of: Data(value.utf8)) == nil, "\(value.prefix(14)) reached the database, its WAL or the log")
        }
        // What support searches by is still there.
        #expect(everything.range(of: Data("…4567".utf8)) != nil && everything.range(of: Data("…1111".utf8)) != nil)
        t.dir.cleanup()
    }
}
