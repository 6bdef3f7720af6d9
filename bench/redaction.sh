#!/usr/bin/env bash
# What the gateway does with upstream answers, alone: saves the canned upstream's answers for one
# card payment (the five a card flow logs), then `kassa bench redaction` times, in ns a byte, the
# event log's redacted copy of them, a parse into a tree for scale, and a session call's
# PaymentOutput from that tree or decoded from the bytes.
# Usage: bench/redaction.sh [seconds] (KASSA_BENCH_BIN=path runs that build; pinned to CPU 1).
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/release.sh
if [ -n "${KASSA_BENCH_BIN:-}" ]; then kassa=$KASSA_BENCH_BIN; else release_build; kassa=.build/release/kassa; fi
out=$(mktemp -d)
port=$((20000 + RANDOM % 10000))
taskset -c 0 "$kassa" sim --canned --listen "127.0.0.1:$port" >"$out/sim.log" 2>&1 & sim=$!
trap 'kill $sim 2>/dev/null || true; rm -rf "$out"' EXIT
for _ in $(seq 50); do curl -s -o /dev/null "http://127.0.0.1:$port/psp/x" && break; sleep 0.1; done
base="http://127.0.0.1:$port"; auth=(-H "Authorization: Bearer kassa-simulator-token" -H "Content-Type: application/json")
curl -s "${auth[@]}" -d '{"paymentorder":{}}' "$base/psp/paymentorders" >"$out/created.json"
order=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["paymentOrder"]["id"])' "$out/created.json")
session=$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print([o["href"] for o in d["operations"] if o["rel"]=="view-paymentsession"][0].split("?")[0])' "$out/created.json")
curl -s "${auth[@]}" "$base$order" >"$out/order.json"
curl -s "${auth[@]}" "$session" >"$out/session.json"
curl -s "${auth[@]}" -d '{}' "$session/prepare" >"$out/prepared.json"
curl -s "${auth[@]}" -d '{}' "$session/methods/CreditCard/expand" >"$out/expanded.json"
curl -s "${auth[@]}" -d '{"paymentToken":"sim-card-frictionless"}' "$session/methods/CreditCard/attempts" >"$out/completed.json"
${KASSA_BENCH_PREFIX:-} taskset -c 1 "$kassa" bench redaction --seconds "${1:-2}" "$out"/created.json "$out"/session.json "$out"/prepared.json "$out"/expanded.json "$out"/completed.json
