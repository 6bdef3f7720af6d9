/// What a client may pay with, after seed 002's PaymentAttemptInstrument.
public enum Instrument: Sendable, Equatable {
    /// Swish: no MSISDN starts the app on this device (local start), an MSISDN on the payer's phone.
    case swish(msisdn: String?)
    /// A saved card from the CreditCard prefills.
    case creditCard(paymentToken: String)
    /// A new card, entered in the payment menu.
    case newCreditCard(enabledPaymentDetailsConsentCheckbox: Bool)
    case applePay
    case googlePay

    /// Apple Pay and Google Pay: paid with the phone's own wallet, not in a web view.
    public var isNativeWallet: Bool {
        switch self {
        case .applePay, .googlePay: return true
        default: return false
        }
    }

    /// The upstream payment method that carries this instrument.
    public var paymentMethod: String {
        switch self {
        case .swish: return "Swish"
        case .creditCard, .newCreditCard: return "CreditCard"
        case .applePay: return "ApplePay"
        case .googlePay: return "GooglePay"
        }
    }

    /// The wire form that `parse` reads: what a client sends as a command's `instrument`.
    public var json: JSONValue {
        switch self {
        case .swish(let msisdn): return ["type": "Swish", "msisdn": msisdn.map { .string($0) } ?? .null]
        case .creditCard(let token): return ["type": "CreditCard", "paymentToken": .string(token)]
        case .newCreditCard(let consent): return ["type": "NewCreditCard", "enabledPaymentDetailsConsentCheckbox": .bool(consent)]
        case .applePay: return ["type": "ApplePay"]
        case .googlePay: return ["type": "GooglePay"]
        }
    }

    /// Reads `{"type": "Swish", "msisdn": "+46…"}` and the other shapes of the
    /// WebSocket protocol; the error names what is wrong.
    public static func parse(_ value: JSONValue?) -> Result<Instrument, Problem> {
        guard let value, case .object = value else {
            return .failure(.badRequest("instrument must be an object with a type", parameter: "instrument"))
        }
        switch value["type"]?.stringValue {
        case "Swish":
            guard let msisdn = value["msisdn"], msisdn != .null else { return .success(.swish(msisdn: nil)) }
            guard let s = msisdn.stringValue, isValidMSISDN(s) else {
                return .failure(.badRequest("msisdn must be + followed by the country code and number, digits only, no whitespace",
                                            parameter: "instrument.msisdn"))
            }
            return .success(.swish(msisdn: s))
        case "CreditCard":
            guard let token = value["paymentToken"]?.stringValue, !token.isEmpty, token.count <= 200 else {
                return .failure(.badRequest("paymentToken must name a saved card from the prefills", parameter: "instrument.paymentToken"))
            }
            return .success(.creditCard(paymentToken: token))
        case "NewCreditCard":
            return .success(.newCreditCard(enabledPaymentDetailsConsentCheckbox: value["enabledPaymentDetailsConsentCheckbox"]?.boolValue ?? true))
        case "ApplePay":
            return .success(.applePay)
        case "GooglePay":
            return .success(.googlePay)
        default:
            return .failure(.badRequest("instrument.type must be Swish, CreditCard, NewCreditCard, ApplePay or GooglePay",
                                        parameter: "instrument.type"))
        }
    }

    /// `+`, country code and number: 8 to 15 digits, nothing else (seed 002).
    public static func isValidMSISDN(_ s: String) -> Bool {
        s.hasPrefix("+") && (8...15).contains(s.utf8.count - 1) && s.utf8.dropFirst().allSatisfy { (0x30...0x39).contains($0) }
    }
}

/// The instruments a session offers, as pushed in `PaymentSessionFetched`.
public enum AvailableInstruments {
    /// A native wallet of another platform than the client's is offered as web-based:
    /// the payment menu can still take it.
    public static func from(_ output: PaymentOutput, device: ClientDevice) -> [JSONValue] {
        var list: [JSONValue] = []
        for method in output.methods {
            switch method.name {
            case "Swish":
                list.append(["type": "Swish", "prefills": .array(method.prefills)])
            case "CreditCard":
                list.append(["type": "CreditCard", "prefills": .array(method.prefills)])
                list.append(["type": "NewCreditCard"])
            case "ApplePay", "GooglePay":
                list.append(device.acceptsNativeWallet(method.name) ? ["type": .string(method.name)]
                                                                    : ["type": "WebBased", "paymentMethod": .string(method.name)])
            default:
                list.append(["type": "WebBased", "paymentMethod": .string(method.name)])
            }
        }
        return list
    }
}
