#!/usr/bin/env bash
# ddlsim-probe's command line on a machine without a GPU (issue #13): --dry-run lists every measurement of the plan
# (each layer's passes, the GEMM sweep, the selection grid, the collectives for --gpus 8), a run without a GPU exits 3
# with one line and writes nothing, a bad plan exits 2 naming the file and JSON path.
# Usage: test_probe_cli.sh DDLSIM DDLSIM_PROBE SOURCE_DIR
set -euo pipefail
ddlsim=$1 probe=$2 src=$3
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAILED: $*" >&2; exit 1; }

"$ddlsim" probe-plan "$src/scenarios/quickstart.json" --out "$dir/plan.json" >/dev/null

# --dry-run: numbered lines, then the summary; ResNet-50 has 53 convolutions, 1 GEMM (3 passes each) and 55
# memory-bound layers (2 passes each)
"$probe" "$dir/plan.json" --dry-run --gpus 8 >"$dir/dry.txt"
layers=$(grep -c '^ *[0-9]* *layer ' "$dir/dry.txt")
[ "$layers" -eq $((3 * 54 + 2 * 55)) ] || fail "dry run lists $layers layer measurements, expected $((3 * 54 + 2 * 55))"
grep -q 'layer conv1 forward: cudnnConvolutionForward input \[64,3,224,224\] filters \[64,3,7,7\]' "$dir/dry.txt" ||
  fail "conv1's forward is not listed with its shapes"
grep -q 'layer fc backward_filter: cublasLtMatmul dB\[k,n\] = A^T dC\[m,n\] with m 64 n 1000 k 2048' "$dir/dry.txt" ||
  fail "fc's weight gradient GEMM is not listed"
for c in all_reduce all_gather reduce_scatter broadcast alltoall sendrecv; do
  grep -q "collective $c 1 GiB in-place: NCCL over 8 ranks on 1 node" "$dir/dry.txt" || fail "no in-place 1 GiB $c"
done
for a in radix_sort radix_select sampling threshold; do
  [ "$(grep -c "selection $a: top" "$dir/dry.txt")" -eq 8 ] || fail "selection $a is not measured at 8 points"
done
# the GEMM sweep: 51 cuBLASLt GEMMs in the probe's dtype (cuda_probe/plan.hpp, gemm_sweep_shapes); --skip gemm
# leaves them out
[ "$(grep -c '^ *[0-9]*  gemm m [0-9]* n [0-9]* k [0-9]*: cublasLtMatmul' "$dir/dry.txt")" -eq 51 ] ||
  fail "the dry run does not list the 51 GEMMs of the sweep"
grep -q 'gemm m 8192 n 12288 k 1536: cublasLtMatmul C\[m,n\] = A\[m,k\] B\[k,n\] (fp32)' "$dir/dry.txt" ||
  fail "GPT-3's tensor-parallel shard is not in the sweep"
tail -n 1 "$dir/dry.txt" | grep -q ' gemm 51 ' || fail "the summary does not count the sweep: $(tail -n 1 "$dir/dry.txt")"
"$probe" "$dir/plan.json" --dry-run --dtype bf16 --skip gemm >"$dir/skip.txt"
! grep -q '  gemm m ' "$dir/skip.txt" || fail "--skip gemm still lists the sweep"
listed=$(grep -c '^ *[0-9][0-9]*  ' "$dir/dry.txt")
tail -n 1 "$dir/dry.txt" | grep -q "^$listed measurements for quickstart (resnet50, batch 64, fp32) on 8 GPUs, 1 node:" ||
  fail "the summary does not count the $listed listed measurements: $(tail -n 1 "$dir/dry.txt")"

# without a GPU (none visible): exit 3, one line, no output file
set +e
CUDA_VISIBLE_DEVICES= "$probe" "$dir/plan.json" --out "$dir/probe.json" >"$dir/out.txt" 2>"$dir/err.txt"
rc=$?
set -e
[ "$rc" -eq 3 ] || fail "without a GPU the probe exited $rc, expected 3: $(cat "$dir/err.txt")"
[ "$(wc -l <"$dir/err.txt")" -eq 1 ] || fail "expected one line on stderr: $(cat "$dir/err.txt")"
grep -q '^ddlsim-probe: no CUDA GPU (.*): run it on a GPU node' "$dir/err.txt" || fail "message: $(cat "$dir/err.txt")"
[ ! -e "$dir/probe.json" ] || fail "a run without a GPU wrote its output"

# a plan with an unknown key: exit 2, naming the file and the JSON path
sed 's/"batch_per_gpu"/"batch"/' "$dir/plan.json" >"$dir/bad.json"
set +e
"$probe" "$dir/bad.json" --dry-run 2>"$dir/err.txt"
rc=$?
set -e
[ "$rc" -eq 2 ] || fail "a bad plan exited $rc, expected 2"
grep -q "bad.json: /batch_per_gpu: missing" "$dir/err.txt" || fail "message: $(cat "$dir/err.txt")"
echo "ok"
