"""Screenshots the admin page's waterfall of a session that failed over between two nodes.

Usage: python3 admin_failover.py BASE_URL ADMIN_TOKEN SESSION_ID SCREENSHOT NODE [NODE…]
Opens BASE_URL/admin/#session=SESSION_ID in headless Chromium, gives the token when asked, and
exits 0 when the waterfall is drawn and each named node labels at least one of its rows.
"""
import sys

from playwright.sync_api import sync_playwright


def main(base, token, session_id, screenshot, nodes):
    failures = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", headless=True, args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        errors = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(f"{base}/admin/#session={session_id}")
        page.wait_for_selector("#token", timeout=10000)
        page.fill("#token", token)
        page.press("#token", "Enter")
        page.wait_for_selector("#waterfall .wf-row[data-type=call]", timeout=15000)
        page.wait_for_timeout(300)
        badges = page.eval_on_selector_all("#waterfall .node-badge", "items => items.map(i => i.textContent.trim())")
        for node in nodes:
            if node not in badges:
                failures.append(f"no row of the waterfall is labelled {node} (labels: {sorted(set(badges))})")
        if not page.is_visible("text=PaymentSessionComplete") and not page.eval_on_selector_all(
                "#waterfall .wf-row", "rows => rows.some(r => r.textContent.includes('PaymentSessionComplete'))"):
            failures.append("the completion is not in the waterfall")
        page.screenshot(path=screenshot, full_page=True)
        if errors:
            failures.append(f"page errors: {errors}")
        browser.close()
    for failure in failures:
        print("FAILED:", failure)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5:]))
