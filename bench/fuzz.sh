#!/usr/bin/env bash
# libFuzzer over every parser that reads untrusted input (Sources/KassaFuzz), each for a
# bounded time, starting from the committed seed corpus (bench/fuzz/corpus/TARGET).
# Usage: bench/fuzz.sh [SECONDS_PER_TARGET (default 60)] [TARGET…]
# A crash or a broken property stops with the input saved under $KASSA_FUZZ_OUT (default a temp dir).
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-60}"; shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(json jsoninput timestamp redaction redactjson planted sessiontoken paymentoutput instrument path scenario numbers clientdevice httpanswer href)
swift build --product KassaFuzz --scratch-path .build-fuzz -Xswiftc -sanitize=fuzzer -Xswiftc -DKASSA_FUZZ >/dev/null
out="${KASSA_FUZZ_OUT:-$(mktemp -d)}"
status=0
for target in "${targets[@]}"; do
  mkdir -p "$out/$target/corpus" "$out/$target/artifacts"
  cp bench/fuzz/corpus/"$target"/* "$out/$target/corpus/" 2>/dev/null || true
  # Swift's own backtracer would take the crash signal before libFuzzer saves the input.
  if SWIFT_BACKTRACE=enable=no KASSA_FUZZ_TARGET="$target" .build-fuzz/debug/KassaFuzz -max_total_time="$seconds" -max_len=65536 -timeout=10 \
       -artifact_prefix="$out/$target/artifacts/" "$out/$target/corpus" >"$out/$target/log" 2>&1; then
    result=ok
  else
    result=FAILED; status=1
  fi
  runs=$(grep -o "Done [0-9]* runs" "$out/$target/log" | grep -o "[0-9]*" || echo 0)
  cov=$(grep -o "cov: [0-9]*" "$out/$target/log" | tail -1 | grep -o "[0-9]*" || echo 0)
  echo "{\"target\": \"$target\", \"seconds\": $seconds, \"runs\": ${runs:-0}, \"coverage\": ${cov:-0}, \"corpus\": $(ls "$out/$target/corpus" | wc -l), \"result\": \"$result\"}"
done
[ $status -eq 0 ] || echo "findings and logs: $out" >&2
exit $status
