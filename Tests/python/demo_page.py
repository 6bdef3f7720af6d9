"""What the /demo/ page scripts share: a headless Chromium (Debian's, through playwright)
on the demo page with a fresh session created, and every CSP complaint collected."""
from contextlib import contextmanager

from playwright.sync_api import sync_playwright


@contextmanager
def demo_session(base, api_key):
    """Yields (page, blocked): the page shows PaymentSessionFetched; blocked lists what the CSP refused."""
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", headless=True, args=["--no-sandbox"])
        page = browser.new_page()
        blocked = []
        page.on("console", lambda m: blocked.append(m.text) if "Content Security Policy" in m.text else None)
        page.goto(base + "/demo/")
        page.fill("#apiKey", api_key)
        page.click("#create")
        page.wait_for_selector("#events li[data-type=PaymentSessionFetched]", timeout=15000)
        try:
            yield page, blocked
        finally:
            browser.close()


def completed_types(page, screenshot):
    """Waits for PaymentSessionComplete, saves the screenshot, and returns (event types in
    seq order, problem and refusal lines)."""
    page.wait_for_selector("#events li[data-type=PaymentSessionComplete]", timeout=20000)
    types = page.eval_on_selector_all("#events li[data-seq]", "items => items.map(i => i.dataset.type)")
    problems = page.eval_on_selector_all("#events li.problem, #events li[data-type=refused]", "items => items.map(i => i.textContent)")
    page.screenshot(path=screenshot, full_page=True)
    return types, problems


def verdict(types, expected, problems, blocked):
    """0 when the events are exactly `expected` and nothing was a problem or blocked by the CSP."""
    print("types", types, "problems", problems, "blocked by CSP", blocked)
    if types != expected:
        print("expected", expected)
        return 1
    return 1 if problems or blocked else 0
