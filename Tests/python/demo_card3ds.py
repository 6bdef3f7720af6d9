"""Pays by card with 3-D Secure on the /demo/ page in headless Chromium: the method
step runs in the page's hidden frame, the simulated issuer's challenge page shows in
its frame, and the payer approves there. Nobody types a cRes: the issuer's page posts
it to Kassa's notification URL.

Usage: python3 demo_card3ds.py BASE_URL API_KEY SCREENSHOT_PATH
Exit 0 when the page reaches PaymentSessionComplete through Run3DSecureMethod,
Show3DSecure and Dismiss3DSecure, with nothing refused or blocked.
"""
import sys

from demo_page import completed_types, demo_session, verdict


def main(base, api_key, screenshot):
    with demo_session(base, api_key) as (page, blocked):
        page.click("button[data-instrument='Visa 401200******0016']")
        page.wait_for_selector("#events li[data-type=Show3DSecure]", timeout=20000)
        page.frame_locator("#challengeFrame").locator("#approve").click(timeout=15000)
        types, problems = completed_types(page, screenshot)
    expected = ["PaymentSessionFetched", "Run3DSecureMethod", "Show3DSecure", "Dismiss3DSecure", "PaymentSessionComplete"]
    return verdict(types, expected, problems, blocked)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2], sys.argv[3]))
