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
    public func body(device: ClientDevice) -> JSONValue {
        var event: [String: JSONValue] = ["created": .string(Timestamp.iso8601(ms: atMs)), "action": .string(action.rawValue)]
        if let durationMs { event["duration"] = .number(Double(durationMs)) }
        var body: [String: JSONValue] = ["type": "ClientEvent", "service": ["name": "Kassa", "version": .string(KassaVersion.string)],
                                         "client": device.client, "event": .object(event)]
        if let http {
            body["http"] = ["requestUrl": .string(http.requestUrl), "method": .string(http.method),
                            "responseStatusCode": http.responseStatusCode.map { .number(Double($0)) } ?? .null]
        }
        if let methodName {
            var method: [String: JSONValue] = ["name": .string(methodName), "sdk": "Kassa"]
            if let succeeded { method["succeeded"] = .bool(succeeded) }
            body["method"] = .object(method)
        }
        return .object(body)
    }
}
