import KassaEdge

extension Simulator {
    /// Every route of the simulator, in one table. Names are what fault rules match.
    static let routes: [Route<Simulator>] = [
        Route(.GET, "/", "root") { s, _ in .json(["service": "kassa-simulator", "baseUrl": .string(s.baseURL)]) },
        Route(.POST, "/psp/consumers", "consumers.create") { s, c in s.createConsumerSession(c) },
        Route(.POST, "/psp/paymentorders", "paymentorders.create") { s, c in s.createPaymentOrder(c) },
        Route(.GET, "/psp/paymentorders/{id}", "paymentorders.get") { s, c in s.getPaymentOrder(c) },
        Route(.PATCH, "/psp/paymentorders/{id}", "paymentorders.patch") { s, c in s.patchPaymentOrder(c) },
        // PaymentSession API
        Route(.GET, "/psp/paymentsessions/{token}", "sessions.get") { s, c in s.getSession(c) },
        Route(.POST, "/psp/paymentsessions/{token}/prepare", "sessions.prepare") { s, c in s.preparePayment(c) },
        Route(.POST, "/psp/paymentsessions/{token}/methods/{method}/expand", "sessions.expand") { s, c in s.expandMethod(c) },
        Route(.POST, "/psp/paymentsessions/{token}/methods/{method}/attempts", "sessions.attempt") { s, c in s.startAttempt(c) },
        Route(.POST, "/psp/paymentsessions/{token}/methods/{method}/fail", "sessions.fail") { s, c in s.failAttempt(c) },
        Route(.POST, "/psp/paymentsessions/{token}/methods/{method}/payload", "sessions.payload") { s, c in s.attemptPayload(c) },
        Route(.GET, "/psp/paymentsessions/{token}/payment", "sessions.payment") { s, c in s.getPayment(c) },
        Route(.POST, "/psp/paymentsessions/{token}/authentication", "sessions.authentication") { s, c in s.createAuthentication(c) },
        Route(.POST, "/psp/paymentsessions/{token}/authentication/complete", "sessions.authentication.complete") { s, c in s.completeAuthentication(c) },
        Route(.POST, "/psp/paymentsessions/{token}/attempts/acknowledge", "sessions.acknowledge") { s, c in s.acknowledgeFailedAttempt(c) },
        Route(.POST, "/psp/paymentsessions/{token}/abort", "sessions.abort") { s, c in s.abortPayment(c) },
        Route(.POST, "/psp/paymentsessions/{token}/customize", "sessions.customize") { s, c in s.customizePayment(c) },
        Route(.GET, "/psp/paymentsessions/{token}/menu", "sessions.menu") { s, c in s.paymentMenuScript(c) },
        Route(.POST, "/psp/paymentsessions/{token}/events", "sessions.events") { s, c in s.eventLogging(c) },
        // The simulated issuer's 3-D Secure pages (open: a browser posts to them).
        Route(.POST, "/sim/acs/method", "sim.acs.method") { s, c in s.acsMethodPage(c) },
        Route(.POST, "/sim/acs/challenge", "sim.acs.challenge") { s, c in s.acsChallengePage(c) },
        // Test control: read or replace the fault rules.
        Route(.GET, "/sim/faults", "sim.faults") { s, _ in s.faultsDocument() },
        Route(.PUT, "/sim/faults", "sim.faults.set") { s, c in s.replaceFaults(c) },
    ]
}
