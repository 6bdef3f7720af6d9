"""Creating a session as a merchant's backend does, for the browser checks (admin_waterfall.py,
kassa_js.py): POST /v1/sessions with a payment order and the API key; returns
{id, clientToken, streamUrl, state}. (swish_flow.py keeps its own: it is the README's
stand-alone example client.)
"""
import json
import urllib.request


def create_session(base, api_key, script, origin="https://shop.example"):
    """`script` names the caller in the order (description, userAgent); `origin` is the shop whose
    pages may host the payment (hostUrls) and where the payer returns."""
    order = {"paymentOrder": {
        "operation": "Purchase", "currency": "SEK", "amount": 1500, "vatAmount": 375,
        "description": script + " test", "userAgent": script, "language": "sv-SE",
        "urls": {"hostUrls": [origin], "completeUrl": origin + "/complete",
                 "cancelUrl": origin + "/cancel", "paymentUrl": origin + "/pay"},
        "payeeInfo": {"payeeId": "payee-1", "payeeName": "Shop"}}}
    request = urllib.request.Request(base + "/v1/sessions", data=json.dumps(order).encode(), method="POST",
                                     headers={"Content-Type": "application/json", "Your-Api-Key": api_key})
    with urllib.request.urlopen(request, timeout=15) as response:
        return json.load(response)
