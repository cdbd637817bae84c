#!/bin/bash
# Runs scripts/timeline.gp (the quickstart's timeline.png) on the flow engine's tasks.csv of the quickstart's 8 GPUs on
# 2 nodes, and checks its rows: each GPU's streams on rows of their own, in rank order, then the hosts (#31: a node's
# GPUs shared one row per stream).
# Usage: test_timeline_gp.sh DDLSIM_BINARY SOURCE_DIR
set -euo pipefail
DDLSIM=$(readlink -f "$1")
SRC=$2
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

"$DDLSIM" run "$SRC/scenarios/quickstart.json" --out "$WORK/out" --no-trace --engine flow --set flow.symmetry=off \
  > /dev/null
rows=$(gnuplot -e "dir='$WORK/out'" "$SRC/scripts/timeline.gp" -e 'print row_names' 2>&1)
expected=""
for gpu in 0 1 2 3 4 5 6 7; do
  expected="$expected${expected:+|}gpu$gpu compute|gpu$gpu comm|gpu$gpu launch"
done
expected="$expected|host0 host-CPU|host1 host-CPU"
if [[ "$rows" != "$expected" ]]; then
  echo "timeline.gp rows: $rows" >&2
  echo "expected:         $expected" >&2
  exit 1
fi
# One bar row per device and stream: the image grows with them (120 px + 26 px a row).
python3 - "$WORK/out/timeline.png" <<'PY'
import struct, sys
data = open(sys.argv[1], "rb").read(24)
assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
width, height = struct.unpack(">II", data[16:24])
assert (width, height) == (1400, 120 + 26 * 26), (width, height)
PY
