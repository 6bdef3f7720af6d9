import Foundation
import KassaCore
import KassaUpstream

extension Gateway {
    static let operationNotAllowed = "https://api.payex.com/psp/errordetail/paymentsessions/operationnotallowed"

    /// One upstream call for a session, retried by the retry policy when that
    /// is safe: reads always, writes only when no connection was ever made.
    func performSessionCall(_ call: SessionCall, sessionID: String, traceID: String) async -> SessionCallOutcome {
        guard isAllowedUpstream(call.href) else {
            return .failed("the \(call.rel) operation points outside the allowed upstream hosts")
        }
        let clock = ContinuousClock()
        let started = clock.now
        var retry = 0
        while true {
            let (result, document) = await callUpstream(UpstreamCall(operation: call.rel, method: call.method, url: call.href, body: call.body,
                                                         traceID: traceID, sessionID: sessionID))
            let reason: String
            var neverSent = false
            switch result {
            case .success(let response):
                if (200..<300).contains(response.status) {
                    if let document, let output = PaymentOutput.parse(document) { return .output(output) }
                    reason = "Swedbank Pay answered \(call.rel) with a body that is not a payment session"
                } else if response.status == 409, document?["type"]?.stringValue == Self.operationNotAllowed {
                    return .notAllowed(document ?? .null)
                } else if (400..<500).contains(response.status) {
                    if let document, document["type"]?.stringValue != nil { return .rejected(document) }
                    return .rejected(["type": "PaymentSessionAPIRequestFailed", "status": .number(Double(response.status)),
                                      "detail": .string("Swedbank Pay refused \(call.rel) with \(response.status)")])
                } else {
                    reason = "Swedbank Pay answered \(call.rel) with \(response.status)"
                }
            case .failure(let error):
                if case .connectFailed = error { neverSent = true }
                reason = "\(call.rel): \(error)"
            }
            let elapsed = started.duration(to: clock.now)
            let elapsedMs = Int(elapsed.components.seconds * 1000) + Int(elapsed.components.attoseconds / 1_000_000_000_000_000)
            guard RetryPolicy.mayRetry(idempotent: call.isIdempotent, neverSent: neverSent),
                  let delay = configuration.sessionRetry.delayMs(beforeRetry: retry + 1, elapsedMs: elapsedMs, jitter: Double.random(in: 0...1))
            else {
                store.eventLog.append(LogEvent(atMs: Self.nowMs(), sessionID: sessionID, kind: "problem", level: .error,
                                               summary: Redaction.redactTokens("\(call.rel) failed after \(retry) retries: \(reason)"), traceID: traceID,
                                               data: ["operation": .string(call.rel), "retries": .number(Double(retry)),
                                                      "reason": .string(Redaction.redactTokens(reason))]))
                return .failed(reason)
            }
            retry += 1
            metrics.upstreamRetry(operation: call.rel)
            store.eventLog.append(LogEvent(atMs: Self.nowMs(), sessionID: sessionID, kind: "upstream.retry", level: .warning,
                                           summary: Redaction.redactTokens("retry \(retry) of \(call.rel) in \(delay) ms: \(reason)"), traceID: traceID,
                                           data: ["operation": .string(call.rel), "retry": .number(Double(retry)), "delayMs": .number(Double(delay))]))
            try? await Task.sleep(for: .milliseconds(delay))
        }
    }

    func sessionPhaseChanged(id: String, from: PaymentSessionMachine.Phase?, phase: PaymentSessionMachine.Phase) {
        metrics.sessionState(from: from?.rawValue, to: phase.rawValue)
        let now = Self.nowMs()
        store.eventLog.update(.init(id: id, phase: phase.rawValue, atMs: now))
        if phase.isTerminal { sessions.ended(id, dueMs: now + Int64(configuration.endedSessionMemorySeconds * 1000)) }
    }

    /// Drops ended sessions that are due and, with `waiting`, sessions the payer has left
    /// waiting too long (see `GatewayConfiguration`); their rows and events stay in the store.
    func evictSessions(nowMs: Int64, waiting: Bool) async {
        var gone = sessions.evictEnded(nowMs: nowMs)
        if waiting { gone += sessions.evictQuiet(quietBeforeMs: nowMs - Int64(configuration.waitingSessionMemorySeconds * 1000)) }
        for actor in gone { metrics.sessionState(from: await actor.phase.rawValue, to: nil) }
    }

    static func iso8601(ms: Int64) -> String {
        Timestamp.iso8601(ms: ms)
    }
}
