import KassaCore
import KassaEdge

/// One virtual client: creates its sessions over HTTP, subscribes over WebSockets,
/// sends commands and checks every frame it gets (StreamReader).
struct VirtualClient {
    let runner: LoadRunner
    let index: Int
    let runEnd: ContinuousClock.Instant?

    private var scenario: Scenario { runner.scenario }
    private var recorder: LoadRecorder { runner.recorder }
    private var webSocket: WebSocketClient { runner.webSockets[index % runner.webSockets.count] }
    private var sourceAddress: String? {
        scenario.sourceAddresses.isEmpty ? nil : scenario.sourceAddresses[index % scenario.sourceAddresses.count]
    }
    private var stepTimeout: Duration { .milliseconds(Int64(scenario.stepTimeoutSeconds * 1000)) }

    struct Session {
        let id: String
        let token: String
        let streamPath: String
    }

    func run(_ flow: Scenario.Flow) async throws(FlowFailure) {
        let session = try await create()
        let (reader, observers) = try await subscribeAll(session)
        do {
            switch flow {
            case .swish:
                try await command(reader, .attempt(.swish(msisdn: "+46739000001")),
                                  step: "swish.attempt→Complete", until: .paymentSessionComplete)
            case .card:
                try await command(reader, .attempt(InstrumentChoice(type: "CreditCard", paymentToken: "sim-card-frictionless")),
                                  step: "card.attempt→Complete", until: .paymentSessionComplete)
            case .card3ds:
                try await command(reader, .attempt(InstrumentChoice(type: "CreditCard", paymentToken: "sim-card-challenge")),
                                  step: "card3ds.attempt→Show3DSecure", until: .show3DSecure)
                try await command(reader, .threeDSecure(cres: "ok"), step: "card3ds.3ds→Complete", until: .paymentSessionComplete,
                                  tolerating: [.dismiss3DSecure])
            case .abort:
                try await command(reader, .abort, step: "abort→Canceled", until: .paymentSessionCanceled)
            case .reconnect:
                try await reconnect(session, reader)
            case .idle:
                let hold = scenario.idleHoldSeconds > 0 ? ContinuousClock.now + .milliseconds(Int64(scenario.idleHoldSeconds * 1000)) : nil
                let until = [hold, runEnd].compactMap { $0 }.min() ?? .now
                let every = scenario.idlePingSeconds > 0 ? Duration.milliseconds(Int64(scenario.idlePingSeconds * 1000)) : nil
                try await reader.hold(until: until, pingEvery: every) { recorder.record("ping→pong", since: $0) }
            case .ping:
                try await pings(reader)
            }
            // Every other subscriber of the session sees the same stream to the same end.
            if flow != .idle && flow != .ping && flow != .reconnect {
                for observer in observers {
                    _ = try await observer.push(flow == .abort ? .paymentSessionCanceled : .paymentSessionComplete,
                                                tolerating: [.show3DSecure, .dismiss3DSecure, .launchClientApp])
                }
            }
        } catch {
            await reader.close()
            for observer in observers { await observer.close() }
            var failure = error
            failure.session = session.id
            throw failure
        }
        await reader.close()
        for observer in observers { await observer.close() }
    }

    // MARK: Steps

    private func create() async throws(FlowFailure) -> Session {
        let order: JSONValue = [
            "operation": "Purchase", "currency": "SEK", "amount": .number(Double(scenario.amount)), "vatAmount": 0,
            "description": "kassa load", "userAgent": "kassa-load", "language": "sv-SE",
            "urls": ["hostUrls": ["https://shop.example"], "completeUrl": "https://shop.example/complete",
                     "cancelUrl": "https://shop.example/cancel", "paymentUrl": "https://shop.example/pay"],
            "payeeInfo": ["payeeId": "kassa-load", "payeeName": "Load test"],
        ]
        let started = ContinuousClock.now
        let response: HTTPClientResponse
        do {
            response = try await post("/v1/sessions", headers: [("Your-Api-Key", runner.apiKey), ("Content-Type", "application/json")],
                                      body: (["paymentOrder": order] as JSONValue).bytes)
        } catch {
            recorder.connectionError()
            throw FlowFailure(error.timedOut ? "create: timeout" : "create: connection error")
        }
        guard response.status == 201 else { throw FlowFailure("create answered \(response.status)") }
        recorder.record("create", since: started)
        // Only the three members the flow needs are read; the rest of the answer is stepped over.
        let created = (try? JSONReader.read(response.body) { r throws(JSONParseError) -> Session? in
            var id: String?, token: String?, stream: String?
            _ = try r.object { r, name throws(JSONParseError) in
                switch name {
                case "id": id = try r.string()
                case "clientToken": token = try r.string()
                case "streamUrl": stream = try r.string()
                default: break
                }
            }
            guard let id, let token, let stream else { return nil }
            return Session(id: id, token: token, streamPath: stream)
        }) ?? nil
        guard let created else {
            recorder.protocolError()
            throw FlowFailure("protocol: create answered without id, clientToken and streamUrl")
        }
        return created
    }

    /// Opens the stream (after `since`) and returns its reader; `first` names the step timed to the first push.
    private func subscribe(_ session: Session, since: Int64 = 0, first: String?) async throws(FlowFailure) -> (StreamReader, ContinuousClock.Instant) {
        let started = ContinuousClock.now
        let path = session.streamPath + (since > 0 ? "?since=\(since)" : "")
        let connection: WebSocketClientConnection
        do {
            connection = try await webSocket.connect(host: runner.target.host, port: runner.target.port, path: path,
                                                     headers: [("Authorization", "Bearer \(session.token)")], sourceAddress: sourceAddress,
                                                     timeout: stepTimeout)
        } catch {
            recorder.connectionError()
            throw FlowFailure("stream: connection failed")
        }
        recorder.streamOpened()
        if let first { recorder.record(first, since: started) }
        return (StreamReader(connection: connection, session: session.id, since: since,
                             recorder: recorder, deadlines: runner.deadlines, stepTimeout: stepTimeout), started)
    }

    /// The client's stream and `subscribersPerSession - 1` observers, each past PaymentSessionFetched.
    private func subscribeAll(_ session: Session) async throws(FlowFailure) -> (StreamReader, [StreamReader]) {
        var readers: [StreamReader] = []
        do {
            for n in 0..<scenario.subscribersPerSession {
                let (reader, started) = try await subscribe(session, first: n == 0 ? "subscribe" : nil)
                readers.append(reader)
                _ = try await reader.push(.paymentSessionFetched)
                if n == 0 { recorder.record("firstEvent", since: started) }
            }
        } catch {
            for reader in readers { await reader.close() }
            throw error
        }
        return (readers[0], Array(readers.dropFirst()))
    }

    /// A POST to the gateway on the client thread's kept connections.
    private func post(_ path: String, headers: [(String, String)], body: [UInt8]) async throws(WebSocketClientError) -> HTTPClientResponse {
        try await webSocket.request("POST", host: runner.target.host, port: runner.target.port, path: runner.target.path + path,
                                    headers: headers, body: body, sourceAddress: sourceAddress, timeout: stepTimeout)
    }

    private func think() async {
        let ms = Int.random(in: scenario.stepThinkMs)
        if ms > 0 { try? await Task.sleep(for: .milliseconds(ms)) }
    }

    /// Sends a command over the stream, checks its answer, and times it to the push `until`.
    /// Sends the command in KassaProtocol's wire form (its id is its type: one of each at a time).
    private func command(_ reader: StreamReader, _ command: ClientCommand, step: String, until: PushType,
                         tolerating: Set<PushType> = []) async throws(FlowFailure) {
        await think()
        let id = command.type.rawValue
        let started = ContinuousClock.now
        reader.send(command.frame(id: id))
        try await reader.ack(id, tolerating: tolerating.union([until]))
        _ = try await reader.push(until, tolerating: tolerating)
        recorder.record(step, since: started)
    }

    /// Drops the stream after Fetched, attempts over HTTP, and resumes with `since`:
    /// the first push after it must be exactly the next seq.
    private func reconnect(_ session: Session, _ first: StreamReader) async throws(FlowFailure) {
        let since = first.lastSeq
        await first.close()
        await think()
        do {
            let attempt: JSONValue = ["instrument": InstrumentChoice(type: "CreditCard", paymentToken: "sim-card-challenge").json]
            let r = try await post("/v1/sessions/\(session.id)/attempts",
                                   headers: [("Authorization", "Bearer \(session.token)"), ("Content-Type", "application/json")], body: attempt.bytes)
            guard r.status == 202 else { throw FlowFailure("attempt over HTTP answered \(r.status)") }
        } catch let failure as FlowFailure {
            throw failure
        } catch {
            recorder.connectionError()
            throw FlowFailure("attempt over HTTP: connection error")
        }
        let (reader, started) = try await subscribe(session, since: since, first: nil)
        do {
            _ = try await reader.push(.show3DSecure)
            recorder.record("reconnect.resume→Show3DSecure", since: started)
            try await command(reader, .threeDSecure(cres: "ok"), step: "reconnect.3ds→Complete", until: .paymentSessionComplete,
                              tolerating: [.dismiss3DSecure])
        } catch {
            await reader.close()
            throw error
        }
        await reader.close()
    }

    /// `pingCount` pings, `pingWindow` outstanding at a time, each answer checked and timed.
    private func pings(_ reader: StreamReader) async throws(FlowFailure) {
        // Ping n's send time is in slot n % window: at most `window` are outstanding.
        var sentAt = [ContinuousClock.Instant](repeating: .now, count: scenario.pingWindow)
        var next = 0, answered = 0
        while answered < scenario.pingCount {
            while next < scenario.pingCount && next - answered < scenario.pingWindow {
                sentAt[next % scenario.pingWindow] = .now
                // The command's text written out: this loop runs tens of thousands of times a second.
                reader.send(text: #"{"id":"p\#(next)","type":"\#(CommandType.ping.rawValue)"}"#)
                next += 1
            }
            try await reader.ack("p\(answered)")
            recorder.record("ping→pong", since: sentAt[answered % scenario.pingWindow])
            answered += 1
        }
    }
}
