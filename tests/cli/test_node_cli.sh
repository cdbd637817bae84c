#!/usr/bin/env bash
# `ddlsim node` end to end (issue #34): the DGX-1V's six NVLink rings at V100's 25 GB/s a link, the PCIe node's
# pairs through host memory and its NIC's GPUDirect reach; bad input exits 2 with one line naming the file and line.
set -u
bin=$1 root=$2
data=$root/tests/data/node
fail() { echo "FAIL: $*"; exit 1; }

out=$("$bin" node "$data/dgx1v-topo.txt" --gpu V100-SXM2-32GB) || fail "dgx1v exit $?"
grep -qF "NVLink rings: 6 x 25 GB/s a link and direction = 150 GB/s of ring bus bandwidth (V100-SXM2-32GB)" <<<"$out" ||
  fail "dgx1v rings: $out"
grep -qF "peer-to-peer: every GPU pair" <<<"$out" || fail "dgx1v peer-to-peer: $out" # SYS pairs over NVLink via a GPU

out=$("$bin" node "$data/pcie-2socket-4gpu-topo.txt") || fail "pcie exit $?"
grep -qF "NVLink rings: none" <<<"$out" || fail "pcie rings: $out"
grep -qF "GPU pairs 0-2, 0-3, 1-2, 1-3" <<<"$out" || fail "pcie staged: $out"
grep -qF "NIC0: GPUDirect RDMA for GPUs 0, 1; through host memory for GPUs 2, 3" <<<"$out" || fail "pcie nic: $out"

tmp=$(mktemp -d) && trap 'rm -rf "$tmp"' EXIT
sed 's/NV2/NV/' "$data/dgx1v-topo.txt" >"$tmp/bad.txt"
err=$("$bin" node "$tmp/bad.txt" 2>&1 >/dev/null)
rc=$?
[[ $rc == 2 ]] || fail "bad cell: exit $rc"
[[ $(wc -l <<<"$err") == 1 ]] || fail "bad cell: not one line: $err"
grep -qF "bad.txt: line 2: unknown path 'NV'" <<<"$err" || fail "bad cell message: $err"

err=$("$bin" node "$data/dgx1v-topo.txt" --gpu V100-SXM2 2>&1 >/dev/null)
rc=$?
[[ $rc == 2 ]] || fail "bad preset: exit $rc"
grep -qF "unknown GPU preset 'V100-SXM2'" <<<"$err" || fail "bad preset message: $err"

err=$("$bin" node "$tmp/missing.txt" 2>&1 >/dev/null)
rc=$?
[[ $rc == 2 ]] || fail "missing file: exit $rc"
echo "ok"
