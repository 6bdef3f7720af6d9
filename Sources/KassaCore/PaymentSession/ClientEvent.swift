/// A beacon for Swedbank Pay's `event-logging` operation: what the SDKs post so that
/// Swedbank Pay's support can follow a payment (swedbank-pay-sdk-android
/// mobilesdk/…/logging/BeaconService.kt, logging/model/BeaconInput.kt, EventAction.kt).
/// Kassa posts the same for the work it does in the client's place.
public struct ClientEvent: Sendable, Equatable {
    public enum Action: String, Sendable, CaseIterable {
        /// A client command, as the SDKs log a call of one of their methods.
        case sdkMethodInvoked = "SDKMethodInvoked"
        /// A push to the client, as the SDKs log a callback to the app.
        case sdkCallbackInvoked = "SDKCallbackInvoked"
        /// One PaymentSession API exchange.
        case httpRequest = "HttpRequest"
        /// The client was told to launch an app (Swish).
        case launchClientApp = "LaunchClientApp"
        /// The payer came back from that app (the SDKs see it; Kassa does not).
        case clientAppCallback = "ClientAppCallback"
    }

    public struct HTTP: Sendable, Equatable {
        public var requestUrl: String
        public var method: String
        public var responseStatusCode: Int?

        public init(requestUrl: String, method: String, responseStatusCode: Int?) {
            self.requestUrl = requestUrl
            self.method = method
            self.responseStatusCode = responseStatusCode
        }
    }

    public var action: Action
    public var atMs: Int64
    public var durationMs: Int?
    public var http: HTTP?
    /// The command or push named in `method.name`.
    public var methodName: String?
    public var succeeded: Bool?

    public init(_ action: Action, atMs: Int64, durationMs: Int? = nil, http: HTTP? = nil, methodName: String? = nil, succeeded: Bool? = nil) {
        self.action = action
        self.atMs = atMs
        self.durationMs = durationMs
        self.http = http
        self.methodName = methodName
        self.succeeded = succeeded
    }

    /// The BeaconInput body: `type`, `service`, `client`, `event`, and `http` or `method` by action.
    /// Written as bytes, member by member: Kassa posts six of these a card payment.
    public func body(device: ClientDevice) -> [UInt8] {
        var body = JSONObjectWriter()
        body.member("type", "ClientEvent")
        body.member("service") { service in
            service.member("name", "Kassa")
            service.member("version", KassaVersion.string)
        }
        body.member("client") { client in device.writeClient(&client) }
        body.member("event") { event in
            event.member("created", Timestamp.iso8601(ms: atMs))
            event.member("action", action.rawValue)
            if let durationMs { event.member("duration", durationMs) }
        }
        if let http {
            body.member("http") { out in
                out.member("requestUrl", http.requestUrl)
                out.member("method", http.method)
                out.member("responseStatusCode", http.responseStatusCode)
            }
        }
        if let methodName {
            body.member("method") { method in
                method.member("name", methodName)
                method.member("sdk", "Kassa")
                if let succeeded { method.member("succeeded", succeeded) }
            }
        }
        return body.finished()
    }
}
