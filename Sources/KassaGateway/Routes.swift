import KassaEdge
import KassaCore

extension Gateway {
    /// Every HTTP route the gateway serves, with who may call it, in one table.
    static let table: [(access: Access, route: Route<Gateway>)] = [
        // Merchant Backend API (seed 000)
        (.merchantKey, Route(.GET, "/swedbank-pay-mobile/", "merchant.root", now: { _, _ in MerchantAPI.rootDocument })),
        (.merchantKey, Route(.POST, "/swedbank-pay-mobile/consumers", "merchant.consumers") { g, c in try await g.merchant.consumers(c) }),
        (.merchantKey, Route(.POST, "/swedbank-pay-mobile/paymentorders", "merchant.paymentorders") { g, c in try await g.merchant.paymentOrders(c) }),
        (.merchantKey, Route(.PATCH, "/swedbank-pay-mobile/paymentorders/{id}/setInstrument", "merchant.setinstrument") { g, c in try await g.merchant.setInstrument(c) }),
        (.merchantKey, Route(.PATCH, "/swedbank-pay-mobile/patch", "merchant.patch") { g, c in try await g.merchant.patch(c) }),
        (.open, Route(.GET, "/swedbank-pay-mobile/sdk-callback/android-intent", "merchant.android-intent") { g, c in try g.merchant.androidIntent(c) }),
        (.open, Route(.GET, "/swedbank-pay-mobile/sdk-callback/ios-universal-link", "merchant.ios-universal-link") { g, c in try g.merchant.iosUniversalLink(c) }),
        (.open, Route(.GET, "/.well-known/apple-app-site-association", "apple-app-site-association", now: { g, c in g.merchant.appleAppSiteAssociation(c) })),

        // Sessions API (Kassa's own, versioned)
        (.apiKey, Route(.POST, "/v1/sessions", "sessions.create") { g, c in try await g.createSession(c) }),
        (.clientToken, Route(.GET, "/v1/sessions/{id}", "sessions.get") { g, c in try await g.getSession(c) }),
        (.clientToken, Route(.POST, "/v1/sessions/{id}/attempts", "sessions.attempt") { g, c in try await g.sessionCommand(c, type: .attempt) }),
        (.clientToken, Route(.POST, "/v1/sessions/{id}/abort", "sessions.abort") { g, c in try await g.sessionCommand(c, type: .abort) }),
        (.clientToken, Route(.POST, "/v1/sessions/{id}/retry", "sessions.retry") { g, c in try await g.sessionCommand(c, type: .retry) }),
        (.clientToken, Route(.POST, "/v1/sessions/{id}/fallback", "sessions.fallback") { g, c in try await g.sessionCommand(c, type: .fallback) }),
        (.clientToken, Route(.POST, "/v1/sessions/{id}/3ds", "sessions.3ds") { g, c in try await g.sessionCommand(c, type: .threeDSecure) }),
        (.clientToken, Route(.POST, "/v1/sessions/{id}/wallet", "sessions.wallet") { g, c in try await g.sessionCommand(c, type: .wallet) }),
        (.clientToken, Route(.POST, "/v1/sessions/{id}/3ds-method", "sessions.3ds-method") { g, c in try await g.sessionCommand(c, type: .threeDSecureMethod) }),
        // The issuer posts the challenge's cRes here; the tag in the path is what authorizes it.
        (.open, Route(.POST, "/v1/sessions/{id}/3ds/notification/{tag}", "sessions.3ds-notification") { g, c in try await g.threeDSNotification(c) }),
        (.clientToken, Route(.POST, "/v1/sessions/{id}/app-launch-failed", "sessions.app-launch-failed") { g, c in try await g.sessionCommand(c, type: .appLaunchFailed) }),
        // The WebSocket GET /v1/sessions/{id}/stream is accepted by SessionService+Stream.swift (an upgrade, not a route).

        // Support API (admin token) and the admin page
        (.admin, Route(.GET, "/v1/admin/events", "admin.events") { g, c in try await g.support.events(c) }),
        (.admin, Route(.GET, "/v1/admin/sessions", "admin.sessions") { g, c in try await g.support.sessions(c) }),
        (.admin, Route(.GET, "/v1/admin/sessions/{id}/timeline", "admin.timeline") { g, c in try await g.support.timeline(c) }),
        (.open, Route(.GET, "/admin/", "admin.page", now: { _, _ in .asset(Assets.adminHTML, contentType: "text/html; charset=utf-8") })),
        (.open, Route(.GET, "/admin/admin.js", "admin.page", now: { _, _ in .asset(Assets.adminJS, contentType: "text/javascript; charset=utf-8") })),
        (.open, Route(.GET, "/admin/admin.css", "admin.page", now: { _, _ in .asset(Assets.adminCSS, contentType: "text/css; charset=utf-8") })),
        // The WebSocket GET /v1/admin/stream (live events for the admin page) is accepted in Gateway+AdminStream.swift.

        // The host page of the payment menu (ShowPaymentMenu's url is a script, not a page)
        (.open, Route(.GET, "/menu/", "menu.page") { g, c in try g.paymentMenuPage(c) }),
        (.open, Route(.GET, "/menu/menu.js", "menu.page", now: { _, _ in .asset(Assets.menuJS, contentType: "text/javascript; charset=utf-8") })),

        // The demo checkout page (a thin client to copy)
        (.open, Route(.GET, "/demo/", "demo", now: { _, _ in
            .asset(Assets.demoHTML, contentType: "text/html; charset=utf-8", policy: Assets.demoContentSecurityPolicy) })),
        (.open, Route(.GET, "/demo/demo.js", "demo", now: { _, _ in .asset(Assets.demoJS, contentType: "text/javascript; charset=utf-8") })),
        (.open, Route(.GET, "/demo/demo.css", "demo", now: { _, _ in .asset(Assets.demoCSS, contentType: "text/css; charset=utf-8") })),

        // The client kit: the browser library, its types, and the stream's contract (CORS for --cors-origins)
        (.open, Route(.GET, "/kassa.js", "client-kit", now: { _, _ in .asset(Assets.kassaJS, contentType: "text/javascript; charset=utf-8") })),
        (.open, Route(.GET, "/kassa.d.ts", "client-kit", now: { _, _ in .asset(Assets.kassaTypes, contentType: "application/typescript; charset=utf-8") })),
        (.open, Route(.GET, "/asyncapi.yaml", "client-kit", now: { _, _ in HTTPResponse(status: 200, contentType: "application/yaml", body: Assets.asyncAPI) })),

        // Operations
        (.open, Route(.GET, "/healthz", "health", now: { g, c in g.healthz(c) })),
        (.open, Route(.GET, "/readyz", "ready") { g, c in try await g.readyz(c) }),
        (.open, Route(.GET, "/metrics", "metrics") { g, c in g.metricsPage(c) }),
        (.open, Route(.GET, "/v1/session-states", "session-states", now: { _, _ in .json(SessionStates.json) })),
        (.open, Route(.GET, "/openapi.yaml", "openapi", now: { _, _ in HTTPResponse(status: 200, contentType: "application/yaml", body: Assets.openAPI) })),
    ]

    /// Who may call each route, by route name. Routes that share a name (a page and its script)
    /// must share their access: the table is refused at start-up otherwise.
    static let access: [String: Access] = Dictionary(table.map { ($0.route.name, $0.access) }, uniquingKeysWith: { first, other in
        precondition(first == other, "routes that share a name must share their access")
        return first
    })
}
