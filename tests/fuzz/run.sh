#!/usr/bin/env bash
# Builds the libFuzzer targets with clang (a build of their libraries instrumented for coverage, ASan and UBSan, in
# BUILD_DIR) and runs each for SECONDS, seeded with the shipped scenarios, the test data and the shared nccl-tests
# logs. Exit 0 when no target found a crash, a sanitizer report or an escaping exception.
#
#   tests/fuzz/run.sh SOURCE_DIR BUILD_DIR SECONDS [CLANGXX]
#   tests/fuzz/run.sh . build/fuzz 600          # a longer run by hand: ~10^6 executions per target or more
set -euo pipefail
src="$(cd "$1" && pwd)"
build="$2"
seconds="$3"
clangxx="${4:-clang++}"
mkdir -p "$build"
build="$(cd "$build" && pwd)"
cmake -S "$src" -B "$build" -DCMAKE_CXX_COMPILER="$clangxx" -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG="-O1 -g1" \
  -DDDLSIM_FUZZ=ON -DDDLSIM_BUILD_TESTS=OFF -DDDLSIM_BUILD_BENCH=OFF -DDDLSIM_PROBE_CUDA=OFF -DDDLSIM_LLD=OFF \
  -DDDLSIM_PCH=OFF >/dev/null
targets=(units json scenario nccl_tests trace probe)
cmake --build "$build" -j"$(nproc)" --target "${targets[@]/#/fuzz_}" >/dev/null

seeds="$build/seeds"
rm -rf "$seeds"
mkdir -p "$seeds"/{units,json,scenario,nccl_tests,trace,probe}
i=0
for q in "5 us" "252.9 ms" "25 MiB" "10 Gbps" "0.857 ns/B" "15.7 TFLOPS" "4.1 GFLOP" "1e7 s" "1 PiB"; do
  for d in 0 1 2 3 4 5; do
    printf "\\x0$d%s" "$q" >"$seeds/units/$i"
    i=$((i + 1))
  done
done
cp "$src"/scenarios/*.json "$seeds/scenario/"
cp "$src"/scenarios/*.json "$src"/tests/data/bad/*.json "$seeds/json/" 2>/dev/null || true
# a scenario with overrides after 0x01 bytes, as the scenario target reads them
{ cat "$src/scenarios/quickstart.json"; printf '\x01strategy.kind=ddp\x01cluster.nodes=4'; } >"$seeds/scenario/with-set"
shared="$src/tests/data/shared/nccl-tests"
if [ -d "$shared" ]; then cp "$shared"/* "$seeds/nccl_tests/"; fi
printf '#  Rank  0 Group  0 Pid 1 on h device  0 [0x1b] NVIDIA H100\n' >"$seeds/nccl_tests/minimal"
# traces: the Kineto trace (tests/data/shared/traces) decompressed, cut to its first 60 events (the whole is 30 MB), and the test fixtures
if [ -f "$src/tests/data/shared/traces/kineto_resnet50_1xV100_bs32.json.gz" ]; then
  python3 - "$src/tests/data/shared/traces/kineto_resnet50_1xV100_bs32.json.gz" "$seeds/trace/resnet50" <<'PY'
import gzip, json, sys
doc = json.load(gzip.open(sys.argv[1]))
doc["traceEvents"] = doc["traceEvents"][:60]
json.dump(doc, open(sys.argv[2], "w"))
PY
fi
cp "$src"/tests/data/traces/*.json "$seeds/trace/" 2>/dev/null || true
cat >"$seeds/probe/example" <<'JSON'
{ "format": "ddlsim-probe", "version": 1, "generator": "ddlsim-probe 0.1.0", "dtype": "fp32",
  "plan": {"file": "plan.json", "scenario": "q.json", "model": "resnet50", "gpu": "V100", "batch_per_gpu": 32},
  "measurements": [
    { "group": "layer", "layer": "conv1", "kernel": "convolution", "pass": "forward",
      "time": { "median": "0.000812 s", "min": "0.000809 s", "p10": "0.00081 s", "p90": "0.000815 s",
                "max": "0.00082 s", "mean": "0.000812 s", "noise": 0.0031, "samples": 616,
                "warmup_samples": 31, "stopped_by": "noise" } } ] }
JSON

status=0
for t in "${targets[@]}"; do
  corpus="$build/corpus/$t"
  mkdir -p "$corpus"
  log="$build/fuzz_$t.log"
  if "$build/tests/fuzz/fuzz_$t" -max_total_time="$seconds" -rss_limit_mb=2048 -timeout=20 -print_final_stats=1 \
    -artifact_prefix="$build/crash-$t-" "$corpus" "$seeds/$t" >"$log" 2>&1; then
    runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo "?")
    echo "fuzz_$t: $runs executions in ${seconds} s, no finding"
  else
    echo "fuzz_$t: FINDING (log $log):"
    grep -E "ERROR|SUMMARY|runtime error|Test unit written|what\(\)" "$log" | head -20
    status=1
  fi
done
exit $status
