/// The session stream's vocabulary, defined once for everything that speaks it: the gateway,
/// the load client, the Swift client library (`KassaClient`) and the tests name pushes, commands
/// and problems through these types. `asyncapi.yaml` describes the same frames for other languages.

/// What the gateway pushes to a client: the Mobile SDK's PaymentSession callbacks, by name.
public enum PushType: String, Sendable, CaseIterable, Codable {
    case paymentSessionFetched = "PaymentSessionFetched"
    case showPaymentMenu = "ShowPaymentMenu"
    case launchClientApp = "LaunchClientApp"
    /// The 3-D Secure method step: post `form` to `url` in a hidden frame, then send `3dsMethod`.
    case run3DSecureMethod = "Run3DSecureMethod"
    case show3DSecure = "Show3DSecure"
    /// A wallet attempt: open the wallet sheet with `data`, then send `wallet` with its payload or a cancel.
    case showWallet = "ShowWallet"
    case dismiss3DSecure = "Dismiss3DSecure"
    case paymentSessionComplete = "PaymentSessionComplete"
    case paymentSessionCanceled = "PaymentSessionCanceled"
    case sessionProblemOccurred = "SessionProblemOccurred"
    case sdkProblemOccurred = "SdkProblemOccurred"

    /// After one of these the session pushes nothing more.
    public var isTerminal: Bool { self == .paymentSessionComplete || self == .paymentSessionCanceled }
    public var isProblem: Bool { self == .sessionProblemOccurred || self == .sdkProblemOccurred }
}

/// A client command's wire `type`, in a WebSocket frame or as the HTTP command route's name.
public enum CommandType: String, Sendable, CaseIterable, Codable {
    case attempt, abort, retry, fallback
    case threeDSecure = "3ds"
    /// The hidden frame of `Run3DSecureMethod` loaded (`completed: true`) or failed (`false`).
    case threeDSecureMethod = "3dsMethod"
    /// The wallet sheet's result: `{"payload": "…"}` (base64, as the wallet gives it) or `{"canceled": true}`.
    case wallet
    case appLaunchFailed
    /// Answered with a pong; never reaches the session.
    case ping
}

/// The problems the gateway itself reports in `SdkProblemOccurred`, named as the SDKs name theirs.
public enum SdkProblemType: String, Sendable, CaseIterable {
    case paymentSessionAPIRequestFailed = "PaymentSessionAPIRequestFailed"
    case paymentSession3DSecureLoadFailed = "PaymentSession3DSecureLoadFailed"
    case paymentSessionEndReached = "PaymentSessionEndReached"
    case abortPaymentNotAllowed = "AbortPaymentNotAllowed"
}
