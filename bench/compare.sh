#!/usr/bin/env bash
# Side by side, one run: (1) the same WebSocket workloads against Kassa and a minimal
# Hummingbird 2 WebSocket server (bench/push-server-hummingbird, built here, benchmark-only):
# the ping workload's answer rate and p99, and memory per idle connection;
# (2) the Merchant API (GET /swedbank-pay-mobile/, POST …/paymentorders) against
# Kassa and against nginx proxying the same requests to the same upstream, with wrk.
# The upstream is `kassa sim --canned` (the simulator's answers replayed, a few µs each), so
# the upstream's own cost does not decide the proxies' rates.
# Usage: bench/compare.sh   (installs nginx-light and wrk if missing; prints JSON lines, the
# last one the ratios Kassa/other; the HTTP ones count successful answers only)
#   KASSA_BENCH_PIN=S:H (default 1:0) pins each server (Kassa, Hummingbird, nginx) to CPUs S and the
#     harness (load client, wrk, canned upstream) to CPUs H, so the servers are compared on the same
#     core and the harness does not take it; KASSA_BENCH_PIN= (empty) pins nothing.
#   KASSA_COMPARE_HTTP_PAIRS=N (default 1) runs each Merchant API pair N times, Kassa and nginx in turn.
#   KASSA_COMPARE_OUT=dir keeps the run's files there (wrk's output a run, the servers' logs, Kassa's
#     database with its event log), to look into a run afterwards (default: a temporary directory).
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/release.sh
for p in nginx-light wrk; do dpkg -s $p >/dev/null 2>&1 || { apt-get update -qq; DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $p; } >&2; done   # stdout is the report
release_build
# Both Swift servers built alike: with Swift's runtime linked in, as each is deployed.
swift build -c release --package-path bench/push-server-hummingbird --scratch-path .build-hummingbird --static-swift-stdlib >/dev/null
kassa=.build/release/kassa
pin=${KASSA_BENCH_PIN-1:0}
server=(); harness=()
if [ -n "$pin" ]; then server=(taskset -c "${pin%%:*}"); harness=(taskset -c "${pin##*:}"); fi
hb=.build-hummingbird/release/PushServer
idle_clients="${KASSA_COMPARE_IDLE:-5000}"
out=${KASSA_COMPARE_OUT:-$(mktemp -d)}
mkdir -p "$out"
rm -f "$out"/kassa.sqlite* "$out"/report.jsonl   # a kept directory starts afresh
pids=()
trap 'kill ${pids[@]} 2>/dev/null || true; nginx -c "$out/nginx.conf" -p "$out" -s stop 2>/dev/null || true; [ -n "${KASSA_COMPARE_OUT:-}" ] || rm -rf "$out"' EXIT
rss() { awk '/VmRSS/ {print $2}' "/proc/$1/status"; }
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }   # user + system, in clock ticks
wait_http() { for _ in $(seq 100); do curl -s -o /dev/null "$1" && return 0; sleep 0.1; done; echo "no answer from $1" >&2; return 1; }

# A load run against one server: its report, and the server's RSS before and at the end.
measure() {  # name pid url scenario [load options]
  local name=$1 pid=$2 url=$3 scenario=$4; shift 4
  local before; before=$(rss "$pid")
  # Kassa's SQLite page caches fill as its log grows (bounded, whatever the connections): read
  # them from /metrics before and after, so the report can show memory per connection without them.
  sqlite_kib() { curl -s "$url/metrics" | awk '/^kassa_sqlite_memory_bytes / {printf "%d", $2 / 1024; found=1} END {if (!found) print ""}'; }
  local sqlite_before; sqlite_before=$(sqlite_kib)
  local ticks; ticks=$(cpu_ticks "$pid")
  # (open descriptors, RSS) pairs twice a second: the slope of RSS over descriptors is the memory
  # one more connection costs, apart from what the process holds whatever its load.
  ( while kill -0 "$pid" 2>/dev/null; do echo "$(ls "/proc/$pid/fd" | wc -l) $(rss "$pid")"; sleep 0.5; done ) >"$out/$name.samples" &
  local sampler=$!
  "${harness[@]}" $kassa load --url "$url" --api-key bench-key --scenario "$scenario" --json "$out/$name.json" "$@" 2>/dev/null >/dev/null || true
  kill $sampler 2>/dev/null || true
  python3 - "$name" "$out/$name.json" "$before" "$(rss "$pid")" "$(( $(cpu_ticks "$pid") - ticks ))" "$(getconf CLK_TCK)" "$out/$name.samples" \
    "$sqlite_before" "$(sqlite_kib)" <<'PY' | tee -a "$out/report.jsonl"
import json, sys
name, path, before, after = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
sqlite_growth = int(sys.argv[9]) - int(sys.argv[8]) if sys.argv[8] and sys.argv[9] else None
cpu_seconds = int(sys.argv[5]) / int(sys.argv[6])
samples = [tuple(map(int, line.split())) for line in open(sys.argv[7]) if len(line.split()) == 2]
r = json.load(open(path))
# Least-squares slope of RSS (KiB) over open descriptors, from a quarter of the peak up to the peak.
peak_fds = max((f for f, _ in samples), default=0)
ramp = [(f, m) for f, m in samples if f >= peak_fds / 4]
marginal = None
if len(ramp) > 5 and peak_fds > 1000:
    mf = sum(f for f, _ in ramp) / len(ramp); mm = sum(m for _, m in ramp) / len(ramp)
    var = sum((f - mf) ** 2 for f, _ in ramp)
    marginal = round(sum((f - mf) * (m - mm) for f, m in ramp) / var, 2) if var else None
answers = r["framesReceived"] - r["pushesReceived"]
ping = r["latencyMs"].get("ping→pong", {})
print(json.dumps({"run": name, "completed": r["completed"], "failed": r["failedTotal"], "protocolErrors": r["protocolErrors"],
                  "answersPerSecond": round((r["framesReceived"] - r["pushesReceived"]) / r["durationSeconds"]),
                  "pingP50Ms": ping.get("p50"), "pingP99Ms": ping.get("p99"), "peakOpenStreams": r["peakOpenStreams"],
                  "serverCpuSeconds": round(cpu_seconds, 2),
                  "serverCpuUsPerAnswer": round(cpu_seconds * 1e6 / answers, 1) if answers > 1000 else None,
                  "rssBeforeKiB": before, "rssAfterKiB": after,
                  "perStreamKiB": round((after - before) / max(r["peakOpenStreams"], 1), 2),
                  "marginalKiBPerStream": marginal,
                  "sqliteCacheGrowthKiB": sqlite_growth,
                  "perStreamKiBWithoutSQLiteCache": round((after - before - sqlite_growth) / max(r["peakOpenStreams"], 1), 2)
                      if sqlite_growth is not None else None}))
PY
}

sim_port=$((20000 + RANDOM % 10000)); kassa_port=$((sim_port + 1)); hb_port=$((sim_port + 2)); nginx_port=$((sim_port + 3))
"${harness[@]}" $kassa sim --canned --listen "127.0.0.1:$sim_port" >"$out/sim.log" 2>&1 & pids+=($!)
source bench/caps.sh
mapfile -t caps < <(serve_caps "$kassa")
"${server[@]}" $kassa serve --listen "127.0.0.1:$kassa_port" --db "$out/kassa.sqlite" --upstream-url "http://127.0.0.1:$sim_port" \
  --upstream-token kassa-simulator-token --api-keys bench-key --admin-token bench-admin --log-level warning \
  "${caps[@]}" >"$out/serve.log" 2>&1 & kassa_pid=$!; pids+=($kassa_pid)
"${server[@]}" $hb "$hb_port" >"$out/hb.log" 2>&1 & hb_pid=$!; pids+=($hb_pid)
wait_http "http://127.0.0.1:$kassa_port/healthz"; wait_http "http://127.0.0.1:$hb_port/"

# 1. WebSocket workloads (Kassa's idle sessions are real sessions: created upstream, fetched, held).
measure kassa-ping $kassa_pid "http://127.0.0.1:$kassa_port" bench/scenarios/ping.json
measure hummingbird-ping $hb_pid "http://127.0.0.1:$hb_port" bench/scenarios/ping.json
measure kassa-idle $kassa_pid "http://127.0.0.1:$kassa_port" bench/scenarios/idle.json --clients "$idle_clients" --duration 40
measure hummingbird-idle $hb_pid "http://127.0.0.1:$hb_port" bench/scenarios/idle.json --clients "$idle_clients" --duration 40

# 2. Merchant API: Kassa vs nginx proxying to the same canned upstream.
cat >"$out/nginx.conf" <<NGINX
worker_processes 1;
daemon on;
pid $out/nginx.pid;
error_log $out/nginx-error.log;
events { worker_connections 4096; }
http {
  access_log off;
  upstream sim { server 127.0.0.1:$sim_port; keepalive 64; }
  server {
    listen 127.0.0.1:$nginx_port;
    location = /swedbank-pay-mobile/ {
      default_type application/json;
      return 200 '{"consumers":"/swedbank-pay-mobile/consumers","paymentorders":"/swedbank-pay-mobile/paymentorders"}';
    }
    location = /swedbank-pay-mobile/paymentorders {
      proxy_pass http://sim/psp/paymentorders;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_set_header Authorization "Bearer kassa-simulator-token";
    }
  }
}
NGINX
"${server[@]}" nginx -c "$out/nginx.conf" -p "$out"
wait_http "http://127.0.0.1:$nginx_port/swedbank-pay-mobile/"
wrk_run() {  # name url [script]
  local name=$1 url=$2; shift 2
  local file="$out/$name.${pair:-1}.wrk"   # one a pair, for a run that must be looked at later
  "${harness[@]}" wrk -t2 -c64 -d10s --latency -H "Your-Api-Key: bench-key" "$@" "$url" >"$file" 2>&1
  python3 - "$name" "$file" <<'PY' | tee -a "$out/report.jsonl"
import re, sys, json
name, text = sys.argv[1], open(sys.argv[2]).read()
rps = float(re.search(r"Requests/sec:\s+([0-9.]+)", text).group(1))
def ms(label):
    m = re.search(r"\s%s\s+([0-9.]+)(us|ms|s)" % re.escape(label), text)
    if not m: return None
    v, unit = float(m.group(1)), m.group(2)
    return round(v / 1000 if unit == "us" else v * 1000 if unit == "s" else v, 3)
non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", text)
non2xx = int(non2xx.group(1)) if non2xx else 0
total = int(re.search(r"(\d+) requests in", text).group(1))
# The ratios count answers that did their work: a run whose answers are problems (a gateway's
# 5xx, nginx's 502s) is fast at nothing.
print(json.dumps({"run": name, "requestsPerSecond": rps, "p50Ms": ms("50%"), "p99Ms": ms("99%"),
                  "non2xx": non2xx, "successesPerSecond": round(rps * (total - non2xx) / total, 2) if total else 0}))
PY
}
# Kassa and nginx take turns, KASSA_COMPARE_HTTP_PAIRS times (default 1): on this machine nginx's
# own rate moves by a fifth from one run to the next, and the ratios are of the runs' means.
for pair in $(seq "${KASSA_COMPARE_HTTP_PAIRS:-1}"); do
  wrk_run kassa-merchant-root "http://127.0.0.1:$kassa_port/swedbank-pay-mobile/"
  wrk_run nginx-merchant-root "http://127.0.0.1:$nginx_port/swedbank-pay-mobile/"
done
for pair in $(seq "${KASSA_COMPARE_HTTP_PAIRS:-1}"); do
  wrk_run kassa-paymentorders "http://127.0.0.1:$kassa_port/swedbank-pay-mobile/paymentorders" -s bench/paymentorder.lua
  wrk_run nginx-paymentorders "http://127.0.0.1:$nginx_port/swedbank-pay-mobile/paymentorders" -s bench/paymentorder.lua
done
# The ratios the performance issue sets goals for (Kassa/nginx ≥ 0.6 and ≥ 0.5, Kassa/Hummingbird
# answers ≥ 1.5, memory per connection ≤ 0.5).
python3 - "$out/report.jsonl" <<'PY'
import json, sys
runs = {}
for x in map(json.loads, open(sys.argv[1])): runs.setdefault(x["run"], []).append(x)
def mean(name, key):
    values = [x[key] for x in runs.get(name, []) if x.get(key) is not None]
    return sum(values) / len(values) if values else None
def ratio(a, b, key, digits=2):
    x, y = mean(a, key), mean(b, key)
    return round(x / y, digits) if x is not None and y else None
print(json.dumps({"run": "ratios",
                  "merchantRootVsNginx": ratio("kassa-merchant-root", "nginx-merchant-root", "successesPerSecond"),
                  "paymentOrdersVsNginx": ratio("kassa-paymentorders", "nginx-paymentorders", "successesPerSecond"),
                  "pingAnswersVsHummingbird": ratio("kassa-ping", "hummingbird-ping", "answersPerSecond"),
                  "memoryPerConnectionVsHummingbird": ratio("kassa-idle", "hummingbird-idle", "marginalKiBPerStream")}))
PY
