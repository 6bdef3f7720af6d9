#!/usr/bin/env bash
# Where the event log's WAL bytes go: runs bench/load.sh (default flows.json, 15 s) with the
# database kept, copies the database and its WAL mid-run, and counts the WAL's valid frames
# (one page each) by the table or index that owns the page, per commit.
# Usage: bench/walframes.sh [scenario] [seconds into the run to copy, default 10]
#   KASSA_BENCH_BIN, KASSA_BENCH_PIN as for bench/load.sh (pin default 1:0).
set -euo pipefail
cd "$(dirname "$0")/.."
scenario=${1:-bench/scenarios/flows.json}; at=${2:-10}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
mkdir "$out/run"
KASSA_BENCH_OUT="$out/run" KASSA_BENCH_PIN=${KASSA_BENCH_PIN:-1:0} bench/load.sh "$scenario" --duration $((at + 5)) >"$out/load.txt" 2>&1 &
load=$!
sleep "$at"
cp "$out/run/kassa.sqlite-wal" "$out/wal"; cp "$out/run/kassa.sqlite" "$out/db"
wait $load || true
python3 - "$out/wal" "$out/db" <<'PY'
import collections, sqlite3, struct, sys
wal = open(sys.argv[1], "rb").read()
_, _, page_size, _, salt1, salt2, _, _ = struct.unpack(">8I", wal[:32])
frames, offset = [], 32
# The WAL is reused from its start after a checkpoint: frames of this generation carry the header's salts.
while offset + 24 + page_size <= len(wal):
    page, db_size, s1, s2 = struct.unpack(">4I", wal[offset:offset + 16])
    if (s1, s2) != (salt1, salt2):
        break
    frames.append((page, db_size))
    offset += 24 + page_size
owner = {page: name for name, page in sqlite3.connect(sys.argv[2]).execute("SELECT name, pageno FROM dbstat")}
commits = sum(1 for _, db_size in frames if db_size)   # a commit's last frame carries the database's size
print(f"{len(frames)} frames of {page_size} bytes in {commits} commits: {len(frames) / max(commits, 1):.1f} frames per commit")
for name, n in collections.Counter(owner.get(page, "(page new since the copy)") for page, _ in frames).most_common():
    print(f"  {name:36} {n:7d} {n / max(commits, 1):6.2f} per commit")
PY
