#!/usr/bin/env bash
# Payment orders in bursts with idle gaps around the canned upstream's 10 s idle close, so the
# gateway's kept upstream connections are closed as the next burst's requests meet them: libcurl
# sends those requests again on new connections, and none should fail. Prints one line a burst
# (answers, and those not 2xx), then the failed upstream exchanges and the circuit breaker's
# openings from the gateway's event log, as one JSON line.
# Usage: bench/idlegaps.sh [BIN] (default: a release build of this tree; installs wrk if missing).
#   KASSA_IDLEGAPS="9.7 10.2 …" sets the gaps in seconds (default ten from 9.7 to 10.9).
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/release.sh
if [ -n "${1:-}" ]; then kassa=$1; else release_build; kassa=.build/release/kassa; fi
out=$(mktemp -d)
pids=()
trap 'kill ${pids[@]} 2>/dev/null || true; rm -rf "$out"' EXIT
source bench/wrkgateway.sh
start_gateway idle "$kassa" "$out"
path=/swedbank-pay-mobile/paymentorders
mapfile -t script < <(wrk_script "$path")
url="http://127.0.0.1:${port[idle]}$path"
answers=0 refused=0
for gap in ${KASSA_IDLEGAPS:-9.7 9.9 10.0 10.1 10.2 10.4 10.6 10.9 9.8 10.05}; do
  taskset -c 0 wrk -t2 -c64 -d2s -H "Your-Api-Key: bench-key" "${script[@]}" "$url" >"$out/wrk.txt" 2>&1
  n=$(awk '/requests in/ {print $1}' "$out/wrk.txt"); bad=$(awk '/Non-2xx/ {print $NF}' "$out/wrk.txt")
  echo "burst after a gap of ${gap} s: ${n} answers, ${bad:-0} not 2xx"
  answers=$((answers + n)); refused=$((refused + ${bad:-0}))
  sleep "$gap"
done
kill "${gateway[idle]}"; wait "${gateway[idle]}" 2>/dev/null || true
python3 - "$out/idle.sqlite" "$answers" "$refused" <<'PY'
import json, sqlite3, sys
db = sqlite3.connect(sys.argv[1])
count = lambda kind: db.execute("SELECT count(*) FROM events WHERE kind = ? AND level = 'error'", (kind,)).fetchone()[0]
print(json.dumps({"answers": int(sys.argv[2]), "notSuccessful": int(sys.argv[3]),
                  "failedUpstreamExchanges": count("upstream.response"), "circuitOpenings": count("upstream.circuit")}))
PY
