#!/usr/bin/env bash
# scripts/gpu-check.sh (issue #31): one prepared command for a machine with a GPU that checks ddlsim's three ways of
# costing a training step against the step measured there, for ResNet-50 and GPT-2 small on one GPU: a PyTorch
# profiler trace (`import-trace`), the probe (`ddlsim-probe`, `calibrate --probe`) and the spec sheet (a preset's
# roofline). docs/calibration.md, "Checking on a GPU: scripts/gpu-check.sh", says how to run it and what it writes.
#
#   scripts/gpu-check.sh [--out DIR] [--bundle DIR] [--ddlsim BIN] [--probe BIN | --no-probe-build] [--python PY]
#                        [--budget SECONDS] [--archive FILE.tar.gz]
#   scripts/gpu-check.sh --prepare [--bundle DIR] [--ddlsim BIN]   here: what a machine without ddlsim's packages needs
#   scripts/gpu-check.sh --analyse DIR [--ddlsim BIN]              the ddlsim steps and the table on a folder it wrote
#
# Exit: 0 every step ran; 1 some step failed (the table and DIR/steps.tsv say which, the rest ran); 2 bad arguments;
# 3 no GPU: the steps before the GPU's ran (environment, scenarios, probe plans, the probe's build and dry run).
set -euo pipefail

src=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
prog=gpu-check

# The models, on one GPU: ResNet-50 at the quickstart's batch (scenarios/quickstart.json: 64 per GPU) and GPT-2 small
# (the zoo's `gpt2`: 12 layers, hidden 768, 12 heads, 1024 tokens) at 8 sequences, whose fp32 activations (~30 GB with
# the 400 MB attention scores of each layer) fit an 80 GB GPU. Optimizers as their recipes train them: torchvision's
# reference (SGD with momentum), HF's default (AdamW); `optimizer` only sizes memory in ddlsim.
models=(resnet50 gpt2)
declare -A batch=([resnet50]=64 [gpt2]=8) optimizer=([resnet50]=sgd-momentum [gpt2]=adam)
# The probe's timing rule: nvbench's default (at least 0.5 s of samples, 15 s at most; cuda_probe/sampler.hpp) would
# take over 5 minutes for the ~716 measurements of both plans (each with the 51 GEMMs of the sweep, whose ceiling
# `calibrate --probe` fits); at least 10 samples and 0.05 s, 0.25 s at most, keep both under about 3 minutes. The noise
# each measurement reached is in the probe file.
probe_args=(--skip selection --skip low_rank --skip collectives --skip overlap --min-time 0.05 --timeout 0.25)
# The training steps (scripts/gpu-check-train.py): warm-up (cudnn.benchmark's search), timed, profiled.
train_args=(--warmup 5 --steps 20 --profile-steps 6)
# The time budget of the whole command: the issue's 8 minutes on one H100 less a margin for the archive.
budget=450
# The GPU of the scenarios where there is none to ask: the lent machines' H100 SXM (the plans' layer shapes do not
# depend on it)
placeholder_gpu='{"preset": "H100-SXM5-80GB"}'

usage() {
  sed -n '7,13p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
}
bad() {
  echo "$prog: $*" >&2
  exit 2
}

mode=check out=gpu-check-out bundle=$src/.gpu-bundle ddlsim=${DDLSIM:-} probe='' build_probe=1 python=python3 archive=''
while (($#)); do
  case $1 in
  --out | --bundle | --ddlsim | --probe | --python | --budget | --archive | --analyse)
    if (($# < 2)) || [[ -z $2 ]]; then
      bad "$1 needs a value (see --help)"
    fi
    case $1 in
    --out) out=$2 ;;
    --bundle) bundle=$2 ;;
    --ddlsim) ddlsim=$2 ;;
    --probe) probe=$2 ;;
    --python) python=$2 ;;
    --budget) budget=$2 ;;
    --archive) archive=$2 ;;
    --analyse)
      [[ $mode == check ]] || bad "--analyse and --prepare exclude each other"
      mode=analyse out=$2
      ;;
    esac
    shift 2
    ;;
  --no-probe-build) build_probe=0 && shift ;;
  --prepare)
    [[ $mode == check ]] || bad "--analyse and --prepare exclude each other"
    mode=prepare && shift
    ;;
  -h | --help) usage && exit 0 ;;
  *) bad "unknown argument '$1' (see --help)" ;;
  esac
done
if ! [[ $budget =~ ^[0-9]+$ ]] || ((budget < 60 || budget > 3600)); then
  bad "--budget must be 60 to 3600 seconds, not '$budget'"
fi
[[ -z $ddlsim || -x $ddlsim ]] || bad "--ddlsim $ddlsim: not an executable file"
[[ -z $probe || -x $probe ]] || bad "--probe $probe: not an executable file"
[[ -z $probe || $build_probe == 1 ]] || bad "--probe and --no-probe-build exclude each other"
command -v "$python" >/dev/null || bad "--python $python: not found"
case $mode in
check) [[ ! -e $out || -d $out && -z $(ls -A "$out") ]] || bad "--out $out exists and is not empty: remove it or choose another" ;;
analyse) [[ -f $out/gpu-check.json ]] || bad "--analyse $out: not a folder that scripts/gpu-check.sh wrote (no gpu-check.json)" ;;
esac

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# A usable ddlsim: --ddlsim or $DDLSIM, else this checkout's release build, else the bundle's (bin/ddlsim with the
# shared libraries it needs, unpacked here and run through a wrapper that points the loader at them). Empty if none
# runs; `why` says what was tried.
why_no_ddlsim='' ddlsim_from=''
find_ddlsim() {
  local c
  for c in "$ddlsim" "$src/build/release/sim/ddlsim"; do
    if [[ -n $c && -x $c ]] && "$c" list gpus >/dev/null 2>&1; then
      ddlsim=$(cd "$(dirname "$c")" && pwd)/$(basename "$c")
      return 0
    fi
    [[ -z $c ]] || why_no_ddlsim+="$c does not run here; "
  done
  if [[ -f $bundle/ddlsim.tar.xz ]]; then
    mkdir -p "$tmp/ddlsim"
    if tar -xJf "$bundle/ddlsim.tar.xz" -C "$tmp/ddlsim" 2>/dev/null ||
      "$python" -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' \
        "$bundle/ddlsim.tar.xz" "$tmp/ddlsim"; then
      # shellcheck disable=SC2016 # $LD_LIBRARY_PATH and $@ are the wrapper's
      printf '#!/bin/sh\nLD_LIBRARY_PATH=%s/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} exec %s/bin/ddlsim "$@"\n' \
        "$tmp/ddlsim" "$tmp/ddlsim" >"$tmp/ddlsim/ddlsim"
      chmod +x "$tmp/ddlsim/ddlsim"
      if "$tmp/ddlsim/ddlsim" list gpus >/dev/null 2>&1; then
        ddlsim=$tmp/ddlsim/ddlsim ddlsim_from=" from $bundle/ddlsim.tar.xz"
        return 0
      fi
      why_no_ddlsim+="the bundle's ($bundle/ddlsim.tar.xz) does not run here: $("$tmp/ddlsim/ddlsim" list gpus 2>&1 | head -n 1); "
    fi
  else
    why_no_ddlsim+="no bundle ($bundle/ddlsim.tar.xz: scripts/gpu-check.sh --prepare makes it); "
  fi
  ddlsim=
  return 1
}

os_name() {
  sed -n 's/^PRETTY_NAME="\{0,1\}\([^"]*\)"\{0,1\}$/\1/p' /etc/os-release 2>/dev/null || true
}

# ---------------------------------------------------------------------------------------------------------------------
# --prepare: what a machine with CUDA and PyTorch but without ddlsim's packages (the lent GPU machines: no SimGrid,
# Boost, fmt, nlohmann-json, CLI11) needs, into BUNDLE (default .gpu-bundle/, ignored by git, carried to the machine):
# ddlsim.tar.xz (ddlsim and the shared libraries `ldd` lists, glibc's own left out), the headers of fmt (used
# header-only), nlohmann/json and CLI11 with CMake package files for them (the probe's build), and the probe plans.
prepare() {
  find_ddlsim || bad "no ddlsim that runs here (${why_no_ddlsim%; }): build it (scripts/quickstart.sh) or pass --ddlsim"
  [[ $ddlsim != "$tmp"/* ]] || bad "the bundle is made from a built ddlsim (pass --ddlsim), not from the bundle's own"
  rm -rf "$bundle.new"
  mkdir -p "$bundle.new"/{include,cmake,plans} "$tmp/stage"/{bin,lib}
  cp "$ddlsim" "$tmp/stage/bin/ddlsim"
  local lib
  # glibc's libraries stay the machine's: they go with its loader, which cannot be carried
  while read -r lib; do
    case $(basename "$lib") in
    libc.so* | libm.so* | libdl.so* | libpthread.so* | librt.so* | libresolv.so* | ld-linux*) ;;
    *) cp -L "$lib" "$tmp/stage/lib/" ;;
    esac
  done < <(ldd "$ddlsim" | awk '$2 == "=>" && $3 ~ /^\// {print $3}')
  tar -cJf "$bundle.new/ddlsim.tar.xz" -C "$tmp/stage" bin lib
  # Header-only packages, found as this machine's compiler finds them; fmt compiled header-only (FMT_HEADER_ONLY)
  local inc dir header version
  for header in fmt/format-inl.h nlohmann/json.hpp CLI/CLI.hpp; do
    dir=
    for inc in /usr/local/include /usr/include; do
      [[ -f $inc/$header ]] && dir=$inc && break
    done
    [[ -n $dir ]] || bad "no $header in /usr/local/include or /usr/include: install fmt, nlohmann-json and CLI11 (scripts/install-deps.sh)"
    cp -r "$dir/${header%%/*}" "$bundle.new/include/"
  done
  version=$(awk '$2 == "FMT_VERSION" {v = $3; printf "%d.%d.%d", v / 10000, (v / 100) % 100, v % 100}' \
    "$bundle.new/include/fmt/core.h")
  write_package fmt fmt::fmt "$version" FMT_HEADER_ONLY=1
  header=$bundle.new/include/nlohmann/detail/abi_macros.hpp # 3.11; before, json.hpp defines the version
  [[ -f $header ]] || header=$bundle.new/include/nlohmann/json.hpp
  version=$(header_version "$header" NLOHMANN_JSON_VERSION_)
  write_package nlohmann_json nlohmann_json::nlohmann_json "$version" ""
  version=$(sed -n 's/^#define CLI11_VERSION "\(.*\)"/\1/p' "$bundle.new/include/CLI/Version.hpp")
  write_package CLI11 CLI11::CLI11 "$version" ""
  # The probe plans, for a machine where the bundle's ddlsim does not run (the layers' shapes do not depend on the GPU)
  local m
  write_scenarios "$tmp/scenarios" "$placeholder_gpu" "H100-SXM5-80GB (for the plans' shapes only)"
  for m in "${models[@]}"; do
    "$ddlsim" probe-plan "$tmp/scenarios/$m.json" --out "$bundle.new/plans/$m.plan.json" >/dev/null
  done
  cat >"$bundle.new/README.txt" <<EOF
Made by scripts/gpu-check.sh --prepare on $(uname -m) $(os_name) from
$ddlsim ($("$ddlsim" --version 2>/dev/null || echo "version unknown")).
ddlsim.tar.xz: bin/ddlsim and lib/ (the shared libraries ldd lists, glibc's left out); include/ and cmake/: fmt
(header-only), nlohmann_json and CLI11 for the probe's build; plans/: the probe plans of the models.
Carry this folder to the GPU machine; docs/calibration.md, "Checking on a GPU: scripts/gpu-check.sh".
EOF
  rm -rf "$bundle"
  mv "$bundle.new" "$bundle"
  echo "$prog: wrote $bundle ($(du -sh "$bundle" | cut -f1)): $(cd "$bundle" && echo ./*)"
}

# header_version FILE PREFIX: "9.10.2" from the file's #define PREFIX{MAJOR,MINOR,PATCH or PATCHLEVEL}
header_version() {
  [[ -f $1 ]] || return 0
  awk -v p="$2" '$1 == "#define" && ($2 == p "MAJOR" || $2 == p "MINOR" || $2 == p "PATCHLEVEL" || $2 == p "PATCH") \
    {v = v (v == "" ? "" : ".") $3} END {print v}' "$1"
}

# write_package NAME TARGET VERSION DEFINITIONS: a CMake package file for headers of the bundle (include/)
write_package() {
  local name=$1 target=$2 version=$3 defs=$4
  [[ -n $version ]] || bad "no version found in the headers of $name"
  mkdir -p "$bundle.new/cmake/$name"
  cat >"$bundle.new/cmake/$name/$name-config.cmake" <<EOF
# Written by scripts/gpu-check.sh --prepare: $name $version, headers copied from this machine into the bundle.
if(NOT TARGET $target)
  add_library($target INTERFACE IMPORTED)
  set_target_properties($target PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "\${CMAKE_CURRENT_LIST_DIR}/../../include"
                                                  INTERFACE_COMPILE_DEFINITIONS "$defs")
endif()
set(${name}_VERSION $version)
EOF
  cat >"$bundle.new/cmake/$name/$name-config-version.cmake" <<EOF
set(PACKAGE_VERSION $version)
if(PACKAGE_VERSION VERSION_LESS PACKAGE_FIND_VERSION)
  set(PACKAGE_VERSION_COMPATIBLE FALSE)
else()
  set(PACKAGE_VERSION_COMPATIBLE TRUE)
endif()
EOF
}

# write_scenarios DIR GPU_JSON GPU_TEXT: the spec-sheet scenario of each model on one GPU (no calibration: the
# preset's roofline at efficiency 1), which the probe's calibration is also run on (--set calibration=...).
write_scenarios() {
  mkdir -p "$1"
  "$python" - "$1" "$2" "$3" "${models[@]}" <<PY
import json, os, sys
out, gpu, gpu_text, models = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3], sys.argv[4:]
batch = {$(for m in "${models[@]}"; do printf '"%s": %s, ' "$m" "${batch[$m]}"; done)}
optimizer = {$(for m in "${models[@]}"; do printf '"%s": "%s", ' "$m" "${optimizer[$m]}"; done)}
for m in models:
    doc = {"name": f"gpu-check-{m}",
           "description": f"scripts/gpu-check.sh: {m} at batch {batch[m]} on one {gpu_text}, fp32, as the spec sheet "
                          "gives it (the preset's roofline at efficiency 1, 5 us per launch); with "
                          "--set calibration=CALIB.json the probe's measured layers",
           "model": {"zoo": m, "batch_per_gpu": batch[m], "gradient_dtype": "fp32"},
           "gpu": gpu,
           "cluster": {"nodes": 1, "gpus_per_node": 1},
           "strategy": {"kind": "bsp"},
           "optimizer": optimizer[m],
           "engine": "analytic"}
    with open(os.path.join(out, m + ".json"), "w") as f:
        json.dump(doc, f, indent=2)
        f.write("\n")
PY
}

if [[ $mode == prepare ]]; then
  prepare
  exit 0
fi

# ---------------------------------------------------------------------------------------------------------------------
# Steps: each one's output in DIR/logs/NAME.log and a line "NAME<TAB>STATUS<TAB>SECONDS<TAB>LOG" in DIR/steps.tsv,
# where STATUS is "ok", "failed (exit N)", "timed out after N s" or "not run: why". A step that fails is recorded and
# the next one runs.
mkdir -p "$out"
out=$(cd "$out" && pwd)
mkdir -p "$out/logs"
failures=0
record() {
  printf '%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" >>"$out/steps.tsv"
  echo "$prog: $1: $2${3:+ ($3 s)}"
}
# run_step NAME LIMIT_S COMMAND...: LIMIT_S 0 runs it without a time limit
run_step() {
  local name=$1 limit=$2 rc=0 start=$SECONDS status=ok
  shift 2
  if ((limit > 0)); then
    timeout --kill-after=10 "$limit" "$@" >"$out/logs/$name.log" 2>&1 || rc=$?
  else
    "$@" >"$out/logs/$name.log" 2>&1 || rc=$?
  fi
  if ((limit > 0 && (rc == 124 || rc == 137))); then
    status="timed out after $limit s"
  elif ((rc != 0)); then
    status="failed (exit $rc)"
  fi
  [[ $status == ok ]] || failures=$((failures + 1))
  record "$name" "$status" $((SECONDS - start)) "logs/$name.log"
  [[ $status == ok ]]
}
not_run() {
  record "$1" "not run: $2" "" ""
}
deadline=$((SECONDS + budget))
# seconds left for a step: the budget less 30 s kept for the ddlsim steps, the table and the archive
time_left() {
  echo $((deadline - SECONDS - 30))
}

# --archive FILE: the whole folder as one .tar.gz (a device call brings back files of at most 16 MiB)
write_archive() {
  [[ -n $archive ]] || return 0
  tar -czf "$archive" -C "$(dirname "$out")" "$(basename "$out")"
  local size
  size=$(stat -c %s "$archive")
  echo "$prog: wrote $archive ($((size / 1024)) KiB)$( ((size <= 16 * 1024 * 1024)) || echo "; over the 16 MiB a device call brings back")"
}

# ---------------------------------------------------------------------------------------------------------------------
# The GPU, the toolkit and the libraries the probe links (cuDNN, NCCL): beside the CUDA toolkit, on the loader's path,
# or in the Python packages NVIDIA ships them in (site-packages/nvidia/*, which PyTorch's wheels depend on).
gpu_name='' gpu_cc='' no_gpu=''
see_gpu() {
  if [[ -v CUDA_VISIBLE_DEVICES && (-z $CUDA_VISIBLE_DEVICES || $CUDA_VISIBLE_DEVICES == -1) ]]; then
    no_gpu="CUDA_VISIBLE_DEVICES='$CUDA_VISIBLE_DEVICES' hides every GPU"
    return
  fi
  if command -v nvidia-smi >/dev/null; then
    local line
    line=$(nvidia-smi --query-gpu=name,compute_cap --format=csv,noheader 2>/dev/null | head -n 1) || line=
    if [[ -n $line ]]; then
      gpu_name=${line%,*} gpu_cc=${line##*, }
      return
    fi
    no_gpu="nvidia-smi lists no GPU"
  else
    no_gpu="no nvidia-smi"
  fi
  if ! "$python" -c 'import torch' 2>/dev/null; then
    no_gpu+="; $python has no torch"
  elif "$python" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
    gpu_name=$("$python" -c 'import torch; print(torch.cuda.get_device_name(0))') no_gpu=''
  else
    no_gpu+="; $python's torch sees none"
  fi
}

cuda_root=
find_toolkit() {
  local nvcc=${CUDACXX:-}
  [[ -n $nvcc ]] || nvcc=$(command -v nvcc || true)
  [[ -n $nvcc || ! -x /usr/local/cuda/bin/nvcc ]] || nvcc=/usr/local/cuda/bin/nvcc
  [[ -n $nvcc ]] && cuda_root=$(cd "$(dirname "$(readlink -f "$nvcc")")/.." && pwd)
  nvcc_bin=$nvcc
}

# find_cuda_lib NAME HEADER: prints "LIBRARY<TAB>INCLUDE_DIR" of the first libNAME.so found with its header
find_cuda_lib() {
  local name=$1 header=$2 d f lib inc dirs=()
  [[ -z $cuda_root ]] || dirs+=("$cuda_root/lib64" "$cuda_root/lib" "$cuda_root/targets/$(uname -m)-linux/lib")
  while read -r d; do dirs+=("$d"); done < <(ldconfig -p 2>/dev/null | awk -v n="lib$name.so" 'index($1, n) == 1 {print $NF}' | xargs -r -n 1 dirname | sort -u)
  while read -r d; do dirs+=("$d"); done < <("$python" - "$name" 2>/dev/null <<'PY'
import os, sys
try:
    import nvidia
except ImportError:
    sys.exit(0)
for root in list(nvidia.__path__):
    for base, _, files in os.walk(root):
        if base.count(os.sep) - root.count(os.sep) <= 2 and any(f.startswith("lib%s.so" % sys.argv[1]) for f in files):
            print(base)
PY
  )
  for d in "${dirs[@]}"; do
    lib=
    for f in "$d/lib$name.so" "$d/lib$name.so".[0-9]*; do
      [[ -e $f ]] && lib=$f && break
    done
    [[ -n $lib ]] || continue
    for inc in "$d/../include" ${cuda_root:+"$cuda_root/include"} /usr/include /usr/local/include "/usr/include/$(uname -m)-linux-gnu"; do
      if [[ -f $inc/$header ]]; then
        printf '%s\t%s\n' "$(readlink -f "$lib")" "$(cd "$inc" && pwd)"
        return 0
      fi
    done
  done
  return 1
}

# The spec sheet's GPU for the device's name as nvidia-smi writes it: ddlsim's preset where one is that GPU
gpu_spec() {
  local n=${1#NVIDIA } && n=${n#Tesla }
  case $n in
  # as find_gpu_preset_for_device (sim/spec/gpus.cpp) names them; an H200 NVL (lower peaks) has no preset
  H200 | "H200 SXM"*) echo '{"preset": "H200-SXM-141GB"}' ;;
  "H100 80GB HBM3" | H100-SXM*) echo '{"preset": "H100-SXM5-80GB"}' ;;
  "H100 PCIe"*) echo '{"preset": "H100-PCIe-80GB"}' ;;
  "H100 NVL"*) echo '{"preset": "H100-NVL-94GB"}' ;;
  *)
    [[ -n $ddlsim ]] && "$ddlsim" list gpus | awk '{print $1}' | grep -qxF -- "$n" &&
      echo "{\"preset\": \"$n\"}"
    ;;
  esac
}

find_ddlsim || true
if [[ $mode == check ]]; then
  see_gpu
  find_toolkit
  cudnn=$(find_cuda_lib cudnn cudnn.h) || cudnn=
  nccl=$(find_cuda_lib nccl nccl.h) || nccl=
  # What there is: into DIR/environment.txt
  {
    echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "machine: $(uname -srm); $(os_name)"
    echo "checkout: $(git -C "$src" describe --always --dirty 2>/dev/null || echo "not a git checkout")"
    echo "gpu: ${gpu_name:-none ($no_gpu)}${gpu_cc:+, compute capability $gpu_cc}"
    if [[ -n $gpu_name ]] && command -v nvidia-smi >/dev/null; then
      echo "nvidia-smi: $(nvidia-smi --query-gpu=driver_version,memory.total,clocks.max.sm,clocks.max.mem,power.limit --format=csv,noheader 2>&1 | head -n 1) (driver, memory, max SM and memory clocks, power limit)"
    fi
    echo "nvcc: ${nvcc_bin:-none}${nvcc_bin:+ ($("$nvcc_bin" --version 2>&1 | grep -o 'release [0-9.]*' || true))}"
    echo "cmake: $(cmake --version 2>/dev/null | head -n 1 || echo none)"
    echo "c++: $(c++ --version 2>/dev/null | head -n 1 || echo none)"
    echo "cudnn: ${cudnn:-none}${cudnn:+ (version $(header_version "${cudnn#*$'\t'}/cudnn_version.h" CUDNN_))}" | tr '\t' ' '
    echo "nccl: ${nccl:-none}${nccl:+ (version $(header_version "${nccl#*$'\t'}/nccl.h" NCCL_))}" | tr '\t' ' '
    echo "python: $("$python" -c 'import sys; print(sys.executable, sys.version.split()[0])' 2>&1)"
    echo "torch: $("$python" -c 'import torch, torchvision; print(torch.__version__, "CUDA", torch.version.cuda, "torchvision", torchvision.__version__)' 2>&1 | tail -n 1)"
    echo "ddlsim: ${ddlsim:-none (${why_no_ddlsim%; })}${ddlsim:+$ddlsim_from ($("$ddlsim" --version 2>&1 | head -n 1))}"
  } >"$out/environment.txt"
  sed "s/^/$prog: /" "$out/environment.txt"

  # The scenarios; without a GPU (or one without a preset) they are written for the lent machines' H100 SXM
  spec_gpu=$(gpu_spec "$gpu_name" || true) spec_note=
  if [[ -z $gpu_name ]]; then
    spec_gpu=$placeholder_gpu spec_note="no GPU here: the scenarios are written for H100-SXM5-80GB"
  elif [[ -z $spec_gpu ]]; then
    spec_note="no ddlsim preset for '$gpu_name' (ddlsim list gpus${ddlsim:-: no ddlsim to ask}): the spec sheet's and the probe's runs are not made"
    probe_args+=(--skip gemm) # its ceiling is a fraction of a preset's peak: `calibrate --probe` refuses it without one
  fi
  write_scenarios "$out/scenarios" "${spec_gpu:-$placeholder_gpu}" "${gpu_name:-H100-SXM5-80GB}"
  "$python" - "$out/gpu-check.json" "$gpu_name" "$spec_gpu" "$spec_note" "${models[@]}" <<PY
import json, sys
path, gpu, spec, note, models = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5:]
batch = {$(for m in "${models[@]}"; do printf '"%s": %s, ' "$m" "${batch[$m]}"; done)}
doc = {"format": "ddlsim-gpu-check", "version": 1, "gpu": gpu or None, "spec_gpu": json.loads(spec) if spec else None,
       "spec_note": note or None, "models": [{"model": m, "batch": batch[m]} for m in models],
       "probe_args": "${probe_args[*]}", "train_args": "${train_args[*]}"}
with open(path, "w") as f:
    json.dump(doc, f, indent=2)
    f.write("\n")
PY
  [[ -z $spec_note ]] || echo "$prog: $spec_note"

  # The probe plans: ddlsim probe-plan, else the bundle's
  mkdir -p "$out/plans"
  for m in "${models[@]}"; do
    if [[ -n $ddlsim ]]; then
      run_step "plan-$m" 60 "$ddlsim" probe-plan "$out/scenarios/$m.json" --out "$out/plans/$m.plan.json" || true
    elif [[ -f $bundle/plans/$m.plan.json ]]; then
      cp "$bundle/plans/$m.plan.json" "$out/plans/" && record "plan-$m" "ok" 0 "$bundle/plans/$m.plan.json"
    else
      not_run "plan-$m" "no ddlsim (${why_no_ddlsim%; }) and no plan in $bundle"
    fi
  done

  # The probe: --probe, else built here (DDLSIM_PROBE_ONLY: the probe and its CPU core alone, with the bundle's
  # packages where there is one), for this GPU's architecture only
  if [[ -z $probe && $build_probe == 1 ]]; then
    if [[ -z $nvcc_bin ]]; then
      not_run probe-configure "no nvcc (PATH, CUDACXX or /usr/local/cuda/bin)"
    elif [[ -z $cudnn || -z $nccl ]]; then
      missing=$([[ -n $cudnn ]] || echo -n "cuDNN (libcudnn.so and cudnn.h) ")$([[ -n $nccl ]] || echo -n "NCCL (libnccl.so and nccl.h) ")
      not_run probe-configure "no ${missing}beside the toolkit, on the loader's path or in $python's nvidia packages"
    elif ! command -v cmake >/dev/null; then
      not_run probe-configure "no cmake"
    else
      bdir=$src/build/gpu-check-probe
      cfg=(-S "$src" -B "$bdir" -DCMAKE_BUILD_TYPE=Release -DDDLSIM_PROBE_ONLY=ON "-DCMAKE_CUDA_COMPILER=$nvcc_bin"
        "-DDDLSIM_CUDNN=${cudnn%$'\t'*}" "-DDDLSIM_NCCL=${nccl%$'\t'*}"
        "-DCMAKE_CUDA_FLAGS=-I${cudnn#*$'\t'} -I${nccl#*$'\t'}")
      ! command -v ninja >/dev/null || cfg+=(-G Ninja)
      [[ -z $gpu_cc ]] || cfg+=("-DCMAKE_CUDA_ARCHITECTURES=${gpu_cc/./}")
      if [[ -d $bundle/cmake ]]; then
        cfg+=("-Dfmt_DIR=$bundle/cmake/fmt" "-Dnlohmann_json_DIR=$bundle/cmake/nlohmann_json" "-DCLI11_DIR=$bundle/cmake/CLI11")
      fi
      rm -rf "$bdir"
      limit=$(time_left)
      if ((limit < 60)); then
        not_run probe-configure "the time budget (--budget $budget) is spent"
      elif run_step probe-configure "$limit" cmake "${cfg[@]}" &&
        limit=$(time_left) && ((limit >= 60 || (limit = 60))) &&
        run_step probe-build "$limit" cmake --build "$bdir" --target ddlsim-probe -j "$(nproc)"; then
        probe=$bdir/cuda_probe/ddlsim-probe
      fi
    fi
  elif [[ -z $probe ]]; then
    not_run probe-build "--no-probe-build"
  fi
  # the probe finds cuDNN and NCCL where it was linked with them, and so do the libraries cuDNN opens at run time
  libpath=${LD_LIBRARY_PATH:-}
  for lib in "$nccl" "$cudnn"; do
    [[ -z $lib ]] || libpath=$(dirname "${lib%$'\t'*}")${libpath:+:$libpath}
  done
  probe_env=(env "LD_LIBRARY_PATH=$libpath")
  if [[ -n $probe ]]; then
    for m in "${models[@]}"; do
      [[ -f $out/plans/$m.plan.json ]] || continue
      run_step "probe-dry-run-$m" 60 "${probe_env[@]}" "$probe" "$out/plans/$m.plan.json" --dry-run "${probe_args[@]}" || true
    done
  fi

  # Everything after this needs the GPU
  if [[ -n $no_gpu ]]; then
    record gpu "not run: no GPU ($no_gpu)" "" ""
    write_archive
    echo "$prog: no GPU found ($no_gpu): the steps that need one were not run; what was done is in $out" >&2
    exit 3
  fi

  # The training steps and their traces, then the probe, each within what is left of the budget
  mkdir -p "$out/traces" "$out/measured" "$out/probe"
  for m in "${models[@]}"; do
    limit=$(time_left)
    ((limit <= 180)) || limit=180
    if ((limit < 30)); then
      not_run "trace-$m" "the time budget (--budget $budget) is spent"
      continue
    fi
    run_step "trace-$m" "$limit" env PYTHONUNBUFFERED=1 "$python" "$src/scripts/gpu-check-train.py" --model "$m" \
      --batch "${batch[$m]}" "${train_args[@]}" --trace "$out/traces/$m.json.gz" --measured "$out/measured/$m.json" || true
    tail -n 1 "$out/logs/trace-$m.log" | sed "s/^/$prog: /"
  done
  # each probe may take what is left but 45 s for each one after it
  n=${#models[@]}
  for m in "${models[@]}"; do
    n=$((n - 1)) && limit=$(($(time_left) - 45 * n))
    if [[ -z $probe ]]; then
      not_run "probe-$m" "no ddlsim-probe (see probe-configure, probe-build)"
    elif [[ ! -f $out/plans/$m.plan.json ]]; then
      not_run "probe-$m" "no plan"
    elif ((limit < 30)); then
      not_run "probe-$m" "the time budget (--budget $budget) is spent"
    else
      run_step "probe-$m" "$limit" "${probe_env[@]}" "$probe" "$out/plans/$m.plan.json" --out "$out/probe/$m.probe.json" \
        "${probe_args[@]}" || true
    fi
  done
fi

# ---------------------------------------------------------------------------------------------------------------------
# The ddlsim steps (here, or with --analyse on a machine with ddlsim): the trace imported and run, the probe's
# calibration run on the spec-sheet scenario, the spec sheet run; then the table.
analyse() {
  local m spec
  spec=$("$python" -c 'import json, sys; print(json.load(open(sys.argv[1]))["spec_gpu"] or "")' "$out/gpu-check.json")
  for m in "${models[@]}"; do
    rm -rf "$out/import/$m" "$out/calib/$m.json" "$out/runs/$m-trace" "$out/runs/$m-probe" "$out/runs/$m-spec"
    mkdir -p "$out/import" "$out/calib" "$out/runs"
    if [[ -z $ddlsim ]]; then
      local s
      for s in import calibrate run-trace run-probe run-spec; do
        not_run "$s-$m" "no ddlsim (${why_no_ddlsim%; }): scripts/gpu-check.sh --analyse DIR on a machine with one"
      done
      continue
    fi
    if [[ ! -f $out/traces/$m.json.gz ]]; then
      not_run "import-$m" "no trace"
    elif run_step "import-$m" 0 "$ddlsim" import-trace "$out/traces/$m.json.gz" --out "$out/import/$m"; then
      run_step "run-trace-$m" 0 "$ddlsim" run "$out/import/$m/scenario.json" --out "$out/runs/$m-trace" --no-trace || true
    fi
    if [[ ! -f $out/probe/$m.probe.json ]]; then
      not_run "calibrate-$m" "no probe file"
    elif run_step "calibrate-$m" 0 "$ddlsim" calibrate --probe "$out/probe/$m.probe.json" --out "$out/calib/$m.json"; then
      if [[ -z $spec ]]; then
        not_run "run-probe-$m" "no ddlsim preset for this GPU"
      else
        run_step "run-probe-$m" 0 "$ddlsim" run "$out/scenarios/$m.json" --set "calibration=$out/calib/$m.json" \
          --out "$out/runs/$m-probe" --no-trace || true
      fi
    fi
    if [[ -z $spec ]]; then
      not_run "run-spec-$m" "no ddlsim preset for this GPU"
    else
      run_step "run-spec-$m" 0 "$ddlsim" run "$out/scenarios/$m.json" --out "$out/runs/$m-spec" --no-trace || true
    fi
  done
}

# The table: DIR/table.md (printed) and DIR/table.csv. A cell is a step time or why there is none.
table() {
  "$python" - "$out" <<'PY'
import csv, json, os, sys
out = sys.argv[1]
meta = json.load(open(os.path.join(out, "gpu-check.json")))
steps = {}
if os.path.exists(os.path.join(out, "steps.tsv")):
    for line in open(os.path.join(out, "steps.tsv")):
        name, status, seconds, log = (line.rstrip("\n").split("\t") + ["", "", ""])[:4]
        steps[name] = (status, log)  # the last line of a name wins (--analyse runs its steps again)

def load(*path):
    p = os.path.join(out, *path)
    try:
        return json.load(open(p))
    except (OSError, ValueError):
        return None

def why(chain):
    """the first step of the chain that did not succeed, as a cell"""
    for name in chain:
        status, log = steps.get(name, ("not run", ""))
        if status != "ok":
            return f"{name}: {status}" + (f" ({log})" if log else "")
    return "no result"

def cell(seconds, measured):
    if seconds is None:
        return None
    text = f"{1e3 * seconds:.2f} ms"
    if measured:
        text += f" ({100 * (seconds / measured - 1):+.1f} %)"
    return text

rows, notes = [], []
for entry in meta["models"]:
    m, b = entry["model"], entry["batch"]
    measured_doc = load("measured", m + ".json")
    measured = measured_doc["median_step_s"] if measured_doc else None
    results = {}
    for kind, chain in (("trace", [f"trace-{m}", f"import-{m}", f"run-trace-{m}"]),
                        ("probe", [f"plan-{m}", f"probe-{m}", f"calibrate-{m}", f"run-probe-{m}"]),
                        ("spec", [f"run-spec-{m}"])):
        summary = load("runs", f"{m}-{kind}", "summary.json")
        results[kind] = (summary["iteration_time_s"] if summary else None, why(chain))
    row = {"model": m, "batch": b,
           "measured": cell(measured, None) or why([f"trace-{m}"])}
    for kind in ("trace", "probe", "spec"):
        row[kind] = cell(results[kind][0], measured) or results[kind][1]
    rows.append((row, measured, results))
    if measured_doc:
        notes.append(f"{m}: measured on {measured_doc['device']} (torch {measured_doc['torch']}, CUDA "
                     f"{measured_doc['cuda']}, cuDNN {measured_doc['cudnn']}): median of "
                     f"{len(measured_doc['step_s'])} synchronised steps; back to back "
                     f"{1e3 * measured_doc['back_to_back_mean_step_s']:.2f} ms per step")
    imported = load("import", m, "scenario.json")
    if imported and "measured" in imported:
        traced_batch = imported.get("model", {}).get("batch_per_gpu")
        notes.append(f"{m}: the trace's profiled steps (ProfilerStep spans, with the profiler's overhead): median "
                     f"{imported['measured']['iteration']}, batch {traced_batch}"
                     + ("" if traced_batch == b else f", NOT the row's batch {b}"))

gpu = meta.get("gpu") or "none"
lines = [f"One training step (fp32) on one GPU: {gpu}" + (f"; {meta['spec_note']}" if meta.get("spec_note") else ""),
         "",
         "| model | batch | measured step | predicted from the trace | predicted from the probe | predicted from the spec sheet |",
         "|---|---:|---:|---:|---:|---:|"]
for row, _, _ in rows:
    lines.append(f"| {row['model']} | {row['batch']} | {row['measured']} | {row['trace']} | {row['probe']} | {row['spec']} |")
lines += [""] + [f"- {n}" for n in notes]
text = "\n".join(lines) + "\n"
open(os.path.join(out, "table.md"), "w").write(text)
with open(os.path.join(out, "table.csv"), "w", newline="") as f:
    w = csv.writer(f, lineterminator="\n")
    w.writerow(["model", "batch", "measured_step_s", "trace_s", "probe_s", "spec_s", "trace_status", "probe_status",
                "spec_status"])
    for row, measured, results in rows:
        w.writerow([row["model"], row["batch"], measured if measured is not None else ""] +
                   [results[k][0] if results[k][0] is not None else "" for k in ("trace", "probe", "spec")] +
                   ["ok" if results[k][0] is not None else results[k][1] for k in ("trace", "probe", "spec")])
print(text, end="")
PY
}

analyse
table
write_archive
if ((failures > 0)); then
  echo "$prog: $failures step(s) failed ($out/steps.tsv, $out/logs/): the table says which" >&2
  exit 1
fi
