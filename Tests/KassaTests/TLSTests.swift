import Foundation
import KassaCore
import KassaUpstream
import Testing
@testable import kassa

/// TLS through libwebsockets, with a self-signed certificate the test makes.
@Suite("TLS")
struct TLSTests {
    @Test("with a certificate and key the port serves https and wss, and refuses plain http")
    func httpsAndWss() async throws {
        let dir = TempDirectory()
        defer { dir.cleanup() }
        let cert = dir.file("cert.pem"), key = dir.file("key.pem")
        let (status, output) = try await runCommand(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                                                     "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
                                                     "-keyout", key, "-out", cert])
        #expect(status == 0, "\(output)")
        let t = try TestNode(edge: { $0.tlsCertificatePath = cert; $0.tlsKeyPath = key })
        let https = "https://127.0.0.1:\(t.node.port)"
        let client = UpstreamClient()
        let health = try await client.send(UpstreamRequest(url: https + "/healthz", caCertificatePath: cert))
        #expect(health.status == 200)

        // Without trusting the certificate, curl refuses it; plain http gets no answer.
        await #expect(throws: UpstreamError.self) { _ = try await client.send(UpstreamRequest(url: https + "/healthz")) }
        let plain = try? await client.send(UpstreamRequest(url: "http://127.0.0.1:\(t.node.port)/healthz", totalTimeoutMs: 2_000))
        #expect(plain?.status != 200)

        let created = try await client.send(UpstreamRequest(method: "POST", url: https + "/v1/sessions", headers: [("Your-Api-Key", "test-key"), ("Content-Type", "application/json")],
                                                           body: (["paymentOrder": SessionClient.order()] as JSONValue).bytes, caCertificatePath: cert))
        #expect(created.status == 201)
        let doc = try JSONValue.parse(created.body)
        let stream = "wss://127.0.0.1:\(t.node.port)" + (doc["streamUrl"]?.stringValue ?? "")
        let (wssStatus, wssOutput) = try await runPython([testsPath("python/wss_handshake.py"), stream, cert, doc["clientToken"]?.stringValue ?? ""])
        #expect(wssStatus == 0, "\(wssOutput)")
        #expect(wssOutput.contains("PaymentSessionFetched"))
        await t.stop()
    }

    @Test("a missing key is refused at start with a clear message")
    func missingKey() throws {
        #expect {
            _ = try TestNode(edge: { $0.tlsCertificatePath = "/nonexistent/cert.pem" })
        } throws: { error in "\(error)".contains("TLS needs both a readable certificate and a readable private key") }
    }
}
