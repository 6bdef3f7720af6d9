import Foundation
import KassaCore
import KassaSimulator
import Testing
@testable import kassa

/// The payment menu as a door both ways: back to a native attempt, to another menu, and
/// instrument mode, each customized upstream as the SDKs do it.
@Suite("Payment menu: both ways, and instrument mode")
struct PaymentMenuTests {
    @Test("after ShowPaymentMenu the client goes back to Swish: the menu is reset (customize with nulls), then the attempt completes")
    func backToSwish() async throws {
        let t = try TestNode()
        let (_, stream) = try await t.sessions.fetched()
        try await stream.send(["id": "m", "type": "fallback", "restrictToInstruments": ["Vipps"]])
        _ = try await stream.event(.showPaymentMenu)
        try await stream.send(["id": "s", "type": "attempt", "instrument": ["type": "Swish", "msisdn": "+46739000001"]])
        #expect(try await stream.ack("s")["ok"] == true, "an attempt from the open menu is taken")
        _ = try await stream.event(.paymentSessionComplete)
        #expect(t.simulator.received("sessions.customize") == [
            ["paymentMethod": nil, "restrictToPaymentMethods": ["Vipps"]],
            ["paymentMethod": nil, "restrictToPaymentMethods": nil],
        ])
        await t.stop()
    }

    func waitForMenus(_ stream: Stream, _ count: Int) async throws {
        let menu = PushType.showPaymentMenu.rawValue
        while stream.types.filter({ $0 == menu }).count < count {
            _ = try await stream.read { $0["type"]?.stringValue == menu }
        }
    }

    @Test("after a new card's menu the client chooses another menu, then instrument mode; each is customized and shown")
    func menuToMenu() async throws {
        let t = try TestNode()
        let (_, stream) = try await t.sessions.fetched()
        try await stream.send(["id": "1", "type": "attempt", "instrument": ["type": "NewCreditCard", "enabledPaymentDetailsConsentCheckbox": false]])
        _ = try await stream.event(.showPaymentMenu)
        try await stream.send(["id": "2", "type": "fallback", "restrictToInstruments": ["Vipps", "Swish"]])
        #expect(try await stream.ack("2")["ok"] == true)
        try await waitForMenus(stream, 2)
        try await stream.send(["id": "3", "type": "fallback", "instrument": "Vipps"])
        #expect(try await stream.ack("3")["ok"] == true)
        try await waitForMenus(stream, 3)
        let menus = stream.received.filter { $0["type"]?.stringValue == PushType.showPaymentMenu.rawValue }
        #expect(menus.count == 3)
        #expect(menus.last?["data"]?["instrumentMode"] == "Vipps")
        #expect(t.simulator.received("sessions.customize") == [
            ["paymentMethod": "CreditCard", "restrictToPaymentMethods": nil, "hideStoredPaymentOptions": true, "showConsentAffirmation": false],
            ["paymentMethod": nil, "restrictToPaymentMethods": ["Vipps", "Swish"]],
            ["paymentMethod": "Vipps", "restrictToPaymentMethods": nil],
        ])
        // An instrument mode for a method the session never offered is refused.
        try await stream.send(["id": "4", "type": "fallback", "instrument": "Bitcoin"])
        #expect(try await stream.ack("4")["problem"]?["status"] == 422)
        await t.stop()
    }
}
