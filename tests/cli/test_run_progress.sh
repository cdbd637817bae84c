#!/usr/bin/env bash
# `ddlsim run` on a terminal shows a progress line on stderr after a while (issue #31: a run was silent for 84 s),
# cleared before the summary; not with --quiet, nor when stderr is not a terminal. DDLSIM_PROGRESS_AFTER_S=0 stands
# for a run of more than 2 s. `script` (util-linux) gives the run a terminal.
set -euo pipefail
bin=$1
root=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export DDLSIM_PROGRESS_AFTER_S=0
run="$bin run $root/scenarios/quickstart.json --out $tmp/o --no-trace"

script -qec "$run" /dev/null >"$tmp/tty.txt"
grep -q $'ddlsim run: quickstart on the analytic engine: .* ([0-9]* s)' "$tmp/tty.txt" ||
  { echo "FAIL: no progress line on a terminal"; cat "$tmp/tty.txt"; exit 1; }
grep -q $'\r\033\\[Kquickstart: resnet50 on 8 GPUs' "$tmp/tty.txt" ||
  { echo "FAIL: the progress line is not cleared before the summary"; cat -v "$tmp/tty.txt"; exit 1; }

script -qec "$run --quiet" /dev/null >"$tmp/quiet.txt"
if grep -q "ddlsim run:" "$tmp/quiet.txt"; then echo "FAIL: a progress line with --quiet"; exit 1; fi

$run 2>"$tmp/err.txt" >/dev/null
if [ -s "$tmp/err.txt" ]; then echo "FAIL: stderr is not a terminal, yet:"; cat "$tmp/err.txt"; exit 1; fi
echo "ok: progress on a terminal only, cleared, off with --quiet"
