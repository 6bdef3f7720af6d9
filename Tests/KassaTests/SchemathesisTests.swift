import Foundation
import Testing

/// Property-based HTTP testing against the gateway's own `/openapi.yaml`:
/// schemathesis (from pip) generates requests, including hostile ones, and
/// fails on any 5xx or any answer that breaks the description.
@Suite("OpenAPI conformance (schemathesis)")
struct SchemathesisTests {
    @Test("no 5xx and no response outside the schema")
    func conformance() async throws {
        let t = try TestNode()
        let url = t.base + "/openapi.yaml"
        let (status, output) = try await onThread { () -> (Int32, String) in
            let process = Process()
            process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
            // The same python3 `make test` installed schemathesis into; its console script may not be on PATH.
            process.arguments = ["python3", "-c", "import sys; from schemathesis.cli import schemathesis; sys.argv[0] = 'st'; sys.exit(schemathesis())",
                                 "run", url, "-H", "Your-Api-Key: test-key", "--seed", "20261122", "-n", "40",
                                 "--checks", "not_a_server_error,status_code_conformance,content_type_conformance,response_schema_conformance",
                                 "--request-timeout", "10", "--suppress-health-check=filter_too_much"]
            var environment = ProcessInfo.processInfo.environment
            environment["NO_COLOR"] = "1"
            environment["SCHEMATHESIS_HOOKS"] = nil
            process.environment = environment
            let pipe = Pipe()
            process.standardOutput = pipe
            process.standardError = pipe
            try process.run()
            let data = pipe.fileHandleForReading.readDataToEndOfFile()
            process.waitUntilExit()
            return (process.terminationStatus, String(decoding: data, as: UTF8.self))
        }
        #expect(status == 0, "schemathesis found failures:\n\(output.suffix(4000))")
        #expect(output.contains("passed"))
        #expect(!output.contains("Server error"))
        await t.stop()
    }
}
