"""A thin client in Python: create a session, follow its stream, pay with Swish.

Usage: python3 swish_flow.py BASE_URL API_KEY   (prints one JSON line per event; exit 0 on PaymentSessionComplete)
The README shows the same protocol; the test suite runs this file against a real gateway.
"""
import asyncio
import json
import sys
import urllib.request

import websockets


def create_session(base, api_key):
    order = {"paymentOrder": {
        "operation": "Purchase", "currency": "SEK", "amount": 1500, "vatAmount": 375,
        "description": "Python client", "userAgent": "swish_flow.py", "language": "sv-SE",
        "urls": {"hostUrls": ["https://shop.example"], "completeUrl": "https://shop.example/complete",
                 "cancelUrl": "https://shop.example/cancel", "paymentUrl": "https://shop.example/pay"},
        "payeeInfo": {"payeeId": "payee-1", "payeeName": "Shop"}}}
    request = urllib.request.Request(base + "/v1/sessions", data=json.dumps(order).encode(), method="POST",
                                     headers={"Content-Type": "application/json", "Your-Api-Key": api_key})
    with urllib.request.urlopen(request) as response:
        return json.load(response)


async def main(base, api_key):
    session = create_session(base, api_key)
    url = base.replace("http", "ws", 1) + session["streamUrl"]
    async with websockets.connect(url, subprotocols=["kassa.v1"],
                                  additional_headers={"Authorization": "Bearer " + session["clientToken"]}) as ws:
        last_seq = 0
        async for frame in ws:
            message = json.loads(frame)
            print(json.dumps(message), flush=True)
            if "seq" in message:
                assert message["seq"] == last_seq + 1, "gap or repeat in the stream"
                last_seq = message["seq"]
                if message["type"] == "PaymentSessionFetched":
                    await ws.send(json.dumps({"id": "c1", "type": "attempt",
                                              "instrument": {"type": "Swish", "msisdn": "+46739000001"}}))
                elif message["type"] == "PaymentSessionComplete":
                    return 0
                elif message["type"] in ("PaymentSessionCanceled", "SessionProblemOccurred", "SdkProblemOccurred"):
                    return 1
            elif message.get("ok") is False:
                return 1
    return 1


if __name__ == "__main__":
    sys.exit(asyncio.run(asyncio.wait_for(main(sys.argv[1], sys.argv[2]), 30)))
