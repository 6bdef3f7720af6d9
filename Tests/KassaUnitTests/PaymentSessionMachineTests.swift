import KassaCore
import Testing

/// The state machine alone: hand-made upstream answers in, effects out.
@Suite("PaymentSession state machine")
struct PaymentSessionMachineTests {
    static let session = "https://up.example/psp/paymentsessions/t"
    static let complete = "https://m.example/complete"
    static let cancel = "https://m.example/cancel"

    static func op(_ rel: String, _ method: String = "POST", next: Bool? = nil, tasks: [JSONValue] = [], expects: [JSONValue] = []) -> JSONValue {
        var o: [String: JSONValue] = ["rel": .string(rel), "method": .string(method), "href": .string(session + "/" + rel)]
        if let next { o["next"] = .bool(next) }
        if !tasks.isEmpty { o["tasks"] = .array(tasks) }
        if !expects.isEmpty { o["expects"] = .array(expects) }
        return .object(o)
    }

    static func output(_ operations: [JSONValue] = [], methods: [String: [JSONValue]] = [:], problem: JSONValue = .null) -> PaymentOutput {
        let names = ["Swish", "CreditCard", "ApplePay", "GooglePay", "Vipps"].filter { methods[$0] != nil }
        let doc: JSONValue = [
            "paymentSession": [
                "culture": "nb-NO",
                "urls": ["completeUrl": .string(complete), "cancelUrl": .string(cancel), "paymentUrl": "https://m.example/pay"],
                "methods": .array(names.map { name in
                    ["paymentMethod": .string(name), "operations": .array(methods[name]!),
                     "prefills": name == "Swish" ? [["rank": 1, "msisdn": "+46739000001"]] : []]
                }),
            ],
            "operations": .array(operations), "problem": problem,
        ]
        let parsed = PaymentOutput.parse(doc)!
        // What the gateway runs on an answer: the output read from its bytes.
        #expect(PaymentOutput.decode(doc.bytes) == parsed)
        // `operation` answers as the first matching candidate would, for every rel and method.
        for rel in OperationRel.allCases {
            for method in [nil] + names.map(Optional.some) {
                let first = parsed.candidates.first { $0.rel == rel.rawValue && (method == nil || $0.paymentMethod == method) }
                #expect(parsed.operation(rel, method: method) == first, "\(rel) \(method ?? "any")")
            }
        }
        return parsed
    }

    @Test("an answer read from its bytes gives what its parsed tree gives, refusals included")
    func decodeMatchesParse() throws {
        let deep = String(repeating: "[", count: 70) + String(repeating: "]", count: 70)
        let documents = [
            #"{"operations":[{"rel":"abort-payment","href":"h","method":"post","next":true,"contentType":"application/json"}]}"#,
            #"{"paymentSession":{"culture":"sv-SE","urls":{"completeUrl":"c","cancelUrl":7,"paymentUrl":"p"},"instrumentModePaymentMethod":null,"#
                + #""methods":[{"paymentMethod":"Swish","prefills":[{"msisdn":"+46739000001"}],"operations":[{"rel":"expand-method","href":"e"}]},"#
                + #"{"operations":[{"rel":"x","href":"y"}]},7,{"paymentMethod":"CreditCard","prefills":{"not":"an array"},"amount":1e2}]},"#
                + #""operations":[{"rel":"r","href":"h","tasks":[{"rel":"t","href":"th","method":"post","expects":[{"name":"n","value":{"a":[1,"\u00e9"]}},{"type":"no name"}]}],"#
                + #""expects":[{"name":"PaReq","type":"string","value":"x"}]},{"href":"no rel"},"not an object"]}"#,
            #"{"problem":{"type":"https://api.payex.com/psp/errordetail/inputerror","title":"Bad","status":400,"detail":"d","operation":{"rel":"r","href":"h"}}}"#,
            #"{"problem":{"title":"no type"},"operations":{"not":"an array"}}"#,
            #"{"unknown":{"deep":[{"x":"\ud83d\ude00 \"quoted\" é"},true,false,null,-0.5e-3]},"operations":[]}"#,
            #"  {"operations":[]}  "#,
            "[]", "\"text\"", "7", "null", "",
            // Refused by both: a duplicate anywhere, a number past a double, a lone surrogate, nesting past 64, trailing data.
            #"{"operations":[],"operations":[]}"#,
            #"{"skipped":{"a":1,"a":2}}"#,
            #"{"skipped":{"a":1,"b":2,"c":3,"d":4,"e":5,"f":6,"g":7,"h":8,"i":9,"j":10,"k":11,"l":12,"m":13,"n":14,"o":15,"p":16,"q":17,"a":18}}"#,
            #"{"skipped":[1e400]}"#,
            #"{"skipped":"\ud800"}"#,
            #"{"skipped":\#(deep)}"#,
            #"{"operations":[]} x"#,
            #"{"operations":[],}"#,
        ]
        for text in documents {
            let parsed = (try? JSONValue.parse(text)).flatMap(PaymentOutput.parse)
            #expect(PaymentOutput.decode(Array(text.utf8)) == parsed, "\(text)")
        }
        #expect(PaymentOutput.decode(Array(documents[1].utf8))?.methods.map(\.name) == ["Swish", "CreditCard"])
        // Prefills are kept as the answer wrote them and parsed when read: spacing and member order do not count, a non-array is none.
        let prefilled = PaymentOutput.decode(Array(#"{"paymentSession":{"methods":[{"paymentMethod":"Swish","prefills": [ {"rank":1, "msisdn":"+46739000001"} ]}]}}"#.utf8))
        #expect(prefilled?.methods.first?.prefillsJSON == Array(#"[ {"rank":1, "msisdn":"+46739000001"} ]"#.utf8))
        #expect(prefilled?.methods.first?.prefills == [["msisdn": "+46739000001", "rank": 1]])
        #expect(prefilled == PaymentOutput.parse(try JSONValue.parse(#"{"paymentSession":{"methods":[{"prefills":[{"msisdn":"+46739000001","rank":1}],"paymentMethod":"Swish"}]}}"#)))
        #expect(prefilled?.withoutPrefills.methods.first?.prefills == [])
        #expect(PaymentOutput.decode(Array(documents[1].utf8))?.methods.last?.prefillsJSON == [])
        #expect(PaymentOutput.decode(Array(documents[1].utf8))?.operations.first?.tasks.first?.expects.first?.value == ["a": [1, "é"]])
        for refused in documents.suffix(8) { #expect(PaymentOutput.decode(Array(refused.utf8)) == nil, "\(refused)") }
        #expect(PaymentOutput.decode([0x7B, 0x22, 0xFF, 0x22, 0x3A, 0x31, 0x7D]) == nil, "invalid UTF-8 in a name")
    }

    static let idle = output([op("abort-payment"), op("customize-payment")],
                             methods: ["Swish": [op("expand-method")], "CreditCard": [op("expand-method")], "Vipps": []])

    func calls(_ effects: [PaymentSessionMachine.Effect]) -> [String] {
        effects.compactMap { if case .call(let c) = $0 { return c.rel } else { return nil } }
    }
    func pushes(_ effects: [PaymentSessionMachine.Effect]) -> [String] {
        effects.compactMap { if case .push(let p) = $0 { return p.type.rawValue } else { return nil } }
    }
    func lastCall(_ m: PaymentSessionMachine) -> SessionCall { m.callInFlight! }

    /// A machine that has fetched and reported the instruments.
    func fetched() -> PaymentSessionMachine {
        var m = PaymentSessionMachine(sessionURL: Self.session)
        _ = m.start()
        _ = m.received(Self.output([Self.op("prepare-payment", next: true), Self.op("abort-payment")]), for: lastCall(m))
        _ = m.received(Self.idle, for: lastCall(m))
        return m
    }

    @Test("fetch: GET the session, prepare-payment, then PaymentSessionFetched with the instruments")
    func fetch() throws {
        var m = PaymentSessionMachine(sessionURL: Self.session)
        let start = m.start()
        #expect(start == [.call(SessionCall(rel: "view-paymentsession", method: "GET", href: Self.session))])
        let afterGet = m.received(Self.output([Self.op("prepare-payment", next: true), Self.op("abort-payment")]), for: lastCall(m))
        #expect(calls(afterGet) == ["prepare-payment"])
        #expect(lastCall(m).body?["integration"]?.stringValue == "App")
        let afterPrepare = m.received(Self.idle, for: lastCall(m))
        #expect(pushes(afterPrepare) == ["PaymentSessionFetched"])
        #expect(m.phase == .awaitingInstrument)
        let types = m.availableInstruments.compactMap { $0["type"]?.stringValue }
        #expect(types == ["Swish", "CreditCard", "NewCreditCard", "WebBased"])
        #expect(m.availableInstruments.first?["prefills"]?.arrayValue?.first?["msisdn"]?.stringValue == "+46739000001")
    }

    @Test("Swish with an MSISDN: expand, start-payment-attempt with the msisdn, poll get-payment, complete")
    func swishMSISDN() throws {
        var m = fetched()
        let attempt = try m.command(.attempt(.swish(msisdn: "+46739000001"))).get()
        #expect(calls(attempt) == ["expand-method"])
        let expanded = m.received(Self.output([Self.op("abort-payment")], methods: ["Swish": [Self.op("start-payment-attempt")]]), for: lastCall(m))
        #expect(calls(expanded) == ["start-payment-attempt"])
        #expect(lastCall(m).body?["msisdn"]?.stringValue == "+46739000001")
        #expect(lastCall(m).body?["culture"]?.stringValue == "nb-NO", "the session's culture, never a fixed one")
        let started = m.received(Self.output([Self.op("abort-payment")], methods: ["Swish": [Self.op("get-payment", "GET")]]), for: lastCall(m))
        guard case .schedulePoll(let ms, let generation)? = started.last else { Issue.record("expected a poll"); return }
        #expect(ms == 2_000)
        let poll = m.pollDue(generation)
        #expect(calls(poll) == ["get-payment"])
        #expect(m.pollDue(generation).isEmpty, "no second call while one is in flight")
        let done = m.received(Self.output([Self.op("redirect-payer", "GET", next: true).replacingHref(Self.complete)]), for: lastCall(m))
        #expect(pushes(done) == ["PaymentSessionComplete"])
        #expect(m.phase == .completed)
    }

    @Test("Swish local start: LaunchClientApp once, with callbackurl added")
    func swishLocal() throws {
        var m = fetched()
        _ = try m.command(.attempt(.swish(msisdn: nil))).get()
        _ = m.received(Self.output([], methods: ["Swish": [Self.op("start-payment-attempt")]]), for: lastCall(m))
        #expect(lastCall(m).body?["msisdn"] == nil)
        let task: JSONValue = ["rel": "launch-client-app", "method": "GET", "href": "swish://paymentrequest?token=abc"]
        let withTask = Self.output([], methods: ["Swish": [Self.op("get-payment", "GET", tasks: [task])]])
        let launched = m.received(withTask, for: lastCall(m))
        #expect(pushes(launched) == ["LaunchClientApp"])
        guard case .push(let event)? = launched.first else { return }
        #expect(event.data["url"]?.stringValue == "swish://paymentrequest?token=abc&callbackurl=https%3A%2F%2Fm.example%2Fpay")
        guard case .schedulePoll(_, let g)? = launched.last else { Issue.record("expected a poll"); return }
        _ = m.pollDue(g)
        #expect(pushes(m.received(withTask, for: lastCall(m))).isEmpty, "the same launch is not pushed twice")
    }

    @Test("a failed attempt: SessionProblemOccurred once, acknowledged, and a new attempt is allowed")
    func failedAttempt() throws {
        var m = fetched()
        _ = try m.command(.attempt(.swish(msisdn: "+46739000002"))).get()
        let problem: JSONValue = ["type": "https://api.payex.com/psp/errordetail/paymentorders/paymentattemptdeclined", "title": "Declined",
                                  "status": 422, "operation": Self.op("acknowledge-failed-attempt")]
        let failed = m.received(Self.output([], methods: ["Swish": []], problem: problem), for: lastCall(m))
        #expect(pushes(failed) == ["SessionProblemOccurred"])
        #expect(calls(failed) == ["acknowledge-failed-attempt"])
        #expect(m.lastProblem?["type"]?.stringValue?.hasSuffix("paymentattemptdeclined") == true)
        let acknowledged = m.received(Self.output([Self.op("abort-payment")], methods: ["Swish": [Self.op("start-payment-attempt")]]), for: lastCall(m))
        #expect(acknowledged.isEmpty)
        #expect(m.phase == .awaitingInstrument)
        let again = try m.command(.attempt(.swish(msisdn: "+46739000001"))).get()
        #expect(calls(again) == ["start-payment-attempt"])
    }

    @Test("card with 3-D Secure: create-authentication, Show3DSecure, the client's cRes, Dismiss3DSecure")
    func card3DS() throws {
        var m = fetched()
        _ = try m.command(.attempt(.creditCard(paymentToken: "tok"))).get()
        _ = m.received(Self.output([], methods: ["CreditCard": [Self.op("start-payment-attempt")]]), for: lastCall(m))
        #expect(lastCall(m).body?["paymentToken"]?.stringValue == "tok")
        let create = Self.op("create-authentication", expects: [["name": "NotificationUrl", "type": "string", "value": "https://n"]])
        let authenticating = m.received(Self.output([], methods: ["CreditCard": [create]]), for: lastCall(m))
        #expect(calls(authenticating) == ["create-authentication"])
        #expect(lastCall(m).body?["notificationUrl"]?.stringValue == "https://n")
        let redirect: JSONValue = ["rel": "sca-redirect", "method": "POST", "href": "https://acs.example/challenge",
                                   "expects": [["name": "creq", "type": "string", "value": "CREQ1"]]]
        let challenge = Self.output([], methods: ["CreditCard": [Self.op("complete-authentication", tasks: [redirect])]])
        let shown = m.received(challenge, for: lastCall(m))
        #expect(pushes(shown) == ["Show3DSecure"])
        #expect(m.phase == .threeDSecure)
        guard case .push(let show)? = shown.first else { return }
        #expect(show.data["form"]?["creq"]?.stringValue == "CREQ1")
        #expect(show.data["url"]?.stringValue == "https://acs.example/challenge")

        #expect(throws: Problem.self) { try m.command(.attempt(.applePay)).get() }
        let answered = try m.command(.threeDSecureResult(cres: "CRES")).get()
        #expect(pushes(answered) == ["Dismiss3DSecure"])
        #expect(calls(answered) == ["complete-authentication"])
        #expect(lastCall(m).body?["cRes"]?.stringValue == "CRES")
        let done = m.received(Self.output([Self.op("redirect-payer", "GET", next: true).replacingHref(Self.complete)]), for: lastCall(m))
        #expect(pushes(done) == ["PaymentSessionComplete"])
    }

    @Test("abort: abort-payment, then PaymentSessionCanceled; commands after the end are refused")
    func abort() throws {
        var m = fetched()
        let aborting = try m.command(.abort).get()
        #expect(calls(aborting) == ["abort-payment"])
        let canceled = m.received(Self.output([Self.op("redirect-payer", "GET", next: true).replacingHref(Self.cancel)]), for: lastCall(m))
        #expect(pushes(canceled) == ["PaymentSessionCanceled"])
        #expect(m.phase == .canceled)
        for command: PaymentSessionMachine.Command in [.abort, .retry, .attempt(.applePay), .fallback(restrictTo: nil)] {
            #expect(throws: Problem.self) { try m.command(command).get() }
        }
    }

    @Test("abort not allowed (409): SdkProblemOccurred and the session is read again")
    func abortNotAllowed() throws {
        var m = fetched()
        _ = try m.command(.abort).get()
        let effects = m.conflict(lastCall(m), problem: ["type": "…/operationnotallowed"])
        #expect(pushes(effects) == ["SdkProblemOccurred"])
        #expect(calls(effects) == ["view-paymentsession"])
    }

    @Test("any 409 reads the session again, once; a 409 on a read, or a second one on the same call, is PaymentSessionAPIRequestFailed")
    func conflicts() throws {
        var m = fetched()
        _ = try m.command(.attempt(.swish(msisdn: "+46739000001"))).get()
        let expand = lastCall(m)
        let first = m.conflict(expand, problem: ["type": "https://api.payex.com/psp/errordetail/some-other-conflict"])
        #expect(pushes(first).isEmpty)
        #expect(calls(first) == ["view-paymentsession"], "any 409, whatever its type, makes the session read itself")
        _ = m.received(Self.idle, for: lastCall(m))
        #expect(lastCall(m).rel == "expand-method", "the re-read session offers the call again")
        let second = m.conflict(lastCall(m), problem: .null)
        #expect(pushes(second) == ["SdkProblemOccurred"], "no loop: the second 409 on the same call fails")
        #expect(m.lastProblem?["type"]?.stringValue == "PaymentSessionAPIRequestFailed")
        #expect(m.phase == .failed)

        var n = fetched()
        _ = try n.command(.attempt(.swish(msisdn: "+46739000001"))).get()
        _ = n.received(Self.output([Self.op("abort-payment")], methods: ["Swish": [Self.op("get-payment", "GET")]]), for: lastCall(n))
        _ = n.pollDue(1)
        let onRead = n.conflict(lastCall(n), problem: .null)
        #expect(pushes(onRead) == ["SdkProblemOccurred"], "a 409 on get-payment is not recovered by reading again")
    }

    @Test("an unknown end address is SdkProblemOccurred(PaymentSessionEndReached)")
    func endReached() {
        var m = fetched()
        _ = try? m.command(.abort).get()
        let effects = m.received(Self.output([Self.op("redirect-payer", "GET", next: true).replacingHref("https://elsewhere")]), for: lastCall(m))
        #expect(pushes(effects) == ["SdkProblemOccurred"])
        #expect(m.phase == .ended)
        #expect(m.lastProblem?["type"]?.stringValue == "PaymentSessionEndReached")
    }

    @Test("request failed after retries: SdkProblemOccurred retryable; retry re-reads the session")
    func failedAndRetry() throws {
        var m = fetched()
        _ = try m.command(.attempt(.swish(msisdn: nil))).get()
        #expect(throws: Problem.self) { try m.command(.retry).get() }
        let failed = m.failed(lastCall(m), reason: "upstream timed out")
        #expect(pushes(failed) == ["SdkProblemOccurred"])
        guard case .push(let event)? = failed.first else { return }
        #expect(event.data["retryable"] == true)
        #expect(m.phase == .failed)
        let retried = try m.command(.retry).get()
        #expect(calls(retried) == ["view-paymentsession"], "a POST is not repeated blindly: the session is read instead")
    }

    @Test("payment menu fallback: customize-payment with the restriction, then ShowPaymentMenu and polling")
    func fallback() throws {
        var m = fetched()
        let customizing = try m.command(.fallback(restrictTo: ["Vipps"])).get()
        #expect(calls(customizing) == ["customize-payment"])
        #expect(lastCall(m).body?["restrictToPaymentMethods"] == ["Vipps"])
        let shown = m.received(Self.output([Self.op("abort-payment"), Self.op("view-payment", "GET")], methods: ["Vipps": []]), for: lastCall(m))
        #expect(pushes(shown) == ["ShowPaymentMenu"])
        guard case .schedulePoll? = shown.last else { Issue.record("the menu is watched by polling"); return }
        #expect(m.phase == .paymentMenu)
    }

    @Test("a call that fails in the payment menu: retry takes the menu up where it was, not a fresh start")
    func failedInMenu() throws {
        var m = fetched()
        _ = try m.command(.fallback(restrictTo: nil)).get()
        _ = m.received(Self.output([Self.op("abort-payment"), Self.op("view-payment", "GET")], methods: ["Vipps": []]), for: lastCall(m))
        _ = m.pollDue(1)
        _ = m.failed(lastCall(m), reason: "upstream timed out")
        #expect(m.phase == .failed)
        _ = try m.command(.retry).get()
        #expect(m.phase == .paymentMenu, "the menu is still open")
        let again = m.received(Self.output([Self.op("abort-payment"), Self.op("view-payment", "GET")], methods: ["Vipps": []]), for: lastCall(m))
        #expect(pushes(again).isEmpty, "the menu is not shown twice")
        guard case .schedulePoll? = again.last else { Issue.record("the menu is still watched"); return }
        #expect(throws: Problem.self) { try m.command(.attempt(.applePay)).get() }
    }

    @Test("new card goes through the payment menu; an instrument the session lacks is refused")
    func newCardAndUnavailable() throws {
        var m = fetched()
        #expect(throws: Problem.self) { try m.command(.attempt(.googlePay)).get() }
        #expect(m.phase == .awaitingInstrument, "a refused command changes nothing")
        let effects = try m.command(.attempt(.newCreditCard(enabledPaymentDetailsConsentCheckbox: false))).get()
        #expect(calls(effects) == ["customize-payment"])
        #expect(lastCall(m).body?["hideStoredPaymentOptions"] == true)
        #expect(lastCall(m).body?["showConsentAffirmation"] == false)
        #expect(lastCall(m).body?["restrictToPaymentMethods"] == .null, "the SDKs send no restriction list for a new card")
        #expect(lastCall(m).body?["paymentMethod"]?.stringValue == "CreditCard")
    }

    @Test("a 4xx other than 409 is SdkProblemOccurred(PaymentSessionAPIRequestFailed), retryable: retry repeats the refused call, or the client chooses again")
    func refused() throws {
        var m = fetched()
        _ = try m.command(.attempt(.swish(msisdn: "+46739000001"))).get()
        _ = m.received(Self.output([Self.op("abort-payment")], methods: ["Swish": [Self.op("start-payment-attempt")]]), for: lastCall(m))
        let start = lastCall(m)
        #expect(start.rel == "start-payment-attempt")
        let effects = m.failed(start, reason: "refused", status: 400, upstreamProblem: ["type": "…/inputerror", "status": 400])
        #expect(pushes(effects) == ["SdkProblemOccurred"])
        guard case .push(let event)? = effects.first else { return }
        #expect(event.data["problem"]?["type"]?.stringValue == "PaymentSessionAPIRequestFailed")
        #expect(event.data["problem"]?["status"]?.intValue == 400)
        #expect(event.data["problem"]?["upstream"]?["type"]?.stringValue == "…/inputerror")
        #expect(event.data["retryable"] == true)
        #expect(m.phase == .failed)
        var retrying = m
        let retried = try retrying.command(.retry).get()
        #expect(calls(retried) == ["start-payment-attempt"], "a refused call took no effect: retry sends it again")
        // Or the payer fixes the number: a new attempt is taken after a refusal.
        #expect(throws: Never.self) { try m.command(.attempt(.swish(msisdn: "+46739000002"))).get() }
        #expect(m.phase == .attempting)
    }

    @Test("restored after a restart: an open challenge is not shown again, and its answer is taken while re-reading")
    func restoredChallenge() throws {
        var m = PaymentSessionMachine(restoring: Self.session, phase: .threeDSecure,
                                      history: ["PaymentSessionFetched", "Show3DSecure"])
        #expect(calls(m.start()) == ["view-paymentsession"])
        let answered = try m.command(.threeDSecureResult(cres: "CRES")).get()
        #expect(answered.isEmpty, "held until the session is read again")
        let redirect: JSONValue = ["rel": "sca-redirect", "method": "POST", "href": "https://acs.example/challenge",
                                   "expects": [["name": "creq", "type": "string", "value": "CREQ1"]]]
        let effects = m.received(Self.output([], methods: ["CreditCard": [Self.op("complete-authentication", tasks: [redirect])]]), for: lastCall(m))
        #expect(pushes(effects) == ["Dismiss3DSecure"], "no second Show3DSecure")
        #expect(calls(effects) == ["complete-authentication"])

        var ended = PaymentSessionMachine(restoring: Self.session, phase: .completed, history: ["PaymentSessionFetched", "PaymentSessionComplete"])
        #expect(ended.phase == .completed)
        #expect(throws: Problem.self) { try ended.command(.abort).get() }
    }

    @Test("3-D Secure load failed: SdkProblemOccurred retryable; retry shows the challenge again")
    func threeDSecureLoadFailed() throws {
        var m = fetched()
        _ = try m.command(.attempt(.creditCard(paymentToken: "tok"))).get()
        let redirect: JSONValue = ["rel": "sca-redirect", "method": "POST", "href": "https://acs.example/c",
                                   "expects": [["name": "creq", "type": "string", "value": "C1"]]]
        let challenge = Self.output([], methods: ["CreditCard": [Self.op("complete-authentication", tasks: [redirect])]])
        _ = m.received(challenge, for: lastCall(m))
        #expect(m.phase == .threeDSecure)
        let failed = try m.command(.threeDSecureLoadFailed(reason: "net::ERR_TIMED_OUT")).get()
        #expect(pushes(failed) == ["SdkProblemOccurred"])
        guard case .push(let event)? = failed.first else { return }
        #expect(event.data["problem"]?["type"]?.stringValue == "PaymentSession3DSecureLoadFailed")
        #expect(event.data["retryable"] == true)
        let retried = try m.command(.retry).get()
        #expect(pushes(retried) == ["Show3DSecure"])
        #expect(m.phase == .threeDSecure)
    }

    @Test("app launch failed: fail-payment-attempt with ClientAppLaunchFailed, then the upstream problem")
    func appLaunchFailed() throws {
        var m = fetched()
        #expect(throws: Problem.self) { try m.command(.appLaunchFailed).get() }
        _ = try m.command(.attempt(.swish(msisdn: nil))).get()
        _ = m.received(Self.output([], methods: ["Swish": [Self.op("start-payment-attempt")]]), for: lastCall(m))
        let task: JSONValue = ["rel": "launch-client-app", "method": "GET", "href": "swish://paymentrequest?token=abc"]
        _ = m.received(Self.output([], methods: ["Swish": [Self.op("get-payment", "GET", tasks: [task]), Self.op("fail-payment-attempt")]]), for: lastCall(m))
        let failing = try m.command(.appLaunchFailed).get()
        #expect(calls(failing) == ["fail-payment-attempt"])
        #expect(lastCall(m).body?["problemType"]?.stringValue == "ClientAppLaunchFailed")
        let problem: JSONValue = ["type": "https://api.payex.com/psp/errordetail/paymentorders/clientapplaunchfailed",
                                  "operation": Self.op("acknowledge-failed-attempt")]
        let reported = m.received(Self.output([], methods: ["Swish": []], problem: problem), for: lastCall(m))
        #expect(pushes(reported) == ["SessionProblemOccurred"])
    }

    @Test("an instrument the session stops offering mid-attempt, or an attempt with nothing left to do, is PaymentSessionEndReached")
    func endStates() throws {
        var m = fetched()
        _ = try m.command(.attempt(.swish(msisdn: "+46739000001"))).get()
        let effects = m.received(Self.output([Self.op("abort-payment")], methods: ["CreditCard": []]), for: lastCall(m))
        #expect(pushes(effects) == ["SdkProblemOccurred"])
        #expect(m.lastProblem?["type"]?.stringValue == "PaymentSessionEndReached")
        #expect(m.phase == .ended)

        var n = fetched()
        _ = try n.command(.attempt(.swish(msisdn: "+46739000001"))).get()
        let nothing = n.received(Self.output([Self.op("abort-payment")], methods: ["Swish": []]), for: lastCall(n))
        #expect(pushes(nothing) == ["SdkProblemOccurred"])
        #expect(n.lastProblem?["type"]?.stringValue == "PaymentSessionEndReached")
    }

    @Test("card calls take longer: start-payment-attempt on CreditCard and the authentication calls, as in the SDKs")
    func longerCalls() {
        #expect(SessionCall(rel: "start-payment-attempt", method: "POST", href: "h", paymentMethod: "CreditCard").takesLonger)
        #expect(!SessionCall(rel: "start-payment-attempt", method: "POST", href: "h", paymentMethod: "Swish").takesLonger)
        #expect(SessionCall(rel: "create-authentication", method: "POST", href: "h").takesLonger)
        #expect(SessionCall(rel: "complete-authentication", method: "POST", href: "h").takesLonger)
        #expect(!SessionCall(rel: "prepare-payment", method: "POST", href: "h").takesLonger)
    }

    @Test("instruments from the wire: valid shapes parse, bad MSISDNs and types are named")
    func instruments() throws {
        #expect(try Instrument.parse(["type": "Swish"]).get() == .swish(msisdn: nil))
        #expect(try Instrument.parse(["type": "Swish", "msisdn": "+46739000001"]).get() == .swish(msisdn: "+46739000001"))
        #expect(try Instrument.parse(["type": "NewCreditCard", "enabledPaymentDetailsConsentCheckbox": false]).get()
                == .newCreditCard(enabledPaymentDetailsConsentCheckbox: false))
        for bad: JSONValue in [["type": "Swish", "msisdn": "+46 739"], ["type": "Swish", "msisdn": "0739000001"],
                               ["type": "Bitcoin"], ["type": "CreditCard"], "Swish"] {
            guard case .failure(let problem) = Instrument.parse(bad) else { Issue.record("\(bad) accepted"); continue }
            #expect(problem.status == 400)
        }
    }
}

extension JSONValue {
    func replacingHref(_ href: String) -> JSONValue {
        guard case .object(var o) = self else { return self }
        o["href"] = .string(href)
        return .object(o)
    }
}
