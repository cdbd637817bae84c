#!/usr/bin/env bash
# Installs the Debian packages ddlsim needs, only those missing; safe to run again (idempotent).
set -euo pipefail

packages=(
  build-essential cmake pkg-config
  lld                   # linker (faster than GNU ld; optional: CMake falls back to the default)
  libsimgrid-dev        # flow-level engine (SimGrid 3.32)
  libmimalloc-dev       # allocator for the flow engine (optional: without it, slower)
  libboost-graph-dev    # iteration DAG
  nlohmann-json3-dev    # JSON
  libfmt-dev            # formatting
  catch2                # tests (Catch2 v2)
  libeigen3-dev         # fitting (calibration)
  libcli11-dev          # command line
  gnuplot-nox           # plots
  python3               # test scripts (tests/layering, tests/cli, scripts/update-goldens.py)
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
echo "install-deps: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
