/// What the client says about its device when the session is created: the
/// upstream calls carry it where the SDKs send the phone's own values
/// (swedbank-pay-sdk-android mobilesdk/…/paymentsession/api/model/request/util/RequestDataUtil.kt,
/// Client.kt, Browser.kt). Every member is optional; what is missing gets a
/// documented default, never an invented value.
public struct ClientDevice: Sendable, Equatable {
    public enum Platform: String, Sendable, CaseIterable {
        case ios, android, web
    }

    public var platform: Platform = .web
    public var userAgent: String?
    public var screenHeight: Int?
    public var screenWidth: Int?
    public var screenColorDepth: Int?
    /// A BCP 47 tag; the session's culture when missing.
    public var language: String?
    /// Minutes east of UTC, as the SDKs compute it (UTC+02:00 is 120).
    public var timeZoneOffset: Int?
    public var acceptHeader: String?
    /// The native wallets the device can pay with now (the app asks PassKit or Google Pay's
    /// isReadyToPay): only these are offered as native instruments.
    public var wallets: [String] = []

    public init(platform: Platform = .web, wallets: [String] = []) {
        self.platform = platform
        self.wallets = wallets
    }

    /// The platform's own wallet, if it has one.
    public var platformWallet: String? {
        switch platform {
        case .ios: return "ApplePay"
        case .android: return "GooglePay"
        case .web: return nil
        }
    }

    /// What Swedbank Pay is told the device can pay with natively. ClickToPay is a
    /// web flow, so every platform takes it; Apple Pay and Google Pay need the phone's
    /// own wallet, declared by the client (swedbank-pay-sdk-ios sends "ApplePay;ClickToPay",
    /// swedbank-pay-sdk-android "GooglePay;ClickToPay" in prepare-payment).
    public var acceptedWallets: [String] {
        (platformWallet.map { wallets.contains($0) ? [$0] : [] } ?? []) + ["ClickToPay"]
    }

    /// The native wallets a session may offer as such: the others are web-based here.
    public func acceptsNativeWallet(_ paymentMethod: String) -> Bool {
        paymentMethod != "ClickToPay" && acceptedWallets.contains(paymentMethod)
    }

    /// The SDKs' browser accept header, used when the client sends none.
    public static let defaultAcceptHeader =
        "text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,image/apng,*/*;q=0.8"

    // MARK: Upstream bodies

    /// `client` of prepare-payment and create-authentication (the SDKs' Client).
    public var client: JSONValue {
        ["userAgent": .string(userAgent ?? Self.kassaUserAgent), "screenHeight": Self.number(screenHeight),
         "screenWidth": Self.number(screenWidth), "screenColorDepth": Self.number(screenColorDepth ?? 24)]
    }

    /// The members of `client`, written without a tree (a beacon's).
    func writeClient(_ out: inout JSONObjectWriter) {
        out.member("userAgent", userAgent ?? Self.kassaUserAgent)
        out.member("screenHeight", screenHeight)
        out.member("screenWidth", screenWidth)
        out.member("screenColorDepth", screenColorDepth ?? 24)
    }

    /// `client` of start-payment-attempt (the SDKs' ClientWithType).
    public var clientWithType: JSONValue {
        var body = client.objectValue ?? [:]
        body["clientType"] = "Native"
        return .object(body)
    }

    /// `client` of complete-authentication (the SDKs' ClientMinimum).
    public var clientMinimum: JSONValue { ["userAgent": .string(userAgent ?? Self.kassaUserAgent)] }

    /// `browser` of prepare-payment and create-authentication.
    public func browser(culture: String?) -> JSONValue {
        ["acceptHeader": .string(acceptHeader ?? Self.defaultAcceptHeader),
         "language": (language ?? culture).map { .string($0) } ?? .null,
         "timeZoneOffset": .number(Double(timeZoneOffset ?? 0)), "javascriptEnabled": true]
    }

    /// `presentationSdk.name`: the SDKs send "iOS" or "Android".
    public var presentationSdkName: String {
        switch platform {
        case .ios: return "iOS"
        case .android: return "Android"
        case .web: return "Web"
        }
    }

    static var kassaUserAgent: String { "Kassa/\(KassaVersion.string)" }

    static func number(_ value: Int?) -> JSONValue { value.map { .number(Double($0)) } ?? .null }

    // MARK: Wire form

    /// The form `parse` reads, with only the members that are set.
    public var json: JSONValue {
        var out: [String: JSONValue] = ["platform": .string(platform.rawValue)]
        if let userAgent { out["userAgent"] = .string(userAgent) }
        if let screenHeight { out["screenHeight"] = .number(Double(screenHeight)) }
        if let screenWidth { out["screenWidth"] = .number(Double(screenWidth)) }
        if let screenColorDepth { out["screenColorDepth"] = .number(Double(screenColorDepth)) }
        if let language { out["language"] = .string(language) }
        if let timeZoneOffset { out["timeZoneOffset"] = .number(Double(timeZoneOffset)) }
        if let acceptHeader { out["acceptHeader"] = .string(acceptHeader) }
        if !wallets.isEmpty { out["wallets"] = .array(wallets.map { .string($0) }) }
        return .object(out)
    }

    static let members: Set<String> = ["platform", "userAgent", "screenHeight", "screenWidth", "screenColorDepth",
                                       "language", "timeZoneOffset", "acceptHeader", "wallets"]

    /// Reads the `client` object of `POST /v1/sessions`; a problem names the member that is wrong.
    public static func parse(_ value: JSONValue) -> Result<ClientDevice, Problem> {
        func bad(_ member: String, _ reason: String) -> Result<ClientDevice, Problem> {
            .failure(.badRequest("client.\(member) \(reason)", parameter: "client.\(member)"))
        }
        guard let object = value.objectValue else { return .failure(.badRequest("client must be an object", parameter: "client")) }
        if let unknown = object.keys.sorted().first(where: { !members.contains($0) }) {
            return bad(unknown, "is not a member of client (\(members.sorted().joined(separator: ", ")))")
        }
        guard let platformText = object["platform"]?.stringValue, let platform = Platform(rawValue: platformText) else {
            return bad("platform", "must be ios, android or web")
        }
        var device = ClientDevice(platform: platform)
        if let raw = object["wallets"], raw != .null {
            guard let list = raw.arrayValue?.compactMap(\.stringValue), list.count == raw.arrayValue?.count, list.count <= 2,
                  list.allSatisfy({ $0 == "ApplePay" || $0 == "GooglePay" }) else {
                return bad("wallets", "must list ApplePay and/or GooglePay, the wallets the device can pay with")
            }
            device.wallets = list
        }
        for (member, limit) in [("userAgent", 512), ("acceptHeader", 1024)] {
            guard let raw = object[member], raw != .null else { continue }
            guard let text = raw.stringValue, (1...limit).contains(text.utf8.count),
                  text.unicodeScalars.allSatisfy({ $0.value >= 0x20 && $0.value != 0x7F }) else {
                return bad(member, "must be text of 1 to \(limit) bytes without control characters")
            }
            if member == "userAgent" { device.userAgent = text } else { device.acceptHeader = text }
        }
        if let raw = object["language"], raw != .null {
            guard let tag = raw.stringValue, PaymentURLHelper.isValidLanguage(tag) else {
                return bad("language", "must be a language tag such as sv-SE")
            }
            device.language = tag
        }
        let ranges: [(String, ClosedRange<Int>)] = [("screenHeight", 1...100_000), ("screenWidth", 1...100_000),
                                                   ("screenColorDepth", 1...64), ("timeZoneOffset", -840...840)]
        for (member, range) in ranges {
            guard let raw = object[member], raw != .null else { continue }
            guard let whole = raw.intValue, range.contains(whole) else {
                return bad(member, "must be a whole number from \(range.lowerBound) to \(range.upperBound)")
            }
            switch member {
            case "screenHeight": device.screenHeight = whole
            case "screenWidth": device.screenWidth = whole
            case "screenColorDepth": device.screenColorDepth = whole
            default: device.timeZoneOffset = whole
            }
        }
        return .success(device)
    }
}
