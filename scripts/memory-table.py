#!/usr/bin/env python3
"""Prints docs/memory.md's table: ddlsim's memory per GPU against the measured peaks of Megatron-LM GPT runs.

    scripts/memory-table.py BUILD/sim/ddlsim

Runs each run of tests/data/memory/megatron-v100.json as a scenario (the shape, t, p, micro-batches of the run; fp16,
Adam, 1F1B, full recomputation) and prints, for the stages measured, the allocator's measured peaks beside ddlsim's
figure before the framework's parts (weights, gradients, optimizer state, activations: the figure before
docs/memory.md's parts, the tied embeddings' copy on the last stage left out) and after them (the same plus the logits,
the copy and fragmentation: what the caching allocator holds, to compare with max_memory_reserved), and the total with
the reserve.
"""
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MIB = 2.0**20
ADAM_FP16_BYTES = 20  # bytes per parameter, Megatron-Core's table (dag/memory.hpp)


def scenario(run):
    p, t = run["pipeline"], run["tensor"]
    shape = {k: run[k] for k in ("layers", "hidden", "heads", "sequence", "vocabulary")}
    return {"name": "megatron-v100",
            "model": {"zoo": "transformer", "gradient_dtype": "fp16", "batch_per_gpu": run["micro_batch"],
                      "transformer": shape},
            "gpu": {"preset": "V100-SXM2-32GB", "efficiency": 0.5},
            "cluster": {"nodes": p * t // 4, "gpus_per_node": 4,
                        "intra_node": {"bandwidth": "150 GB/s", "latency": "1 us"},
                        "inter_node": {"bandwidth": "100 Gbps", "latency": "2 us"}, "nic": "per-gpu"},
            "strategy": {"kind": "ddp"}, "parallelism": {"pipeline": p, "tensor": t},
            "pipeline": {"schedule": "1f1b", "partition": "uniform", "recompute": "full",
                         "micro_batches": run["micro_batches"]},
            "optimizer": "adam"}


def stage_memory(ddlsim, run, tmp):
    path = os.path.join(tmp, "s.json")
    with open(path, "w") as f:
        json.dump(scenario(run), f)
    out = os.path.join(tmp, "out")
    subprocess.run([ddlsim, "run", path, "--out", out, "--no-trace", "--quiet"], check=True,
                   stdout=subprocess.DEVNULL)
    with open(os.path.join(out, "summary.json")) as f:
        return [st["memory"] for st in json.load(f)["pipeline"]["per_stage"]]


def main():
    ddlsim = sys.argv[1]
    with open(os.path.join(ROOT, "tests", "data", "memory", "megatron-v100.json")) as f:
        data = json.load(f)
    print("| run: L, h, p | stage | measured max allocated | measured max reserved | before | error | after "
          "(allocator) | error | after with the reserve |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    with tempfile.TemporaryDirectory() as tmp:
        for run in data["runs"]:
            memory = stage_memory(ddlsim, run, tmp)
            last = run["pipeline"] - 1
            tied = run["vocabulary"] * run["hidden"] / run["tensor"] * ADAM_FP16_BYTES
            for st in run["stages"]:
                m = memory[st["stage"]]
                parts = ("weights_bytes", "gradients_bytes", "optimizer_bytes", "activation_bytes", "buffer_bytes")
                before = sum(m[k] for k in parts) - (tied if st["stage"] == last else 0)
                after = m["total_bytes"] - m["reserve_bytes"]
                reserved = st["max_reserved_mib"] * MIB
                print(f"| {run['layers']}, {run['hidden']}, {run['pipeline']} | {st['stage']} "
                      f"| {st['max_allocated_mib']:,.0f} | {st['max_reserved_mib']:,.0f} | {before / MIB:,.0f} "
                      f"| {100 * (before / reserved - 1):+.1f} % | {after / MIB:,.0f} | {100 * (after / reserved - 1):+.1f} % "
                      f"| {m['total_bytes'] / MIB:,.0f} |")


if __name__ == "__main__":
    main()
