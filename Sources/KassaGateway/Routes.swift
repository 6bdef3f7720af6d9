import KassaEdge

extension Gateway {
    /// Every HTTP route the gateway serves, in one table.
    static let routes: [Route<Gateway>] = [
        // Merchant Backend API (seed 000)
        Route(.GET, "/swedbank-pay-mobile/", "merchant.root") { g, c in await g.merchantRoot(c) },
        Route(.POST, "/swedbank-pay-mobile/consumers", "merchant.consumers") { g, c in await g.merchantConsumers(c) },
        Route(.POST, "/swedbank-pay-mobile/paymentorders", "merchant.paymentorders") { g, c in await g.merchantPaymentOrders(c) },
        Route(.PATCH, "/swedbank-pay-mobile/paymentorders/{id}/setInstrument", "merchant.setinstrument") { g, c in await g.merchantSetInstrument(c) },
        Route(.GET, "/swedbank-pay-mobile/sdk-callback/android-intent", "merchant.android-intent") { g, c in await g.merchantAndroidIntent(c) },
        Route(.GET, "/swedbank-pay-mobile/sdk-callback/ios-universal-link", "merchant.ios-universal-link") { g, c in await g.merchantIOSUniversalLink(c) },
        Route(.GET, "/.well-known/apple-app-site-association", "apple-app-site-association") { g, c in await g.appleAppSiteAssociation(c) },

        // Sessions API (Kassa's own, versioned)
        Route(.POST, "/v1/sessions", "sessions.create") { g, c in await g.createSession(c) },
        Route(.GET, "/v1/sessions/{id}", "sessions.get") { g, c in await g.getSession(c) },
        Route(.POST, "/v1/sessions/{id}/attempts", "sessions.attempt") { g, c in await g.sessionCommand(c, type: "attempt") },
        Route(.POST, "/v1/sessions/{id}/abort", "sessions.abort") { g, c in await g.sessionCommand(c, type: "abort") },
        Route(.POST, "/v1/sessions/{id}/retry", "sessions.retry") { g, c in await g.sessionCommand(c, type: "retry") },
        Route(.POST, "/v1/sessions/{id}/fallback", "sessions.fallback") { g, c in await g.sessionCommand(c, type: "fallback") },
        Route(.POST, "/v1/sessions/{id}/3ds", "sessions.3ds") { g, c in await g.sessionCommand(c, type: "3ds") },
        Route(.POST, "/v1/sessions/{id}/app-launch-failed", "sessions.app-launch-failed") { g, c in await g.sessionCommand(c, type: "appLaunchFailed") },
        // The WebSocket GET /v1/sessions/{id}/stream is accepted in Gateway+Stream.swift (an upgrade, not a route).

        // Support API (admin token) and the admin page
        Route(.GET, "/v1/admin/events", "admin.events") { g, c in await g.adminEvents(c) },
        Route(.GET, "/v1/admin/sessions", "admin.sessions") { g, c in await g.adminSessions(c) },
        Route(.GET, "/v1/admin/sessions/{id}/timeline", "admin.timeline") { g, c in await g.adminTimeline(c) },
        Route(.GET, "/admin/", "admin.page") { _, _ in .asset(Assets.adminHTML, contentType: "text/html; charset=utf-8") },
        Route(.GET, "/admin/admin.js", "admin.page") { _, _ in .asset(Assets.adminJS, contentType: "text/javascript; charset=utf-8") },
        Route(.GET, "/admin/admin.css", "admin.page") { _, _ in .asset(Assets.adminCSS, contentType: "text/css; charset=utf-8") },
        // The WebSocket GET /v1/admin/stream (live events for the admin page) is accepted in Gateway+AdminStream.swift.

        // The demo checkout page (a thin client to copy)
        Route(.GET, "/demo/", "demo") { _, _ in .asset(Assets.demoHTML, contentType: "text/html; charset=utf-8") },
        Route(.GET, "/demo/demo.js", "demo") { _, _ in .asset(Assets.demoJS, contentType: "text/javascript; charset=utf-8") },
        Route(.GET, "/demo/demo.css", "demo") { _, _ in .asset(Assets.demoCSS, contentType: "text/css; charset=utf-8") },

        // Operations
        Route(.GET, "/healthz", "health") { g, c in await g.healthz(c) },
        Route(.GET, "/readyz", "ready") { g, c in await g.readyz(c) },
        Route(.GET, "/metrics", "metrics") { g, c in await g.metricsPage(c) },
        Route(.GET, "/openapi.yaml", "openapi") { _, _ in HTTPResponse(status: 200, contentType: "application/yaml", body: Assets.openAPI) },
    ]
}
