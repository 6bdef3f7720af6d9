import Foundation
import KassaCore
import KassaEdge
import KassaUpstream

/// A thin client for tests: creates sessions over HTTP and follows their
/// stream over a real WebSocket (hand-made frames on a raw socket).
struct SessionClient {
    let base: String
    let port: Int
    let client = UpstreamClient()

    struct Created {
        let id: String
        let token: String
        let streamUrl: String
    }

    static func order(amount: Int = 1500, description: String = "Test purchase") -> JSONValue {
        ["operation": "Purchase", "currency": "SEK", "amount": .number(Double(amount)), "vatAmount": 0,
         "description": .string(description), "userAgent": "KassaTests", "language": "sv-SE",
         "urls": ["hostUrls": ["https://shop.example"], "completeUrl": "https://shop.example/complete",
                  "cancelUrl": "https://shop.example/cancel", "paymentUrl": "https://shop.example/pay"],
         "payeeInfo": ["payeeId": "payee-1", "payeeName": "Shop"]]
    }

    func createResponse(_ body: JSONValue, key: String = "test-key", idempotencyKey: String? = nil) async throws -> UpstreamResponse {
        var headers = [("Your-Api-Key", key), ("Content-Type", "application/json")]
        if let idempotencyKey { headers.append(("Idempotency-Key", idempotencyKey)) }
        return try await client.send(UpstreamRequest(method: "POST", url: base + "/v1/sessions", headers: headers, body: body.bytes))
    }

    /// `client`: the device object of `POST /v1/sessions`; the wallets need their platform's.
    func create(amount: Int = 1500, key: String = "test-key", client device: JSONValue? = nil) async throws -> Created {
        var body: [String: JSONValue] = ["paymentOrder": Self.order(amount: amount)]
        if let device { body["client"] = device }
        let r = try await createResponse(.object(body), key: key)
        guard r.status == 201 else { throw TestFailure("create answered \(r.status): \(r.text)") }
        let doc = try JSONValue.parse(r.body)
        return Created(id: doc["id"]!.stringValue!, token: doc["clientToken"]!.stringValue!, streamUrl: doc["streamUrl"]!.stringValue!)
    }

    func command(_ session: Created, _ type: String, _ body: JSONValue = [:], token: String? = nil, idempotencyKey: String? = nil) async throws -> UpstreamResponse {
        var headers = [("Authorization", "Bearer \(token ?? session.token)"), ("Content-Type", "application/json")]
        if let idempotencyKey { headers.append(("Idempotency-Key", idempotencyKey)) }
        return try await client.send(UpstreamRequest(method: "POST", url: base + "/v1/sessions/\(session.id)/\(type)", headers: headers, body: body.bytes))
    }

    func snapshot(_ session: Created, token: String? = nil) async throws -> UpstreamResponse {
        try await client.send(UpstreamRequest(url: base + "/v1/sessions/\(session.id)", headers: [("Authorization", "Bearer \(token ?? session.token)")]))
    }

    /// A new session, its stream open, past PaymentSessionFetched.
    func fetched(client device: JSONValue? = nil) async throws -> (Created, Stream) {
        let session = try await create(client: device)
        let stream = try await self.stream(session)
        _ = try await stream.event(.paymentSessionFetched)
        return (session, stream)
    }

    /// A new session the client aborted, past PaymentSessionCanceled (an ended session), its stream still open.
    func canceled() async throws -> (Created, Stream) {
        let (session, stream) = try await fetched()
        try await stream.send(["id": "a", "type": "abort"])
        _ = try await stream.event(.paymentSessionCanceled)
        return (session, stream)
    }

    /// Opens the stream with the libwebsockets client.
    func stream(_ session: Created, since: Int64? = nil, tokenInQuery: Bool = false) async throws -> Stream {
        var path = session.streamUrl + (since.map { "?since=\($0)" } ?? "")
        if tokenInQuery { path += (since == nil ? "?" : "&") + "token=\(session.token)" }
        let headers = tokenInQuery ? [] : [("Authorization", "Bearer \(session.token)")]
        let connection = try await sharedWebSocketClient.connect(port: port, path: path, headers: headers)
        return Stream(connection: connection)
    }
}

/// One libwebsockets client context for every test.
let sharedWebSocketClient: WebSocketClient = {
    do { return try WebSocketClient() } catch { fatalError("\(error)") }
}()

/// One open session stream.
final class Stream: @unchecked Sendable {
    let connection: WebSocketClientConnection
    private var iterator: WebSocketClientEvents.AsyncIterator
    var received: [JSONValue] = []

    /// Session streams are held to asyncapi.yaml; the admin stream has its own frames.
    let checksContract: Bool

    init(connection: WebSocketClientConnection, checksContract: Bool = true) {
        self.connection = connection
        self.checksContract = checksContract
        iterator = connection.events.makeAsyncIterator()
    }

    /// Reads frames until one satisfies `stop` (15 s at most); returns every frame read.
    func read(until stop: @escaping @Sendable (JSONValue) -> Bool) async throws -> [JSONValue] {
        let connection = self.connection
        let watchdog = Task {
            try await Task.sleep(for: .seconds(15))
            connection.close()
        }
        defer { watchdog.cancel() }
        var frames: [JSONValue] = []
        while let event = await iterator.next() {
            switch event {
            case .closed(let code):
                throw TestFailure("stream closed (\(code.map(String.init) ?? "no code")); read \(frames.map(\.text))")
            case .text(let text, _):
                let value = try JSONValue.parse(text)
                if checksContract { try Self.holdToContract(text, value) }
                frames.append(value)
                received.append(value)
                if stop(value) { return frames }
            }
        }
        throw TestFailure("stream ended; read \(frames.map(\.text))")
    }

    /// Every frame the gateway sends matches asyncapi.yaml and decodes into KassaProtocol's types.
    static func holdToContract(_ text: String, _ value: JSONValue) throws {
        let broken = StreamContract.check(serverFrame: value)
        guard broken.isEmpty else { throw TestFailure("a frame breaks asyncapi.yaml: \(broken.joined(separator: "; "))") }
        let data = Data(text.utf8)
        if value["seq"] != nil {
            let event = try JSONDecoder().decode(StreamEvent.self, from: data)
            if case .unknown(let type, _) = event.event { throw TestFailure("KassaProtocol does not know the event \(type)") }
        } else {
            _ = try JSONDecoder().decode(CommandAnswer.self, from: data)
        }
    }

    func event(_ type: PushType) async throws -> JSONValue {
        try await read { $0["type"]?.stringValue == type.rawValue }.last!
    }

    func ack(_ id: String) async throws -> JSONValue {
        try await read { $0["re"]?.stringValue == id }.last!
    }

    func send(_ command: JSONValue) async throws { connection.send(command) }

    /// A wallet attempt as a phone makes it: attempt, the wallet sheet (`ShowWallet`), then the
    /// sheet's payload. Returns the ShowWallet event.
    @discardableResult
    func payByWallet(_ wallet: String, id: String = "w", payload: String = "c2ltLXBheWxvYWQ=") async throws -> JSONValue {
        try await send(["id": .string(id), "type": "attempt", "instrument": ["type": .string(wallet)]])
        let sheet = try await event(.showWallet)
        try await send(["id": .string(id + "p"), "type": "wallet", "payload": .string(payload)])
        return sheet
    }

    func sendText(_ text: String) { connection.send(text) }

    /// The seq numbers of the pushed events received so far.
    var seqs: [Int] { received.compactMap { $0["seq"]?.intValue } }
    var types: [String] { received.compactMap { $0["seq"] != nil ? $0["type"]?.stringValue : nil } }
}
