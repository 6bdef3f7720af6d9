#!/usr/bin/env bash
# The soak: bench/scenarios/soak.json (10 minutes of the mixed flows) through bench/load.sh,
# then RSS, open files and flow p99 per minute from its samples, and the RSS trend
# between the second and the last minute. Usage: bench/soak.sh [OUTDIR]
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-$(mktemp -d)}"
KASSA_BENCH_OUT="$out" bash bench/load.sh bench/scenarios/soak.json | tail -1
python3 - "$out" <<'PY'
import csv, json, sys
out = sys.argv[1]
rows = [(int(r["t"]), int(r["rssKiB"]), int(r["fds"])) for r in csv.DictReader(open(out + "/samples.csv"))]
timeline = json.load(open(out + "/report.json"))["timeline"]
minutes = {}
for t, rss, fds in rows:
    minutes.setdefault(t // 60, []).append((rss, fds))
p99 = {}
for line in timeline:
    p99[int(line["t"]) // 60] = line.get("flowP99Ms")
flows = {}
for line in timeline:
    flows.setdefault(int(line["t"]) // 60, []).append(line["flowsPerSecond"])
table = [{"minute": m, "rssKiB": max(r for r, _ in v), "fds": max(f for _, f in v),
          "flowsPerSecond": round(sum(flows.get(m, [0])) / max(len(flows.get(m, [1])), 1)), "flowP99MsCumulative": p99.get(m)}
         for m, v in sorted(minutes.items())]
for row in table: print(json.dumps(row))
if len(table) > 3:
    print(json.dumps({"rssGrowthKiBFromMinute1ToLast": table[-2]["rssKiB"] - table[1]["rssKiB"]}))
PY
