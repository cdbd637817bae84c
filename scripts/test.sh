#!/usr/bin/env bash
# The whole test suite: install missing packages, build and run every test (dev preset, -Werror), then once
# more under AddressSanitizer + UndefinedBehaviorSanitizer (skip with DDLSIM_SKIP_ASAN=1).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
jobs="$(nproc)"
cmake --preset dev >/dev/null
cmake --build --preset dev -j"$jobs"
ctest --preset dev -j"$jobs"
if [ "${DDLSIM_SKIP_ASAN:-0}" != "1" ]; then
  cmake --preset asan >/dev/null
  cmake --build --preset asan -j"$jobs"
  ctest --preset asan -j"$jobs"
fi
