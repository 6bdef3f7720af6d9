#!/usr/bin/env bash
# Where the event log's WAL bytes go: runs bench/load.sh (default flows.json, 15 s) with the
# database kept, stops the gateway for a moment mid-run to copy the database and its WAL as one
# state, and counts the WAL's frames (one page each) of whole commits by the table or index that
# owns the page, per commit. Owners come from the copy read together with its WAL, so a page the
# run added since the last checkpoint is counted under its table, not apart.
# Usage: bench/walframes.sh [scenario] [seconds into the run to copy, default 10]
#   KASSA_BENCH_BIN, KASSA_BENCH_PIN, KASSA_BENCH_UPSTREAM as for bench/load.sh (pin default 1:0).
set -euo pipefail
cd "$(dirname "$0")/.."
scenario=${1:-bench/scenarios/flows.json}; at=${2:-10}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
mkdir "$out/run"
KASSA_BENCH_OUT="$out/run" KASSA_BENCH_PIN=${KASSA_BENCH_PIN:-1:0} bench/load.sh "$scenario" --duration $((at + 5)) >"$out/load.txt" 2>&1 &
load=$!
sleep "$at"
gateway=$(pgrep -f "serve --listen 127.0.0.1:$(cat "$out/run/gateway.port")" | head -1)
# Stopped, the gateway writes nothing while the two files are copied: they are one state.
kill -STOP "$gateway"
cp "$out/run/kassa.sqlite" "$out/db"; cp "$out/run/kassa.sqlite-wal" "$out/db-wal"
kill -CONT "$gateway"
wait $load || true
python3 - "$out/db" <<'PY'
import collections, sqlite3, struct, sys
path = sys.argv[1]
wal = open(path + "-wal", "rb").read()   # read before SQLite opens (and checkpoints) the copy
_, _, page_size, _, salt1, salt2, _, _ = struct.unpack(">8I", wal[:32])
frames, offset = [], 32
# The WAL is reused from its start after a checkpoint: frames of this generation carry the header's salts.
while offset + 24 + page_size <= len(wal):
    page, db_size, s1, s2 = struct.unpack(">4I", wal[offset:offset + 16])
    if (s1, s2) != (salt1, salt2):
        break
    frames.append((page, db_size))
    offset += 24 + page_size
# Whole commits only: a commit's last frame carries the database's size.
ends = [i for i, (_, db_size) in enumerate(frames) if db_size]
frames = frames[:ends[-1] + 1] if ends else []
commits = len(ends)
owner = {page: name for name, page in sqlite3.connect(path).execute("SELECT name, pageno FROM dbstat")}
count, first = collections.Counter(), collections.Counter()
seen = set()
for page, _ in frames:
    name = owner.get(page, "(free now)")
    count[name] += 1
    if page not in seen:
        seen.add(page)
        first[name] += 1
per = max(commits, 1)
print(f"{len(frames)} frames of {page_size} bytes in {commits} commits: {len(frames) / per:.1f} frames per commit, "
      f"{len(seen) / per:.1f} of them a page's first in this WAL")
for name, n in count.most_common():
    print(f"  {name:36} {n / per:6.2f} per commit ({first[name] / per:5.2f} first)")
PY
