-- wrk: POST one payment order, as a merchant's backend would (bench/compare.sh, bench/httpab.sh).
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.body = '{"paymentorder":{"operation":"Purchase","currency":"SEK","amount":1500,"vatAmount":0,"description":"bench","userAgent":"wrk","language":"sv-SE","urls":{"hostUrls":["https://shop.example"],"completeUrl":"https://shop.example/c","cancelUrl":"https://shop.example/x"},"payeeInfo":{"payeeId":"p","payeeReference":"r"}}}'
