import Foundation
import Hummingbird
import HummingbirdWebSocket
import Synchronization

// POST /v1/sessions answers a session; its stream pushes PaymentSessionFetched
// (seq 1) on open and answers each {"id", "type": "ping"} with {"re", "ok", "type": "pong"},
// as Kassa does, so `kassa load` runs the same ping and idle scenarios against both.
let port = Int(CommandLine.arguments.dropFirst().first ?? "9400") ?? 9400
let counter = Atomic<Int>(0)

let router = Router()
router.post("/v1/sessions") { _, _ -> Response in
    let n = counter.add(1, ordering: .relaxed).newValue
    let body = #"{"id":"hb\#(n)","clientToken":"t\#(n)","streamUrl":"/v1/sessions/hb\#(n)/stream"}"#
    return Response(status: .created, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(string: body)))
}

func iso8601Now() -> String {
    Date().formatted(Date.ISO8601FormatStyle(includingFractionalSeconds: true))
}

let wsRouter = Router(context: BasicWebSocketRequestContext.self)
wsRouter.ws("/v1/sessions/:id/stream") { _, _ in
    .upgrade([.secWebSocketProtocol: "kassa.v1"])
} onUpgrade: { inbound, outbound, context in
    let id = context.requestContext.parameters.get("id") ?? ""
    try await outbound.write(.text(#"{"seq":1,"session":"\#(id)","type":"PaymentSessionFetched","at":"\#(iso8601Now())","data":{}}"#))
    for try await message in inbound.messages(maxSize: 1 << 16) {
        guard case .text(let text) = message,
              let object = try? JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any],
              object["type"] as? String == "ping" else { continue }
        let re = object["id"] as? String ?? ""
        try await outbound.write(.text(#"{"re":"\#(re)","ok":true,"type":"pong"}"#))
    }
}

let app = Application(
    router: router,
    server: .http1WebSocketUpgrade(webSocketRouter: wsRouter),
    configuration: .init(address: .hostname("127.0.0.1", port: port))
)
try await app.runService()
