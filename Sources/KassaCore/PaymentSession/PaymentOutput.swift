/// What every PaymentSession API call answers (the SDKs' PaymentOutputModel),
/// reduced to what the session needs to decide its next step.
public struct PaymentOutput: Sendable, Equatable {
    public struct Expectation: Sendable, Equatable {
        public var name: String
        public var type: String
        public var value: JSONValue
    }

    public struct Task: Sendable, Equatable {
        public var rel: String
        public var href: String
        public var method: String
        public var contentType: String?
        public var expects: [Expectation]

        public func expectation(_ name: String) -> Expectation? { expects.first { $0.name == name } }

        /// The expectations as one object, name to value: the form a task's page is posted with,
        /// or the values a wallet sheet is opened with.
        public var expectedValues: JSONValue {
            .object(Dictionary(expects.map { ($0.name, $0.value) }, uniquingKeysWith: { _, last in last }))
        }
    }

    public struct Operation: Sendable, Equatable {
        public var rel: String
        public var href: String
        public var method: String
        public var next: Bool
        public var contentType: String?
        public var tasks: [Task]
        public var expects: [Expectation]
        /// The payment method whose operations listed it; nil for top-level ones.
        public var paymentMethod: String?

        public func expectation(_ name: String) -> Expectation? { expects.first { $0.name == name } }
    }

    public struct Method: Sendable, Equatable {
        public var name: String
        /// The method's `prefills` array as the answer wrote it (empty when there is none). Only
        /// the instrument list a client is shown reads it, and most answers are never shown: it
        /// is parsed then, not with every answer.
        public var prefillsJSON: [UInt8]
        public var operations: [Operation]

        public var prefills: [JSONValue] { prefillsJSON.isEmpty ? [] : (try? JSONValue.parse(prefillsJSON))?.arrayValue ?? [] }

        /// The same prefills however the answer spaced and ordered them.
        public static func == (a: Method, b: Method) -> Bool {
            a.name == b.name && a.operations == b.operations && a.prefills == b.prefills
        }
    }

    public struct UpstreamProblem: Sendable, Equatable {
        public var type: String
        public var title: String?
        public var status: Int?
        public var detail: String?
        public var operation: Operation?

        public var json: JSONValue {
            var o: [String: JSONValue] = ["type": .string(type)]
            if let title { o["title"] = .string(title) }
            if let status { o["status"] = .number(Double(status)) }
            if let detail { o["detail"] = .string(detail) }
            return .object(o)
        }
    }

    public var operations: [Operation]
    public var methods: [Method]
    public var problem: UpstreamProblem?
    public var completeUrl: String?
    public var cancelUrl: String?
    public var paymentUrl: String?
    public var instrumentModePaymentMethod: String?
    /// The session's culture, which the SDKs send back with each attempt.
    public var culture: String?

    /// The same output without the methods' prefills.
    public var withoutPrefills: PaymentOutput {
        var copy = self
        for i in copy.methods.indices { copy.methods[i].prefillsJSON = [] }
        return copy
    }

    /// Top-level operations followed by every method's, as the SDKs build their candidate list.
    /// Built at its final size (the machine asks for it several times per answer).
    public var allOperations: [Operation] {
        let fromMethods = methods.reduce(0) { $0 + $1.operations.count }
        guard fromMethods > 0 else { return operations }
        var all: [Operation] = []
        all.reserveCapacity(operations.count + fromMethods)
        all.append(contentsOf: operations)
        for method in methods { all.append(contentsOf: method.operations) }
        return all
    }

    /// If any operation is marked `next`, only those count (the SDKs' "prioritised operations").
    var onlyNextCount: Bool {
        func anyNext(_ operations: [Operation]) -> Bool { operations.indices.contains { operations[$0].next } }
        return anyNext(operations) || methods.indices.contains { anyNext(methods[$0].operations) }
    }

    /// The operations that count (see `onlyNextCount`), in `allOperations`' order.
    public var candidates: [Operation] {
        let all = allOperations
        return onlyNextCount ? all.filter(\.next) : all
    }

    /// The first of `candidates` with this rel (and method), found without building that list
    /// and compared in place, by index: the machine asks about a dozen rels an answer, and
    /// `first(where:)` copied each operation it passed (seven references retained and released).
    public func operation(_ rel: OperationRel, method: String? = nil) -> Operation? {
        let nextOnly = onlyNextCount
        let name = rel.rawValue
        func found(in operations: [Operation]) -> Operation? {
            for i in operations.indices where (!nextOnly || operations[i].next) && operations[i].rel == name
                && (method == nil || operations[i].paymentMethod == method) {
                return operations[i]
            }
            return nil
        }
        if let operation = found(in: operations) { return operation }
        for i in methods.indices {
            if let operation = found(in: methods[i].operations) { return operation }
        }
        return nil
    }

    public func method(_ name: String) -> Method? { methods.first { $0.name == name } }

    /// Parses a PaymentOutputModel document; nil when it is not one.
    public static func parse(_ document: JSONValue) -> PaymentOutput? {
        guard case .object = document else { return nil }
        let session = document["paymentSession"]
        let methods: [Method] = (session?["methods"]?.arrayValue ?? []).compactMap { m in
            guard let name = m["paymentMethod"]?.stringValue else { return nil }
            return Method(name: shared(name), prefillsJSON: m["prefills"].flatMap { $0.arrayValue == nil ? nil : $0.bytes } ?? [],
                          operations: (m["operations"]?.arrayValue ?? []).compactMap { parseOperation($0, method: name) })
        }
        let urls = session?["urls"]
        return PaymentOutput(operations: (document["operations"]?.arrayValue ?? []).compactMap { parseOperation($0, method: nil) },
                             methods: methods, problem: document["problem"].flatMap(parseProblem),
                             completeUrl: urls?["completeUrl"]?.stringValue, cancelUrl: urls?["cancelUrl"]?.stringValue,
                             paymentUrl: urls?["paymentUrl"]?.stringValue,
                             instrumentModePaymentMethod: session?["instrumentModePaymentMethod"]?.stringValue,
                             culture: session?["culture"]?.stringValue)
    }

    static func parseProblem(_ p: JSONValue) -> UpstreamProblem? {
        guard let type = p["type"]?.stringValue else { return nil }
        return UpstreamProblem(type: type, title: p["title"]?.stringValue, status: p["status"]?.intValue,
                               detail: p["detail"]?.stringValue, operation: p["operation"].flatMap { parseOperation($0, method: nil) })
    }

    static func parseExpectations(_ value: JSONValue?) -> [Expectation] {
        (value?.arrayValue ?? []).compactMap { e in
            guard let name = e["name"]?.stringValue else { return nil }
            return Expectation(name: name, type: e["type"]?.stringValue ?? "string", value: e["value"] ?? .null)
        }
    }

    static func parseOperation(_ o: JSONValue, method: String?) -> Operation? {
        guard let rel = o["rel"]?.stringValue, let href = o["href"]?.stringValue else { return nil }
        let tasks: [Task] = (o["tasks"]?.arrayValue ?? []).compactMap { t in
            guard let rel = t["rel"]?.stringValue, let href = t["href"]?.stringValue else { return nil }
            return Task(rel: shared(rel), href: href, method: shared(t["method"]?.stringValue ?? "GET"),
                        contentType: t["contentType"]?.stringValue.map(shared), expects: parseExpectations(t["expects"]))
        }
        return Operation(rel: shared(rel), href: href, method: shared((o["method"]?.stringValue ?? "GET").uppercased()),
                         next: o["next"]?.boolValue ?? false, contentType: o["contentType"]?.stringValue.map(shared),
                         tasks: tasks, expects: parseExpectations(o["expects"]), paymentMethod: method.map(shared))
    }

    /// The names every output repeats (operation rels, methods, content types): one copy for
    /// all sessions instead of one per session, since a session holds its output while it waits.
    static let sharedStrings: [String: String] = {
        let names = OperationRel.allCases.map(\.rawValue) + ["application/json", "application/x-www-form-urlencoded",
                     "GET", "POST", "PATCH", "Swish", "CreditCard", "ApplePay", "GooglePay", "Vipps", "WebBased"]
        return Dictionary(uniqueKeysWithValues: names.map { ($0, $0) })
    }()

    /// A string of up to 15 UTF-8 bytes is held inline, with no storage to share: not looked up.
    static func shared(_ s: String) -> String { s.utf8.count <= 15 ? s : sharedStrings[s] ?? s }

    // MARK: From the bytes

    /// `parse` of the document `body` holds, read from its bytes: only what the output keeps is
    /// built, instead of a tree of the whole answer that is taken apart and freed (most of an
    /// answer's members are for other readers). Nil exactly when `parse` of the parsed document
    /// would be (the `paymentoutput` fuzz target holds the two to each other).
    public static func decode(_ body: [UInt8]) -> PaymentOutput? {
        let output = try? JSONReader.read(body) { r throws(JSONParseError) -> PaymentOutput? in
            var output = PaymentOutput(operations: [], methods: [], problem: nil, completeUrl: nil, cancelUrl: nil,
                                       paymentUrl: nil, instrumentModePaymentMethod: nil, culture: nil)
            let isObject = try r.object { r, name throws(JSONParseError) in
                switch name {
                case "operations": output.operations = try readOperations(&r)
                case "problem": output.problem = parseProblem(try r.value())
                case "paymentSession":
                    _ = try r.object { r, name throws(JSONParseError) in
                        switch name {
                        case "methods": output.methods = try readMethods(&r)
                        case "instrumentModePaymentMethod": output.instrumentModePaymentMethod = try r.string()
                        case "culture": output.culture = try r.string()
                        case "urls":
                            _ = try r.object { r, name throws(JSONParseError) in
                                switch name {
                                case "completeUrl": output.completeUrl = try r.string()
                                case "cancelUrl": output.cancelUrl = try r.string()
                                case "paymentUrl": output.paymentUrl = try r.string()
                                default: break
                                }
                            }
                        default: break
                        }
                    }
                default: break
                }
            }
            return isObject ? output : nil
        }
        return output ?? nil
    }

    static func readMethods(_ r: inout JSONReader) throws(JSONParseError) -> [Method] {
        var methods: [Method] = []
        _ = try r.array { r throws(JSONParseError) in
            var name: String?, prefills: [UInt8] = [], operations: [Operation] = []
            _ = try r.object { r, member throws(JSONParseError) in
                switch member {
                case "paymentMethod": name = try r.string()
                case "prefills": prefills = try r.rawArray() ?? []
                case "operations": operations = try readOperations(&r)
                default: break
                }
            }
            guard let name else { return }
            let method = shared(name)
            for i in operations.indices { operations[i].paymentMethod = method }
            methods.append(Method(name: method, prefillsJSON: prefills, operations: operations))
        }
        return methods
    }

    /// What an operation and a task are read from (a task's own `next` and `tasks` are not kept).
    private struct Link {
        var rel: String?, href: String?, method: String?, contentType: String?, next: Bool?
        var tasks: [Task] = [], expects: [Expectation] = []
    }

    /// Each object of the array here, as a `Link`.
    private static func readLinks(_ r: inout JSONReader, _ take: (Link) -> Void) throws(JSONParseError) {
        _ = try r.array { r throws(JSONParseError) in
            var link = Link()
            _ = try r.object { r, member throws(JSONParseError) in
                switch member {
                case "rel": link.rel = try r.string()
                case "href": link.href = try r.string()
                case "method": link.method = try r.string()
                case "contentType": link.contentType = try r.string()
                case "next": link.next = try r.bool()
                case "tasks": link.tasks = try readTasks(&r)
                case "expects": link.expects = try readExpectations(&r)
                default: break
                }
            }
            take(link)
        }
    }

    static func readOperations(_ r: inout JSONReader) throws(JSONParseError) -> [Operation] {
        var operations: [Operation] = []
        try readLinks(&r) { link in
            guard let rel = link.rel, let href = link.href else { return }
            operations.append(Operation(rel: shared(rel), href: href, method: shared((link.method ?? "GET").uppercased()), next: link.next ?? false,
                                        contentType: link.contentType.map(shared), tasks: link.tasks, expects: link.expects, paymentMethod: nil))
        }
        return operations
    }

    static func readTasks(_ r: inout JSONReader) throws(JSONParseError) -> [Task] {
        var tasks: [Task] = []
        try readLinks(&r) { link in
            guard let rel = link.rel, let href = link.href else { return }
            tasks.append(Task(rel: shared(rel), href: href, method: shared(link.method ?? "GET"), contentType: link.contentType.map(shared),
                              expects: link.expects))
        }
        return tasks
    }

    static func readExpectations(_ r: inout JSONReader) throws(JSONParseError) -> [Expectation] {
        var expects: [Expectation] = []
        _ = try r.array { r throws(JSONParseError) in
            var name: String?, type: String?, value: JSONValue = .null
            _ = try r.object { r, member throws(JSONParseError) in
                switch member {
                case "name": name = try r.string()
                case "type": type = try r.string()
                case "value": value = try r.value()
                default: break
                }
            }
            guard let name else { return }
            expects.append(Expectation(name: name, type: type ?? "string", value: value))
        }
        return expects
    }
}
