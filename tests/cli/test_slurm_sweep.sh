#!/bin/bash
# Runs scripts/slurm-sweep.sbatch as Slurm would (every array task with its SLURM_* variables, then the merge job it
# submits, through a stand-in `sbatch` that runs --wrap commands), and checks that the merged table is the table of an
# unsharded `ddlsim sweep`, apart from the wall-time column.
# Usage: test_slurm_sweep.sh DDLSIM_BINARY SOURCE_DIR
set -euo pipefail
DDLSIM=$(readlink -f "$1")
SRC=$2
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

# A small sweep: the quickstart on 1..6 nodes x 3 strategies (18 points over 16 shards: some shards get 2 points,
# some 1).
python3 - "$SRC/scenarios/quickstart.json" "$WORK/sweep.json" <<'PY'
import json, sys
doc = json.load(open(sys.argv[1]))
doc["sweep"] = {"cluster.nodes": [1, 2, 3, 4, 5, 6], "strategy.kind": ["wfbp", "ddp", "mg-wfbp"]}
json.dump(doc, open(sys.argv[2], "w"))
PY

mkdir -p "$WORK/bin"
cat > "$WORK/bin/sbatch" <<'SB'
#!/bin/bash
# Stand-in for sbatch: runs the --wrap command now (the dependency has been met: every array task ran before).
for arg in "$@"; do
  case "$arg" in --wrap=*) exec bash -c "${arg#--wrap=}" ;; esac
done
echo "sbatch stand-in: no --wrap" >&2
exit 1
SB
chmod +x "$WORK/bin/sbatch"

cd "$WORK"
for i in $(seq 0 15); do
  PATH="$WORK/bin:$PATH" DDLSIM="$DDLSIM" SLURM_ARRAY_TASK_ID=$i SLURM_ARRAY_JOB_ID=42 SLURM_CPUS_PER_TASK=1 \
    bash "$SRC/scripts/slurm-sweep.sbatch" "$WORK/sweep.json" "$WORK/out" > "$WORK/task$i.log" 2>&1
done
"$DDLSIM" sweep "$WORK/sweep.json" --out "$WORK/reference" --no-plots > /dev/null 2>&1

strip_wall() { python3 -c '
import csv, sys
rows = list(csv.reader(open(sys.argv[1])))
c = rows[0].index("sim.wall_s")
for r in rows: del r[c]; print(r)' "$1"; }
if ! diff <(strip_wall "$WORK/out/results.csv") <(strip_wall "$WORK/reference/results.csv"); then
  echo "FAIL: the merged shards differ from the unsharded sweep" >&2
  exit 1
fi
rows=$(($(wc -l < "$WORK/out/results.csv") - 1))
if [[ $rows != 18 ]]; then
  echo "FAIL: merged table has $rows points, expected 18" >&2
  exit 1
fi
for plot in throughput speedup scaling_efficiency breakdown; do
  [[ -s "$WORK/out/$plot.png" && -s "$WORK/out/$plot.svg" ]] || { echo "FAIL: merge drew no $plot plot" >&2; exit 1; }
done
echo "PASS: 16 array tasks + merge = the unsharded sweep (18 points)"
