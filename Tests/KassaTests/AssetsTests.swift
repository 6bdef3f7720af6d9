import Foundation
import KassaCore
import KassaUpstream
import Testing
@testable import kassa

/// The OpenAPI document and the pages are files under `Resources/`, embedded in the binary.
@Suite("Assets: embedded files, linted, served under a strict CSP")
struct AssetsTests {
    @Test("openapi.yaml validates, every script parses, and no page has inline script, style or handlers")
    func lint() async throws {
        let (status, output) = try await runPython([testsPath("python/check_assets.py"), testsPath("../Sources/KassaGateway/Resources")])
        #expect(status == 0, "\(output)")
        #expect(output.contains("0 failures"))
    }

    @Test("what is served is the file on disk, and pages carry a CSP without 'unsafe-inline'")
    func served() async throws {
        let t = try TestNode()
        let client = UpstreamClient()
        let files = ["/kassa.js": "kassa.js", "/kassa.d.ts": "kassa.d.ts", "/admin/": "admin.html", "/admin/admin.js": "admin.js",
                     "/admin/admin.css": "admin.css", "/demo/": "demo.html", "/demo/demo.js": "demo.js", "/demo/demo.css": "demo.css"]
        for (path, file) in files {
            let response = try await client.send(UpstreamRequest(url: t.base + path))
            #expect(response.status == 200, "\(path)")
            let onDisk = try Data(contentsOf: URL(fileURLWithPath: testsPath("../Sources/KassaGateway/Resources/" + file)))
            #expect(response.body == Array(onDisk), "\(path) is \(file) as embedded")
            guard path.hasSuffix("/") || path.hasSuffix(".js") else { continue }
            let csp = try #require(response.header("content-security-policy"), "\(path)")
            #expect(!csp.contains("unsafe-inline") && !csp.contains("unsafe-eval"))
            #expect(csp.contains("connect-src 'self'") && csp.contains("frame-ancestors 'none'") && csp.contains("script-src 'self'"))
            #expect(response.header("x-content-type-options") == "nosniff")
        }
        // The API documents are served with schemas.yaml in place of their marker line, once.
        let shared = try String(contentsOfFile: testsPath("../Sources/KassaGateway/Resources/schemas.yaml"), encoding: .utf8)
        let sharedText = shared.trimmingCharacters(in: .newlines)
        for (path, file) in ["/openapi.yaml": "openapi.yaml", "/asyncapi.yaml": "asyncapi.yaml"] {
            let served = try await client.send(UpstreamRequest(url: t.base + path)).text
            let onDisk = try String(contentsOfFile: testsPath("../Sources/KassaGateway/Resources/" + file), encoding: .utf8)
            #expect(onDisk.contains("    # kassa:shared-schemas\n") && !served.contains("# kassa:shared-schemas"), "\(path)")
            #expect(served.components(separatedBy: sharedText).count == 2, "\(path) holds schemas.yaml once")
        }
        await t.stop()
    }
}
