#!/usr/bin/env bash
# One HTTP route, two builds at the same time: in each round both gateways run on CPU 1, each with
# its own canned upstream and its own wrk (1 thread, 32 connections, 10 s after a 3 s warm-up) on
# CPU 0. Runs in turn (bench/httpab.sh) see this machine's speed move between minutes; two gateways
# sharing a core in the same seconds see the same machine (as bench/together.sh for flows).
# Prints, a round, each side's answers a second and µs of gateway CPU an answer, and B's against A's.
# Usage: bench/httptogether.sh BIN_A BIN_B [rounds] [path]
#   (default 3 rounds, POST /swedbank-pay-mobile/paymentorders with compare.sh's payment order body;
#   another path is a GET with the bench API key; installs wrk if missing).
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 2 ] || { echo "usage: bench/httptogether.sh BIN_A BIN_B [rounds] [path]" >&2; exit 2; }
a=$1 b=$2 rounds=${3:-3} path=${4:-/swedbank-pay-mobile/paymentorders}
out=$(mktemp -d)
pids=()
trap 'kill ${pids[@]} 2>/dev/null || true; rm -rf "$out"' EXIT
source bench/wrkgateway.sh
mapfile -t script < <(wrk_script "$path")

load() {  # seconds: both wrk runs at once, each one's output in $out/wrk-<side>
  local w=()
  for side in A B; do
    taskset -c 0 wrk -t1 -c32 -d"$1"s -H "Your-Api-Key: bench-key" "${script[@]}" "http://127.0.0.1:${port[$side]}$path" >"$out/wrk-$side" & w+=($!)
  done
  wait "${w[@]}"
}

echo "round  A answers/s  µs/answer   B answers/s  µs/answer   B/A"
for i in $(seq "$rounds"); do
  pids=()
  start_gateway A "$a" "$out"; start_gateway B "$b" "$out"
  load 3
  before_a=$(cpu_ticks "${gateway[A]}"); before_b=$(cpu_ticks "${gateway[B]}")
  load 10
  ticks_a=$(( $(cpu_ticks "${gateway[A]}") - before_a )); ticks_b=$(( $(cpu_ticks "${gateway[B]}") - before_b ))
  rps_a=$(awk '/Requests\/sec/ {print $2}' "$out/wrk-A"); rps_b=$(awk '/Requests\/sec/ {print $2}' "$out/wrk-B")
  kill "${pids[@]}"; wait "${pids[@]}" 2>/dev/null || true
  python3 -c "import sys; i, ra, rb, ta, tb, hz = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6]); \
ua, ub = ta / hz * 1e6 / (ra * 10), tb / hz * 1e6 / (rb * 10); \
print(f'{i:5} {ra:12.0f} {ua:10.1f} {rb:13.0f} {ub:10.1f}   {ub / ua:.3f}')" "$i" "$rps_a" "$rps_b" "$ticks_a" "$ticks_b" "$(getconf CLK_TCK)"
done
