"""Checks the /admin/ page's waterfall in headless Chromium, against a real gateway.

Usage: python3 admin_waterfall.py BASE_URL API_KEY ADMIN_TOKEN SCREENSHOT_PATH

Makes a card payment through the API that fails in 3-D Secure: the card `sim-card-challenge`
gets a challenge, the client reports that the challenge page could not be shown
(`{"type":"3ds","loadFailed":…}`: SdkProblemOccurred PaymentSession3DSecureLoadFailed), retries,
and the issuer then declines (`cres` `sim-cres-fail`: SessionProblemOccurred). Then opens
/admin/#session=<id> with no token, gives the token when asked, and checks:
- a bar per upstream call, each as wide as its duration: two bars' widths against their
  durationMs ratio, and every bar against the axis's scale;
- a marker per command and per push, a time axis with labels, the states in a band;
- the problem highlighted, and the first problem explained in plain words (3-D Secure, the
  SDK problem name, that the client was told to retry);
- the share link names the session and not the token; the token is nowhere in the address;
  opened again with the token in sessionStorage, the link shows the session without asking;
- Export JSON parses and holds as many events as GET /v1/admin/sessions/{id}/timeline; Export
  CSV has a header with at, sinceStartMs, kind, level, status, durationMs, summary and as many rows;
- a `node` member on an event shows as a label on its row;
- nothing is blocked by the CSP, and the page throws nothing.
Saves a full-page screenshot. Exit 0 only if all of it holds; each failure is printed.
"""
import asyncio
import csv
import io
import json
import sys
import time
import urllib.request

import websockets
from kassa_sessions import create_session
from playwright.sync_api import sync_playwright

CSV_NEEDED = ["at", "sinceStartMs", "kind", "level", "status", "durationMs", "summary"]


def get_json(url, headers):
    with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=15) as response:
        return json.load(response)


async def failed_card_payment(base, api_key):
    """A 3-D Secure card payment whose challenge fails to load, then is declined. Returns the session id."""
    session = create_session(base, api_key, "admin_waterfall.py")
    url = base.replace("http", "ws", 1) + session["streamUrl"]
    seen = []
    async with websockets.connect(url, subprotocols=["kassa.v1"],
                                  additional_headers={"Authorization": "Bearer " + session["clientToken"]}) as ws:
        challenges = 0
        async for frame in ws:
            message = json.loads(frame)
            kind = message.get("type")
            if "seq" not in message:
                if message.get("ok") is False:
                    raise RuntimeError(f"a command was refused: {message}")
                continue
            seen.append(kind)
            if kind == "PaymentSessionFetched":
                await ws.send(json.dumps({"id": "pay", "type": "attempt",
                                          "instrument": {"type": "CreditCard", "paymentToken": "sim-card-challenge"}}))
            elif kind == "Show3DSecure":
                challenges += 1
                if challenges == 1:
                    await ws.send(json.dumps({"id": "load", "type": "3ds", "loadFailed": "the challenge frame did not load"}))
                else:
                    await ws.send(json.dumps({"id": "cres", "type": "3ds", "cres": "sim-cres-fail"}))
            elif kind == "SdkProblemOccurred":
                await asyncio.sleep(0.15)  # a client waits a moment before it retries
                await ws.send(json.dumps({"id": "retry", "type": "retry"}))
            elif kind == "SessionProblemOccurred":
                break
            elif kind in ("PaymentSessionComplete", "PaymentSessionCanceled"):
                raise RuntimeError(f"the payment did not fail: {seen}")
    await asyncio.sleep(0.5)  # the stream's close is logged too
    return session["id"], seen


def timeline(base, token, session_id):
    return get_json(f"{base}/v1/admin/sessions/{session_id}/timeline", {"Authorization": "Bearer " + token})


def settled_timeline(base, token, session_id, seconds=10):
    """The timeline once the session's last call (acknowledge-failed-attempt, made after the
    SessionProblemOccurred push) is committed and nothing more arrives: the page, opened after,
    must show the same events."""
    deadline = time.monotonic() + seconds
    previous = None
    while True:
        api = timeline(base, token, session_id)
        acknowledged = any(e["kind"] == "upstream.response" and (e.get("data") or {}).get("operation") == "acknowledge-failed-attempt"
                           for e in api["events"])
        if (acknowledged and previous is not None and len(previous["events"]) == len(api["events"])) or time.monotonic() > deadline:
            return api
        previous = api
        time.sleep(0.3)


def main(base, api_key, token, screenshot):
    base = base.rstrip("/")
    session_id, pushed = asyncio.run(asyncio.wait_for(failed_card_payment(base, api_key), 30))
    expected_pushes = ["PaymentSessionFetched", "Show3DSecure", "SdkProblemOccurred", "Show3DSecure",
                       "Dismiss3DSecure", "SessionProblemOccurred"]
    failures = []
    if pushed != expected_pushes:
        failures.append(f"the payment went otherwise than planned: {pushed}")
    api = settled_timeline(base, token, session_id)
    events = api["events"]
    responses = [e for e in events if e["kind"] == "upstream.response"]
    commands = [e for e in events if e["kind"] == "client.command"]
    pushes = [e for e in events if e["kind"] == "push.sent"]

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", headless=True, args=["--no-sandbox"])
        context = browser.new_context(viewport={"width": 1280, "height": 900})
        try:
            context.grant_permissions(["clipboard-read", "clipboard-write"], origin=base)
        except Exception:  # noqa: BLE001 - an older Chromium: the copy check falls back to the status text
            pass
        page = context.new_page()
        blocked, errors = [], []
        page.on("console", lambda m: blocked.append(m.text) if "Content Security Policy" in m.text else None)
        page.on("pageerror", lambda e: errors.append(str(e)))

        # The shared link, opened without a token: the page asks for it, then shows the session.
        link = f"{base}/admin/#session={session_id}"
        page.goto(link)
        page.wait_for_selector("#pending", state="visible", timeout=10000)
        if page.is_visible("#sessionPanel"):
            failures.append("the session was shown before the token was given")
        page.fill("#token", token)
        page.press("#token", "Enter")
        page.wait_for_selector("#waterfall .wf-row[data-type=call]", timeout=15000)
        page.wait_for_timeout(300)

        # Bars: one per upstream exchange, each as long as its duration.
        bars = page.eval_on_selector_all("#waterfall .wf-bar.call", """bars => bars.map(b => ({
            duration: Number(b.dataset.durationMs), width: b.getBoundingClientRect().width,
            track: b.parentElement.getBoundingClientRect().width, operation: b.dataset.operation,
            status: b.dataset.status, response: b.dataset.responseId}))""")
        scale_ms = float(page.get_attribute("#waterfall", "data-scale-ms"))
        if len(bars) != len(responses):
            failures.append(f"{len(bars)} call bars for {len(responses)} upstream responses")
        by_response = {str(e["id"]): e for e in responses}
        for bar in bars:
            response = by_response.get(bar["response"])
            if response is None or abs(bar["duration"] - response.get("durationMs", -1)) > 1e-6:
                failures.append(f"bar {bar} does not carry its response's durationMs")
                continue
            expected = bar["duration"] / scale_ms * bar["track"]
            if abs(bar["width"] - expected) > max(0.25, expected * 0.05):
                failures.append(f"{bar['operation']}: {bar['width']:.2f}px wide, the axis says {expected:.2f}px for {bar['duration']} ms")
        # The longest and the shortest call: the most telling ratio.
        timed = sorted((b for b in bars if b["duration"] > 0 and b["width"] > 0), key=lambda b: b["duration"], reverse=True)
        if len(timed) >= 2:
            a, b = timed[0], timed[-1]
            ratio_w, ratio_d = a["width"] / b["width"], a["duration"] / b["duration"]
            if abs(ratio_w - ratio_d) > 0.08 * ratio_d:
                failures.append(f"bar widths {a['width']:.2f}/{b['width']:.2f} px do not follow durations {a['duration']}/{b['duration']} ms")
        else:
            failures.append(f"not two call bars to compare: {bars}")

        # Zooming to the first problem widens the bars in view.
        page.click("#zoomProblem")
        page.wait_for_timeout(200)
        zoomed_scale = float(page.get_attribute("#waterfall", "data-scale-ms"))
        if not zoomed_scale < scale_ms:
            failures.append(f"zooming to the first problem did not zoom ({scale_ms} → {zoomed_scale} ms)")
        page.click("#zoomReset")
        page.wait_for_timeout(200)

        # Markers, axis, states.
        command_markers = page.eval_on_selector_all("#waterfall .wf-row[data-type=command] .wf-marker.m-command", "m => m.length")
        push_markers = page.eval_on_selector_all("#waterfall .wf-row[data-type=push] .wf-marker.m-push", "m => m.length")
        lane_markers = page.eval_on_selector_all("#waterfall .wf-lane .wf-marker", "m => m.length")
        if command_markers != len(commands) or command_markers == 0:
            failures.append(f"{command_markers} command markers for {len(commands)} commands")
        if push_markers != len(pushes) or push_markers == 0:
            failures.append(f"{push_markers} push markers for {len(pushes)} pushes")
        if lane_markers != len(commands) + len(pushes):
            failures.append(f"{lane_markers} markers on the lane under the axis, not {len(commands) + len(pushes)}")
        ticks = page.eval_on_selector_all("#waterfall .wf-axis .wf-tick", "t => t.map(x => x.textContent)")
        if len(ticks) < 2 or not all(t.endswith(" ms") or t.endswith(" s") for t in ticks):
            failures.append(f"the axis has no readable tick labels: {ticks}")
        overlapping = page.eval_on_selector_all("#waterfall .wf-axis .wf-tick, #waterfall .wf-axis .wf-break", """labels => {
            const boxes = labels.map(l => l.getBoundingClientRect());
            return boxes.flatMap((a, i) => boxes.slice(i + 1).filter(b => a.left < b.right && b.left < a.right)
                                                          .map(() => labels[i].textContent)); }""")
        if overlapping:
            failures.append(f"axis labels overlap: {overlapping}")
        states = page.eval_on_selector_all("#waterfall .wf-state", "s => s.map(x => x.dataset.state)")
        for state in ("threeDSecure", "failed", "awaitingInstrument"):
            if state not in states:
                failures.append(f"the state band lacks {state}: {states}")
        legend = page.inner_text("#legend")
        for words in ("upstream call", "failed call", "retried attempt", "command", "push", "problem"):
            if words not in legend:
                failures.append(f"the legend does not mention {words!r}")

        # Problems highlighted, and the first one explained.
        problem_rows = page.eval_on_selector_all("#waterfall .wf-row.problem", "r => r.map(x => x.textContent)")
        first_row = page.eval_on_selector_all("#waterfall .wf-row.first", "r => r.map(x => x.textContent)")
        red_pushes = page.eval_on_selector_all("#waterfall .wf-row[data-type=push] .m-push.problem", "m => m.length")
        if len(problem_rows) < 2 or red_pushes < 2:
            failures.append(f"the two problems are not highlighted: rows {problem_rows}, red push markers {red_pushes}")
        if len(first_row) != 1 or "PaymentSession3DSecureLoadFailed" not in first_row[0]:
            failures.append(f"the first problem's row is not marked: {first_row}")
        if not page.query_selector("#waterfall .wf-firstline"):
            failures.append("no line marks the first problem on the chart")
        explained = page.inner_text("#firstProblem")
        for words in ("3-D Secure", "PaymentSession3DSecureLoadFailed", "retry", "the challenge frame did not load"):
            if words not in explained:
                failures.append(f"the first-problem box does not say {words!r}: {explained!r}")

        # The share link: the session id, never the token.
        share = page.input_value("#shareLink")
        if session_id not in share or token in share or token in page.url:
            failures.append(f"the share link or address is wrong: {share!r}, {page.url!r}")
        page.click("#copyLink")
        page.wait_for_timeout(200)
        copied = None
        try:
            copied = page.evaluate("navigator.clipboard.readText()")
        except Exception:  # noqa: BLE001 - no clipboard access: the status must say what to do
            pass
        status = page.inner_text("#copyStatus")
        if copied is not None and copied != share:
            failures.append(f"Copy link copied {copied!r}, not {share!r}")
        if not status:
            failures.append("Copy link says nothing")

        # Exports, made in the page from what it shows.
        with page.expect_download() as download:
            page.click("#exportJson")
        with open(download.value.path(), encoding="utf-8") as f:
            exported = json.load(f)
        with page.expect_download() as download:
            page.click("#exportCsv")
        with open(download.value.path(), encoding="utf-8", newline="") as f:
            table = list(csv.reader(io.StringIO(f.read())))
        counts = {len(events), len(timeline(base, token, session_id)["events"])}
        if len(exported.get("events", [])) not in counts:
            failures.append(f"the JSON export has {len(exported.get('events', []))} events, the API {counts}")
        if exported.get("session", {}).get("id") != session_id:
            failures.append("the JSON export does not name its session")
        header = table[0] if table else []
        missing = [c for c in CSV_NEEDED if c not in header]
        if missing or len(table) - 1 not in counts:
            failures.append(f"the CSV export: header {header}, {len(table) - 1} rows for {counts} events")
        elif table[1][header.index("kind")] != events[0]["kind"]:
            failures.append(f"the CSV's first row is not the first event: {table[1]}")

        page.screenshot(path=screenshot, full_page=True)

        # Opened again with the token in sessionStorage: the session at once, no question.
        page.goto("about:blank")
        page.goto(link)
        try:
            page.wait_for_selector("#waterfall .wf-row[data-type=call]", timeout=10000)
        except Exception:  # noqa: BLE001
            failures.append("the link did not show the session with the token in sessionStorage")
        if page.is_visible("#pending"):
            failures.append("the page asked for the token although it had it")

        # A node label, for timelines merged from several nodes.
        page.evaluate("""e => window.kassaAdmin.add(e)""", {
            "id": 10 ** 12, "session": session_id, "atMs": events[-1]["atMs"] + 5, "kind": "client.command",
            "level": "info", "summary": "ws: abort", "node": "node-b", "data": {"command": "abort", "source": "ws"}})
        page.wait_for_timeout(300)
        badges = page.eval_on_selector_all("#waterfall .wf-row .node-badge", "b => b.map(x => x.textContent)")
        unlabelled = page.eval_on_selector_all("#waterfall .wf-row:not(.wf-axis):not(.wf-states):not(.wf-lane) .node-badge", "b => b.length")
        in_table = page.eval_on_selector_all("#timeline tbody .node-badge", "b => b.map(x => x.textContent)")
        if badges != ["node-b"] or unlabelled != 1 or in_table != ["node-b"]:
            failures.append(f"node labels: chart {badges}, table {in_table} (only the event with a node gets one)")
        browser.close()

    if blocked:
        failures.append(f"blocked by the CSP: {blocked}")
    if errors:
        failures.append(f"the page threw: {errors}")
    for failure in failures:
        print("FAIL", failure)
    widths = ", ".join(f"{b['operation']} {b['duration']} ms = {b['width']:.2f} px" for b in bars)
    print(f"session {session_id}: {len(events)} events; call bars ({scale_ms:.1f} ms across the track): {widths}; "
          f"{command_markers} command and {push_markers} push markers; first problem: {explained!r}")
    return 1 if failures else 0


if __name__ == "__main__":
    if len(sys.argv) != 5:
        print(__doc__)
        sys.exit(2)
    sys.exit(main(*sys.argv[1:5]))
