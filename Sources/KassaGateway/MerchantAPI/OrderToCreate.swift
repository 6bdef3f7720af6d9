import KassaCore

/// A merchant's `{"paymentorder": {…}}` (seed 000) made into the document that goes upstream,
/// from its bytes: the members Kassa checks are read as values, and every member goes on as it
/// came but these, written again: `payeeInfo` with Kassa's payee reference, `amount` and
/// `vatAmount` as whole numbers, `urls` when an origin is added to it; `operation` is added when
/// missing. A tree of the whole order, looked up by path and written again, was about a twelfth
/// of a created order's CPU.
enum OrderToCreate {
    /// The checked members as read (nil: missing). `order`, and `urls` unless an origin is added
    /// to it, stand for their kind only (`.object([:])` for an object, `kind`): their members are
    /// read one by one.
    private struct Checked {
        var order: JSONValue?
        var operation, currency, amount, vatAmount, description, userAgent, language, instrument: JSONValue?
        var urls, hostUrls, completeUrl, payeeInfo, productName: JSONValue?
    }

    /// The upstream document, once `document` passed the seed's Merchant Backend checks (else the
    /// first problem). `payeeID`: the configured one, for an order whose payeeInfo has none (or "").
    /// `hostURL`: an origin to add to urls.hostUrls (the Sessions API's own, for its payment menu page).
    static func upstreamBody(_ document: [UInt8], payeeReference: String, payeeID: String?,
                             addingHostURL hostURL: String? = nil) throws(Problem) -> [UInt8] {
        var checked = Checked()
        // The root's members before and after paymentorder, which goes between them.
        var root: [UInt8] = [], orderAt = 0
        var members: [UInt8] = []   // paymentorder's, each with a comma after it
        root.reserveCapacity(64)
        members.reserveCapacity(document.count + 32)
        let isObject: Bool
        do {
            isObject = try JSONReader.read(document) { r throws(JSONParseError) -> Bool in
                try r.object { r, name throws(JSONParseError) in
                    if root.count > 0 { root.append(UInt8(ascii: ",")) }
                    name.write(into: &root)
                    root.append(UInt8(ascii: ":"))
                    guard name == "paymentorder" else {
                        let (_, raw) = try r.spanning { _ throws(JSONParseError) in }
                        return root.append(contentsOf: raw)
                    }
                    orderAt = root.count
                    let (isOrder, raw) = try r.spanning { r throws(JSONParseError) in
                        try r.object { r, name throws(JSONParseError) in try Self.read(&r, name, &checked, hostURL, into: &members) }
                    }
                    checked.order = Self.kind(isObject: isOrder, raw)
                }
            }
        } catch {
            throw MerchantProblem.badRequest("body", "is not valid JSON: \(error)")
        }
        guard isObject else { throw MerchantProblem.badRequest("body", "must be a JSON object") }
        try Self.check(checked)

        // Both SDKs send payeeId "" by default (swedbank-pay-sdk-ios SwedbankPaySDK/Classes/SwedbankPaySDK+Extensions/
        // PaymentOrder.swift; swedbank-pay-sdk-android mobilesdk/…/PayeeInfo.kt): empty counts as missing.
        var payeeInfo = checked.payeeInfo?.objectValue ?? [:]
        payeeInfo["payeeReference"] = .string(payeeReference)
        if (payeeInfo["payeeId"]?.stringValue ?? "").isEmpty {
            guard let payeeID else {
                throw MerchantProblem.badRequest("paymentorder.payeeInfo.payeeId", "is required (or start Kassa with --payee-id)")
            }
            payeeInfo["payeeId"] = .string(payeeID)
        }
        var body: [UInt8] = []
        body.reserveCapacity(root.count + members.count + 160)
        body.append(UInt8(ascii: "{"))
        body.append(contentsOf: root[..<orderAt])
        body.append(UInt8(ascii: "{"))
        body.append(contentsOf: members)
        if checked.operation == nil { body.append(contentsOf: #""operation":"Purchase","#.utf8) }
        body.append(contentsOf: #""payeeInfo":"#.utf8)
        JSONValue.object(payeeInfo).write(into: &body)
        body.append(UInt8(ascii: "}"))
        body.append(contentsOf: root[orderAt...])
        body.append(UInt8(ascii: "}"))
        return body
    }

    /// One member of paymentorder: a checked one taken as a value, and every one but payeeInfo
    /// copied to `members` as it came.
    private static func read(_ r: inout JSONReader, _ name: JSONName, _ checked: inout Checked, _ hostURL: String?,
                             into members: inout [UInt8]) throws(JSONParseError) {
        if name == "payeeInfo" { checked.payeeInfo = try r.value(); return }
        name.write(into: &members)
        members.append(UInt8(ascii: ":"))
        if name == "urls", let hostURL {
            // Written again with the origin added; a hostUrls that is no array becomes one of it.
            var urls = try r.value()
            if var fields = urls.objectValue {
                var hosts = fields["hostUrls"]?.arrayValue ?? []
                if !hosts.contains(.string(hostURL)) { hosts.append(.string(hostURL)) }
                fields["hostUrls"] = .array(hosts)
                (checked.hostUrls, checked.completeUrl) = (fields["hostUrls"], fields["completeUrl"])
                urls = .object(fields)
            }
            checked.urls = urls
            urls.write(into: &members)
            return members.append(UInt8(ascii: ","))
        }
        if name == "amount" || name == "vatAmount" {
            // Written again, as a whole number the way the SDKs send it (1500 for 1.5e3).
            let value = try r.value()
            if name == "amount" { checked.amount = value } else { checked.vatAmount = value }
            value.write(into: &members)
            return members.append(UInt8(ascii: ","))
        }
        let (_, raw) = try r.spanning { r throws(JSONParseError) in
            switch name {
            case "operation": checked.operation = try r.value()
            case "currency": checked.currency = try r.value()
            case "description": checked.description = try r.value()
            case "userAgent": checked.userAgent = try r.value()
            case "language": checked.language = try r.value()
            case "instrument": checked.instrument = try r.value()
            case "productName": checked.productName = try r.value()
            case "urls":
                let (isObject, raw) = try r.spanning { r throws(JSONParseError) in
                    try r.object { r, name throws(JSONParseError) in
                        switch name {
                        case "hostUrls": checked.hostUrls = try r.value()
                        case "completeUrl": checked.completeUrl = try r.value()
                        default: break
                        }
                    }
                }
                checked.urls = kind(isObject: isObject, raw)
            default: break
            }
        }
        members.append(contentsOf: raw)
        members.append(UInt8(ascii: ","))
    }

    /// What the checks need of a value read member by member: whether it is an object, or null.
    static func kind(isObject: Bool, _ raw: UnsafeBufferPointer<UInt8>) -> JSONValue {
        isObject ? .object([:]) : (raw.first == UInt8(ascii: "n") ? .null : .bool(false))
    }

    /// The seed's checks, in the order the sample backends make them; the first problem thrown.
    private static func check(_ c: Checked) throws(Problem) {
        var input = JSONInput(.null)   // its checks only: the values come from the reader
        guard input.object(c.order, field: "paymentorder") != nil else {
            throw MerchantProblem.badRequest(input.problems[0].field, input.problems[0].description)
        }
        _ = input.string(c.operation, field: "paymentorder.operation", required: false)
        _ = input.string(c.currency, field: "paymentorder.currency")
        _ = input.integer(c.amount, field: "paymentorder.amount", minimum: 0)
        _ = input.integer(c.vatAmount, field: "paymentorder.vatAmount", minimum: 0)
        _ = input.string(c.description, field: "paymentorder.description")
        _ = input.string(c.userAgent, field: "paymentorder.userAgent", required: false)
        _ = input.string(c.language, field: "paymentorder.language", required: false)
        _ = input.string(c.instrument, field: "paymentorder.instrument", required: false)
        _ = input.object(c.urls, field: "paymentorder.urls")
        _ = input.strings(c.hostUrls, field: "paymentorder.urls.hostUrls")
        _ = input.string(c.completeUrl, field: "paymentorder.urls.completeUrl")
        _ = input.object(c.payeeInfo, field: "paymentorder.payeeInfo", required: false)
        _ = input.string(c.productName, field: "paymentorder.productName", required: false)
        if let first = input.problems.first { throw MerchantProblem.badRequest(first.field, first.description) }
    }
}
