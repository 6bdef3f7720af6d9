"""Drives the /demo/ checkout page in headless Chromium through a Swish payment,
dropping the WebSocket once on the way to prove the page resumes with `since`.

Usage: python3 demo_checkout.py BASE_URL API_KEY SCREENSHOT_PATH
Exit 0 when the page shows PaymentSessionComplete with gap-free, unrepeated events.
"""
import sys

from demo_page import demo_session


def main(base, api_key, screenshot):
    with demo_session(base, api_key) as (page, blocked):
        # A dropped connection: the page must reconnect with since and miss nothing.
        page.evaluate("window.kassaDemo.dropConnection()")
        page.wait_for_selector("body[data-connections='2']", timeout=15000)
        page.wait_for_selector("#connection:text-is('open')", timeout=15000)
        page.fill("#msisdn", "+46739000001")
        page.click("button[data-instrument=Swish]")
        page.wait_for_selector("#events li[data-type=PaymentSessionComplete]", timeout=20000)
        seqs = page.eval_on_selector_all("#events li[data-seq]", "items => items.map(i => Number(i.dataset.seq))")
        problems = page.eval_on_selector_all("#events li.problem", "items => items.map(i => i.textContent)")
        page.screenshot(path=screenshot, full_page=True)
    print("seqs", seqs, "problems", problems, "blocked by CSP", blocked)
    if blocked:
        return 1
    if seqs != list(range(1, len(seqs) + 1)):
        print("events are not gap-free and unrepeated")
        return 1
    if problems:
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2], sys.argv[3]))
