#!/usr/bin/env bash
# Event log benchmark: sustained append rate, then timeline and payee-reference
# query latency with EVENTS rows (default 5 million). Release build; prints JSON.
# Usage: bench/eventlog.sh [EVENTS]
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/release.sh
events="${1:-5000000}"
release_build
db="$(mktemp -d)/bench.sqlite"
.build/release/kassa bench eventlog --db "$db" --events "$events" --samples 2000
rm -rf "$(dirname "$db")"
