#!/usr/bin/env bash
# A/B: alternating bench/load.sh runs of a base build (default commit 4056be9, the performance
# issue's reference) and of this tree, on one machine, each gateway with its own simulator, both
# driven by this tree's load client. With KASSA_BENCH_PIN (default 1:0) the gateway has CPU 1 and
# the simulator and client CPU 0.
# Prints one line a run, then each side's mean and the ratio base/this for gateway CPU per flow,
# and last the means and ratios (CPU and WAL bytes a flow) as one JSON line.
# Usage: bench/ab.sh [pairs] [scenario] [extra kassa load options…]   (default 3 pairs, flows.json)
#   KASSA_AB_BASE=commit   the base (default 4056be9); built once in .build-ab/<commit> (a worktree), the
#     same way as this tree (bench/release.sh: as the image ships it, both at 4056be9 and now).
#   KASSA_AB_BASE_BIN=path use that binary as the base instead.
#   KASSA_EVENT_LOGGING=off  this tree's gateway sends no event-logging beacons (the base has none):
#     the same upstream work per flow on both sides (5 exchanges, not 11).
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/release.sh
pairs=${1:-3}; scenario=${2:-bench/scenarios/flows.json}; shift $(( $# < 2 ? $# : 2 ))
base=${KASSA_AB_BASE:-4056be9}
if [ -z "${KASSA_AB_BASE_BIN:-}" ]; then
  tree=.build-ab/$base
  [ -d "$tree" ] || git worktree add --detach "$tree" "$base" >/dev/null
  release_build "$tree"
  KASSA_AB_BASE_BIN=$tree/.build/release/kassa
fi
release_build
this=.build/release/kassa
export KASSA_BENCH_CLIENT_BIN=$this KASSA_BENCH_PIN=${KASSA_BENCH_PIN:-1:0}
results=$(mktemp)
trap 'rm -f "$results"' EXIT
printf '%-5s %8s %9s %9s %10s %9s %9s %9s %10s\n' side flows/s failed "gw ms" "KiB" writes switches commits "push p99"
# The order turns each pair (base first, then this first): the first run of a pair tends to measure faster.
for i in $(seq "$pairs"); do
  sides="base this"; (( i % 2 )) || sides="this base"
  for side in $sides; do
    bin=$this; [ "$side" = base ] && bin=$KASSA_AB_BASE_BIN
    line=$(KASSA_BENCH_BIN=$bin bench/load.sh "$scenario" "$@" | tail -1)
    echo "$side $line" >>"$results"
    python3 - "$side" "$line" <<'PY'
import json, sys
side, r = sys.argv[1], json.loads(sys.argv[2])
f = r["perFlow"]
print(f'{side:<5} {r["flowsPerSecond"]:8.1f} {r["failedTotal"]:9d} {r["cpuMsPerFlow"]["gateway"]:9.3f} {f["walAndFileBytes"] / 1024:10.1f}'
      f' {f["writeSyscalls"]:9.1f} {f["contextSwitches"]:9.1f} {f["eventLogCommits"]:9.2f} {r["pushP99Ms"] or 0:10.1f}')
PY
  done
done
python3 - "$results" <<'PY'
import json, sys
runs = {"base": [], "this": []}
for line in open(sys.argv[1]):
    side, _, r = line.partition(" ")
    runs[side].append(json.loads(r))
mean = {s: sum(r["cpuMsPerFlow"]["gateway"] for r in rs) / len(rs) for s, rs in runs.items()}
wal = {s: sum(r["perFlow"]["walAndFileBytes"] for r in rs) / len(rs) for s, rs in runs.items()}
print(f'gateway CPU per flow: base {mean["base"]:.3f} ms, this {mean["this"]:.3f} ms, base/this {mean["base"] / mean["this"]:.2f}x')
# The same means for a script to read (bench/goals.sh).
print(json.dumps({"baseGatewayMsPerFlow": round(mean["base"], 3), "thisGatewayMsPerFlow": round(mean["this"], 3),
                  "cpuBaseOverThis": round(mean["base"] / mean["this"], 2),
                  "baseWalKiBPerFlow": round(wal["base"] / 1024, 1), "thisWalKiBPerFlow": round(wal["this"] / 1024, 1),
                  "walBaseOverThis": round(wal["base"] / wal["this"], 2) if wal["this"] else None}))
PY
