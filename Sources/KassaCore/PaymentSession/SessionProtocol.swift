/// PaymentSession operation and task rels (seed 002; the SDKs' operation and task names); the
/// client-facing vocabulary (pushes, commands, problems) is in KassaProtocol.
/// Upstream may send others: `PaymentOutput` keeps rels as strings and compares with these.
public enum OperationRel: String, Sendable, CaseIterable {
    case viewPaymentSession = "view-paymentsession"
    case preparePayment = "prepare-payment"
    case abortPayment = "abort-payment"
    case customizePayment = "customize-payment"
    case eventLogging = "event-logging"
    case expandMethod = "expand-method"
    case startPaymentAttempt = "start-payment-attempt"
    case getPayment = "get-payment"
    case createAuthentication = "create-authentication"
    case completeAuthentication = "complete-authentication"
    case redirectPayer = "redirect-payer"
    case acknowledgeFailedAttempt = "acknowledge-failed-attempt"
    case failPaymentAttempt = "fail-payment-attempt"
    case viewPayment = "view-payment"
    case attemptPayload = "attempt-payload"
    // Task rels.
    case launchClientApp = "launch-client-app"
    case scaRedirect = "sca-redirect"
    case scaMethodRequest = "sca-method-request"
    case walletSDK = "wallet-sdk"
}

extension PaymentSessionMachine.Command {
    /// A command from the wire (an HTTP body or a WebSocket frame); the problem names what is wrong.
    public static func parse(_ type: String, _ body: JSONValue) -> Result<Self, Problem> {
        switch CommandType(rawValue: type) {
        case .attempt:
            return Instrument.parse(body["instrument"]).map { .attempt($0) }
        case .abort: return .success(.abort)
        case .retry: return .success(.retry)
        case .fallback:
            if let mode = body["instrument"], mode != .null {
                guard let name = mode.stringValue, !name.isEmpty, name.utf8.count <= 64 else {
                    return .failure(.badRequest("instrument must name one payment method (instrument mode)", parameter: "instrument"))
                }
                return .success(.instrumentMode(paymentMethod: name))
            }
            let restrict = body["restrictToInstruments"]
            if let restrict, restrict != .null {
                guard let list = restrict.arrayValue?.compactMap(\.stringValue), list.count == restrict.arrayValue?.count, list.count <= 20 else {
                    return .failure(.badRequest("restrictToInstruments must be an array of payment method names", parameter: "restrictToInstruments"))
                }
                return .success(.fallback(restrictTo: list))
            }
            return .success(.fallback(restrictTo: nil))
        case .threeDSecure:
            if let failure = body["loadFailed"]?.stringValue { return .success(.threeDSecureLoadFailed(reason: failure)) }
            guard let cres = body["cres"]?.stringValue else { return .failure(.badRequest("cres is required", parameter: "cres")) }
            return .success(.threeDSecureResult(cres: cres))
        case .threeDSecureMethod:
            guard let completed = body["completed"]?.boolValue else {
                return .failure(.badRequest("completed must be true (the method page loaded) or false", parameter: "completed"))
            }
            return .success(.threeDSecureMethodResult(completed: completed))
        case .wallet:
            if body["canceled"]?.boolValue == true { return .success(.walletResult(payload: nil)) }
            guard let payload = body["payload"]?.stringValue, !payload.isEmpty, payload.utf8.count <= 65_536 else {
                return .failure(.badRequest("payload must be the wallet's payment data (base64, up to 64 KiB), or send canceled: true",
                                            parameter: "payload"))
            }
            return .success(.walletResult(payload: payload))
        case .appLaunchFailed:
            return .success(.appLaunchFailed)
        case .ping, nil:
            let names = CommandType.allCases.map(\.rawValue).joined(separator: ", ")
            return .failure(.badRequest("unknown command type \(type.prefix(40)); use one of \(names)", parameter: "type"))
        }
    }
}
