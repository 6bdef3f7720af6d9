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
        public var prefills: [JSONValue]
        public var operations: [Operation]
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
        for i in copy.methods.indices { copy.methods[i].prefills = [] }
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

    /// If any candidate is marked `next`, only those count (the SDKs' "prioritised operations").
    public var candidates: [Operation] {
        let all = allOperations
        return all.contains(where: \.next) ? all.filter(\.next) : all
    }

    public func operation(_ rel: OperationRel, method: String? = nil) -> Operation? {
        candidates.first { $0.rel == rel.rawValue && (method == nil || $0.paymentMethod == method) }
    }

    public func method(_ name: String) -> Method? { methods.first { $0.name == name } }

    /// Parses a PaymentOutputModel document; nil when it is not one.
    public static func parse(_ document: JSONValue) -> PaymentOutput? {
        guard case .object = document else { return nil }
        let session = document["paymentSession"]
        let methods: [Method] = (session?["methods"]?.arrayValue ?? []).compactMap { m in
            guard let name = m["paymentMethod"]?.stringValue else { return nil }
            return Method(name: shared(name), prefills: m["prefills"]?.arrayValue ?? [],
                          operations: (m["operations"]?.arrayValue ?? []).compactMap { parseOperation($0, method: name) })
        }
        var problem: UpstreamProblem?
        if let p = document["problem"], let type = p["type"]?.stringValue {
            problem = UpstreamProblem(type: type, title: p["title"]?.stringValue, status: p["status"]?.intValue,
                                      detail: p["detail"]?.stringValue, operation: p["operation"].flatMap { parseOperation($0, method: nil) })
        }
        let urls = session?["urls"]
        return PaymentOutput(operations: (document["operations"]?.arrayValue ?? []).compactMap { parseOperation($0, method: nil) },
                             methods: methods, problem: problem,
                             completeUrl: urls?["completeUrl"]?.stringValue, cancelUrl: urls?["cancelUrl"]?.stringValue,
                             paymentUrl: urls?["paymentUrl"]?.stringValue,
                             instrumentModePaymentMethod: session?["instrumentModePaymentMethod"]?.stringValue,
                             culture: session?["culture"]?.stringValue)
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

    static func shared(_ s: String) -> String { sharedStrings[s] ?? s }
}
