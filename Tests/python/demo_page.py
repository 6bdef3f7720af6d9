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
