#!/usr/bin/env bash
# Two builds measured at the same time: in each round, two bench/load.sh runs start together,
# both gateways pinned to CPU 1 and both harnesses (upstream and client) to CPU 0. This machine's
# speed moves by half between minutes, so runs taken in turn (bench/ab.sh) differ by ±10 % for the
# same binary; two gateways sharing one core in the same seconds see the same machine, and their
# CPU per flow agrees within about 1 % (RESULTS, thirty-fourth stop).
# Prints one line a run and, a round, B's gateway CPU per flow against A's.
# Usage: bench/together.sh BIN_A BIN_B [rounds] [extra kassa load options…]   (default 3 rounds)
#   KASSA_TOGETHER_ENV_A / KASSA_TOGETHER_ENV_B="NAME=value …"  variables for that side's gateway
#     alone (as KASSA_BENCH_SERVE_ENV): one binary under two settings.
#   The scenario is flows.json with 200 clients a side (KASSA_TOGETHER_SCENARIO, --clients to
#   change); KASSA_BENCH_UPSTREAM (default canned here) and KASSA_EVENT_LOGGING pass through.
#   Both sides are driven by one load client, A's unless KASSA_BENCH_CLIENT_BIN names another (an old
#   build as A has no `sim --canned` and may lack the client's options: give a newer client, with
#   KASSA_BENCH_UPSTREAM=sim for each side's own simulator), so the harness is the same on both.
set -euo pipefail
cd "$(dirname "$0")/.."
a=$1; b=$2; rounds=${3:-3}; shift $(( $# < 3 ? $# : 3 ))
scenario=${KASSA_TOGETHER_SCENARIO:-bench/scenarios/flows.json}
export KASSA_BENCH_UPSTREAM=${KASSA_BENCH_UPSTREAM:-canned} KASSA_BENCH_PIN=1:0 KASSA_BENCH_CLIENT_BIN=${KASSA_BENCH_CLIENT_BIN:-$a}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
side() {   # side NAME BIN ENV [load options…]: one load.sh run, its JSON line in $work/NAME
  local name=$1 bin=$2 env=$3
  shift 3
  KASSA_BENCH_BIN=$bin KASSA_BENCH_SERVE_ENV=$env bench/load.sh "$scenario" --duration 15 --clients 200 "$@" \
    2>/dev/null | tail -1 >"$work/$name"
}
printf '%-5s %5s %8s %7s %9s %8s %8s %8s %10s\n' round side flows/s failed "gw ms" "pool µs" "curl µs" "edge µs" "writer µs"
for i in $(seq "$rounds"); do
  side A "$a" "${KASSA_TOGETHER_ENV_A:-}" "$@" &
  side B "$b" "${KASSA_TOGETHER_ENV_B:-}" "$@" &
  wait
  python3 - "$i" "$work/A" "$work/B" <<'PY'
import json, sys
rnd, runs = sys.argv[1], {}
for name, path in zip("AB", sys.argv[2:]):
    r = runs[name] = json.load(open(path))
    t = r.get("threadCpuUsPerFlow") or {}
    print(f'{rnd:<5} {name:>5} {r["flowsPerSecond"]:8.1f} {r["failedTotal"]:7d} {r["cpuMsPerFlow"]["gateway"]:9.3f}'
          f' {t.get("oot.default-qos", 0):8.0f} {t.get("kassa-curl", 0):8.0f} {t.get("kassa-edge", 0):8.0f} {t.get("kassa-eventlog", 0):10.0f}')
a, b = (runs[s]["cpuMsPerFlow"]["gateway"] for s in "AB")
print(f'{rnd:<5} B/A {b / a:.3f} ({(b / a - 1) * 100:+.1f} %)')
PY
done
