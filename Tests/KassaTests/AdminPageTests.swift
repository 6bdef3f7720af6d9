import Foundation
import KassaCore
import Testing
@testable import kassa

/// The admin page in real headless Chromium: search, timeline, live updates.
@Suite("Admin page (Chromium)")
struct AdminPageTests {
    @Test("a failed 3-D Secure payment as a waterfall: bars as long as their calls, markers, the first problem in plain words, a token-free share link, JSON and CSV exports")
    func waterfallInChromium() async throws {
        let t = try TestNode()
        let screenshot = try DemoPageTests.screenshotPath("admin-waterfall.png")
        let (status, output) = try await runPython([testsPath("python/admin_waterfall.py"), t.base, "test-key", "test-admin", screenshot])
        #expect(status == 0, "\(output.suffix(3000))")
        #expect(FileManager.default.fileExists(atPath: screenshot))
        await t.stop()
    }

    @Test("finds a payment by payee reference, shows its timeline with the problem highlighted, and follows a live one")
    func timelineInChromium() async throws {
        let t = try TestNode()
        // A payment with a declined attempt, then a successful one.
        let (done, s) = try await t.sessions.fetched(client: ["platform": "ios", "wallets": ["ApplePay"]])
        try await s.send(["id": "1", "type": "attempt", "instrument": ["type": "CreditCard", "paymentToken": "sim-card-declined"]])
        _ = try await s.event(.sessionProblemOccurred)
        var accepted = false
        for i in 0..<50 where !accepted {
            try await s.send(["id": .string("a\(i)"), "type": "attempt", "instrument": ["type": "ApplePay"]])
            accepted = try await s.ack("a\(i)")["ok"] == true
        }
        _ = try await s.event(.showWallet)
        try await s.send(["id": "p", "type": "wallet", "payload": "c2lt"])
        _ = try await s.event(.paymentSessionComplete)
        let payeeReference = try #require(try t.node.store.session(id: done.id)?.payeeReference)

        // A second one, still waiting for the payer when the page opens it.
        let (live, ls) = try await t.sessions.fetched(client: ["platform": "android", "wallets": ["GooglePay"]])

        let control = t.dir.file("control")
        let screenshot = testsPath("../test-artifacts/admin-timeline.png")
        try FileManager.default.createDirectory(atPath: testsPath("../test-artifacts"), withIntermediateDirectories: true)
        let page = Task { try await runPython([testsPath("python/admin_timeline.py"), t.base, "test-admin", payeeReference, live.id, control, screenshot]) }
        // When the page follows the live session, complete it: the page must show it without a reload.
        let deadline = Date().addingTimeInterval(30)
        while !FileManager.default.fileExists(atPath: control) && Date() < deadline { try await Task.sleep(for: .milliseconds(50)) }
        try await ls.payByWallet("GooglePay", id: "go")
        _ = try await ls.event(.paymentSessionComplete)
        let (status, output) = try await page.value
        #expect(status == 0, "\(output.suffix(3000))")
        #expect(FileManager.default.fileExists(atPath: screenshot))
        await t.stop()
    }
}
