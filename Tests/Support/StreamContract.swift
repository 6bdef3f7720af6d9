import Foundation
import KassaCore
@testable import KassaGateway

/// The stream's contract as served (`/asyncapi.yaml`, schemas.yaml spliced in), and a check of any
/// frame against it. Every frame the tests' stream client reads goes through `check`, so the
/// document cannot drift from what the gateway sends.
enum StreamContract {
    /// The served document as JSON (PyYAML turns it into JSON once per test run).
    static let document: JSONValue = {
        let yaml = String(decoding: Assets.asyncAPI, as: UTF8.self)
        let script = "import json, sys, yaml; print(json.dumps(yaml.safe_load(sys.stdin.read())))"
        do {
            let child = try ChildProcess(["python3", "-c", script], environment: ProcessInfo.processInfo.environment)
            child.write(yaml)
            child.closeInput()
            guard child.waitForExit(seconds: 30) == 0 else { fatalError("asyncapi.yaml did not load: \(child.stderrText)") }
            return try JSONValue.parse(child.stdoutText)
        } catch {
            fatalError("asyncapi.yaml did not load: \(error)")
        }
    }()

    static func message(_ name: String) -> JSONValue? { document["components"]?["messages"]?[name]?["payload"] }

    /// The message a frame from the gateway must match: its event type, or the answer.
    static func check(serverFrame frame: JSONValue) -> [String] {
        let name: String
        if frame["seq"] != nil, let type = frame["type"]?.stringValue { name = type } else { name = "CommandAnswer" }
        guard let schema = message(name) else { return ["no message \(name) in asyncapi.yaml for \(frame.text.prefix(200))"] }
        return violations(frame, schema, at: "\(name)")
    }

    static func check(command frame: JSONValue) -> [String] {
        let name = "command-" + (frame["type"]?.stringValue ?? "")
        guard let schema = message(name) else { return ["no message \(name) in asyncapi.yaml"] }
        return violations(frame, schema, at: name)
    }

    // MARK: The JSON Schema subset the documents use

    static func resolve(_ schema: JSONValue) -> JSONValue {
        guard let ref = schema["$ref"]?.stringValue, ref.hasPrefix("#/") else { return schema }
        var node = document
        for part in ref.dropFirst(2).split(separator: "/") { node = node[String(part)] ?? .null }
        return resolve(node)
    }

    static func violations(_ value: JSONValue, _ raw: JSONValue, at path: String) -> [String] {
        let schema = resolve(raw)
        guard case .object = schema else { return [] }
        var found: [String] = []
        func fail(_ why: String) { found.append("\(path): \(why), got \(value.text.prefix(120))") }

        if value == .null, schema["nullable"]?.boolValue == true { return [] }
        if let type = schema["type"]?.stringValue, !matches(value, type: type) { fail("not \(type)"); return found }
        if let options = schema["enum"]?.arrayValue, !options.contains(value) { fail("not one of \(JSONValue.array(options).text)") }
        if let constant = schema["const"], constant != value { fail("not \(constant.text)") }
        if let all = schema["allOf"]?.arrayValue { for s in all { found += violations(value, s, at: path) } }
        if let any = schema["anyOf"]?.arrayValue, !any.contains(where: { violations(value, $0, at: path).isEmpty }) { fail("matches no anyOf") }
        if let one = schema["oneOf"]?.arrayValue {
            let count = one.filter { violations(value, $0, at: path).isEmpty }.count
            if count != 1 { fail("matches \(count) of oneOf, not exactly 1") }
        }
        if case .object(let members) = value {
            for name in schema["required"]?.arrayValue?.compactMap(\.stringValue) ?? [] where members[name] == nil { fail("lacks \(name)") }
            let properties = schema["properties"]?.objectValue ?? [:]
            for (name, member) in members {
                if let property = properties[name] { found += violations(member, property, at: "\(path).\(name)"); continue }
                switch schema["additionalProperties"] {
                case .bool(false)?: fail("has \(name), which is not allowed")
                case let extra? where extra.objectValue != nil: found += violations(member, extra, at: "\(path).\(name)")
                default: break
                }
            }
        }
        if case .array(let items) = value, let itemSchema = schema["items"] {
            for (i, item) in items.enumerated() { found += violations(item, itemSchema, at: "\(path)[\(i)]") }
        }
        if case .string(let text) = value {
            if let min = schema["minLength"]?.intValue, text.count < min { fail("shorter than \(min)") }
            if let max = schema["maxLength"]?.intValue, text.count > max { fail("longer than \(max)") }
            if let pattern = schema["pattern"]?.stringValue, text.range(of: pattern, options: .regularExpression) == nil { fail("does not match \(pattern)") }
        }
        if case .number(let n) = value {
            if let min = schema["minimum"]?.doubleValue, n < min { fail("below \(min)") }
            if let max = schema["maximum"]?.doubleValue, n > max { fail("above \(max)") }
        }
        return found
    }

    static func matches(_ value: JSONValue, type: String) -> Bool {
        switch (type, value) {
        case ("object", .object), ("array", .array), ("string", .string), ("boolean", .bool), ("number", .number), ("null", .null): true
        case ("integer", .number(let n)): n.rounded() == n
        default: false
        }
    }
}
