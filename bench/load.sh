#!/usr/bin/env bash
# Runs `kassa load` with a scenario against a fresh gateway (release build) whose
# simulator runs in its own process, all on loopback, and samples the gateway's
# RSS and open files once a second. Every load client connects from 127.0.0.1, as clients behind
# a proxy do: the per-address caps (half-open, open) are raised above the scenario's clients. Prints the load report, then one JSON line:
#   {"rssStartKiB", "rssPeakKiB", "rssEndKiB", "fdsPeak", "perStreamKiB", "droppedEvents", ...}
# Usage: bench/load.sh SCENARIO [extra kassa load options…]
#   KASSA_BENCH_OUT=dir keeps the report, samples and logs there (default: a temp dir, deleted).
#   KASSA_BENCH_BIN=path uses that kassa binary (gateway and simulator) instead of building one.
#   KASSA_BENCH_CLIENT_BIN=path runs the load client from that binary (default: the same one), so
#     two gateway builds can be driven by one client.
#   KASSA_BENCH_PIN=G:H pins the gateway to CPUs G and the simulator and client to CPUs H (taskset),
#     e.g. 1:0, so the harness does not take the gateway's core.
#   KASSA_BENCH_ALLOCS=1 counts the gateway's malloc calls with a perf uprobe on libc's malloc (Swift's
#     allocations end there too) and reports allocationsPerFlow, and the Swift pool's jobs (a uprobe on
#     swift_job_run) as poolJobs. The probes cost microseconds a call, so take the other figures from a
#     run without them.
#   KASSA_BENCH_UPSTREAM=canned answers upstream calls with `kassa sim --canned` (from the client's
#     binary): the simulator's card-payment answers replayed, a few µs each, so the harness's share of
#     the machine is small. Card flows only (flows.json, push.json).
#   KASSA_BENCH_SIM_ARGS="…" passes more options to the simulator, e.g. `--fault *:latency=50` for
#     an upstream that answers in 50 ms (many calls in flight, as against Swedbank Pay).
#   KASSA_BENCH_SERVE_ARGS="…" passes more options to `kassa serve`; KASSA_BENCH_SERVE_ENV="NAME=value …"
#     sets variables in the gateway's environment alone, not the simulator's or the client's (e.g.
#     `GLIBC_TUNABLES=…` or `LD_PRELOAD=…`), to measure one binary under two settings.
# Beside CPU per flow, the JSON line gives host-independent counts per flow for the gateway: bytes
# written to files and write syscalls (/proc/<pid>/io), context switches (every thread), event-log
# commits; and each gateway thread's CPU per flow by its kernel name.
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/release.sh
scenario="$1"; shift
if [ -n "${KASSA_BENCH_BIN:-}" ]; then kassa=$KASSA_BENCH_BIN; else release_build; kassa=.build/release/kassa; fi
out="${KASSA_BENCH_OUT:-$(mktemp -d)}"
mkdir -p "$out"
rm -f "$out"/kassa.sqlite*   # a fresh database: a previous run's sessions would be recovered
client=${KASSA_BENCH_CLIENT_BIN:-$kassa}
gw_pin=(); harness_pin=()
if [ -n "${KASSA_BENCH_PIN:-}" ]; then gw_pin=(taskset -c "${KASSA_BENCH_PIN%%:*}"); harness_pin=(taskset -c "${KASSA_BENCH_PIN##*:}"); fi
source bench/caps.sh
mapfile -t caps < <(serve_caps "$kassa")
# Pushes stamped to the microsecond where the build can (a millisecond stamp errs by up to 1 ms).
# (Read whole before it is searched, as in caps.sh: `grep -q` in a pipefail pipeline fails at random.)
serve_help=$($kassa serve --help 2>&1 || true)
if [[ $serve_help == *--push-stamps* ]]; then caps+=(--push-stamps us); fi
gw_port=$((20000 + RANDOM % 10000)); sim_port=$((gw_port + 1))
upstream=($kassa sim --payer-delay-ms "${KASSA_BENCH_PAYER_DELAY_MS:-0}")
[ "${KASSA_BENCH_UPSTREAM:-sim}" = canned ] && upstream=($client sim --canned)
read -ra sim_args <<< "${KASSA_BENCH_SIM_ARGS:-}"   # split on spaces, no globbing (`*:latency=50`)
upstream+=("${sim_args[@]}")
"${harness_pin[@]}" "${upstream[@]}" --listen "127.0.0.1:$sim_port" >"$out/sim.log" 2>&1 &
sim=$!
read -ra serve_env <<< "${KASSA_BENCH_SERVE_ENV:-}"
"${gw_pin[@]}" env "${serve_env[@]}" $kassa serve --listen "127.0.0.1:$gw_port" --db "$out/kassa.sqlite" --upstream-url "http://127.0.0.1:$sim_port" \
  --upstream-token kassa-simulator-token --api-keys bench-key --admin-token bench-admin \
  "${caps[@]}" ${KASSA_BENCH_SERVE_ARGS:-} >"$out/serve.log" 2>&1 &
gw=$!
trap 'kill $gw $sim 2>/dev/null || true; wait 2>/dev/null || true; [ -n "${KASSA_BENCH_OUT:-}" ] || rm -rf "$out"' EXIT
for _ in $(seq 50); do curl -sf "http://127.0.0.1:$gw_port/readyz" >/dev/null && break; sleep 0.1; done
echo "$gw_port" >"$out/gateway.port"   # for a sampler beside the run (bench/soak.sh)
cpu_ticks() { awk '{print $14 + $15}' "$1/stat"; }   # user + system of a /proc process or task, in clock ticks
# Per-thread CPU ticks ("name ticks" lines) and the process's switches and writes, for the per-flow counts.
threads() { for t in /proc/$gw/task/*; do printf '%s\t%s\n' "$(cat "$t/comm")" "$(cpu_ticks "$t")"; done 2>/dev/null; }
switches() { cat /proc/$gw/task/*/status 2>/dev/null | awk '/ctxt_switches/ {n += $2} END {print n}'; }
io() { awk '/^(wchar|syscw):/ {printf "%s ", $2}' "/proc/$gw/io"; }
threads >"$out/threads.start"; switches_start=$(switches); io_start=$(io)
gw_cpu_start=$(cpu_ticks /proc/$gw); sim_cpu_start=$(cpu_ticks /proc/$sim)
rss() { awk '/VmRSS/ {print $2}' "/proc/$gw/status"; }
# Every 10 s also SQLite's own memory (its page caches, bounded) from /metrics, so a soak can
# tell a cache filling up from a leak; empty in the other seconds.
sqlite_kib() { curl -s --max-time 1 "http://127.0.0.1:$gw_port/metrics" | awk '/^kassa_sqlite_memory_bytes / {printf "%d", $2 / 1024}'; }
echo "t,rssKiB,fds,sqliteKiB" >"$out/samples.csv"
start_rss=$(rss)
( t=0; while kill -0 $gw 2>/dev/null; do
    echo "$t,$(rss),$(ls /proc/$gw/fd | wc -l),$( [ $((t % 10)) = 0 ] && sqlite_kib )" >>"$out/samples.csv"; sleep 1; t=$((t + 1))
  done ) &
sampler=$!
allocs_pid=
if [ "${KASSA_BENCH_ALLOCS:-0}" = 1 ]; then
  libc=$(ldd "$kassa" | awk '/libc\.so\.6/ {print $3}')
  probes=$(perf probe -l 2>/dev/null || true)
  [[ $probes == *'probe_libc:malloc '* ]] || perf probe -q -x "$libc" --add malloc
  # And the jobs the Swift pool runs (a task's start or resumption each): the hand-offs a flow costs.
  # Counted where the runtime is: libswift_Concurrency for a build linked to it, the binary itself
  # for a release build (bench/release.sh links Swift's runtime in; perf finds that symbol by its
  # address only). Made afresh each run: a probe left on another binary would count that one's jobs.
  perf probe -l 2>/dev/null | awk '/swift_job_run / {print $1}' | while read -r p; do perf probe -q -d "$p"; done
  concurrency=$(ldd "$kassa" | awk '/libswift_Concurrency\.so/ {print $3}')
  if [ -n "$concurrency" ]; then perf probe -q -x "$concurrency" --add swift_job_run
  else perf probe -q -x "$kassa" --add "swift_job_run=0x$(nm "$kassa" | awk '$3 == "swift_job_run" {print $1; exit}')"; fi
  perf stat -e probe_libc:malloc -e "$(perf probe -l 2>/dev/null | awk '/swift_job_run / && !n++ {print $1}')" -x, -o "$out/allocs.csv" -p $gw & allocs_pid=$!
fi
status=0
date +%s.%N >"$out/client.start"   # the client's timeline counts seconds from here
${KASSA_BENCH_LOAD_PREFIX:-} "${harness_pin[@]}" $client load --url "http://127.0.0.1:$gw_port" --api-key bench-key --scenario "$scenario" --json "$out/report.json" "$@" \
  2>"$out/progress.log" || status=$?
kill $sampler 2>/dev/null || true
if [ -n "$allocs_pid" ]; then kill -INT $allocs_pid; wait $allocs_pid || true; fi
gw_cpu=$(( $(cpu_ticks /proc/$gw) - gw_cpu_start )); sim_cpu=$(( $(cpu_ticks /proc/$sim) - sim_cpu_start )); ticks=$(getconf CLK_TCK)
end_rss=$(rss)
threads >"$out/threads.end"; switches_end=$(switches); io_end=$(io)
metrics=$(curl -s "http://127.0.0.1:$gw_port/metrics")
echo "$metrics" >"$out/metrics.txt"
kill -TERM $gw; wait $gw || true   # a graceful stop flushes the event log
python3 - "$out" "$start_rss" "$end_rss" "$metrics" "$gw_cpu" "$sim_cpu" "$ticks" "$switches_start $switches_end" "$io_start" "$io_end" <<'PY'
import csv, json, sys, re, sqlite3
from collections import defaultdict
sys.path.insert(0, "bench")
from histogram import quantile_ms
out, start, end, metrics = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
switches = [int(x) for x in sys.argv[8].split()]
io_start, io_end = [int(x) for x in sys.argv[9].split()], [int(x) for x in sys.argv[10].split()]
def thread_ticks(name):   # ticks by kernel thread name (pool threads share one)
    ticks = defaultdict(int)
    for line in open(out + "/threads." + name):
        comm, _, n = line.rstrip("\n").rpartition("\t")
        ticks[comm] += int(n)
    return ticks
cpu = {"gateway": int(sys.argv[5]) / int(sys.argv[7]), "simulator": int(sys.argv[6]) / int(sys.argv[7])}
rows = list(csv.DictReader(open(out + "/samples.csv")))
report = json.load(open(out + "/report.json"))
peak = max(int(r["rssKiB"]) for r in rows) if rows else start
fds = max(int(r["fds"]) for r in rows) if rows else 0
streams = report.get("peakOpenStreams", 0)
cpu["client"] = report.get("clientCpuSeconds", 0)
cpu["total"] = sum(cpu.values())
def per(count, scale):   # CPU per completed flow (ms) or per push received (µs), by process
    return {k: round(v * scale / count, 3) for k, v in cpu.items()} if count else None
db = sqlite3.connect(out + "/kassa.sqlite")
def metric(name):
    m = re.findall(r"^%s(?:\{[^}]*\})? ([0-9.e+]+)$" % re.escape(name), metrics, re.M)
    return sum(float(x) for x in m) if m else None
def bucket_quantile(name, q):   # a histogram's quantile in ms, from the scrape at the end
    return quantile_ms(sorted((float("inf") if le == "+Inf" else float(le), float(v))
                              for le, v in re.findall(r'^%s_bucket\{[^}]*le="([^"]+)"[^}]*\} ([0-9.e+]+)$' % re.escape(name), metrics, re.M)), q)
completed = report["completed"]
# perf stat's CSV line: count,unit,event,… (only with KASSA_BENCH_ALLOCS=1).
allocations = jobs = None
try:
    for line in open(out + "/allocs.csv"):
        fields = line.split(",")
        if len(fields) > 2 and fields[2] == "probe_libc:malloc" and fields[0].isdigit():
            allocations = int(fields[0])
        if len(fields) > 2 and fields[2].endswith(":swift_job_run") and fields[0].isdigit():
            jobs = int(fields[0])
except FileNotFoundError:
    pass
t0, t1 = thread_ticks("start"), thread_ticks("end")
exchanges = (metric("kassa_upstream_requests_total") or 0) + (metric("kassa_beacons_total") or 0)
def per_flow(x, digits=1):
    return round(x / completed, digits) if completed else None
print(json.dumps({
    "completed": report["completed"], "failedTotal": report["failedTotal"], "flowsPerSecond": report["flowsPerSecond"],
    "pushesPerSecond": report["pushesPerSecond"], "protocolErrors": report["protocolErrors"],
    "connectionErrors": report["connectionErrors"], "peakOpenStreams": streams,
    "rssStartKiB": start, "rssPeakKiB": peak, "rssEndKiB": end, "fdsPeak": fds,
    "perStreamKiB": round((peak - start) / streams, 2) if streams else None,
    # The same without SQLite's page caches (bounded, filled by the log whatever the connections).
    "sqliteKiBAtEnd": round((metric("kassa_sqlite_memory_bytes") or 0) / 1024),
    "perStreamKiBWithoutSQLiteCache": round((peak - start - (metric("kassa_sqlite_memory_bytes") or 0) / 1024) / streams, 2) if streams else None,
    "eventLogWriteErrors": metric("kassa_eventlog_write_errors_total") or 0,
    "eventLogQueueDepthAtEnd": metric("kassa_eventlog_queue_depth"),
    # Every push a client received must be in the log (a subscriber sees each push once).
    "pushesLogged": db.execute("SELECT COUNT(*) FROM events WHERE kind = 'push.sent'").fetchone()[0],
    "sessionsStored": db.execute("SELECT COUNT(*) FROM sessions").fetchone()[0],
    "pushP99Ms": report["latencyMs"].get("push", {}).get("p99"),
    "pushP50Ms": report["latencyMs"].get("push", {}).get("p50"),
    "flowP99Ms": report["latencyMs"].get("flow", {}).get("p99"),
    "flowP50Ms": report["latencyMs"].get("flow", {}).get("p50"),
    # Open loop: the rate due and the flows that started over 1 ms late (the client or the cap was the bound).
    "arrivalsPerSecond": report.get("arrivalsPerSecond"), "lateStarts": report.get("lateStarts"), "notStarted": report.get("notStarted"),
    # The gateway's own push latency (state change to frame written), from its histogram's buckets.
    "gatewayPushP99Ms": bucket_quantile("kassa_push_latency_seconds", 0.99),
    "gatewayPushP50Ms": bucket_quantile("kassa_push_latency_seconds", 0.50),
    # Its first part: state change to commit and hand-off to the edge, once a push.
    "gatewayPushCommitP99Ms": bucket_quantile("kassa_push_commit_wait_seconds", 0.99),
    "gatewayPushCommitP50Ms": bucket_quantile("kassa_push_commit_wait_seconds", 0.50),
    # Where the machine's CPU went during the run: gateway and simulator from /proc, the client from its report.
    "cpuSeconds": {k: round(v, 2) for k, v in cpu.items()},
    "cpuMsPerFlow": per(report["completed"], 1e3),
    "cpuUsPerPush": per(report["pushesReceived"], 1e6),
    # Counts per flow that do not depend on the host's speed (gateway process).
    "perFlow": {
        "walAndFileBytes": per_flow(io_end[0] - io_start[0], 0), "writeSyscalls": per_flow(io_end[1] - io_start[1]),
        "contextSwitches": per_flow(switches[1] - switches[0]),
        "eventLogCommits": per_flow(metric("kassa_eventlog_batch_size_count") or 0, 2),
        "allocations": per_flow(allocations, 0) if allocations is not None else None,
        "poolJobs": per_flow(jobs) if jobs is not None else None,
    },
    "threadCpuUsPerFlow": {k: per_flow((t1[k] - t0.get(k, 0)) * 1e6 / int(sys.argv[7]), 0) for k in sorted(t1) if t1[k] - t0.get(k, 0) > 0},
    # Upstream exchanges (session calls and event-logging beacons) per flow, and the curl thread's
    # CPU per exchange: the cost of one exchange on the gateway's side of the socket.
    "upstreamExchangesPerFlow": per_flow(exchanges, 2),
    "curlThreadUsPerExchange": round((t1.get("kassa-curl", 0) - t0.get("kassa-curl", 0)) * 1e6 / int(sys.argv[7]) / exchanges, 1) if exchanges else None,
}))
PY
exit $status
