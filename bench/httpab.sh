#!/usr/bin/env bash
# One HTTP route, two builds, alternating: wrk (2 threads, 64 connections, 10 s) against each
# build's gateway in turn, the gateway pinned to CPU 1 and wrk and the canned upstream to CPU 0.
# Prints one line a run (answers a second, the gateway's CPU seconds, µs of gateway CPU an
# answer), then each side's mean.
# Usage: bench/httpab.sh BIN_A BIN_B [pairs] [path]
#   (default 2 pairs, /swedbank-pay-mobile/ with the bench API key; installs wrk if missing).
#   A path ending in /paymentorders is POSTed with compare.sh's payment order body.
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 2 ] || { echo "usage: bench/httpab.sh BIN_A BIN_B [pairs] [path]" >&2; exit 2; }
a=$1 b=$2 pairs=${3:-2} path=${4:-/swedbank-pay-mobile/}
out=$(mktemp -d)
pids=()
trap 'kill ${pids[@]} 2>/dev/null || true; rm -rf "$out"' EXIT
source bench/wrkgateway.sh
mapfile -t script < <(wrk_script "$path")

run() {  # side binary
  local side=$1 bin=$2
  pids=()
  start_gateway "$side" "$bin" "$out"
  local gw=${gateway[$side]}
  local before; before=$(cpu_ticks $gw)
  local rps; rps=$(taskset -c 0 wrk -t2 -c64 -d10s -H "Your-Api-Key: bench-key" "${script[@]}" "http://127.0.0.1:${port[$side]}$path" | awk '/Requests\/sec/ {print $2}')
  local ticks=$(( $(cpu_ticks $gw) - before ))
  kill "${pids[@]}"; wait "${pids[@]}" 2>/dev/null || true
  python3 -c "import sys; rps, t, hz = float(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]); \
print(f'{sys.argv[1]} {rps:10.0f} {t / hz:7.2f} {t / hz * 1e6 / (rps * 10):8.2f}')" "$side" "$rps" "$ticks" "$(getconf CLK_TCK)" | tee -a "$out/runs"
}

echo "side  answers/s   cpu s  µs/answer"
# The order turns each pair (AB, BA, …): the first run of a pair measured 2–4 % faster whichever
# build it was.
for i in $(seq "$pairs"); do
  if (( i % 2 )); then run A "$a"; run B "$b"; else run B "$b"; run A "$a"; fi
done
awk '{n[$1]++; r[$1]+=$2; u[$1]+=$4} END {for (s in n) printf "%s mean %10.0f answers/s %8.2f µs/answer\n", s, r[s]/n[s], u[s]/n[s]}' "$out/runs" | sort
