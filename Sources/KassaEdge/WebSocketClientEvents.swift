import Synchronization

/// One client connection's messages in arrival order, then `.closed`, for one reader.
/// A plain mailbox rather than an `AsyncStream`: the stream's generic storage runs
/// unspecialised, and its metadata look-ups were a visible share of the load client's CPU.
/// A reader whose task is cancelled while waiting gets nil.
public final class WebSocketClientEvents: AsyncSequence, Sendable {
    public typealias Element = WebSocketClientEvent

    private struct Mailbox {
        var queued: [WebSocketClientEvent] = []
        var head = 0
        var finished = false
        var reader: UnsafeContinuation<WebSocketClientEvent?, Never>?

        mutating func take() -> WebSocketClientEvent? {
            guard head < queued.count else { return nil }
            let event = queued[head]
            head += 1
            if head == queued.count {
                queued.removeAll(keepingCapacity: true)
                head = 0
            }
            return event
        }
    }

    private let mailbox = Mutex(Mailbox())

    init() {}

    /// Hands `event` to a waiting reader, or queues it. Nothing is taken after `finish`.
    func yield(_ event: WebSocketClientEvent) {
        let reader = mailbox.withLock { box -> UnsafeContinuation<WebSocketClientEvent?, Never>? in
            guard !box.finished else { return nil }
            if let reader = box.reader {
                box.reader = nil
                return reader
            }
            box.queued.append(event)
            return nil
        }
        reader?.resume(returning: event)
    }

    /// After what is queued, readers get nil.
    func finish() {
        let reader = mailbox.withLock { box -> UnsafeContinuation<WebSocketClientEvent?, Never>? in
            box.finished = true
            defer { box.reader = nil }
            return box.reader
        }
        reader?.resume(returning: nil)
    }

    func next() async -> WebSocketClientEvent? {
        if let ready = mailbox.withLock({ $0.take() }) { return ready }
        return await withTaskCancellationHandler {
            await withUnsafeContinuation { (reader: UnsafeContinuation<WebSocketClientEvent?, Never>) in
                // Decided under the lock: a message or finish that raced in, a cancellation, or wait.
                let now = mailbox.withLock { box -> WebSocketClientEvent?? in
                    if let ready = box.take() { return .some(ready) }
                    if box.finished || Task.isCancelled { return .some(nil) }
                    box.reader = reader
                    return nil
                }
                if let now { reader.resume(returning: now) }
            }
        } onCancel: {
            let reader = mailbox.withLock { box -> UnsafeContinuation<WebSocketClientEvent?, Never>? in
                defer { box.reader = nil }
                return box.reader
            }
            reader?.resume(returning: nil)
        }
    }

    public struct AsyncIterator: AsyncIteratorProtocol {
        let events: WebSocketClientEvents
        public mutating func next() async -> WebSocketClientEvent? { await events.next() }
    }

    public func makeAsyncIterator() -> AsyncIterator { AsyncIterator(events: self) }
}
