#!/usr/bin/env bash
# Quick start: install missing packages, build (release), run the shipped default scenario.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
cmake --preset release -DDDLSIM_BUILD_TESTS=OFF >/dev/null
cmake --build --preset release -j"$(nproc)" --target ddlsim
build/release/sim/ddlsim run scenarios/quickstart.json --out out/quickstart "$@"
if command -v gnuplot >/dev/null; then
  gnuplot -e "dir='out/quickstart'" scripts/timeline.gp && echo "  plot in out/quickstart/timeline.png"
fi
