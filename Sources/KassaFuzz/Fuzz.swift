import Glibc
import KassaCore
import KassaEdge
import KassaLoad
import KassaUpstream

/// libFuzzer targets, one per parser that reads untrusted input, and `planted` for redaction's
/// promise (nothing planted survives). Built and run by
/// bench/fuzz.sh (`-sanitize=fuzzer`, KASSA_FUZZ defined); KASSA_FUZZ_TARGET picks the
/// target. Each checks a property, so a wrong answer fails like a crash does.
enum FuzzTarget: String, CaseIterable {
    case json, jsoninput, timestamp, redaction, redactjson, planted, sessiontoken, paymentoutput, instrument, path, scenario, numbers, clientdevice, httpanswer, href

    static let selected: FuzzTarget = {
        let name = getenv("KASSA_FUZZ_TARGET").map { String(cString: $0) } ?? ""
        guard let target = FuzzTarget(rawValue: name) else {
            fatalError("set KASSA_FUZZ_TARGET to one of \(FuzzTarget.allCases.map(\.rawValue).joined(separator: ", "))")
        }
        return target
    }()

    static let streamPattern = PathPattern("/v1/sessions/{id}/stream")
    static let plainHrefs = PlainHrefReader(origins: ["https://api.example.com:443", "http://127.0.0.1:8080"].compactMap { UpstreamURL($0) })

    func run(_ bytes: [UInt8]) {
        let text = String(decoding: bytes, as: UTF8.self)
        switch self {
        case .json:
            // Whatever parses writes back to text that parses to the same value.
            let value = try? JSONValue.parse(bytes)
            if let value {
                guard (try? JSONValue.parse(value.bytes)) == value else { fatalError("JSON round trip differs: \(value.text)") }
            }
            // Stepping over a document refuses exactly what parsing it refuses.
            let skipped = (try? JSONReader.read(bytes) { r throws(JSONParseError) in try r.skip() }) != nil
            guard skipped == (value != nil) else { fatalError("JSONReader \(skipped ? "took" : "refused") what parse did not: \(text)") }
        case .jsoninput:
            _ = JSONInput.parse(bytes)
        case .timestamp:
            if let ms = Timestamp.parseISO8601(text), (0...253_402_300_799_999).contains(ms) {
                guard Timestamp.parseISO8601(Timestamp.iso8601(ms: ms)) == ms else { fatalError("timestamp round trip differs for \(text)") }
            }
            if let us = Timestamp.parseISO8601Microseconds(text), (0...253_402_300_799_999_999).contains(us) {
                guard Timestamp.parseISO8601Microseconds(Timestamp.iso8601(us: us)) == us else { fatalError("µs timestamp round trip differs for \(text)") }
            }
        case .numbers:
            // Every whole number a client writes as text: in range when read, and read back the same.
            for range: ClosedRange<Int64> in [0...1_000_000_000_000, 1...1_000, 0...Int64.max, 0...ClientNumber.maxTimeMs] {
                if let value = ClientNumber.whole(text, in: range) {
                    guard range.contains(value), ClientNumber.whole(String(value), in: range) == value else { fatalError("\(text) read as \(value)") }
                }
            }
            if let ms = ClientNumber.timeMs(text), !(0...ClientNumber.maxTimeMs).contains(ms) { fatalError("time \(text) out of range") }
            if let length = EdgeServer.contentLength(text), length < 0 || String(length).utf8.count > 18 { fatalError("length \(text)") }
        case .clientdevice:
            // A device from a client: every number it keeps is inside its documented range.
            if let value = try? JSONValue.parse(bytes), let device = try? ClientDevice.parse(value).get() {
                if let offset = device.timeZoneOffset, !(-840...840).contains(offset) { fatalError("time zone offset \(offset)") }
                _ = device.json.bytes
            }
        case .redaction:
            // Values found by their shape: a second pass changes nothing.
            guard Redaction.redactValues(text) == Redaction.scanValues(text) else { fatalError("the shortcut skipped a value in \(text)") }
            let values = Redaction.redactText(text)
            guard values == Redaction.redactTextInFull(text) else { fatalError("the text's hints skipped a stage for \(text)") }
            guard Redaction.redactText(values) == values else { fatalError("value redaction is not stable: \(values)") }
            let tokens = Redaction.redactTokens(text)
            var run = 0
            for c in tokens.utf8 {
                let hex = (0x30...0x39).contains(c) || (0x41...0x46).contains(c) || (0x61...0x66).contains(c)
                run = hex ? run + 1 : 0
                if run >= 40 { fatalError("a token survived redaction: \(tokens)") }
            }
            let query = Redaction.redactURLQuery(text)
            guard Redaction.redactURLQuery(query) == query else { fatalError("query redaction is not stable: \(query)") }
            _ = Redaction.redact(.string(text))
        case .redactjson:
            // A body redacted as bytes reads back as its parsed tree redacted (and a tree written redacted in one
            // pass as its redacted tree written); what is no document gives nil.
            let tree = try? JSONValue.parse(bytes)
            let redacted = Redaction.redactJSON(bytes)
            if let tree {
                guard let redacted, (try? JSONValue.parse(redacted)) == Redaction.redact(tree) else {
                    fatalError("byte redaction differs from the tree's for \(text)")
                }
                guard Redaction.redactedBytes(tree) == Redaction.redact(tree).bytes else {
                    fatalError("the one-pass writer differs from the redacted tree's bytes for \(text)")
                }
            } else if let redacted {
                // Not a document for the parser, yet walked: only a repeated member name (which the
                // parser refuses and the walk redacts each time by its name) may stay in what it wrote.
                do { _ = try JSONValue.parse(redacted) } catch {
                    guard error.reason.hasPrefix("duplicate member") else { fatalError("byte redaction wrote no document for \(text): \(error)") }
                }
            }
        case .planted:
            // A value the rules must find, set apart from whatever the input puts either side of it, and a
            // secret under a secret's name and in a secret query parameter: none survives any way of redacting.
            guard bytes.count >= 2 else { return }
            let (choice, depth) = (Int(bytes[0]), Int(bytes[1]) % 4)
            let context = Array(bytes.dropFirst(2)).split(separator: 0, maxSplits: 1, omittingEmptySubsequences: false)
            let before = String(decoding: context.first ?? [], as: UTF8.self), after = String(decoding: context.dropFirst().first ?? [], as: UTF8.self)
            let value = Redaction.plantableValues[choice % Redaction.plantableValues.count]
            let separator = Redaction.plantSeparators[choice / Redaction.plantableValues.count % Redaction.plantSeparators.count]
            let name = Redaction.plantSecretNames[choice % Redaction.plantSecretNames.count]
            let plants = Redaction.plantings(value: value, separators: (separator, separator), secret: "s3cr3t0b5e55ed", secretName: name,
                                             before: before, after: after) { member in
                (0..<depth).reduce(member) { inner, level in level % 2 == 0 ? .array([.string(after), inner]) : ["x": inner, "note": .string(before)] }
            }
            for (planted, document) in plants {
                if let leak = Redaction.leak(of: planted, in: document) { fatalError("\(planted) survived in \(document.text): \(leak)") }
            }
        case .sessiontoken:
            // Nothing made up verifies under a secret the input cannot know.
            _ = SessionToken.header(text)
            if SessionToken.open(text, keys: fuzzTokenKeys) != nil { fatalError("a forged token opened: \(text)") }
        case .paymentoutput:
            let parsed = (try? JSONValue.parse(bytes)).flatMap(PaymentOutput.parse)
            guard PaymentOutput.decode(bytes) == parsed else { fatalError("PaymentOutput.decode differs from parse for \(text)") }
            if let output = parsed {
                _ = AvailableInstruments.from(output, device: ClientDevice())
                var machine = PaymentSessionMachine(sessionURL: "https://sim.example/psp/paymentsessions/x")
                _ = machine.start()
                _ = machine.received(output, for: SessionCall(rel: "view-paymentsession", method: "GET", href: "https://sim.example/psp/paymentsessions/x"))
            }
        case .instrument:
            if let value = try? JSONValue.parse(bytes) { _ = Instrument.parse(value) }
        case .href:
            // An href read without libcurl is read exactly as libcurl reads it.
            if let plain = Self.plainHrefs.read(text), plain != UpstreamURL(text) {
                fatalError("\(text) read as \(plain); libcurl reads \(String(describing: UpstreamURL(text)))")
            }
        case .path:
            if let parameters = Self.streamPattern.match(text) {
                guard let id = parameters["id"], !id.isEmpty, !id.contains("/") else { fatalError("bad match for \(text)") }
            }
        case .httpanswer:
            // The load client's answers: never whole before their last byte, and a body is what its length says.
            if case .complete(let answer, let keepAlive) = HTTPResponseReader.read(bytes, atClose: false) {
                guard answer.body.count <= bytes.count, (100...599).contains(answer.status) else { fatalError("answer \(answer.status) from \(text)") }
                guard !keepAlive || bytes.isEmpty || HTTPResponseReader.read(Array(bytes.dropLast()), atClose: false) == .incomplete || answer.body.isEmpty
                else { fatalError("an answer read whole one byte early: \(text)") }
            }
            _ = HTTPResponseReader.read(bytes, atClose: true)
        case .scenario:
            if let scenario = try? Scenario(json: text) {
                guard scenario.clients >= 1, scenario.clients <= Scenario.maxClients,
                      scenario.durationSeconds != nil || scenario.iterations != nil else { fatalError("an unbounded scenario was accepted") }
            }
        }
    }
}

#if KASSA_FUZZ
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    FuzzTarget.selected.run(data.map { Array(UnsafeBufferPointer(start: $0, count: size)) } ?? [])
    return 0
}

/// libFuzzer's driver (its own `main` is not linked: SwiftPM points `main` at `KassaFuzz_main`).
@_extern(c, "LLVMFuzzerRunDriver")
func runFuzzerDriver(_ argc: UnsafeMutablePointer<Int32>, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>,
                     _ callback: @convention(c) (UnsafePointer<UInt8>?, Int) -> Int32) -> Int32

/// The executable's entry point: hands over to libFuzzer.
@_cdecl("KassaFuzz_main")
public func fuzzMain(_ argc: Int32, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>) -> Int32 {
    var count = argc
    var arguments: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>? = argv
    return runFuzzerDriver(&count, &arguments) { data, size in fuzzOneInput(data, size) }
}
#else
@main
struct FuzzUsage {
    static func main() {
        print("Fuzz targets are built with -sanitize=fuzzer: run bench/fuzz.sh")
    }
}
#endif

/// Keys from a secret no fuzz input can know.
let fuzzTokenKeys = try! TokenKeys(secrets: ["fuzz-secret-never-in-any-input-0123456789"])
