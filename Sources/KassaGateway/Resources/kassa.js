// kassa.js: the browser client of a Kassa payment session. An ES module with no
// dependencies and no build step; Kassa serves it at /kassa.js and its types at /kassa.d.ts.
//
// The merchant's backend creates the session (POST /v1/sessions with its API key, which
// never reaches a browser) and hands the page {id, clientToken, streamUrl}:
//
//   import { KassaSession, handleThreeDSecure } from "/kassa.js";
//   const session = new KassaSession(await (await fetch("/my-backend/checkout")).json());
//   session.on("PaymentSessionFetched", (e) => showInstruments(e.data.availableInstruments));
//   session.on("PaymentSessionComplete", () => location.assign("/thanks"));
//   handleThreeDSecure(session, { container: document.getElementById("bank") });
//   session.connect();
//   await session.attempt({ type: "Swish", msisdn: "+46739000001" });
//
// The stream numbers its events per session without gaps; the session resumes after every
// drop with ?since=<last seq>, so each event reaches the handlers exactly once, in order.
// A page that is loaded again for the same session (a reload, the Swish app returning to its
// callbackurl) gets the whole history unless it passes the `since` it kept (session.lastSeq).

/** The WebSocket subprotocol of the stream. */
export const PROTOCOL = "kassa.v1";

/** Close codes after which reconnecting cannot help: the token was refused, the session is unknown. */
const REFUSED_CLOSE_CODES = new Set([4401, 4404]);

/** True for the events after which a session pushes nothing more. */
export function isTerminalEvent(event) {
  return event.type === "PaymentSessionComplete" || event.type === "PaymentSessionCanceled" ||
    (event.type === "SdkProblemOccurred" && event.data?.problem?.type === "PaymentSessionEndReached");
}

/** Anything kassa.js rejects a command with. `command` is the frame (without the token: a frame never holds it). */
export class KassaError extends Error {
  constructor(message, { command = null, problem = null, cause } = {}) {
    super(message, cause === undefined ? undefined : { cause });
    this.name = new.target.name;
    this.command = command;
    this.problem = problem;
  }
}

/** The session answered `ok: false`: `problem` is the RFC 7807 problem (its `type`, `status`, `detail`). Nothing changed. */
export class KassaCommandError extends KassaError {}

/**
 * The connection dropped after the command was sent and before its answer came: it may or may
 * not have been carried out. Do not simply send it again; the stream says what happened (the
 * session resumes by itself and delivers every event it missed).
 */
export class KassaOutcomeUnknownError extends KassaError {}

/** The session had stopped (it ended, was refused, or close() was called): the command was never sent. */
export class KassaSessionClosedError extends KassaError {}

export class KassaSession {
  #token;
  #options;
  #handlers = new Map(); // event type, "*", "connection" or "problem" → Set of handlers
  #socket = null;
  #socketOpened = false; // whether the current socket reached open (a refused upgrade never does)
  #state = "idle";
  #lastSeq;
  #attempt = 0; // failed connections since the last successful open: the backoff exponent
  #timer = null; // the pending reconnect
  #heartbeat = null;
  #heard = false; // a frame arrived since the last heartbeat tick
  #pinged = false;
  #ending = null; // {event, timer} between a terminal event and the socket's close
  #queue = []; // commands waiting for an open socket, in order
  #pending = new Map(); // command id → {command, resolve, reject}, sent on the current socket
  #commandPrefix = randomPrefix();
  #commandCount = 0;
  #streamProblem = null; // the last `{"re": null, "ok": false}` problem (a refusal before 4401/4404)
  #resolveClosed;
  #online = () => { if (this.#state === "reconnecting") this.#openNow(); };

  /**
   * @param session what the merchant's backend handed over: {id, clientToken, streamUrl}
   * @param options baseUrl (default: this page's origin), since (default 0), backoff {initialMs, maxMs},
   *   heartbeatMs, checkOnFailedOpen, WebSocket and fetch (for tests and other environments)
   */
  constructor(session, options = {}) {
    const { id, clientToken, streamUrl } = session || {};
    if (typeof id !== "string" || !id || typeof clientToken !== "string" || !clientToken) {
      throw new TypeError("KassaSession needs {id, clientToken, streamUrl} as the merchant's backend got them from POST /v1/sessions");
    }
    const baseUrl = options.baseUrl ?? globalThis.location?.origin;
    if (!baseUrl) throw new TypeError("baseUrl is required outside a browser page");
    Object.defineProperties(this, {
      id: { value: id, enumerable: true },
      baseUrl: { value: String(baseUrl).replace(/\/+$/, ""), enumerable: true },
      streamUrl: { value: streamUrl || `/v1/sessions/${encodeURIComponent(id)}/stream`, enumerable: true },
    });
    this.#token = clientToken;
    this.#lastSeq = options.since ?? 0;
    if (!Number.isSafeInteger(this.#lastSeq) || this.#lastSeq < 0) throw new TypeError("since must be a whole number, 0 or more");
    this.#options = {
      initialMs: options.backoff?.initialMs ?? 500,
      maxMs: options.backoff?.maxMs ?? 15000,
      // The server pings, but a browser never sees pings: without our own, a connection that died
      // silently (a phone changing networks) would look open until TCP gives up, minutes later.
      heartbeatMs: options.heartbeatMs ?? 25000,
      checkOnFailedOpen: options.checkOnFailedOpen ?? true,
      WebSocket: options.WebSocket ?? globalThis.WebSocket,
      fetch: options.fetch ?? globalThis.fetch?.bind(globalThis),
    };
    /** Resolves once the session has stopped for good, with {reason, event?, code?, problem?}. */
    Object.defineProperty(this, "closed", { value: new Promise((resolve) => { this.#resolveClosed = resolve; }), enumerable: true });
  }

  /** The seq of the last event delivered; a reconnect asks for everything after it. */
  get lastSeq() { return this.#lastSeq; }

  /** "idle" (before connect), "connecting", "open", "reconnecting" (waiting to try again) or "closed" (for good). */
  get connectionState() { return this.#state; }

  /** Starts following the stream. Add handlers first: events are delivered as they arrive. */
  connect() {
    if (this.#state === "idle") {
      globalThis.addEventListener?.("online", this.#online);
      this.#openNow();
    }
    return this;
  }

  /** Stops for good: no reconnect; commands waiting for a connection are rejected. */
  close() {
    this.#stop({ reason: "client" });
  }

  /** Drops the connection now and opens a new one at once (as a network drop would, without the wait). */
  reconnect() {
    if (this.#state === "closed" || this.#state === "idle" || this.#ending) return;
    if (this.#socket) this.#lost(this.#socket, { code: 1000, reason: "reconnect" }, { now: true });
    else this.#openNow();
  }

  // MARK: Events

  /**
   * Calls `handler` for each event of `type` ("PaymentSessionFetched", …), for every event ("*"),
   * for connection changes ("connection": {state, attempt, delayMs, code, reason, problem}), or for
   * problems that are not an event nor a command's answer ("problem": a refused stream).
   * Returns a function that removes the handler.
   */
  on(type, handler) {
    if (!this.#handlers.has(type)) this.#handlers.set(type, new Set());
    this.#handlers.get(type).add(handler);
    return () => this.off(type, handler);
  }

  off(type, handler) {
    this.#handlers.get(type)?.delete(handler);
  }

  /** The events from now on, for `for await`; it ends after the session has stopped. */
  events() {
    const buffered = [];
    let wake = null;
    let done = false;
    const off = this.on("*", (event) => { buffered.push(event); wake?.(); });
    this.closed.then(() => { done = true; wake?.(); });
    return {
      [Symbol.asyncIterator]() { return this; },
      async next() {
        while (!buffered.length && !done) await new Promise((resolve) => { wake = resolve; });
        wake = null;
        if (buffered.length) return { value: buffered.shift(), done: false };
        off();
        return { value: undefined, done: true };
      },
      async return() {
        off();
        done = true;
        buffered.length = 0;
        return { value: undefined, done: true };
      },
    };
  }

  [Symbol.asyncIterator]() { return this.events(); }

  #emit(type, value) {
    for (const handler of [...(this.#handlers.get(type) || [])]) {
      // One handler's bug must not stop the others, nor the stream.
      try { handler(value); } catch (error) { report(error); }
    }
  }

  #setState(state, details = {}) {
    this.#state = state;
    this.#emit("connection", { state, ...details });
  }

  // MARK: Commands

  /**
   * Sends a command: `send("attempt", {instrument})`. Resolves with the answer `{re, ok: true}`;
   * rejects with KassaCommandError (the session refused it: `error.problem`), KassaOutcomeUnknownError
   * (the connection dropped before the answer) or KassaSessionClosedError (never sent).
   * A command sent while the connection is down waits for the next open one.
   */
  send(type, body = {}) {
    const command = { ...body, type, id: `${this.#commandPrefix}-${++this.#commandCount}` };
    return new Promise((resolve, reject) => {
      if (this.#state === "closed" || this.#ending) {
        reject(new KassaSessionClosedError(`the session has stopped; ${type} was not sent`, { command }));
        return;
      }
      const entry = { command, resolve, reject };
      if (this.#socket && this.#socketOpened && this.#socket.readyState === 1) this.#transmit(entry);
      else this.#queue.push(entry);
    });
  }

  /** Pays with an instrument: {type: "Swish", msisdn?}, {type: "CreditCard", paymentToken}, {type: "NewCreditCard"}, {type: "ApplePay"}, {type: "GooglePay"}. */
  attempt(instrument) { return this.send("attempt", { instrument }); }
  abort() { return this.send("abort"); }
  /** After SdkProblemOccurred with retryable: true. */
  retry() { return this.send("retry"); }
  /** Swedbank Pay's payment menu: all methods, `{restrictToInstruments: [...]}`, or `{instrument: "Vipps"}` (instrument mode). */
  fallback(options = {}) { return this.send("fallback", options); }
  /** The wallet sheet's result for ShowWallet: its payment data (base64), or `{canceled: true}`. */
  wallet(result) { return this.send("wallet", typeof result === "string" ? { payload: result } : result); }
  cancelWallet() { return this.send("wallet", { canceled: true }); }
  /** Whether the hidden frame of Run3DSecureMethod loaded (handleThreeDSecure sends it for you). */
  threeDSecureMethod(completed) { return this.send("3dsMethod", { completed: Boolean(completed) }); }
  /** The challenge's cRes, when the client captured it (normally the issuer posts it to Kassa itself). */
  threeDSecure(cres) { return this.send("3ds", { cres }); }
  /** The challenge of Show3DSecure could not be shown: a retryable SdkProblemOccurred follows. */
  threeDSecureLoadFailed(reason) { return this.send("3ds", { loadFailed: String(reason) }); }
  /** The app of LaunchClientApp did not open. */
  appLaunchFailed() { return this.send("appLaunchFailed"); }
  ping() { return this.send("ping"); }

  #transmit(entry) {
    this.#pending.set(entry.command.id, entry);
    try {
      this.#socket.send(JSON.stringify(entry.command));
    } catch (error) {
      // The socket closed between the check and the send: nothing left, so it waits for the next one
      // (in order: the queue is empty or being flushed front to back when this happens).
      this.#pending.delete(entry.command.id);
      this.#queue.push(entry);
    }
  }

  #answer(message) {
    const entry = message.re == null ? undefined : this.#pending.get(message.re);
    if (!entry) {
      // Not an answer to anything pending: a problem with the stream itself (sent before a 4401/4404 close).
      if (message.ok === false) {
        this.#streamProblem = message.problem ?? null;
        this.#emit("problem", message.problem);
      }
      return;
    }
    this.#pending.delete(message.re);
    if (message.ok) entry.resolve(message);
    else {
      const problem = message.problem ?? {};
      entry.reject(new KassaCommandError(`${entry.command.type} refused: ${problem.detail || problem.title || problem.type || "no reason given"}`,
        { command: entry.command, problem }));
    }
    if (this.#ending && this.#pending.size === 0) this.#finish();
  }

  #rejectPending(error) {
    for (const entry of this.#pending.values()) {
      entry.reject(new error.constructor(`${entry.command.type}: ${error.message}`, { command: entry.command }));
    }
    this.#pending.clear();
  }

  // MARK: The connection

  #openNow() {
    clearTimeout(this.#timer);
    this.#timer = null;
    // streamUrl is a path on Kassa: it goes after baseUrl, which may carry a proxy's path prefix.
    const url = new URL(/^[a-z][a-z0-9+.-]*:/i.test(this.streamUrl) ? this.streamUrl : this.baseUrl + this.streamUrl);
    if (url.protocol === "https:") url.protocol = "wss:";
    else if (url.protocol === "http:") url.protocol = "ws:";
    url.searchParams.set("since", String(this.#lastSeq));
    url.searchParams.set("token", this.#token);
    this.#setState("connecting", { attempt: this.#attempt, since: this.#lastSeq });
    let socket;
    try {
      socket = new this.#options.WebSocket(url.href, PROTOCOL);
    } catch (error) {
      // A URL the browser refuses (CSP, a bad baseUrl): trying again cannot help.
      this.#stop({ reason: "refused", problem: { type: "about:blank", title: "WebSocket refused", detail: String(error?.message || error) } });
      return;
    }
    this.#socket = socket;
    this.#socketOpened = false;
    socket.onopen = () => {
      if (this.#socket !== socket) return;
      this.#socketOpened = true;
      this.#attempt = 0; // the backoff starts over after every successful open
      this.#setState("open", { since: Number(url.searchParams.get("since")) });
      this.#startHeartbeat(socket);
      for (const entry of this.#queue.splice(0)) this.#transmit(entry);
    };
    socket.onmessage = (message) => this.#receive(socket, message.data);
    socket.onclose = (close) => this.#lost(socket, { code: close.code, reason: close.reason });
    // onerror is always followed by onclose, which decides.
  }

  #receive(socket, text) {
    if (this.#socket !== socket) return;
    this.#heard = true;
    this.#pinged = false;
    let message;
    try { message = JSON.parse(text); } catch { return; }
    if (message === null || typeof message !== "object") return;
    if (typeof message.seq === "number") this.#event(message);
    else if ("re" in message) this.#answer(message);
  }

  #event(event) {
    if (this.#ending) return;
    // A replay that overlaps what we have (since is exclusive, so this should not happen; harmless if it does).
    if (event.seq <= this.#lastSeq) return;
    if (event.seq !== this.#lastSeq + 1) {
      // The stream promises no gaps; if one shows up anyway, ask again from what we have.
      this.#lost(this.#socket, { code: 1000, reason: `gap: expected seq ${this.#lastSeq + 1}, got ${event.seq}` });
      return;
    }
    this.#lastSeq = event.seq;
    this.#emit(event.type, event);
    this.#emit("*", event);
    if (isTerminalEvent(event)) {
      // The end. Answers may still be on their way (the command that ended it): wait for them, briefly.
      this.#ending = { event, timer: setTimeout(() => this.#finish(), 2000) };
      for (const entry of this.#queue.splice(0)) {
        entry.reject(new KassaSessionClosedError(`the session ended (${event.type}); ${entry.command.type} was not sent`, { command: entry.command }));
      }
      if (this.#pending.size === 0) this.#finish();
    }
  }

  #finish() {
    if (!this.#ending) return;
    clearTimeout(this.#ending.timer);
    this.#stop({ reason: "ended", event: this.#ending.event });
  }

  /** The socket closed (or is given up): decide whether and when to try again. */
  #lost(socket, { code, reason }, { now = false } = {}) {
    if (!socket || this.#socket !== socket) return;
    const wasOpen = this.#socketOpened;
    this.#detach(socket);
    this.#rejectPending(new KassaOutcomeUnknownError(
      "the connection dropped before the answer; the command may or may not have been carried out, and the stream will tell"));
    if (this.#state === "closed") return;
    if (this.#ending) { this.#finish(); return; }
    if (REFUSED_CLOSE_CODES.has(code)) {
      this.#stop({ reason: "refused", code, problem: this.#streamProblem });
      return;
    }
    if (now) { this.#openNow(); return; }
    this.#attempt += 1;
    const base = Math.min(this.#options.maxMs, this.#options.initialMs * 2 ** (this.#attempt - 1));
    const delayMs = Math.round(base * (0.5 + Math.random() * 0.5)); // jitter: clients cut off together do not return together
    this.#setState("reconnecting", { attempt: this.#attempt, delayMs, code, reason });
    // A refused upgrade (401, 404) reaches a browser as a bare 1006 before open; the session's
    // own URL tells why, with the same token, and says whether trying again can help. The next
    // try waits for that answer too, so a refused session is tried once, however slow the check.
    const checked = !wasOpen && this.#options.checkOnFailedOpen && this.#options.fetch ? this.#checkSession() : null;
    this.#timer = setTimeout(() => {
      if (!checked) { this.#openNow(); return; }
      this.#timer = null;
      const go = () => { if (this.#state === "reconnecting" && !this.#timer) this.#openNow(); };
      checked.then(go, go);
    }, delayMs);
  }

  async #checkSession() {
    let response;
    try {
      // Bounded: the next try waits for this answer.
      response = await this.#options.fetch(`${this.baseUrl}/v1/sessions/${encodeURIComponent(this.id)}`,
        { headers: { Authorization: `Bearer ${this.#token}` }, cache: "no-store", credentials: "omit",
          signal: typeof AbortSignal.timeout === "function" ? AbortSignal.timeout(5000) : undefined });
    } catch {
      return; // the network is down: keep trying
    }
    if (response.status !== 401 && response.status !== 404) return;
    if (this.#state === "closed" || this.#state === "open") return;
    let problem = null;
    try { problem = await response.json(); } catch { problem = { status: response.status }; }
    this.#emit("problem", problem);
    this.#stop({ reason: "refused", code: response.status, problem });
  }

  #startHeartbeat(socket) {
    const every = this.#options.heartbeatMs;
    if (!every) return;
    this.#heard = true;
    this.#pinged = false;
    this.#heartbeat = setInterval(() => {
      if (this.#socket !== socket) return;
      if (!this.#heard) {
        // A whole interval of silence after a ping: the connection is dead, whatever the browser thinks.
        if (this.#pinged) { this.#lost(socket, { code: 1006, reason: "no answer to ping" }); return; }
        this.#pinged = true;
        this.ping().catch(() => {});
      }
      this.#heard = false;
    }, every);
  }

  #detach(socket) {
    clearInterval(this.#heartbeat);
    this.#heartbeat = null;
    socket.onopen = socket.onmessage = socket.onclose = null;
    socket.onerror = null;
    if (socket.readyState === 0 || socket.readyState === 1) {
      try { socket.close(1000); } catch { /* already closing */ }
    }
    if (this.#socket === socket) { this.#socket = null; this.#socketOpened = false; }
  }

  #stop(info) {
    if (this.#state === "closed") return;
    clearTimeout(this.#timer);
    this.#timer = null;
    if (this.#ending) clearTimeout(this.#ending.timer);
    globalThis.removeEventListener?.("online", this.#online);
    if (this.#socket) this.#detach(this.#socket);
    this.#rejectPending(new KassaOutcomeUnknownError("the session stopped before the answer; the stream's events tell what happened"));
    for (const entry of this.#queue.splice(0)) {
      entry.reject(new KassaSessionClosedError(`the session has stopped (${info.reason}); ${entry.command.type} was not sent`, { command: entry.command }));
    }
    this.#setState("closed", info);
    this.#resolveClosed(info);
  }
}

// MARK: Browser helpers. Each takes a session and returns a function that detaches it.

/**
 * LaunchClientApp: switches to the app (Swish) by navigating to its URL.
 * Options: navigate (default true; false to show your own link or button), onLaunch(url, event),
 * failAfterMs (default 0: off): if the page is still visible that long after the switch, the app
 * did not open, and `appLaunchFailed` is sent so the payer can choose again.
 */
export function handleAppSwitch(session, { navigate = true, onLaunch, failAfterMs = 0, onError = report } = {}) {
  return session.on("LaunchClientApp", (event) => whenCurrent(session, event, () => {
    onLaunch?.(event.data.url, event);
    if (!navigate) return;
    if (failAfterMs > 0 && globalThis.document) {
      let left = false;
      const leave = () => { if (document.visibilityState === "hidden") left = true; };
      document.addEventListener("visibilitychange", leave);
      setTimeout(() => {
        document.removeEventListener("visibilitychange", leave);
        if (!left && isLatest(session, event)) session.appLaunchFailed().catch(onError);
      }, failAfterMs);
    }
    globalThis.location.assign(event.data.url);
  }));
}

/**
 * 3-D Secure in the browser. Run3DSecureMethod: posts the form into a hidden frame and sends
 * `3dsMethod` with completed: true once it has loaded (false on an error or after data.timeoutMs).
 * Show3DSecure: posts the challenge (creq) into a visible frame; the issuer's page posts the
 * cRes to Kassa itself, and the frame is hidden on Dismiss3DSecure or any later event.
 * Options: methodFrame and challengeFrame (iframes to use; made in `container`, default
 * document.body, when missing), onChallenge(visible, frame) to show and hide it yourself
 * (default: the frame's `hidden`), onError for refused commands.
 * The page's CSP must let it: frame-src and form-action for the issuers' origins.
 */
export function handleThreeDSecure(session, { methodFrame, challengeFrame, container, onChallenge, onError = report } = {}) {
  let challenge = challengeFrame || null;
  let showing = false;
  const show = (visible) => {
    showing = visible;
    // A frame made here is shown and hidden here; one the page gave is the page's to show if it asks to.
    if (!challengeFrame || !onChallenge) challenge.hidden = !visible;
    onChallenge?.(visible, challenge);
  };
  const offMethod = session.on("Run3DSecureMethod", (event) => whenCurrent(session, event, () => {
    const frame = methodFrame || makeFrame(container, "kassa-3ds-method", true);
    let finished = false;
    const finish = (completed) => {
      if (finished) return;
      finished = true;
      clearTimeout(timer);
      frame.removeEventListener("load", loaded);
      frame.removeEventListener("error", failed);
      if (!methodFrame) frame.remove();
      // Kassa goes on by itself after timeoutMs: once anything followed, the answer is moot.
      if (isLatest(session, event)) session.threeDSecureMethod(completed).catch(onError);
    };
    // The empty frame's own about:blank load (synchronous in some browsers, not in others) is not the step.
    const loaded = () => { if (!isBlank(frame)) finish(true); };
    const failed = () => finish(false);
    postToFrame(frame, event.data);
    frame.addEventListener("load", loaded);
    frame.addEventListener("error", failed);
    const timer = setTimeout(() => finish(false), event.data.timeoutMs ?? 10000);
  }));
  const offChallenge = session.on("*", (event) => {
    if (event.type === "Show3DSecure") {
      whenCurrent(session, event, () => {
        challenge = challenge || makeFrame(container, "kassa-3ds-challenge", false);
        show(true);
        postToFrame(challenge, event.data);
      });
    } else if (showing) {
      show(false); // Dismiss3DSecure, a problem, or the end: the challenge is over
    }
  });
  return () => { offMethod(); offChallenge(); };
}

/**
 * ShowPaymentMenu: frames Kassa's menu host page, `{baseUrl}/menu/?url=<data.url>` (the url is
 * Swedbank Pay's script, not a page), and passes on what it reports: onMessage({event, data})
 * with event "loaded", "paid", "error" or "event" (Swedbank Pay's onEventNotification).
 * Options: frame (an iframe; made in `container` when missing), onShow(visible, frame, event)
 * (default: the frame's `hidden`). The menu is hidden when a native attempt takes over or the
 * session ends. The page's CSP must let it frame Kassa's origin (frame-src).
 */
export function handlePaymentMenu(session, { frame, container, onShow, onMessage } = {}) {
  let menu = frame || null;
  let showing = false;
  const menuOrigin = new URL(session.baseUrl + "/").origin;
  const show = (visible, event) => {
    showing = visible;
    if (!frame || !onShow) menu.hidden = !visible;
    onShow?.(visible, menu, event);
  };
  const offEvents = session.on("*", (event) => {
    if (event.type === "ShowPaymentMenu") {
      whenCurrent(session, event, () => {
        menu = menu || makeFrame(container, "kassa-menu", false);
        menu.src = `${session.baseUrl}/menu/?url=${encodeURIComponent(event.data.url)}`;
        show(true, event);
      });
    } else if (showing && (isTerminalEvent(event) || NATIVE_STEPS.has(event.type))) {
      show(false, event);
    }
  });
  // The host page posts to "*" (it cannot know who frames it): take only its own messages.
  const listener = (message) => {
    if (message.origin !== menuOrigin || !menu || message.source !== menu.contentWindow) return;
    if (message.data?.source !== "kassa-menu") return;
    onMessage?.({ event: message.data.event, data: message.data.data ?? {} });
  };
  globalThis.addEventListener?.("message", listener);
  return () => { offEvents(); globalThis.removeEventListener?.("message", listener); };
}

/**
 * Runs `act` for an event that asks the page to do something, unless it turns out to be history:
 * a page that comes back (the Swish app returning to its callbackurl, a reload) and follows the
 * session from since=0 gets every event again, and must not switch to the app a second time
 * (or open a finished challenge) because a LaunchClientApp is among them. Replayed events arrive in one burst, so an event
 * followed at once by another is past. (Passing the `since` the page stored avoids the replay.)
 */
function whenCurrent(session, event, act) {
  setTimeout(() => { if (isLatest(session, event)) act(); }, 50);
}

/** Nothing has happened since `event`: what it asked for is still wanted. */
function isLatest(session, event) {
  return session.lastSeq === event.seq && session.connectionState !== "closed";
}

/** Events that mean the payer went on with a native instrument instead of the menu. */
const NATIVE_STEPS = new Set(["LaunchClientApp", "Run3DSecureMethod", "Show3DSecure", "ShowWallet"]);

/**
 * Submits `form` to `url` with `method` into `frame` (a form with target = the frame's name):
 * how a 3-D Secure page is opened. No inline script or style, so it runs under a strict CSP.
 */
export function postToFrame(frame, { url, method = "POST", form = {} }) {
  if (!frame.name) frame.name = `kassa-frame-${randomPrefix()}`;
  const doc = frame.ownerDocument;
  const element = doc.createElement("form");
  element.method = method;
  element.action = url;
  element.target = frame.name;
  element.hidden = true;
  for (const [name, value] of Object.entries(form)) {
    const input = doc.createElement("input");
    input.type = "hidden";
    input.name = name;
    input.value = String(value);
    element.appendChild(input);
  }
  doc.body.appendChild(element);
  // The prototype's submit: an input named "submit" would shadow the form's own.
  HTMLFormElement.prototype.submit.call(element);
  element.remove();
}

function makeFrame(container, prefix, hidden) {
  const frame = document.createElement("iframe");
  frame.name = `${prefix}-${randomPrefix()}`;
  frame.title = hidden ? "3-D Secure method step" : "Payment";
  if (hidden) {
    // CSSOM, not a style attribute: allowed under a CSP without 'unsafe-inline'.
    frame.style.display = "none";
  } else {
    frame.hidden = true;
  }
  (container || document.body).appendChild(frame);
  return frame;
}

function isBlank(frame) {
  try {
    return frame.contentWindow.location.href === "about:blank";
  } catch {
    return false; // another origin's page: the issuer's
  }
}

function randomPrefix() {
  const bytes = new Uint8Array(4);
  globalThis.crypto.getRandomValues(bytes);
  return Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}

function report(error) {
  if (typeof globalThis.reportError === "function") globalThis.reportError(error);
  else console.error(error);
}
