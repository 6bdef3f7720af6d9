#!/usr/bin/env bash
# The soak: bench/scenarios/soak.json (10 minutes of the mixed flows) through bench/load.sh,
# then per minute: the gateway's peak RSS and open files, SQLite's memory (page caches), flows/s, and the worst and median
# of each second's push p99; then the RSS and descriptor trend (least-squares slope and
# first-to-last difference) over the minutes after a three-minute warm-up (the 120 s window
# of waiting sessions filled, the SQLite page cache grown) to the last full minute.
# Beside them: how many seconds had a push p99 over 20 and 50 ms, and how often the WAL
# started over and how many frames it reached (the wal-index header in kassa.sqlite-shm, read
# every 200 ms: mxFrame at byte 16, host order; see sqlite.org/walformat.html).
# Usage: bench/soak.sh [OUTDIR] [extra kassa load options…]
#        bench/soak.sh --report OUTDIR   (the tables again, from a finished run)
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-}" = "--report" ]; then
  out="$2"
else
  out="${1:-$(mktemp -d)}"
  shift || true
  mkdir -p "$out"
  rm -f "$out/gateway.port" "$out/seconds.jsonl"
  python3 - "$out" > "$out/wal-frames.txt" <<'PY' &
import json, re, struct, sys, time, urllib.request
out = sys.argv[1]
# Once a second, beside the WAL: the gateway's own push latency, its wait for the commit, event-log
# commit and WAL-restart hold buckets (cumulative, from /metrics), the machine's stolen and I/O-wait CPU ticks (/proc/stat) and the
# time every task was stalled on I/O (/proc/pressure/io "full", µs), and for the event log's writer
# and the edge thread their time on a CPU, their time runnable but waiting for one (ns) and how
# many times they were put on one (/proc/PID/task/TID/schedstat). A slow second can then be told apart: inside the gateway, in
# its commits, a thread kept from a CPU, or on the host.
buckets = re.compile(r'^kassa_(push_latency|push_commit_wait|eventlog_write|eventlog_wal_restart)_seconds_bucket\{le="([^"]+)"\} ([0-9.e+]+)$', re.M)
# The event log's writer's reads of the database's files (inside its commits): those past 1 ms came from the disk.
writer_reads = re.compile(r'^kassa_sqlite_read_seconds_(?:bucket\{reader="eventlog",le="0\.001"\}|count\{reader="eventlog"\}) ([0-9.e+]+)$', re.M)
port, next_scrape = None, 0.0
threads = {}   # "writer"/"edge" -> the gateway's thread's schedstat path, found once by name
def find_threads():
    import glob
    for comm in glob.glob("/proc/[0-9]*/task/*/comm"):
        try:
            name = open(comm).read().strip()
            key = {"kassa-eventlog": "writer", "kassa-edge": "edge"}.get(name)
            pid = comm.split("/")[2]
            if key and out + "/kassa.sqlite" in open(f"/proc/{pid}/cmdline").read():
                threads[key] = comm[:-len("comm")] + "schedstat"
        except OSError:
            pass
while True:
    try:
        with open(out + "/kassa.sqlite-shm", "rb") as f: print(f"{time.time():.1f} {struct.unpack_from('<I', f.read(20), 16)[0]}", flush=True)
    except (OSError, struct.error):
        pass  # not created yet
    now = time.time()
    if now >= next_scrape:
        next_scrape = now + 1.0
        try:
            port = port or open(out + "/gateway.port").read().strip()
            text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=0.5).read().decode()
            line = {"time": round(now, 3), "push": [], "commit": [], "write": [], "restart": []}
            key = {"push_latency": "push", "push_commit_wait": "commit", "eventlog_write": "write", "eventlog_wal_restart": "restart"}
            for name, le, count in buckets.findall(text):
                line[key[name]].append([float(le), float(count)])
            reads = writer_reads.findall(text)   # within 1 ms, then all (builds before the metric: none)
            if len(reads) == 2: line["writerReadsOver1Ms"] = float(reads[1]) - float(reads[0])
            cpu = open("/proc/stat").readline().split()
            line["iowaitTicks"], line["stealTicks"] = int(cpu[5]), int(cpu[8])
            full = open("/proc/pressure/io").read().split("full ")[1]
            line["ioFullUs"] = int(full.split("total=")[1])
            if len(threads) < 2: find_threads()
            for key, path in threads.items():
                on_cpu, waiting, runs = open(path).read().split()
                line[key + "CpuNs"], line[key + "RunWaitNs"], line[key + "Runs"] = int(on_cpu), int(waiting), int(runs)
            with open(out + "/seconds.jsonl", "a") as f: f.write(json.dumps(line) + "\n")
        except (OSError, ValueError, IndexError):
            pass  # the gateway not up yet, or gone
    time.sleep(0.2)
PY
  sampler=$!
  trap 'kill "$sampler" 2>/dev/null || true' EXIT
  # A failed flow makes load.sh exit non-zero; the tables are still wanted (they count it).
  KASSA_BENCH_OUT="$out" bash bench/load.sh bench/scenarios/soak.json "$@" | tail -1 || true
fi
python3 - "$out" <<'PY'
import csv, json, statistics, sys
out = sys.argv[1]
samples = list(csv.DictReader(open(out + "/samples.csv")))
rows = [(int(r["t"]), int(r["rssKiB"]), int(r["fds"])) for r in samples]
sqlite = {}   # minute -> SQLite's memory (KiB) at its last sample, where load.sh took it
for r in samples:
    if r.get("sqliteKiB"): sqlite[int(r["t"]) // 60] = int(r["sqliteKiB"])
report = json.load(open(out + "/report.json"))
minutes, seconds = {}, {}
for t, rss, fds in rows:
    minutes.setdefault(t // 60, []).append((rss, fds))
for line in report["timeline"]:
    seconds.setdefault((int(line["t"]) - 1) // 60, []).append(line)
table = []
for m in sorted(seconds):
    lines = seconds[m]
    samples = minutes.get(m, [(0, 0)])
    p99s = [l["pushP99Ms"] for l in lines if l.get("pushP99Ms") is not None]
    table.append({"minute": m + 1, "rssKiB": max(r for r, _ in samples), "fds": max(f for _, f in samples),
                  "sqliteKiB": sqlite.get(m),
                  "flowsPerSecond": round(sum(l["flowsPerSecond"] for l in lines) / len(lines)),
                  "failed": lines[-1]["failed"],
                  "pushP99MsMedianSecond": round(statistics.median(p99s), 2) if p99s else None,
                  "pushP99MsWorstSecond": max(p99s) if p99s else None})
for row in table: print(json.dumps(row))
warm = [r for r in table if r["minute"] > 3 and len(seconds[r["minute"] - 1]) >= 55]
for r in warm:
    if r["sqliteKiB"] is not None: r["rssWithoutSQLiteKiB"] = r["rssKiB"] - r["sqliteKiB"]
def slope(key):
    points = [(r["minute"], r[key]) for r in warm if r.get(key) is not None]
    if len(points) < 3: return None
    xs = [x for x, _ in points]; ys = [y for _, y in points]
    mx, my = statistics.mean(xs), statistics.mean(ys)
    return round(sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs), 1)
p99s = [l["pushP99Ms"] for l in report["timeline"] if l.get("pushP99Ms") is not None]
try:
    frames = [int(l.split()[1]) for l in open(out + "/wal-frames.txt")]
except OSError:
    frames = []
print(json.dumps({"seconds": len(p99s), "secondsOver20Ms": sum(p > 20 for p in p99s), "secondsOver50Ms": sum(p > 50 for p in p99s),
                  "worstSecondMs": max(p99s, default=None), "walRestarts": sum(b < a for a, b in zip(frames, frames[1:])),
                  "walMostFrames": max(frames, default=None)}))
if len(warm) >= 3:
    first, last = warm[0], warm[-1]
    print(json.dumps({"fromMinute": first["minute"], "toMinute": last["minute"],
                      "rssKiBPerMinuteSlope": slope("rssKiB"), "rssChangeKiB": last["rssKiB"] - first["rssKiB"],
                      "sqliteKiBPerMinuteSlope": slope("sqliteKiB"), "rssWithoutSQLiteKiBPerMinuteSlope": slope("rssWithoutSQLiteKiB"),
                      "fdsPerMinuteSlope": slope("fds"), "fdsChange": last["fds"] - first["fds"],
                      "failedTotal": report["failedTotal"], "protocolErrors": report["protocolErrors"],
                      "connectionErrors": report["connectionErrors"]}))
PY
# Each second with a client-side push p99 over 50 ms, against the sampler's seconds that overlap
# it: the gateway's own push p99 (state change to frame written) and the p99 of its part until the
# commit handed the push to the edge (builds before that metric: null), the slowest event-log commit and
# the longest hold of the commits for a WAL restart (the upper bounds of their histogram buckets),
# the event log writer's reads past 1 ms (from the disk, inside its commits; builds before that metric: 0),
# the host's stolen and I/O-wait ticks and full I/O stall, and the CPU time of the writer and the
# edge thread and their time runnable but kept from a CPU (builds of soak.sh before it: null). The gateway's own count of seconds over 50 ms comes first.
if [ -s "$out/seconds.jsonl" ] && [ -s "$out/client.start" ]; then python3 - "$out" <<'PY'
import json, sys
sys.path.insert(0, "bench")
from histogram import quantile_ms
out = sys.argv[1]
scrapes = [json.loads(l) for l in open(out + "/seconds.jsonl")]
start = float(open(out + "/client.start").read())
timeline = json.load(open(out + "/report.json"))["timeline"]
def delta(a, b, key):   # the buckets' counts in (a, b]: cumulative, as Prometheus keeps them
    return [(le, c - p) for (le, c), (_, p) in zip(b[key], a[key])]
def slowest_ms(buckets):   # the smallest bound that holds every commit of the interval
    total = buckets[-1][1] if buckets else 0
    return next((le * 1000 for le, count in buckets if count >= total), None) if total > 0 else None
intervals = []
for a, b in zip(scrapes, scrapes[1:]):
    if any(len(a.get(k, [])) != len(b.get(k, [])) for k in ("push", "commit", "write", "restart")): continue
    intervals.append({"from": a["time"], "to": b["time"], "gatewayP99Ms": quantile_ms(delta(a, b, "push"), 0.99, digits=1),
                      "commitWaitP99Ms": quantile_ms(delta(a, b, "commit"), 0.99, digits=1) if a.get("commit") else None,
                      "slowestCommitMs": slowest_ms(delta(a, b, "write")),
                      "longestRestartHoldMs": slowest_ms(delta(a, b, "restart")) if a.get("restart") else None,
                      "writerReadsOver1Ms": b["writerReadsOver1Ms"] - a["writerReadsOver1Ms"] if "writerReadsOver1Ms" in a and "writerReadsOver1Ms" in b else None,
                      "stealTicks": b["stealTicks"] - a["stealTicks"], "iowaitTicks": b["iowaitTicks"] - a["iowaitTicks"],
                      "ioFullMs": round((b["ioFullUs"] - a["ioFullUs"]) / 1000, 1),
                      **{f"{t}{k}Ms": round((b[f"{t}{k}Ns"] - a[f"{t}{k}Ns"]) / 1e6, 1) if f"{t}{k}Ns" in a and f"{t}{k}Ns" in b else None
                         for t in ("writer", "edge") for k in ("Cpu", "RunWait")}})
slow = []
for line in timeline:
    if (line.get("pushP99Ms") or 0) <= 50: continue
    lo, hi = start + line["t"] - 1, start + line["t"]
    near = [i for i in intervals if i["to"] > lo and i["from"] < hi]
    if not near: continue
    slow.append({"t": line["t"], "clientP99Ms": line["pushP99Ms"], "flowsPerSecond": line["flowsPerSecond"],
                 "gatewayP99Ms": max((i["gatewayP99Ms"] or 0) for i in near),
                 "commitWaitP99Ms": max((i["commitWaitP99Ms"] for i in near if i["commitWaitP99Ms"] is not None), default=None),
                 "slowestCommitMs": max((i["slowestCommitMs"] or 0) for i in near),
                 "longestRestartHoldMs": max((i["longestRestartHoldMs"] or 0) for i in near),
                 "writerReadsOver1Ms": sum(i["writerReadsOver1Ms"] or 0 for i in near),
                 "stealTicks": sum(i["stealTicks"] for i in near), "iowaitTicks": sum(i["iowaitTicks"] for i in near),
                 "ioFullMs": round(sum(i["ioFullMs"] for i in near), 1),
                 **{k: round(sum(i[k] for i in near), 1) if all(i[k] is not None for i in near) else None
                    for k in ("writerCpuMs", "writerRunWaitMs", "edgeCpuMs", "edgeRunWaitMs")}})
print(json.dumps({"gatewaySeconds": len(intervals), "gatewaySecondsOver50Ms": sum((i["gatewayP99Ms"] or 0) > 50 for i in intervals),
                  "gatewaySecondsOver20Ms": sum((i["gatewayP99Ms"] or 0) > 20 for i in intervals),
                  "commitWaitSecondsOver20Ms": sum((i["commitWaitP99Ms"] or 0) > 20 for i in intervals)
                      if any(i["commitWaitP99Ms"] is not None for i in intervals) else None,
                  "secondsWithACommitOver50Ms": sum((i["slowestCommitMs"] or 0) > 50 for i in intervals),
                  "slowClientSeconds": len(slow), "ofThemGatewayOver50Ms": sum(s["gatewayP99Ms"] > 50 for s in slow),
                  "ofThemCommitOver50Ms": sum(s["slowestCommitMs"] > 50 for s in slow),
                  "ofThemRestartHoldOver50Ms": sum(s["longestRestartHoldMs"] > 50 for s in slow),
                  "secondsWithARestartHoldOver50Ms": sum((i["longestRestartHoldMs"] or 0) > 50 for i in intervals),
                  "secondsWithWriterReadsOver1Ms": sum((i["writerReadsOver1Ms"] or 0) > 0 for i in intervals),
                  "ofThemWithWriterReadsOver1Ms": sum(s["writerReadsOver1Ms"] > 0 for s in slow),
                  "ofThemWithSteal": sum(s["stealTicks"] > 0 for s in slow),
                  "ofThemWriterWaitingOver20MsForACPU": sum(s["writerRunWaitMs"] > 20 for s in slow)
                      if all(s["writerRunWaitMs"] is not None for s in slow) else None}))
for s in slow: print(json.dumps(s))
PY
fi
