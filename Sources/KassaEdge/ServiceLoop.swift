import CLibWebSockets
import Foundation
import KassaCore
import Synchronization

/// One libwebsockets context and the one thread that services it, shared by
/// the server and the client. Only that thread touches lws; other threads
/// `post` commands, which wake it (`lws_cancel_service`) to `drain` them on
/// `LWS_CALLBACK_EVENT_WAIT_CANCELLED`.
///
/// lws runs on a libev loop (epoll) owned here and handed to lws as a "foreign"
/// loop: lws's own poll() loop walks every descriptor on each wake-up, which
/// stalls past ten thousand connections; and with a loop of our own lws installs
/// no signal handlers and the loop ends only when we say.
final class ServiceLoop<Command: Sendable>: @unchecked Sendable {
    /// Commands, and whether the context still exists: posts after it is
    /// destroyed are dropped, so nothing wakes a freed context.
    private let outbox = Mutex<(commands: [Command], alive: Bool)>(([], true))
    private let exitRequested = Atomic<Bool>(false)
    /// Posters waking the service thread outside the lock: the context is destroyed only once
    /// none is left (they count themselves in under the lock, while the loop is alive).
    private let wakesInFlight = Atomic<Int>(0)
    /// Passes the loop has made (counted where there is a `beforePoll`): each a wake-up of the
    /// service thread or a further round of events it found ready.
    let passes = Atomic<Int>(0)
    /// The service thread's pthread id once it runs (0 before).
    private let serviceThread = Atomic<UInt>(0)
    private(set) var context: OpaquePointer?
    private let eventLoop: OpaquePointer?
    private let foreignLoops = UnsafeMutablePointer<UnsafeMutableRawPointer?>.allocate(capacity: 1)
    private var started = false
    /// An empty buffer with room, for `drain`'s next batch (the service thread's alone).
    private var spareBuffer: [Command] = []
    /// The service thread's mark: it serves every connection, so it must never block.
    let nonBlocking = NonBlockingThread(name: "lws service")

    init() {
        eventLoop = kassa_ev_loop_new()
        foreignLoops.initialize(to: eventLoop.map { UnsafeMutableRawPointer($0) })
    }

    deinit {
        // A loop whose thread never ran (the context was not created) is ours to free.
        if !started, let eventLoop { kassa_ev_loop_destroy(eventLoop) }
        foreignLoops.deallocate()
    }

    /// Makes a context created from `info` run on this loop.
    func configure(_ info: inout lws_context_creation_info) {
        guard eventLoop != nil else { return }
        info.options |= UInt64(LWS_SERVER_OPTION_LIBEV)
        info.foreign_loops = foreignLoops
    }

    /// Starts the service thread for `context`; `teardown` runs on it after the context is destroyed.
    /// `beforePoll` runs on it on each pass of the loop, after the pass's callbacks and before the
    /// loop tells epoll what they changed.
    func start(_ context: OpaquePointer, name: String, beforePoll: (@Sendable () -> Void)? = nil,
               teardown: @escaping @Sendable () -> Void) {
        self.context = context
        started = true
        let thread = Thread.named(name) { [self] in
            guard let context = self.context else { return }
            serviceThread.store(UInt(pthread_self()), ordering: .releasing)
            nonBlocking.markCurrentThread()
            let hook = beforePoll.map { run in BeforePoll { self.passes.add(1, ordering: .relaxed); run() } }
            if let eventLoop {
                let tick = kassa_ev_tick_start(eventLoop, context, 0.1)
                let prepare = hook.map { kassa_ev_prepare_start(eventLoop, kassaBeforePoll, Unmanaged.passUnretained($0).toOpaque()) }
                kassa_ev_run(eventLoop)
                if let prepare { kassa_ev_prepare_stop(eventLoop, prepare) }
                withExtendedLifetime(hook) {}
                kassa_ev_tick_stop(eventLoop, tick)
            } else {
                while !exitRequested.load(ordering: .acquiring) {
                    if lws_service(context, 0) < 0 { break }
                    hook?.run()
                }
            }
            outbox.withLock { $0.alive = false }
            while wakesInFlight.load(ordering: .acquiring) > 0 { sched_yield() }
            lws_context_destroy(context)
            if let eventLoop { kassa_ev_loop_destroy(eventLoop) }
            teardown()
        }
        thread.start()
    }

    /// Queues a command for the service thread; false when the loop has ended.
    @discardableResult
    func post(_ command: Command) -> Bool {
        guard let context = self.context else { return false }
        let wake = outbox.withLock { box -> Bool? in
            guard box.alive else { return nil }
            box.commands.append(command)
            // One wake-up per batch: a non-empty outbox already has one pending (the service
            // thread empties it in `drain`).
            guard box.commands.count == 1 else { return false }
            wakesInFlight.add(1, ordering: .relaxed)
            return true
        }
        guard let wake else { return false }
        // The wake-up is a system call: made under the lock, it kept the service thread spinning
        // in `drain` whenever the poster was preempted (the gateway's threads may share one core).
        if wake {
            lws_cancel_service(context)
            wakesInFlight.subtract(1, ordering: .releasing)
        }
        return true
    }

    /// Runs `command` at once when called on the service thread with nothing queued (an answer
    /// made inside a callback, such as a pong): it needs no wake-up, and everything posted before
    /// it has already run, so the order of commands is kept. Otherwise queues it like `post`.
    @discardableResult
    func postOrRun(_ command: Command, _ run: (Command) -> Void) -> Bool {
        let onServiceThread = serviceThread.load(ordering: .acquiring) == UInt(pthread_self())
        if onServiceThread, outbox.withLock({ $0.alive && $0.commands.isEmpty }) {
            run(command)
            return true
        }
        return post(command)
    }

    /// On the service thread: runs `each` on the commands posted since the last call. Ends the
    /// loop here once an exit was requested (libev's loop may be broken only from its own thread).
    func drain(_ each: (Command) -> Void) {
        // The outbox and the batch trade buffers, so neither side allocates one per pass.
        var batch: [Command] = []
        swap(&batch, &spareBuffer)
        outbox.withLock { swap(&$0.commands, &batch) }
        if exitRequested.load(ordering: .acquiring), let eventLoop { kassa_ev_break(eventLoop) }
        for command in batch { each(command) }
        batch.removeAll(keepingCapacity: true)
        spareBuffer = batch
    }

    /// Ends the loop after the current service pass (safe from any thread).
    func requestExit() {
        exitRequested.store(true, ordering: .releasing)
        let context = self.context
        outbox.withLock { box in if box.alive, let context { lws_cancel_service(context) } }
    }
}

/// A loop's `beforePoll` action, boxed for libev's prepare watcher (a C callback cannot capture).
private final class BeforePoll {
    let run: () -> Void
    init(_ run: @escaping () -> Void) { self.run = run }
}

private func kassaBeforePoll(_ data: UnsafeMutableRawPointer?) {
    guard let data else { return }
    Unmanaged<BeforePoll>.fromOpaque(data).takeUnretainedValue().run()
}

/// The object a libwebsockets context was created for (its `user` pointer): how the
/// C callbacks, which cannot capture, find their server or client.
func contextOwner<Owner: AnyObject>(_ wsi: OpaquePointer?, as: Owner.Type) -> Owner? {
    guard let wsi, let context = lws_get_context(wsi), let raw = lws_context_user(context) else { return nil }
    return Unmanaged<Owner>.fromOpaque(raw).takeUnretainedValue()
}

/// libwebsockets logs errors only (its notices go to stderr, not to Kassa's JSON log);
/// KASSA_LWS_LOG_LEVEL sets its bit mask when chasing a problem.
func setLibWebSocketsLogLevel() {
    lws_set_log_level(Int32(ProcessInfo.processInfo.environment["KASSA_LWS_LOG_LEVEL"].flatMap { Int32($0) } ?? Int32(LLL_ERR)), nil)
}
