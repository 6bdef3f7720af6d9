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
  python3 - "$out/kassa.sqlite-shm" > "$out/wal-frames.txt" <<'PY' &
import struct, sys, time
while True:
    try:
        with open(sys.argv[1], "rb") as f: print(f"{time.time():.1f} {struct.unpack_from('<I', f.read(20), 16)[0]}", flush=True)
    except (OSError, struct.error):
        pass  # not created yet
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
