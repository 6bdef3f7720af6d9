"""kassa.js in headless Chromium through a really dropped connection.

A TCP proxy of this script's own, on a free loopback port, stands in front of the gateway,
and the page is loaded through it (/demo/, so kassa.js runs under the demo's CSP and the
stream is same-origin). The session is created here, with the API key, and the page gets
only {id, clientToken, streamUrl}; it imports /kassa.js and pays with the simulator's Swish.
On the way the proxy cuts every connection twice (once with a command on the wire, once
mid-payment) and refuses new ones for a second each time, so the backoff shows.

Checks: the events arrive typed and gap-free from 1 to PaymentSessionComplete, each once,
in on("*") and in `for await`; every reconnect asked for `since` = the last seq it had, and
the gateway sent nothing twice; reconnect delays grow (exponential, 50-100 % jitter) and
start over after an open; a command taken resolves {re, ok: true}, a command the state
refuses (`retry` while awaiting the instrument) rejects with
urn:kassa:problem:command-not-allowed, one whose connection dropped before its answer rejects
with KassaOutcomeUnknownError, and one sent while reconnecting waits and is taken; after
PaymentSessionComplete no connection is attempted for 2 s; a stream for an unknown session
stops with the gateway's 404 problem after one try; /kassa.js and /kassa.d.ts are served;
nothing is blocked by the CSP.

Usage: python3 kassa_js.py BASE_URL API_KEY
Exit 0 when all hold; otherwise each failure is printed.
"""
import re
import socket
import struct
import sys
import threading
import time
from urllib.parse import urlparse

from kassa_sessions import create_session
from playwright.sync_api import Error as PlaywrightError
from playwright.sync_api import sync_playwright

MSISDN = "+46739000001"
INITIAL_MS, MAX_MS = 200, 2000


class DroppingProxy:
    """Forwards loopback TCP to the gateway; cut() resets every connection and refuses new ones for a while."""

    def __init__(self, target_host, target_port):
        self.target = (target_host, target_port)
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.lock = threading.Lock()
        self.pairs = []
        self.accepted = 0
        self.refused = 0
        self.refuse_until = 0.0
        self.stalled = False
        self.streams = []  # (session id, since) of every stream upgrade that reached the gateway
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            with self.lock:
                if time.monotonic() < self.refuse_until:
                    self.refused += 1
                    reset(client)
                    continue
                self.accepted += 1
            try:
                upstream = socket.create_connection(self.target)
            except OSError:
                reset(client)
                continue
            with self.lock:
                self.pairs.append((client, upstream))
            threading.Thread(target=self._pump, args=(client, upstream, True), daemon=True).start()
            threading.Thread(target=self._pump, args=(upstream, client, False), daemon=True).start()

    def _pump(self, source, sink, from_client):
        try:
            while True:
                data = source.recv(65536)
                if not data:
                    break
                if from_client:
                    match = re.match(rb"GET /v1/sessions/([0-9a-f]+)/stream\?since=(\d+)", data)
                    if match:
                        self.streams.append((match.group(1).decode(), int(match.group(2))))
                    if self.stalled:
                        continue  # swallowed: the command never reaches the gateway, so no answer comes
                sink.sendall(data)
        except OSError:
            pass
        for s in (source, sink):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def stall(self):
        self.stalled = True

    def cut(self, refuse_for):
        """Resets every proxied connection (the browser sees 1006) and refuses new ones for refuse_for seconds."""
        with self.lock:
            self.refuse_until = time.monotonic() + refuse_for
            self.stalled = False
            pairs, self.pairs = self.pairs, []
        for client, upstream in pairs:
            reset(client)
            reset(upstream)

    def connections(self):
        with self.lock:
            return self.accepted + self.refused

    def close(self):
        self.listener.close()
        self.cut(0)


def reset(sock):
    """Closes with RST, as a dropped network does, rather than an orderly close. The shutdown wakes a
    pump thread blocked in recv on it (a bare close would not, and the connection would live on)."""
    for step in (lambda: sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0)),
                 lambda: sock.shutdown(socket.SHUT_RDWR), sock.close):
        try:
            step()
        except OSError:
            pass


# Runs in the page: imports the library as any page would and records what it sees.
SETUP = """async (handle) => {
  const kassa = await import("/kassa.js");
  const t = { events: [], iterated: [], raw: [], sockets: [], states: [], problems: [], kassa };
  // A WebSocket that notes each connection's since and every frame as it came off the wire.
  class RecordingWebSocket extends WebSocket {
    constructor(url, protocols) {
      super(url, protocols);
      const since = Number(new URL(url).searchParams.get("since"));
      t.sockets.push({ since, lastSeq: t.session ? t.session.lastSeq : null, protocols });
      this.addEventListener("message", (m) => {
        const frame = JSON.parse(m.data);
        if (typeof frame.seq === "number") t.raw.push(frame.seq);
      });
    }
  }
  t.capture = async (promise) => {
    try { return { resolved: await promise }; }
    catch (e) { return { rejected: { name: e.name, message: e.message, problem: e.problem ?? null,
                                     isKassaError: e instanceof kassa.KassaError, command: e.command ?? null } }; }
  };
  const session = new kassa.KassaSession(handle, {
    WebSocket: RecordingWebSocket, backoff: { initialMs: %d, maxMs: %d } });
  t.session = session;
  session.on("*", (e) => t.events.push({ seq: e.seq, type: e.type, session: e.session,
    data: typeof e.data === "object" && e.data !== null && !Array.isArray(e.data) ? Object.keys(e.data).sort() : null,
    at: !Number.isNaN(Date.parse(e.at)) }));
  session.on("connection", (c) => t.states.push({ ...c, t: performance.now() }));
  session.on("problem", (p) => t.problems.push(p));
  session.closed.then((info) => { t.closedInfo = { reason: info.reason, type: info.event?.type ?? null }; });
  (async () => { for await (const e of session.events()) t.iterated.push(e.seq); t.iterationEnded = true; })();
  const served = async (path) => {
    const r = await fetch(path, { cache: "no-store" });
    return { status: r.status, type: r.headers.get("content-type"), text: (await r.text()).slice(0, 200000) };
  };
  const js = await served("/kassa.js"), dts = await served("/kassa.d.ts");
  t.assets = { js: { status: js.status, type: js.type },
               dts: { status: dts.status, declaresSession: dts.text.includes("export declare class KassaSession") } };
  window.__t = t;
  session.connect();
}""" % (INITIAL_MS, MAX_MS)


def reconnect_runs(states):
    """The runs of reconnecting states between opens: [[(attempt, delayMs), ...], ...]."""
    runs, run = [], []
    for s in states:
        if s["state"] == "reconnecting":
            run.append((s["attempt"], s["delayMs"]))
        elif s["state"] == "open" and run:
            runs.append(run)
            run = []
    if run:
        runs.append(run)
    return runs


def main(base, api_key):
    failures = []

    def check(condition, what):
        if not condition:
            failures.append(what)
        return condition

    target = urlparse(base)
    proxy = DroppingProxy(target.hostname, target.port or 80)
    origin = f"http://127.0.0.1:{proxy.port}"
    handle = create_session(base, api_key, "kassa_js.py", origin)
    page_handle = {k: handle[k] for k in ("id", "clientToken", "streamUrl")}
    blocked = []
    stage = "loading /demo/ through the proxy and importing /kassa.js"
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", headless=True, args=["--no-sandbox"])
        try:
            page = browser.new_page()
            page.on("console", lambda m: blocked.append(m.text) if "Content Security Policy" in m.text else None)
            page.goto(origin + "/demo/")
            page.evaluate(SETUP, page_handle)
            stage = "waiting for PaymentSessionFetched"
            page.wait_for_function("() => window.__t && window.__t.events.length >= 1", timeout=15000)

            refused = page.evaluate("() => __t.capture(__t.session.retry())")
            pong = page.evaluate("() => __t.capture(__t.session.ping())")

            # Drop 1: a command on the wire when the connection goes (the proxy swallows it first).
            stage = "the first drop"
            proxy.stall()
            page.evaluate("() => { __t.stalledPing = __t.capture(__t.session.ping()); }")
            time.sleep(0.3)
            proxy.cut(refuse_for=1.0)
            page.wait_for_function("() => __t.session.connectionState !== 'open'", timeout=5000)
            # A command sent while the connection is down waits for the next one.
            sent_while = page.evaluate("""() => { const state = __t.session.connectionState;
                __t.attempted = __t.capture(__t.session.attempt({ type: "Swish", msisdn: "%s" })); return state; }""" % MSISDN)
            stalled = page.evaluate("() => __t.stalledPing")
            attempted = page.evaluate("() => __t.attempted")
            if "resolved" not in attempted:
                raise PlaywrightError(f"the Swish attempt sent while reconnecting was not taken: {attempted}")

            # Drop 2: mid-payment, while the payer confirms in Swish.
            stage = "the second drop, waiting for PaymentSessionComplete"
            proxy.cut(refuse_for=1.0)
            page.wait_for_function("() => __t.events.some((e) => e.type === 'PaymentSessionComplete')", timeout=25000)
            stage = "waiting for the session to stop and for await to end after PaymentSessionComplete"
            page.wait_for_function("() => __t.closedInfo !== undefined && __t.iterationEnded === true", timeout=5000)
            connections_at_end = proxy.connections()
            sockets_at_end = page.evaluate("() => __t.sockets.length")
            time.sleep(2.0)
            quiet = {"proxy": proxy.connections() - connections_at_end,
                     "sockets": page.evaluate("() => __t.sockets.length") - sockets_at_end}
            t = page.evaluate("""() => ({ events: __t.events, iterated: __t.iterated, raw: __t.raw, sockets: __t.sockets,
                states: __t.states, problems: __t.problems, closedInfo: __t.closedInfo, assets: __t.assets,
                state: __t.session.connectionState, lastSeq: __t.session.lastSeq })""")

            stage = "following an unknown session"
            # A session the gateway does not know: the upgrade is refused (the browser sees only 1006),
            # kassa.js asks GET /v1/sessions/{id} why, and stops with the problem instead of retrying,
            # even when that answer comes after the first retry was due.
            unknown = page.evaluate("""async (handle) => {
                const sockets = [];
                class Counting extends WebSocket { constructor(u, p) { super(u, p); sockets.push(u); } }
                // The check answers later than the first retry is due: the retry waits for it.
                const slowFetch = (url, init) => new Promise((r) => setTimeout(r, 400)).then(() => fetch(url, init));
                const s = new __t.kassa.KassaSession(handle, { WebSocket: Counting, fetch: slowFetch, backoff: { initialMs: 100 } });
                const problems = [];
                s.on("problem", (p) => problems.push(p.type));
                s.connect();
                const info = await Promise.race([s.closed, new Promise((r) => setTimeout(() => r(null), 8000))]);
                if (!info) s.close();
                await new Promise((r) => setTimeout(r, 500));
                return { info: info && { reason: info.reason, code: info.code ?? null, type: info.problem?.type ?? null },
                         sockets: sockets.length, problems };
            }""", {"id": "0" * 32, "clientToken": handle["clientToken"], "streamUrl": f"/v1/sessions/{'0' * 32}/stream"})
        except PlaywrightError as error:
            print(f"FAILED: {stage}: {str(error).splitlines()[0]}")
            try:
                print("the page saw:", page.evaluate("""() => window.__t && { events: __t.events.map((e) => e.seq + " " + e.type),
                    states: __t.states.map((c) => c.state + (c.attempt ? " " + c.attempt : "")), closed: __t.closedInfo ?? null }"""))
            except PlaywrightError:
                pass
            return 1
        finally:
            browser.close()
            proxy.close()

    events = t["events"]
    seqs = [e["seq"] for e in events]
    types = [e["type"] for e in events]
    known = {"PaymentSessionFetched", "LaunchClientApp", "Run3DSecureMethod", "ShowWallet", "Show3DSecure",
             "Dismiss3DSecure", "ShowPaymentMenu", "PaymentSessionComplete", "PaymentSessionCanceled",
             "SessionProblemOccurred", "SdkProblemOccurred"}
    runs = reconnect_runs(t["states"])
    reconnects = t["sockets"][1:]
    on_the_wire = [since for session, since in proxy.streams if session == handle["id"]]
    print("events", list(zip(seqs, types)))
    print("raw frames", t["raw"], "iterated", t["iterated"])
    print("sockets (since, lastSeq)", [(s["since"], s["lastSeq"]) for s in t["sockets"]], "on the wire", on_the_wire)
    print("reconnect runs (attempt, delayMs)", runs, "refused connections", proxy.refused)
    print("retry:", refused, "ping:", pong)
    print("stalled ping:", stalled, "sent while", sent_while, "->", attempted)
    print("after the end:", quiet, "closed", t["closedInfo"], "state", t["state"])
    print("unknown session:", unknown, "assets", t["assets"], "blocked by CSP", blocked)

    # The events: typed, gap-free from 1, each once, to the end.
    check(seqs == list(range(1, len(seqs) + 1)), f"events are not 1..n without gaps or repeats: {seqs}")
    check(types[:1] == ["PaymentSessionFetched"] and types[-1:] == ["PaymentSessionComplete"],
          f"expected PaymentSessionFetched first and PaymentSessionComplete last: {types}")
    check(all(e["type"] in known and e["session"] == handle["id"] and e["data"] is not None and e["at"] for e in events),
          f"every event has a known type, this session's id, an object data and a time: {events}")
    data_keys = {e["type"]: e["data"] for e in events}
    check(data_keys.get("PaymentSessionFetched") == ["availableInstruments"] and data_keys.get("PaymentSessionComplete") == [],
          f"the events' data is as kassa.d.ts declares it: {data_keys}")
    check(t["iterated"] == seqs, f"for await saw {t['iterated']}, on('*') saw {seqs}")
    check(t["raw"] == seqs, f"the gateway sent frames twice or out of order (since not used?): {t['raw']}")
    # The reconnects resumed from the last seq, on the wire too.
    check(t["sockets"][:1] and t["sockets"][0]["since"] == 0, "the first connection asks since=0")
    check(len(reconnects) >= 4, f"expected several reconnect attempts across two drops: {len(reconnects)}")
    check(all(s["since"] == s["lastSeq"] and s["since"] >= 1 for s in reconnects),
          f"every reconnect asks since = the last seq it has: {reconnects}")
    check(all(s["protocols"] == "kassa.v1" for s in t["sockets"]), "every connection asks for the kassa.v1 subprotocol")
    check(on_the_wire[:1] == [0] and len(on_the_wire) >= 3 and all(s >= 1 for s in on_the_wire[1:]),
          f"the gateway saw since=0, then only resumed since values: {on_the_wire}")
    # Backoff: each refusal window shows growing delays with jitter, starting over after an open.
    check(proxy.refused >= 2, f"the proxy refused too few attempts to show a backoff: {proxy.refused}")
    check(len(runs) >= 2, f"expected a reconnecting run per drop: {runs}")
    for run in runs:
        attempts = [a for a, _ in run]
        check(attempts == list(range(1, len(run) + 1)), f"attempts count up from 1 after each open: {attempts}")
        for attempt, delay in run:
            cap = min(MAX_MS, INITIAL_MS * 2 ** (attempt - 1))
            check(cap * 0.5 - 1 <= delay <= cap + 1, f"delay {delay} ms for attempt {attempt} is outside {cap // 2}-{cap} ms")
    check(any(len(run) >= 2 for run in runs), f"no drop needed a second try, so the backoff never grew: {runs}")
    # Commands.
    check(pong.get("resolved", {}).get("ok") is True and isinstance(pong["resolved"].get("re"), str),
          f"ping resolves with {{re, ok: true}}: {pong}")
    rejected = refused.get("rejected") or {}
    check(rejected.get("name") == "KassaCommandError" and rejected.get("isKassaError")
          and (rejected.get("problem") or {}).get("type") == "urn:kassa:problem:command-not-allowed",
          f"retry while awaiting the instrument rejects with command-not-allowed: {refused}")
    check((stalled.get("rejected") or {}).get("name") == "KassaOutcomeUnknownError",
          f"a command whose connection dropped before its answer rejects with KassaOutcomeUnknownError: {stalled}")
    check(sent_while in ("connecting", "reconnecting"), f"the attempt was meant to be sent while reconnecting, not {sent_while}")
    answer = attempted.get("resolved") or {}
    check(answer.get("ok") is True and isinstance(answer.get("re"), str) and answer["re"],
          f"the attempt sent while reconnecting resolves with {{re, ok: true}}: {attempted}")
    # The end: nothing more.
    check(quiet == {"proxy": 0, "sockets": 0}, f"connections were attempted after PaymentSessionComplete: {quiet}")
    check(t["state"] == "closed" and t["closedInfo"] == {"reason": "ended", "type": "PaymentSessionComplete"},
          f"the session stops for good at PaymentSessionComplete: {t['state']} {t['closedInfo']}")
    check(not t["problems"], f"stream problems: {t['problems']}")
    # A refused stream stops with its problem.
    check(unknown["info"] == {"reason": "refused", "code": 404, "type": "urn:kassa:problem:not-found"}
          and unknown["sockets"] == 1 and unknown["problems"] == ["urn:kassa:problem:not-found"],
          f"a stream for an unknown session stops after one try with the 404 problem: {unknown}")
    # Served as a module, with its types.
    check(t["assets"]["js"]["status"] == 200 and (t["assets"]["js"]["type"] or "").startswith("text/javascript"),
          f"/kassa.js served as text/javascript: {t['assets']['js']}")
    check(t["assets"]["dts"] == {"status": 200, "declaresSession": True}, f"/kassa.d.ts served: {t['assets']['dts']}")
    check(not blocked, f"blocked by the CSP: {blocked}")

    for failure in failures:
        print("FAILED:", failure)
    print("ok" if not failures else f"{len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
