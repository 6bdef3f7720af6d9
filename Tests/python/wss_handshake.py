"""Opens a session stream over wss:// trusting only CA_FILE, and prints the first event's type.

Usage: python3 wss_handshake.py URL CA_FILE TOKEN
"""
import asyncio
import json
import ssl
import sys

import websockets


async def main(url, cafile, token):
    context = ssl.create_default_context(cafile=cafile)
    async with websockets.connect(url, ssl=context, subprotocols=["kassa.v1"],
                                  additional_headers={"Authorization": "Bearer " + token}) as ws:
        print(json.loads(await ws.recv())["type"])


if __name__ == "__main__":
    asyncio.run(asyncio.wait_for(main(*sys.argv[1:4]), 20))
