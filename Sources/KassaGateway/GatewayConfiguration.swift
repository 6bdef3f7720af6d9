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

    public init(apiKeys: [String], adminToken: String, upstreamURL: String, upstreamToken: String,
                allowedUpstreamHosts: [String] = [], upstreamTimeoutMs: Int = 10_000) {
        self.apiKeys = apiKeys
        self.adminToken = adminToken
        self.upstreamURL = upstreamURL
        self.upstreamToken = upstreamToken
        self.allowedUpstreamHosts = allowedUpstreamHosts
        self.upstreamTimeoutMs = upstreamTimeoutMs
    }
}
