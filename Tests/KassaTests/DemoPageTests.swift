import Foundation
import Testing
@testable import kassa

/// The demo checkout page in real headless Chromium (playwright from pip,
/// Debian's chromium): a complete Swish flow with a dropped connection on the way.
@Suite("Demo checkout page (Chromium)")
struct DemoPageTests {
    @Test("the page creates a session, pays with Swish, resumes after a drop, and shows every state once")
    func swishInChromium() async throws {
        let t = try TestNode()
        let screenshot = try Self.screenshotPath("demo-checkout.png")
        let (status, output) = try await runPython([testsPath("python/demo_checkout.py"), t.base, "test-key", screenshot])
        #expect(status == 0, "\(output.suffix(3000))")
        #expect(FileManager.default.fileExists(atPath: screenshot), "the run saves a screenshot")
        await t.node.store.eventLog.flush()
        let opens = try t.node.store.eventLog.events().filter { $0.kind == "ws.open" }
        #expect(opens.count >= 2, "the page reconnected after the drop")
        #expect(opens.contains { $0.data?["since"]?.intValue ?? 0 >= 1 }, "and resumed with since")
        await t.stop()
    }

    @Test("the page pays by card with 3-D Secure: the method step in a hidden frame, the issuer's challenge in a frame, no cRes typed")
    func cardWithChallengeInChromium() async throws {
        let t = try TestNode()
        let screenshot = try Self.screenshotPath("demo-card3ds.png")
        let (status, output) = try await runPython([testsPath("python/demo_card3ds.py"), t.base, "test-key", screenshot])
        #expect(status == 0, "\(output.suffix(3000))")
        let authentication = try #require(t.simulator.received("sessions.authentication").first)
        #expect(authentication["methodCompletionIndicator"] == "Y", "the page reported the method frame loaded")
        #expect(authentication["client"]?["userAgent"]?.stringValue?.contains("Chrome") == true, "the browser's own data went upstream")
        await t.node.store.eventLog.flush()
        let commands = try t.node.store.eventLog.events().filter { $0.kind == "client.command" }.map(\.summary)
        #expect(commands.contains("issuer: 3ds"), "the cRes came from the issuer's page: \(commands)")
        await t.stop()
    }

    @Test("the page opens the payment menu in Kassa's host page, then goes back to Swish and completes")
    func menuBothWaysInChromium() async throws {
        let t = try TestNode()
        let screenshot = try Self.screenshotPath("demo-menu.png")
        let (status, output) = try await runPython([testsPath("python/demo_menu.py"), t.base, "test-key", screenshot])
        #expect(status == 0, "\(output.suffix(3000))")
        #expect(t.simulator.received("sessions.customize") == [
            ["paymentMethod": nil, "restrictToPaymentMethods": ["Vipps"]],
            ["paymentMethod": nil, "restrictToPaymentMethods": nil],
        ], "the menu was reset before the Swish attempt")
        let order = try #require(t.simulator.received("sessions.attempt").first)
        #expect(order["msisdn"] == "+46739000001")
        await t.stop()
    }

    @Test("kassa.js through a proxy that cuts the connection: typed gap-free events, resume from lastSeq with backoff, commands answered or refused with their problem, a stop at the end")
    func kassaJSInChromium() async throws {
        let t = try TestNode()
        let (status, output) = try await runPython([testsPath("python/kassa_js.py"), t.base, "test-key"])
        #expect(status == 0, "\(output.suffix(3000))")
        await t.node.store.eventLog.flush()
        let opens = try t.node.store.eventLog.events().filter { $0.kind == "ws.open" }
        #expect(opens.filter { $0.data?["since"]?.intValue ?? 0 >= 1 }.count >= 2, "the library resumed with since after each cut")
        await t.stop()
    }

    /// Where a run's screenshot goes (test-artifacts/, kept out of git), with any old one removed.
    static func screenshotPath(_ name: String) throws -> String {
        let artifacts = URL(fileURLWithPath: testsPath("../test-artifacts"))
        try FileManager.default.createDirectory(at: artifacts, withIntermediateDirectories: true)
        let path = artifacts.appendingPathComponent(name).path
        try? FileManager.default.removeItem(atPath: path)
        return path
    }
}
