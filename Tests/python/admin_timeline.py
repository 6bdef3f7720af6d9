"""Drives the /admin/ support page in headless Chromium.

Usage: python3 admin_timeline.py BASE_URL ADMIN_TOKEN PAYEE_REFERENCE LIVE_SESSION CONTROL_FILE SCREENSHOT
Finds the session by payee reference and checks its timeline; then opens LIVE_SESSION,
writes "ready" to CONTROL_FILE so the test completes that payment, and waits for the
completion to appear in the timeline without a reload. Exit 0 when all of it is seen.
"""
import sys

from playwright.sync_api import sync_playwright


def main(base, token, payee_reference, live_session, control, screenshot):
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", headless=True, args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        # The page runs under a strict CSP: anything it blocks is a failure.
        blocked = []
        page.on("console", lambda m: blocked.append(m.text) if "Content Security Policy" in m.text else None)
        page.goto(base + "/admin/")
        page.fill("#token", token)
        page.select_option("#field", "payeeReference")
        page.fill("#search", payee_reference)
        page.click("#find")
        page.wait_for_selector("#timeline tr[data-summary=PaymentSessionComplete]", timeout=15000)
        kinds = page.eval_on_selector_all("#timeline tbody tr", "rows => rows.map(r => r.dataset.kind)")
        for needed in ["session.created", "upstream.request", "upstream.response", "push.sent", "state.transition"]:
            if needed not in kinds:
                print("missing", needed, kinds)
                return 1
        expandable = page.eval_on_selector_all("#timeline tr[data-kind='upstream.response'] details", "d => d.length")
        problems = page.eval_on_selector_all("#timeline tr.problem", "rows => rows.map(r => r.dataset.summary)")
        if expandable == 0:
            print("upstream exchanges are not expandable")
            return 1
        if not any("ProblemOccurred" in s for s in problems):
            print("the declined attempt is not highlighted", problems)
            return 1

        page.select_option("#field", "id")
        page.fill("#search", live_session)
        page.click("#find")
        page.wait_for_selector("#timeline tr[data-summary=PaymentSessionFetched]", timeout=15000)
        page.wait_for_selector("#live:text-is('● live')", timeout=15000)
        with open(control, "w") as f:
            f.write("ready")
        page.wait_for_selector("#timeline tr[data-summary=PaymentSessionComplete]", timeout=20000)
        page.screenshot(path=screenshot, full_page=True)
        browser.close()
    if blocked:
        print("blocked by the CSP", blocked)
        return 1
    print("ok", len(kinds), "rows")
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:7]))
