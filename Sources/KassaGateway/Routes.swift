import KassaEdge

extension Gateway {
    /// Every HTTP route the gateway serves, in one table.
    static let routes: [Route] = [
        // Operations
        Route(.GET, "/healthz", "health") { g, c in await g.healthz(c) },
        Route(.GET, "/readyz", "ready") { g, c in await g.readyz(c) },
    ]
}
