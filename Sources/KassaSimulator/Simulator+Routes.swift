import KassaEdge

extension Simulator {
    /// Every route of the simulator, in one table. Names are what fault rules match.
    static let routes: [Route<Simulator>] = [
        Route(.GET, "/", "root") { s, _ in .json(["service": "kassa-simulator", "baseUrl": .string(s.baseURL)]) },
        Route(.POST, "/psp/consumers", "consumers.create") { s, c in s.createConsumerSession(c) },
        Route(.POST, "/psp/paymentorders", "paymentorders.create") { s, c in s.createPaymentOrder(c) },
        Route(.GET, "/psp/paymentorders/{id}", "paymentorders.get") { s, c in s.getPaymentOrder(c) },
        Route(.PATCH, "/psp/paymentorders/{id}", "paymentorders.patch") { s, c in s.patchPaymentOrder(c) },
        // Test control: read or replace the fault rules.
        Route(.GET, "/sim/faults", "sim.faults") { s, _ in s.faultsDocument() },
        Route(.PUT, "/sim/faults", "sim.faults.set") { s, c in s.replaceFaults(c) },
    ]
}
