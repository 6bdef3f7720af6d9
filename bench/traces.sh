#!/usr/bin/env bash
# What traces cost the gateway: bench/load.sh with a scenario (default flows.json), alternating runs
# with traces off and on, on the same release binary. "On" exports every span over OTLP/HTTP to
# Tests/python/otlp_receiver.py --count on loopback, which decodes each batch and counts its spans.
# Prints one line a run: mode, flows/s, completed, gateway CPU ms per flow, spans received per flow.
# Usage: bench/traces.sh [pairs] [scenario]   (default 2 pairs, bench/scenarios/flows.json)
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/release.sh
pairs=${1:-2}; scenario=${2:-bench/scenarios/flows.json}
release_build
export KASSA_BENCH_BIN=.build/release/kassa
printf '%-4s %8s %10s %22s %16s\n' mode flows/s completed "gateway CPU ms/flow" "spans per flow"
for _ in $(seq "$pairs"); do
  for mode in off on; do
    spans=0
    if [ "$mode" = on ]; then
      coproc RECEIVER { exec python3 Tests/python/otlp_receiver.py --count; }
      read -r _ port <&"${RECEIVER[0]}"
      out=$(KASSA_BENCH_SERVE_ARGS="--otlp-endpoint http://127.0.0.1:$port" bench/load.sh "$scenario" | tail -1)
      exec {RECEIVER[1]}>&-   # the receiver prints its count once its input closes
      read -r _ spans <&"${RECEIVER[0]}"
      wait "$RECEIVER_PID" 2>/dev/null || true
    else
      out=$(bench/load.sh "$scenario" | tail -1)
    fi
    python3 - "$mode" "$spans" "$out" <<'PY'
import json, sys
mode, spans, r = sys.argv[1], int(sys.argv[2]), json.loads(sys.argv[3])
per_flow = spans / r["completed"] if r["completed"] else 0
print(f'{mode:<4} {r["flowsPerSecond"]:8.1f} {r["completed"]:10d} {r["cpuMsPerFlow"]["gateway"]:22.3f} {per_flow:16.1f}')
PY
  done
done
