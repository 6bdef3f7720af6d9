#!/usr/bin/env bash
# Every performance goal measured in one sitting and printed as a table: today's figure, the goal,
# and whether the figure meets it. Each row comes from the script that measures it alone, run in
# turn, so the whole table is from one hour: this host's speed moves by half between hours, and a
# table pieced together from several days hides that (RESULTS.md keeps each day's figures).
# About 20 minutes; with --soak, 10 more.
# Usage: bench/goals.sh [--soak]
#   cpu, wal   bench/ab.sh 3 with the beacons off: gateway CPU and WAL bytes a flow against 4056be9
#   flows      bench/load.sh flows.json, 20 s, beacons off as in ab.sh: the canned upstream, the lean
#              client pinned away
#   openloop   bench/openloop.sh 20: the gateway's push p99 at half of capacity, open loop
#   pushes     bench/load.sh push.json at 156 flows a second (≈ 10 000 pushes a second)
#   compare    bench/compare.sh, two pairs: the HTTP routes against nginx, ping and memory against
#              Hummingbird
#   soak       bench/soak.sh (with --soak): seconds with a push p99 over 50 ms
#   KASSA_GOALS_OUT=dir keeps each script's output there (default: a temporary directory).
set -euo pipefail
cd "$(dirname "$0")/.."
soak=false
[ "${1:-}" = --soak ] && soak=true
out=${KASSA_GOALS_OUT:-$(mktemp -d)}
mkdir -p "$out"
step() {   # step NAME COMMAND…: its output to the terminal and to $out/NAME.txt
  local name=$1
  shift
  echo "== $name: $*" >&2
  # A run with failures still gives its figures (load.sh exits 2 then): the table shows them.
  "$@" | tee "$out/$name.txt" >&2 || echo "== $name exited with status $?" >&2
}
step cpu env KASSA_EVENT_LOGGING=off bench/ab.sh 3
step flows env KASSA_EVENT_LOGGING=off KASSA_BENCH_UPSTREAM=canned KASSA_BENCH_PIN=1:0 bench/load.sh bench/scenarios/flows.json --duration 20
step openloop bench/openloop.sh 20
step pushes env KASSA_MAX_CONNECTIONS=4096 KASSA_BENCH_UPSTREAM=sim KASSA_BENCH_PIN=1:0 \
  bench/load.sh bench/scenarios/push.json --rate 156 --clients 2000
# Two pairs of each HTTP route: one pair's ratio moves by a tenth with the minute (nginx itself
# from 106 000 to 122 000 a second within the hour), two give the means of two.
# With KASSA_GOALS_OUT, compare.sh's files too (Kassa's event log says why a run's answers failed).
step compare env KASSA_COMPARE_HTTP_PAIRS="${KASSA_COMPARE_HTTP_PAIRS:-2}" ${KASSA_GOALS_OUT:+KASSA_COMPARE_OUT="$out/compare"} bench/compare.sh
if $soak; then step soak bench/soak.sh "$out/soak"; fi
python3 - "$out" <<'PY'
import json, os, sys
out = sys.argv[1]

def line(name, key):
    """The last JSON line of a step's output that has `key`."""
    path = os.path.join(out, name + ".txt")
    if not os.path.exists(path):
        return None
    found = None
    for text in open(path):
        text = text.strip()
        if text.startswith("{") and key in text:
            try:
                found = json.loads(text)
            except ValueError:
                pass
    return found

rows = []
def row(goal, target, measure):
    """`measure` gives the figure and whether it meets the target; a step that gave no figure
    (it failed, or was not run) shows as not measured rather than stopping the table."""
    try:
        figure, met = measure()
        rows.append((goal, target, figure, "met" if met else "not met"))
    except (TypeError, KeyError):
        rows.append((goal, target, "not measured (its step's output has no figure)", "-"))

cpu = line("cpu", "cpuBaseOverThis")
row("gateway CPU a flow vs 4056be9", "≥ 2.5×", lambda: (
    f'{cpu["cpuBaseOverThis"]}× ({cpu["baseGatewayMsPerFlow"]} → {cpu["thisGatewayMsPerFlow"]} ms)', cpu["cpuBaseOverThis"] >= 2.5))
row("WAL bytes a flow vs 4056be9", "≥ 4×", lambda: (
    f'{cpu["walBaseOverThis"]}× ({cpu["baseWalKiBPerFlow"]} → {cpu["thisWalKiBPerFlow"]} KiB)', cpu["walBaseOverThis"] >= 4))
open_loop = line("openloop", '"loads"')
row("gateway push p99 at 50 % of capacity", "≤ 5 ms", lambda: (
    f'{open_loop["loads"]["50"]["gatewayPushP99Ms"]} ms (capacity {open_loop["capacity"]} flows/s)',
    open_loop["loads"]["50"]["gatewayPushP99Ms"] <= 5))
pushes = line("pushes", "pushesPerSecond")
row("client push p99 at 10 000 pushes/s", "≤ 5 ms", lambda: (
    f'{pushes["pushP99Ms"]} ms at {pushes["pushesPerSecond"]:.0f} pushes/s, {pushes["failedTotal"]} failed',
    pushes["pushP99Ms"] <= 5 and pushes["pushesPerSecond"] >= 9_500 and pushes["failedTotal"] == 0))
ratios = line("compare", '"ratios"')
row("GET /swedbank-pay-mobile/ vs nginx", "≥ 0.6×", lambda: (f'{ratios["merchantRootVsNginx"]}×', ratios["merchantRootVsNginx"] >= 0.6))
row("POST …/paymentorders vs nginx", "≥ 0.5×", lambda: (f'{ratios["paymentOrdersVsNginx"]}×', ratios["paymentOrdersVsNginx"] >= 0.5))
flows = line("flows", "flowsPerSecond")
row("card flows a second, canned upstream, beacons off", "2 000", lambda: (
    f'{flows["flowsPerSecond"]:.0f} ({flows["cpuMsPerFlow"]["gateway"]} ms a flow)', flows["flowsPerSecond"] >= 2_000))
row("ping answers vs Hummingbird", "≥ 1.5×", lambda: (f'{ratios["pingAnswersVsHummingbird"]}×', ratios["pingAnswersVsHummingbird"] >= 1.5))
row("memory a connection vs Hummingbird", "≤ 0.5×", lambda: (
    f'{ratios["memoryPerConnectionVsHummingbird"]}×', ratios["memoryPerConnectionVsHummingbird"] <= 0.5))
if os.path.exists(os.path.join(out, "soak.txt")):
    soak, seconds = line("soak", "gatewaySecondsOver50Ms"), line("soak", "worstSecondMs")
    row("soak: seconds with a push p99 over 50 ms", "0", lambda: (
        f'{seconds["secondsOver50Ms"]} at the client (worst {seconds["worstSecondMs"]} ms), {soak["gatewaySecondsOver50Ms"]} at the gateway',
        seconds["secondsOver50Ms"] == 0 and soak["gatewaySecondsOver50Ms"] == 0))

print("| goal | target | today | |")
print("| --- | --- | --- | --- |")
for r in rows:
    print("| " + " | ".join(r) + " |")
PY
