#!/usr/bin/env python3
"""Mutation run over the shipped scenarios (issue #15): every mutated scenario must exit 0 with finite, non-negative
figures, or exit 2 with exactly one line on stderr; never exit 1, a signal, or run past the time limit.

    scripts/mutate.py BUILD/sim/ddlsim [--cases 3000] [--flow 100] [--seed 1] [--timeout 60] [--jobs 2]

Each case takes a shipped scenario (its sweep left out), applies one to three random mutations (a number set to an
extreme, a quantity's magnitude or unit changed, a key removed, an unknown key added, a value of the wrong type, an
array emptied or doubled) and runs `ddlsim run` on it. The first --cases run on the scenario's engine as shipped
(analytic for most), the next --flow on the flow engine, on clusters cut to at most 64 GPUs so that each stays fast.
Prints a table of outcomes and every defect with its reproducer (written under /tmp/ddlsim-mutate-<seed>/); exits 1
if there is a defect.
"""
import argparse
import concurrent.futures
import json
import math
import os
import random
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

EXTREME_NUMBERS = [0, -1, 1, 2, 3, 7, 1e-308, 5e-324, 1e308, -1e308, 2**31, 2**31 - 1, 2**53 + 1, 2**63 - 1,
                   -(2**63), 2**64, 0.5, 1e-9, 1e9, 1e15, 1e21, 65536, 1048576, 1073741824]
MAGNITUDES = ["0", "-1", "1e-300", "5e-324", "1e-20", "1e-9", "1e-3", "0.5", "1", "3", "1e3", "1e9", "1e15", "1e20",
              "1e300", "1e308", "nan", "inf", "-0", "1e-15", "1e7"]
UNITS = ["s", "ms", "us", "ns", "ps", "h", "min", "B", "kB", "MiB", "GiB", "PiB", "EB", "B/s", "Gbps", "GB/s",
         "PB/s", "TFLOPS", "FLOPS", "GFLOP", "ns/B", "s/B", "", "K", "parsecs"]
STRINGS = ["", " ", "x", "..", "/", "ring", "tree", "mg-wfbp", "ps-sync", "flow", "analytic", "\u00e9\u00e8",
           "a\nb", "1 s", "10 Gbps", "fp16", "resnet50", "bert-large", "gpt2-xl", "transformer", "gpipe", "1f1b",
           "interleaved-1f1b", "pipedream", "balanced", "uniform", "dedicated", "byteps", "ps", "allreduce"]


def paths(doc, prefix=()):
    """Every (path, value) in the document, containers included."""
    yield prefix, doc
    if isinstance(doc, dict):
        for k, v in doc.items():
            yield from paths(v, prefix + (k,))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            yield from paths(v, prefix + (i,))


def get_parent(doc, path):
    node = doc
    for p in path[:-1]:
        node = node[p]
    return node


def gentle(value, rng):
    """A plausible value near the original: a number or a quantity's magnitude scaled by 0.1 .. 10."""
    factor = 10 ** rng.uniform(-1, 1)
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return max(1, round(value * factor))
    if isinstance(value, float):
        return value * factor
    if isinstance(value, str):
        parts = value.split(" ")
        try:
            return f"{float(parts[0]) * factor:.6g} {parts[1]}" if len(parts) == 2 else value
        except ValueError:
            return value
    return value


def mutate_value(value, rng):
    if rng.random() < 0.5:
        return gentle(value, rng)
    r = rng.random()
    if isinstance(value, bool):
        return rng.choice([not value, 0, "true", None])
    if isinstance(value, (int, float)):
        if r < 0.7:
            return rng.choice(EXTREME_NUMBERS)
        return rng.choice([str(value), None, [value], {"x": value}])
    if isinstance(value, str):
        parts = value.split(" ")
        if len(parts) == 2 and r < 0.6:  # a quantity: change its magnitude, its unit, or both
            mag, unit = parts
            k = rng.random()
            if k < 0.5:
                mag = rng.choice(MAGNITUDES)
            elif k < 0.8:
                unit = rng.choice(UNITS)
            else:
                mag, unit = rng.choice(MAGNITUDES), rng.choice(UNITS)
            return f"{mag} {unit}".strip()
        if r < 0.85:
            return rng.choice(STRINGS)
        return rng.choice([1, None, [value], {}])
    if isinstance(value, list):
        if not value or r < 0.3:
            return []
        if r < 0.6:
            return value + value
        return value[: max(1, len(value) // 2)]
    if isinstance(value, dict):
        if r < 0.2:
            return {}
        return rng.choice([[], "x", 0, None])
    return rng.choice(EXTREME_NUMBERS)


def mutate(doc, rng):
    doc = json.loads(json.dumps(doc))
    for _ in range(rng.randint(1, 3)):
        candidates = [(p, v) for p, v in paths(doc) if p]
        if not candidates:
            break
        path, value = rng.choice(candidates)
        parent = get_parent(doc, path)
        r = rng.random()
        if r < 0.08 and isinstance(parent, dict):
            del parent[path[-1]]
        elif r < 0.16 and isinstance(parent, dict):
            parent[rng.choice(["extra", "nodez", path[-1] + "_"])] = rng.choice(EXTREME_NUMBERS + STRINGS)
        else:
            parent[path[-1]] = mutate_value(value, rng)
    return doc


def small_cluster(doc):
    c = doc.get("cluster")
    if isinstance(c, dict) and "topology" not in c:  # a fat-tree fixes its node count
        if isinstance(c.get("nodes"), int) and c["nodes"] > 8:
            c["nodes"] = 8
        if isinstance(c.get("gpus_per_node"), int) and c["gpus_per_node"] > 8:
            c["gpus_per_node"] = 8
    doc.pop("parallelism", None)
    doc.pop("pipeline", None)
    return doc


def bad_figure(x, path=""):
    """The first non-finite or negative number in a summary, or None."""
    if isinstance(x, dict):
        for k, v in x.items():
            found = bad_figure(v, f"{path}/{k}")
            if found:
                return found
    elif isinstance(x, list):
        for i, v in enumerate(x):
            found = bad_figure(v, f"{path}/{i}")
            if found:
                return found
    elif isinstance(x, (int, float)) and not isinstance(x, bool):
        if not math.isfinite(x) or x < 0:
            return f"{path} = {x}"
    return None


def run_case(binary, case_dir, index, doc, engine, timeout):
    path = os.path.join(case_dir, f"case{index}.json")
    with open(path, "w") as f:
        json.dump(doc, f)
    out = os.path.join(case_dir, f"out{index}")
    argv = [binary, "run", path, "--out", out, "--no-trace"]
    if engine:
        argv += ["--engine", engine]
    try:
        done = subprocess.run(argv, capture_output=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return index, "timeout", path, f"over {timeout} s"
    err = done.stderr.decode("utf-8", "replace")
    if done.returncode == 0:
        try:
            with open(os.path.join(out, "summary.json")) as f:
                summary = json.load(f)
        except (OSError, ValueError) as e:
            return index, "exit 0 without summary", path, str(e)
        bad = bad_figure(summary)
        subprocess.run(["rm", "-rf", out])
        if bad:
            return index, "exit 0, bad figure", path, bad
        os.remove(path)
        return index, "exit 0", None, ""
    if done.returncode == 2:
        lines = err.count("\n")
        if lines != 1 or not err.startswith("ddlsim: "):
            return index, "exit 2, not one line", path, err[:500]
        os.remove(path)
        return index, "exit 2", None, ""
    if done.returncode < 0:
        return index, f"signal {-done.returncode}", path, err[-500:]
    return index, f"exit {done.returncode}", path, err[-500:]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("binary")
    ap.add_argument("--cases", type=int, default=3000)
    ap.add_argument("--flow", type=int, default=100)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--timeout", type=float, default=60)
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    args = ap.parse_args()
    binary = os.path.abspath(args.binary)
    rng = random.Random(args.seed)
    bases = []
    for name in sorted(os.listdir(os.path.join(ROOT, "scenarios"))):
        if name.endswith(".json"):
            with open(os.path.join(ROOT, "scenarios", name)) as f:
                doc = json.load(f)
            doc.pop("sweep", None)
            # relative paths (calibrations, workloads) resolve against the scenario's directory
            for key in ("calibration",):
                if isinstance(doc.get(key), str):
                    doc[key] = os.path.join(ROOT, "scenarios", doc[key])
            for sub, key in (("gpu", "calibration"), ("model", "workload"), ("measured", "timeline")):
                if isinstance(doc.get(sub), dict) and isinstance(doc[sub].get(key), str):
                    doc[sub][key] = os.path.join(ROOT, "scenarios", doc[sub][key])
            bases.append(doc)
    case_dir = os.path.join(tempfile.gettempdir(), f"ddlsim-mutate-{args.seed}")
    os.makedirs(case_dir, exist_ok=True)
    cases = []
    for i in range(args.cases + args.flow):
        flow = i >= args.cases
        base = rng.choice(bases)
        doc = mutate(small_cluster(json.loads(json.dumps(base))) if flow else base, rng)
        cases.append((i, doc, "flow" if flow else ""))
    outcomes = {}
    defects = []
    with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
        futures = [pool.submit(run_case, binary, case_dir, i, doc, engine, args.timeout) for i, doc, engine in cases]
        for fut in concurrent.futures.as_completed(futures):
            index, outcome, path, detail = fut.result()
            engine = "flow" if index >= args.cases else "shipped"
            outcomes[(engine, outcome)] = outcomes.get((engine, outcome), 0) + 1
            if outcome not in ("exit 0", "exit 2"):
                defects.append((index, outcome, path, detail))
    print(f"{'engine':<8} {'outcome':<24} {'cases':>6}")
    for (engine, outcome), n in sorted(outcomes.items()):
        print(f"{engine:<8} {outcome:<24} {n:>6}")
    for index, outcome, path, detail in sorted(defects):
        print(f"\nDEFECT case {index}: {outcome}: {path}\n  {detail.strip()}")
    print(f"\n{len(cases)} cases, {len(defects)} defects (seed {args.seed})")
    return 1 if defects else 0


if __name__ == "__main__":
    sys.exit(main())
