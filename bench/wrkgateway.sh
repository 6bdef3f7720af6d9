# Sourced by bench/httpab.sh, bench/httptogether.sh and bench/idlegaps.sh: wrk installed, the
# request for a path (`wrk_script`: compare.sh's payment order body for a path ending in
# /paymentorders), and a gateway started on CPU 1 in front of its own canned upstream on CPU 0
# (`start_gateway`).
dpkg -s wrk >/dev/null 2>&1 || { apt-get update -qq; DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wrk; } >&2
source bench/caps.sh
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }   # user + system of a process, in clock ticks
wrk_script() {  # path; prints wrk's options for it, one a line
  if [[ $1 == */paymentorders ]]; then printf '%s\n' -s bench/paymentorder.lua; fi
}
declare -A gateway port
start_gateway() {  # side binary dir: a fresh database in dir; the pids go to the caller's pids array
  local side=$1 bin=$2 dir=$3 caps
  local sim_port=$((20000 + RANDOM % 10000)); port[$side]=$((sim_port + 1))
  mapfile -t caps < <(serve_caps "$bin")
  rm -f "$dir/$side".sqlite*
  taskset -c 0 "$bin" sim --canned --listen "127.0.0.1:$sim_port" >"$dir/sim-$side.log" 2>&1 & pids+=($!)
  taskset -c 1 "$bin" serve --listen "127.0.0.1:${port[$side]}" --db "$dir/$side.sqlite" --upstream-url "http://127.0.0.1:$sim_port" \
    --upstream-token kassa-simulator-token --api-keys bench-key --admin-token bench-admin --log-level warning \
    "${caps[@]}" >"$dir/serve-$side.log" 2>&1 & gateway[$side]=$!; pids+=($!)
  for _ in $(seq 100); do curl -s -o /dev/null "http://127.0.0.1:${port[$side]}/healthz" && break; sleep 0.1; done
}
