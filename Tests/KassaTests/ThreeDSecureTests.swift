import Foundation
import KassaCore
import KassaSimulator
import KassaUpstream
import Testing
@testable import kassa

/// 3-D Secure as a browser does it, over real HTTP: the method page in a hidden frame, the
/// issuer's challenge page posting the cRes to Kassa's notification URL.
@Suite("3-D Secure: method step and notification URL")
struct ThreeDSecureTests {
    let client = UpstreamClient()

    func postForm(_ url: String, _ fields: [String: JSONValue]) async throws -> UpstreamResponse {
        let body = fields.sorted { $0.key < $1.key }
            .map { PaymentURLHelper.percentEncode($0.key) + "=" + PaymentURLHelper.percentEncode($0.value.stringValue ?? "") }
            .joined(separator: "&")
        return try await client.send(UpstreamRequest(method: "POST", url: url, headers: [("Content-Type", "application/x-www-form-urlencoded")],
                                                     body: Array(body.utf8)))
    }

    /// The `action` and hidden `cres` of the challenge page's first form (Approve).
    static func approveForm(_ html: String) -> (action: String, cres: String)? {
        func attribute(_ name: String, after marker: String) -> String? {
            guard let start = html.range(of: marker) else { return nil }
            let rest = html[start.upperBound...]
            guard let open = rest.range(of: name + "=\"") else { return nil }
            let value = rest[open.upperBound...].prefix { $0 != "\"" }
            return String(value).replacingOccurrences(of: "&amp;", with: "&")
        }
        guard let action = attribute("action", after: "<form"), let cres = attribute("value", after: "name=\"cres\"") else { return nil }
        return (action, cres)
    }

    @Test("the method page runs in the client's frame and its result reaches create-authentication; the issuer's cRes comes back through Kassa")
    func methodAndNotification() async throws {
        let t = try TestNode()
        let (session, stream) = try await t.sessions.fetched()
        try await stream.send(["id": "1", "type": "attempt", "instrument": ["type": "CreditCard", "paymentToken": "sim-card-method"]])
        let method = try await stream.event(.run3DSecureMethod)
        let url = try #require(method["data"]?["url"]?.stringValue)
        let form = try #require(method["data"]?["form"]?.objectValue)
        #expect(method["data"]?["method"] == "POST" && method["data"]?["timeoutMs"] == 10_000)
        // The hidden frame: the issuer's method page loads, so the client answers completed.
        let page = try await postForm(url, form)
        #expect(page.status == 200 && page.header("content-type")?.hasPrefix("text/html") == true)
        let answer = try await t.sessions.command(session, "3ds-method", ["completed": true])
        #expect(answer.status == 202)

        let show = try await stream.event(.show3DSecure)
        let create = try #require(t.simulator.received("sessions.authentication").first)
        #expect(create["methodCompletionIndicator"] == "Y")
        let notification = try #require(create["notificationUrl"]?.stringValue)
        #expect(notification.hasPrefix(t.base + "/v1/sessions/\(session.id)/3ds/notification/"), "Kassa's own URL, not upstream's")

        // The client shows the challenge: its frame posts the creq to the issuer's page.
        let challenge = try await postForm(try #require(show["data"]?["url"]?.stringValue),
                                           try #require(show["data"]?["form"]?.objectValue))
        let approve = try #require(Self.approveForm(challenge.text), "\(challenge.text)")
        #expect(approve.action == notification)
        // The payer approves: the issuer's page posts the cRes to Kassa, and the payment goes on.
        let verified = try await postForm(approve.action, ["cres": .string(approve.cres)])
        #expect(verified.status == 200 && verified.text.contains("Verified"))
        _ = try await stream.event(.dismiss3DSecure)
        _ = try await stream.event(.paymentSessionComplete)
        #expect(t.simulator.received("sessions.authentication.complete").first?["cRes"] == .string(approve.cres))

        // Only the URL Kassa gave is taken, and only with a cRes.
        let forged = try await postForm(t.base + "/v1/sessions/\(session.id)/3ds/notification/" + String(repeating: "0", count: 32), ["cres": "x"])
        #expect(forged.status == 404)
        let empty = try await postForm(notification, [:])
        #expect(empty.status == 400)
        await t.stop()
    }

    @Test("a client that never answers the method step: after the timeout create-authentication goes on with U")
    func methodTimeout() async throws {
        let t = try TestNode { $0.threeDSMethodTimeoutMs = 300 }
        let (_, stream) = try await t.sessions.fetched()
        try await stream.send(["id": "1", "type": "attempt", "instrument": ["type": "CreditCard", "paymentToken": "sim-card-method"]])
        _ = try await stream.event(.run3DSecureMethod)
        _ = try await stream.event(.show3DSecure)
        #expect(t.simulator.received("sessions.authentication").first?["methodCompletionIndicator"] == "U")
        // A method answer now is too late: refused, nothing changes.
        try await stream.send(["id": "late", "type": "3dsMethod", "completed": true])
        #expect(try await stream.ack("late")["problem"]?["status"] == 409)
        await t.stop()
    }

    @Test("a card whose issuer has no method page: no method step, upstream's indicator is sent")
    func upstreamIndicator() async throws {
        let t = try TestNode()
        let (_, stream) = try await t.sessions.fetched()
        try await stream.send(["id": "1", "type": "attempt", "instrument": ["type": "CreditCard", "paymentToken": "sim-card-challenge"]])
        _ = try await stream.event(.show3DSecure)
        #expect(!stream.types.contains(PushType.run3DSecureMethod.rawValue))
        #expect(t.simulator.received("sessions.authentication").first?["methodCompletionIndicator"] == "U")
        await t.stop()
    }
}
