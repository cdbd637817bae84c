#!/usr/bin/env bash
# scripts/gpu-check.sh on a machine without a GPU (issue #31): bad arguments exit 2 with one line; a run does the steps
# before the GPU's (the environment, the spec-sheet scenarios, the probe plans, the probe's dry run where nvcc built
# the probe) and exits 3 with one line; --analyse on that folder, with the shared ResNet-50 trace standing in for a
# recorded one, imports and runs it and writes the table, the cells without inputs saying why. The probe is not built
# here (minutes of nvcc): the suite's own is passed where there is one (not under the asan preset).
# Usage: test_gpu_check.sh DDLSIM SOURCE_DIR [DDLSIM_PROBE]
set -euo pipefail
ddlsim=$1 src=$2 probe=${3:-}
script=$src/scripts/gpu-check.sh
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() {
  echo "FAILED: $*" >&2
  exit 1
}
# expect RC ARGS...: runs the script (no GPU visible, no bundle), its stdout and stderr in $dir/stdout, $dir/stderr
expect() {
  local want=$1 rc=0
  shift
  CUDA_VISIBLE_DEVICES='' bash "$script" --bundle "$dir/no-bundle" "$@" >"$dir/stdout" 2>"$dir/stderr" || rc=$?
  [ "$rc" -eq "$want" ] || fail "gpu-check.sh $* exited $rc, expected $want: $(cat "$dir/stderr")"
}

# bad arguments: exit 2, one line naming the problem
expect 2 --frobnicate
grep -qx "gpu-check: unknown argument '--frobnicate' (see --help)" "$dir/stderr" || fail "message: $(cat "$dir/stderr")"
expect 2 --out
grep -qx "gpu-check: --out needs a value (see --help)" "$dir/stderr" || fail "message: $(cat "$dir/stderr")"
expect 2 --budget 5
grep -qx "gpu-check: --budget must be 60 to 3600 seconds, not '5'" "$dir/stderr" || fail "message: $(cat "$dir/stderr")"
expect 2 --analyse "$dir"
grep -q "^gpu-check: --analyse $dir: not a folder that scripts/gpu-check.sh wrote" "$dir/stderr" ||
  fail "message: $(cat "$dir/stderr")"

# without a GPU: the steps before the GPU's, then exit 3 with one line
out=$dir/out
if [ -n "$probe" ]; then
  expect 3 --out "$out" --ddlsim "$ddlsim" --probe "$probe"
else
  expect 3 --out "$out" --ddlsim "$ddlsim" --no-probe-build
fi
[ "$(wc -l <"$dir/stderr")" -eq 1 ] || fail "expected one line on stderr: $(cat "$dir/stderr")"
grep -qx "gpu-check: no GPU found (CUDA_VISIBLE_DEVICES='' hides every GPU): the steps that need one were not run; what was done is in $out" \
  "$dir/stderr" || fail "message: $(cat "$dir/stderr")"
for m in resnet50 gpt2; do
  [ -s "$out/scenarios/$m.json" ] || fail "no scenario for $m"
  grep -q '"format": "ddlsim-probe-plan"' "$out/plans/$m.plan.json" || fail "no probe plan for $m"
  grep -q "^plan-$m	ok	" "$out/steps.tsv" || fail "plan-$m is not recorded as done: $(cat "$out/steps.tsv")"
done
for check in 'resnet50 "model": "resnet50"' 'resnet50 "batch_per_gpu": 64' 'gpt2 "model": "gpt2"' 'gpt2 "batch_per_gpu": 8'; do
  grep -q "${check#* }" "$out/plans/${check%% *}.plan.json" || fail "the ${check%% *} plan has no ${check#* }"
done
grep -q "^gpu: none (CUDA_VISIBLE_DEVICES='' hides every GPU)" "$out/environment.txt" || fail "environment.txt: no gpu line"
grep -q "^gpu	not run: no GPU" "$out/steps.tsv" || fail "the GPU step is not recorded as not run"
if [ -e "$out/traces" ] || [ -e "$out/probe" ]; then fail "steps that need a GPU wrote something"; fi
if [ -n "$probe" ]; then
  # ResNet-50: 53 convolutions and 1 GEMM (3 passes each), 55 memory-bound layers (2 passes), the GEMM sweep (51) and
  # the device group
  tail -n 1 "$out/logs/probe-dry-run-resnet50.log" |
    grep -q "^[0-9]* measurements for gpu-check-resnet50 (resnet50, batch 64, fp32) on 1 GPU, 1 node: gemm 51 .*layer 272" ||
    fail "the probe's dry run of the ResNet-50 plan: $(tail -n 1 "$out/logs/probe-dry-run-resnet50.log")"
else
  grep -q "^probe-build	not run: --no-probe-build" "$out/steps.tsv" || fail "the skipped build is not recorded"
fi
expect 2 --out "$out" --ddlsim "$ddlsim" --no-probe-build
grep -q "^gpu-check: --out $out exists and is not empty" "$dir/stderr" || fail "message: $(cat "$dir/stderr")"

# --analyse: the shared ResNet-50 trace (one V100, batch 32) in place of a recorded one; nothing measured, no probe
mkdir "$out/traces"
cp "$src/tests/data/shared/traces/kineto_resnet50_1xV100_bs32.json.gz" "$out/traces/resnet50.json.gz"
expect 0 --analyse "$out" --ddlsim "$ddlsim"
row=$(grep '^| resnet50 | 64 |' "$out/table.md") || fail "no ResNet-50 row: $(cat "$out/table.md")"
ms='[0-9]+\.[0-9]{2} ms'
want="^\| resnet50 \| 64 \| trace-resnet50: not run \| $ms \| probe-resnet50: not run \| $ms \|\$"
[[ $row =~ $want ]] ||
  fail "ResNet-50 row: $row"
grep -q "^| gpt2 | 8 | trace-gpt2: not run | trace-gpt2: not run | probe-gpt2: not run | [0-9.]* ms |$" "$out/table.md" ||
  fail "GPT-2 row: $(grep '^| gpt2' "$out/table.md")"
grep -q "resnet50: the trace's profiled steps .* batch 32, NOT the row's batch 64" "$out/table.md" ||
  fail "the table does not say that the trace's batch is not the row's: $(cat "$out/table.md")"
grep -q '^| model | batch | measured step |' "$dir/stdout" || fail "--analyse did not print the table"
grep -q '^resnet50,64,,[0-9.e-]*,,[0-9.e-]*,ok,probe-resnet50: not run,ok$' "$out/table.csv" ||
  fail "table.csv: $(cat "$out/table.csv")"
echo "ok"
