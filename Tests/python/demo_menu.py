"""Opens the payment menu on the /demo/ page in headless Chromium (Kassa's host page
loading the view-payment script), then goes back to Swish and completes: the menu is
not a one-way door.

Usage: python3 demo_menu.py BASE_URL API_KEY SCREENSHOT_PATH
Exit 0 when the menu loaded in its frame and the page reached PaymentSessionComplete
after ShowPaymentMenu, with nothing refused or blocked.
"""
import sys

from demo_page import completed_types, demo_session, verdict


def main(base, api_key, screenshot):
    with demo_session(base, api_key) as (page, blocked):
        page.click("button[data-instrument=Vipps]")
        page.wait_for_selector("#events li[data-type=ShowPaymentMenu]", timeout=15000)
        menu = page.frame_locator("#menuFrame").locator("#sim-menu")
        menu.wait_for(timeout=15000)
        shown = menu.text_content()
        page.wait_for_selector("body[data-menu=loaded]", timeout=15000)
        page.fill("#msisdn", "+46739000001")
        page.click("button[data-instrument=Swish]")
        types, problems = completed_types(page, screenshot)
    print("menu", shown)
    if "Vipps" not in (shown or ""):
        return 1
    return verdict(types, ["PaymentSessionFetched", "ShowPaymentMenu", "PaymentSessionComplete"], problems, blocked)

if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2], sys.argv[3]))
