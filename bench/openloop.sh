#!/usr/bin/env bash
# Latency without coordinated omission: measures the gateway's capacity closed loop (flows.json,
# 400 clients at saturation), then runs flows open loop on a fixed schedule at 25 %, 50 % and 75 %
# of it, each latency counted from the flow's due time. All runs through bench/load.sh, pinned
# (KASSA_BENCH_PIN, default 1:0: the gateway alone on CPU 1). Prints one line a run, and last
# the capacity and each load's latencies as one JSON line (for bench/goals.sh).
# Usage: bench/openloop.sh [seconds per open-loop run, default 20] [scenario, default flows.json]
#   KASSA_OPENLOOP_CAPACITY=flows/s skips the closed-loop run and uses that capacity.
#   KASSA_OPENLOOP_LOADS="25 50 75" the loads, in % of capacity.
#   KASSA_BENCH_BIN, KASSA_BENCH_CLIENT_BIN as for bench/load.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/release.sh
seconds=${1:-20}; scenario=${2:-bench/scenarios/flows.json}
if [ -z "${KASSA_BENCH_BIN:-}" ]; then release_build; export KASSA_BENCH_BIN=.build/release/kassa; fi
export KASSA_BENCH_PIN=${KASSA_BENCH_PIN:-1:0}
row() {
  python3 - "$1" "$2" <<'PY'
import json, sys
load, r = sys.argv[1], json.loads(sys.argv[2])
def f(v, fmt="{:.1f}"):
    return "-" if v is None else fmt.format(v)
print(f'{load:>9} {f(r.get("arrivalsPerSecond")):>8} {r["flowsPerSecond"]:8.1f} {r["failedTotal"]:6d} {f(r.get("lateStarts"), "{}"):>6}'
      f' {f(r.get("flowP50Ms"), "{:.2f}"):>8} {f(r.get("flowP99Ms"), "{:.2f}"):>8} {f(r.get("pushP50Ms"), "{:.2f}"):>8} {f(r.get("pushP99Ms"), "{:.2f}"):>8}'
      f' {f(r.get("gatewayPushP99Ms"), "{:.2f}"):>8} {r["cpuMsPerFlow"]["gateway"]:8.3f}')
PY
}
printf '%9s %8s %8s %6s %6s %8s %8s %8s %8s %8s %8s\n' load due/s flows/s failed late "flow p50" "flow p99" "push p50" "push p99" "gw push" "gw ms"
capacity=${KASSA_OPENLOOP_CAPACITY:-}
results=$(mktemp)
trap 'rm -f "$results"' EXIT
if [ -z "$capacity" ]; then
  line=$(bench/load.sh "$scenario" | tail -1)
  row closed "$line"
  echo "closed $line" >>"$results"
  capacity=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["flowsPerSecond"])' "$line")
fi
for pct in ${KASSA_OPENLOOP_LOADS:-25 50 75}; do
  rate=$(python3 -c "print(round($capacity * $pct / 100, 1))")
  # At most 2 000 flows in flight: far above what a gateway keeping up holds (rate × flow time).
  line=$(bench/load.sh "$scenario" --rate "$rate" --duration "$seconds" --clients 2000 | tail -1)
  row "$pct %" "$line"
  echo "$pct $line" >>"$results"
done
python3 - "$capacity" "$results" <<'PY'
import json, sys
loads = {}
for line in open(sys.argv[2]):
    load, _, r = line.partition(" ")
    r = json.loads(r)
    loads[load] = {k: r.get(k) for k in ("flowsPerSecond", "lateStarts", "flowP99Ms", "pushP99Ms", "gatewayPushP99Ms")}
    loads[load]["gatewayMsPerFlow"] = r["cpuMsPerFlow"]["gateway"]
print(json.dumps({"capacity": float(sys.argv[1]), "loads": loads}))
PY
