import KassaCore

/// What the gateway needs to know beyond the edge's limits.
public struct GatewayConfiguration: Sendable {
    /// Merchant API keys; a request must carry one of them.
    public var apiKeys: [String]
    /// Token for the support API and admin page.
    public var adminToken: String
    /// Base URL of Swedbank Pay (or the simulator), e.g. `https://api.externalintegration.payex.com`.
    public var upstreamURL: String
    /// Bearer token for upstream calls.
    public var upstreamToken: String
    /// Hosts a client-supplied upstream URL may point at.
    public var allowedUpstreamHosts: [String]
    /// Milliseconds allowed for one upstream exchange.
    public var upstreamTimeoutMs: Int
    /// Set as `payeeInfo.payeeId` on payment orders that lack one.
    public var payeeID: String?
    /// `appID`s listed in the Apple app site association.
    public var appleAppIDs: [String]
    /// The back-link page the iOS payment url helper redirects to (seed 000).
    public var iosTrampolineURL: String
    /// The gateway's public `https://host` for payment urls; empty: taken from each request's Host header.
    public var publicBaseURL: String

    /// How a session retries upstream calls, and its deadline for one call.
    public var sessionRetry: RetryPolicy
    /// Milliseconds a client may take to run the 3-D Secure method step before Kassa goes on without it.
    public var threeDSMethodTimeoutMs = 10_000
    /// A live push's `at` to the microsecond rather than the millisecond (`--push-stamps us`, for
    /// benchmarks: a millisecond stamp makes a 2 ms push latency err by up to half).
    public var pushStampsInMicroseconds = false
    /// Milliseconds between get-payment polls (the SDKs use 2 000).
    public var sessionPollIntervalMs: Int
    /// Upstream calls in flight at once, and as many connections kept for reuse
    /// (`--upstream-connections`). A call beyond them waits for one to finish: set below the calls
    /// in flight at a busy moment (calls a second × upstream latency), calls queue. With fewer
    /// connections kept than open, every call past the kept number paid a TCP and TLS handshake
    /// and left a closed socket behind.
    public var upstreamConnections = GatewayConfiguration.defaultUpstreamConnections
    public static let defaultUpstreamConnections = 1_024
    /// The breaker each upstream host starts with.
    public var circuitBreaker = CircuitBreaker()
    /// Requests per second allowed from one client address (0: no limit), and per API key.
    public var rateLimitPerIP: Double = 0
    public var rateLimitPerKey: Double = 0
    /// Failed authentications allowed per minute from one client address, and against one
    /// credential (a session, the admin token, an API key); then 429 (0: no limit).
    public var authFailuresPerMinute = 30
    /// Sessions one node holds at most (0: no limit); creating more is refused with 503.
    public var maxSessions = 0
    /// Seconds an ended session stays in memory once no stream follows it; after that it is
    /// read back from the store if asked for (memory stays flat however many sessions end).
    public var endedSessionMemorySeconds: Double = 30
    /// Seconds a session waiting for the payer's choice, with nothing in flight and no stream
    /// following it, stays in memory; after that a command or a subscription reads it back
    /// from the store and upstream (an abandoned checkout does not hold memory for ever).
    public var waitingSessionMemorySeconds: Double = 120
    /// Seal client tokens: the first seals new ones, every one opens them (rotation). Nodes that
    /// share them can pick up each other's sessions. Empty: the node keeps one of its own in a
    /// file beside its database (see `KassaNode`), so what it sealed opens after its restarts.
    /// Each must be at least 32 bytes with 8 distinct characters.
    public var clusterSecrets: [String] = []
    /// The edge speaks only https and wss (set from the edge's configuration): the scheme of
    /// URLs built from a request's Host header when `publicBaseURL` is empty.
    public var edgeServesTLS = false
    /// The Apple Pay merchant identifier (`merchant.com.example`) given to iOS clients with the wallet sheet.
    public var applePayMerchantID: String?
    /// Post the SDKs' beacons to a session's `event-logging` operation when it offers one.
    public var eventLogging = true
    /// Seconds a client token is valid after its session was created: the absolute maximum.
    public var clientTokenMaxAgeSeconds = 86_400
    /// Seconds a client token stays valid once its session has ended (long enough to show the
    /// outcome and resume a dropped stream, short enough that a leaked token soon opens nothing).
    public var clientTokenAfterEndSeconds = 900
    /// Web origins (`https://shop.example`) whose pages may call the client endpoints and open
    /// session streams; empty: none but Kassa's own pages. The merchant and admin endpoints never answer CORS.
    public var corsOrigins: [String] = []
    /// The other nodes' base URLs (`http://node2:8080`), which the support API asks too; they
    /// share this node's admin token. Empty: this node's own events only.
    public var peers: [String] = []
    /// How this node marks its events and sessions when it has peers.
    public var nodeName = "kassa"
    /// Where spans go over OTLP/HTTP (`http://collector:4318/v1/traces`); nil: no traces.
    public var otlpEndpoint: String?

    /// Production's trampoline (swedbank-pay-sdk-mobile-example-merchant examples/node.js/routes/ios-universal-link-callback.js);
    /// test setups pass `stageTrampolineURL` (seed 000) with `--ios-trampoline-url`.
    public static let defaultTrampolineURL = "https://ecom.payex.com/externalresourcehost/trampoline"
    public static let stageTrampolineURL = "https://ecom.stage.payex.com/externalresourcehost/trampoline"

    public init(apiKeys: [String], adminToken: String, upstreamURL: String, upstreamToken: String,
                allowedUpstreamHosts: [String] = [], upstreamTimeoutMs: Int = 10_000, payeeID: String? = nil,
                appleAppIDs: [String] = [], iosTrampolineURL: String = GatewayConfiguration.defaultTrampolineURL,
                publicBaseURL: String = "", sessionRetry: RetryPolicy = RetryPolicy(), sessionPollIntervalMs: Int = 2_000) {
        self.sessionRetry = sessionRetry
        self.sessionPollIntervalMs = sessionPollIntervalMs
        self.payeeID = payeeID
        self.appleAppIDs = appleAppIDs
        self.iosTrampolineURL = iosTrampolineURL
        self.publicBaseURL = publicBaseURL
        self.apiKeys = apiKeys
        self.adminToken = adminToken
        self.upstreamURL = upstreamURL
        self.upstreamToken = upstreamToken
        self.allowedUpstreamHosts = allowedUpstreamHosts
        self.upstreamTimeoutMs = upstreamTimeoutMs
    }
}
