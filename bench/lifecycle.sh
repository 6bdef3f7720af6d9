#!/usr/bin/env bash
# The gateway's CPU per WebSocket lifecycle, by difference: alternating load.sh runs of card flows
# (flows.json, canned upstream, pinned 1:0) with one stream per session and with three. Each extra
# stream is one whole lifecycle (upgrade, bearer check, subscribe, the session's PaymentSessionFetched
# and PaymentSessionComplete frames, close) with no upstream work of its own, so
#   µs per lifecycle = (gateway µs per flow with 3 streams − with 1) / 2.
# Prints one line a run, then the mean of each side and the difference.
# Usage: bench/lifecycle.sh [pairs] [seconds]   (default 3 pairs of 20 s)
#   KASSA_BENCH_BIN=path measures that kassa binary (default: a release build of this tree).
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/release.sh
pairs=${1:-3}; seconds=${2:-20}
if [ -z "${KASSA_BENCH_BIN:-}" ]; then release_build; export KASSA_BENCH_BIN=.build/release/kassa; fi
export KASSA_BENCH_PIN=${KASSA_BENCH_PIN:-1:0} KASSA_BENCH_UPSTREAM=canned
dir=$(mktemp -d); trap 'rm -rf "$dir"' EXIT
for n in 1 3; do
  python3 - "$n" >"$dir/streams$n.json" <<'PY'
import json, sys
s = json.load(open("bench/scenarios/flows.json"))
s["name"], s["subscribersPerSession"] = f"flows, {sys.argv[1]} streams a session", int(sys.argv[1])
print(json.dumps(s))
PY
done
printf '%-8s %8s %7s %9s %9s %9s\n' streams flows/s failed "gw µs" switches "streams"
for _ in $(seq "$pairs"); do
  for n in 1 3; do
    line=$(bench/load.sh "$dir/streams$n.json" --duration "$seconds" | tail -1)
    echo "$n $line" >>"$dir/results"
    python3 - "$n" "$line" <<'PY'
import json, sys
n, r = sys.argv[1], json.loads(sys.argv[2])
print(f'{n:<8} {r["flowsPerSecond"]:8.1f} {r["failedTotal"]:7d} {r["cpuMsPerFlow"]["gateway"] * 1000:9.0f}'
      f' {r["perFlow"]["contextSwitches"]:9.1f} {r["peakOpenStreams"]:9d}')
PY
  done
done
python3 - "$dir/results" <<'PY'
import json, sys
runs = {"1": [], "3": []}
for line in open(sys.argv[1]):
    n, _, r = line.partition(" ")
    runs[n].append(json.loads(r)["cpuMsPerFlow"]["gateway"] * 1000)
mean = {n: sum(v) / len(v) for n, v in runs.items()}
print(f'gateway µs per flow: 1 stream {mean["1"]:.0f}, 3 streams {mean["3"]:.0f}; per WebSocket lifecycle {(mean["3"] - mean["1"]) / 2:.0f} µs')
print(json.dumps({"gatewayUsPerFlow1Stream": round(mean["1"]), "gatewayUsPerFlow3Streams": round(mean["3"]),
                  "gatewayUsPerWebSocketLifecycle": round((mean["3"] - mean["1"]) / 2)}))
PY
