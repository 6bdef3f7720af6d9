/// The frames of the session stream (`kassa.v1`), as Codable types. The gateway writes events and
/// answers through them, the load client and `KassaClient` read them, and the tests hold every
/// frame they see against `asyncapi.yaml`, so code, library and contract cannot drift apart.

/// One pushed event: `{"seq", "session", "type", "at", "data"}`. `type` stays a string so a
/// client reads events newer than itself (as `.unknown`) instead of failing.
public struct StreamEvent: Codable, Sendable, Equatable {
    /// Numbered per session from 1, without gaps; resume with `?since=<seq>`.
    public var seq: Int64
    public var session: String
    public var type: String
    /// ISO 8601, UTC, milliseconds.
    public var at: String
    public var data: JSONValue

    public init(seq: Int64, session: String, type: String, at: String, data: JSONValue) {
        self.seq = seq
        self.session = session
        self.type = type
        self.at = at
        self.data = data
    }

    /// Read without a decoder (the load client's path): nil unless it is an event.
    public init?(json: JSONValue) {
        guard let seq = json["seq"]?.doubleValue, seq >= 1, seq < 9.0e15, seq.rounded() == seq,
              let session = json["session"]?.stringValue, let type = json["type"]?.stringValue else { return nil }
        self.init(seq: Int64(seq), session: session, type: type, at: json["at"]?.stringValue ?? "", data: json["data"] ?? .object([:]))
    }

    public var json: JSONValue {
        ["seq": .number(Double(seq)), "session": .string(session), "type": .string(type), "at": .string(at), "data": data]
    }

    public var pushType: PushType? { PushType(rawValue: type) }

    /// After this event the session pushes nothing more: it completed, was canceled, or reached
    /// an end nothing can act on (`PaymentSessionEndReached`).
    public var isTerminal: Bool {
        if pushType?.isTerminal == true { return true }
        return pushType == .sdkProblemOccurred && data["problem"]?["type"]?.stringValue == SdkProblemType.paymentSessionEndReached.rawValue
    }

    /// The event with its data typed.
    public var event: SessionEvent { SessionEvent(self) }
}

/// An event's meaning, typed from its `data`; members the gateway may leave out are optional.
public enum SessionEvent: Sendable, Equatable {
    case paymentSessionFetched(availableInstruments: [JSONValue])
    /// `url` is Swedbank Pay's menu script: frame Kassa's `/menu/?url=…` host page with it.
    case showPaymentMenu(url: String, restrictedToInstruments: [String]?, instrumentMode: String?)
    /// Open `url` (the Swish app).
    case launchClientApp(url: String)
    /// Post `form` to `url` in a hidden frame, then send `threeDSecureMethod(completed:)`.
    case run3DSecureMethod(FormPost, timeoutMs: Int?)
    /// Post `form` to `url` in a visible frame: the issuer's challenge.
    case show3DSecure(FormPost)
    case dismiss3DSecure
    /// Open the wallet sheet with `request`, then send `wallet(payload:)` or `walletCanceled`.
    case showWallet(paymentMethod: String, request: JSONValue, merchantIdentifier: String?)
    case complete
    case canceled
    case sessionProblem(StreamProblem)
    case sdkProblem(StreamProblem)
    /// An event this library does not know yet.
    case unknown(type: String, data: JSONValue)

    public struct FormPost: Sendable, Equatable {
        public var url: String
        public var method: String
        public var form: [String: String]
    }

    public init(_ event: StreamEvent) {
        let data = event.data
        let form = FormPost(url: data["url"]?.stringValue ?? "", method: data["method"]?.stringValue ?? "POST",
                            form: (data["form"]?.objectValue ?? [:]).compactMapValues(\.stringValue))
        switch event.pushType {
        case .paymentSessionFetched: self = .paymentSessionFetched(availableInstruments: data["availableInstruments"]?.arrayValue ?? [])
        case .showPaymentMenu:
            self = .showPaymentMenu(url: data["url"]?.stringValue ?? "",
                                    restrictedToInstruments: data["restrictedToInstruments"]?.arrayValue?.compactMap(\.stringValue),
                                    instrumentMode: data["instrumentMode"]?.stringValue)
        case .launchClientApp: self = .launchClientApp(url: data["url"]?.stringValue ?? "")
        case .run3DSecureMethod: self = .run3DSecureMethod(form, timeoutMs: data["timeoutMs"]?.intValue)
        case .show3DSecure: self = .show3DSecure(form)
        case .dismiss3DSecure: self = .dismiss3DSecure
        case .showWallet:
            self = .showWallet(paymentMethod: data["paymentMethod"]?.stringValue ?? "", request: data["request"] ?? .null,
                               merchantIdentifier: data["merchantIdentifier"]?.stringValue)
        case .paymentSessionComplete: self = .complete
        case .paymentSessionCanceled: self = .canceled
        case .sessionProblemOccurred: self = .sessionProblem(StreamProblem(data["problem"] ?? .null))
        case .sdkProblemOccurred: self = .sdkProblem(StreamProblem(data["problem"] ?? .null))
        case nil: self = .unknown(type: event.type, data: data)
        }
    }
}

/// An RFC 7807 problem as clients read it: the standard members typed, the rest kept.
public struct StreamProblem: Codable, Sendable, Equatable {
    public var type: String
    public var title: String?
    public var status: Int?
    public var detail: String?
    /// `SdkProblemOccurred` `PaymentSessionAPIRequestFailed` and `…3DSecureLoadFailed`: send `retry`.
    public var retryable: Bool
    /// The whole document, extension members included.
    public var document: JSONValue

    public init(_ document: JSONValue) {
        self.document = document
        type = document["type"]?.stringValue ?? "about:blank"
        title = document["title"]?.stringValue
        status = document["status"]?.intValue
        detail = document["detail"]?.stringValue
        retryable = document["retryable"]?.boolValue ?? false
    }

    public init(from decoder: any Decoder) throws { self.init(try JSONValue(from: decoder)) }
    public func encode(to encoder: any Encoder) throws { try document.encode(to: encoder) }
}

/// The answer to a command: `{"re": id, "ok": true}`, `{"re": id, "ok": true, "type": "pong"}`,
/// or `{"re": id, "ok": false, "problem": {…}}`.
public struct CommandAnswer: Codable, Sendable, Equatable {
    /// The command's `id`; null when the frame had none or could not be read.
    public var re: String?
    public var ok: Bool
    public var type: String?
    public var problem: StreamProblem?

    public init(re: String?, ok: Bool, type: String? = nil, problem: StreamProblem? = nil) {
        self.re = re
        self.ok = ok
        self.type = type
        self.problem = problem
    }

    /// Read without a decoder: nil unless it is an answer.
    public init?(json: JSONValue) {
        guard let ok = json["ok"]?.boolValue, let re = json["re"] else { return nil }
        self.init(re: Self.id(re), ok: ok, type: json["type"]?.stringValue, problem: json["problem"].map(StreamProblem.init))
    }

    public init(from decoder: any Decoder) throws {
        guard let answer = CommandAnswer(json: try JSONValue(from: decoder)) else {
            throw DecodingError.dataCorrupted(.init(codingPath: decoder.codingPath, debugDescription: "not a command answer"))
        }
        self = answer
    }

    /// The gateway echoes whatever id a command carried; clients that send numbers get numbers.
    public static func id(_ re: JSONValue) -> String? {
        switch re {
        case .string(let text): text
        case .number(let n): n.rounded() == n && abs(n) < 9.0e15 ? String(Int64(n)) : String(n)
        default: nil
        }
    }

    /// The gateway's answers; `re` echoes the command's id as it came (any JSON), or null.
    public static func frame(re: JSONValue?, problem: JSONValue? = nil, type: String? = nil) -> JSONValue {
        var frame: [String: JSONValue] = ["re": re ?? .null, "ok": .bool(problem == nil)]
        if let problem { frame["problem"] = problem }
        if let type { frame["type"] = .string(type) }
        return .object(frame)
    }
}

/// What a client sends: each command's members, encoded with its `id` as one frame.
public enum ClientCommand: Sendable, Equatable {
    case attempt(InstrumentChoice)
    case abort
    case retry
    /// The payment menu, optionally restricted to some payment methods.
    case fallback(restrictToInstruments: [String]?)
    /// The payment menu for one payment method (instrument mode).
    case instrumentMode(String)
    /// The cRes of a challenge the client captured itself (the issuer usually posts it to Kassa).
    case threeDSecure(cres: String)
    case threeDSecureLoadFailed(reason: String)
    case threeDSecureMethod(completed: Bool)
    /// The wallet sheet's payment data, base64.
    case wallet(payload: String)
    case walletCanceled
    case appLaunchFailed
    case ping

    public var type: CommandType {
        switch self {
        case .attempt: .attempt
        case .abort: .abort
        case .retry: .retry
        case .fallback, .instrumentMode: .fallback
        case .threeDSecure, .threeDSecureLoadFailed: .threeDSecure
        case .threeDSecureMethod: .threeDSecureMethod
        case .wallet, .walletCanceled: .wallet
        case .appLaunchFailed: .appLaunchFailed
        case .ping: .ping
        }
    }

    /// The frame, `{"id", "type", …members}`.
    public func frame(id: String) -> JSONValue {
        var members: [String: JSONValue] = ["id": .string(id), "type": .string(type.rawValue)]
        switch self {
        case .attempt(let instrument): members["instrument"] = instrument.json
        case .fallback(let list): if let list { members["restrictToInstruments"] = .array(list.map(JSONValue.string)) }
        case .instrumentMode(let method): members["instrument"] = .string(method)
        case .threeDSecure(let cres): members["cres"] = .string(cres)
        case .threeDSecureLoadFailed(let reason): members["loadFailed"] = .string(reason)
        case .threeDSecureMethod(let completed): members["completed"] = .bool(completed)
        case .wallet(let payload): members["payload"] = .string(payload)
        case .walletCanceled: members["canceled"] = true
        case .abort, .retry, .appLaunchFailed, .ping: break
        }
        return .object(members)
    }
}

/// The instrument of an `attempt`: `type` (`Swish`, `CreditCard`, `NewCreditCard`, `ApplePay`,
/// `GooglePay`) and what that type takes.
public struct InstrumentChoice: Codable, Sendable, Equatable {
    public var type: String
    /// Swish on another device: `+`, country code and digits.
    public var msisdn: String?
    /// A saved card, from PaymentSessionFetched's CreditCard prefills.
    public var paymentToken: String?
    public var enabledPaymentDetailsConsentCheckbox: Bool?

    public init(type: String, msisdn: String? = nil, paymentToken: String? = nil, enabledPaymentDetailsConsentCheckbox: Bool? = nil) {
        self.type = type
        self.msisdn = msisdn
        self.paymentToken = paymentToken
        self.enabledPaymentDetailsConsentCheckbox = enabledPaymentDetailsConsentCheckbox
    }

    public static func swish(msisdn: String? = nil) -> InstrumentChoice { InstrumentChoice(type: "Swish", msisdn: msisdn) }

    public var json: JSONValue {
        var members: [String: JSONValue] = ["type": .string(type)]
        if let msisdn { members["msisdn"] = .string(msisdn) }
        if let paymentToken { members["paymentToken"] = .string(paymentToken) }
        if let enabledPaymentDetailsConsentCheckbox { members["enabledPaymentDetailsConsentCheckbox"] = .bool(enabledPaymentDetailsConsentCheckbox) }
        return .object(members)
    }
}

extension ClientCommand: Codable {
    private enum Keys: String, CodingKey { case type, instrument, restrictToInstruments, cres, loadFailed, completed, payload, canceled }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: Keys.self)
        let name = try c.decode(String.self, forKey: .type)
        guard let type = CommandType(rawValue: name) else {
            throw DecodingError.dataCorruptedError(forKey: .type, in: c, debugDescription: "unknown command type \(name)")
        }
        switch type {
        case .attempt: self = .attempt(try c.decode(InstrumentChoice.self, forKey: .instrument))
        case .abort: self = .abort
        case .retry: self = .retry
        case .fallback:
            if let method = try? c.decode(String.self, forKey: .instrument) { self = .instrumentMode(method) }
            else { self = .fallback(restrictToInstruments: try c.decodeIfPresent([String].self, forKey: .restrictToInstruments)) }
        case .threeDSecure:
            if let reason = try c.decodeIfPresent(String.self, forKey: .loadFailed) { self = .threeDSecureLoadFailed(reason: reason) }
            else { self = .threeDSecure(cres: try c.decode(String.self, forKey: .cres)) }
        case .threeDSecureMethod: self = .threeDSecureMethod(completed: try c.decode(Bool.self, forKey: .completed))
        case .wallet:
            if try c.decodeIfPresent(Bool.self, forKey: .canceled) == true { self = .walletCanceled }
            else { self = .wallet(payload: try c.decode(String.self, forKey: .payload)) }
        case .appLaunchFailed: self = .appLaunchFailed
        case .ping: self = .ping
        }
    }

    /// Encodes the members without an `id`; `frame(id:)` is the wire form.
    public func encode(to encoder: any Encoder) throws {
        var members = frame(id: "")
        if case .object(var object) = members { object.removeValue(forKey: "id"); members = .object(object) }
        try members.encode(to: encoder)
    }
}

extension JSONValue: Codable {
    public init(from decoder: any Decoder) throws {
        let c = try decoder.singleValueContainer()
        if c.decodeNil() { self = .null }
        else if let b = try? c.decode(Bool.self) { self = .bool(b) }
        else if let n = try? c.decode(Double.self) { self = .number(n) }
        else if let s = try? c.decode(String.self) { self = .string(s) }
        else if let a = try? c.decode([JSONValue].self) { self = .array(a) }
        else { self = .object(try c.decode([String: JSONValue].self)) }
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.singleValueContainer()
        switch self {
        case .null: try c.encodeNil()
        case .bool(let b): try c.encode(b)
        case .number(let n): try c.encode(n)
        case .string(let s): try c.encode(s)
        case .array(let a): try c.encode(a)
        case .object(let o): try c.encode(o)
        }
    }
}
