#!/usr/bin/env python3
"""Regenerates the golden summaries (tests/golden/) that pin every shipped scenario's figures.

    scripts/update-goldens.py BUILD/sim/cli/ddlsim        # rewrite tests/golden/ from this binary
    scripts/update-goldens.py BUILD/sim/cli/ddlsim --check # compare only; exit 1 on a difference

Cases (tests/golden/cases.json, rewritten too): each scenario as shipped, and for a scenario with a sweep a small
fixed subset of its points: point i sets every sweep axis (a zip group counting as one axis) to value i mod its
length, for i < the longest axis, so that every value of every axis appears at least once. Every case runs on the
scenario's own engine; cases of at most 64 GPUs also run on the flow engine (where the scenario is analytic and has no
`variability`, which only the analytic engine samples), and the
quickstart also with flow.symmetry off. Each golden is the run's summary.json without sim.wall_s, the only field that
may differ between runs. Run this on purpose, after a change that moves figures, and say so in the commit.
"""
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GOLDEN = os.path.join(ROOT, "tests", "golden")


def sweep_axes(sweep):
    """[(keys, [values per key])]: a cartesian key is an axis of its own, a zip group one axis of several keys."""
    axes = []
    for key, values in sweep.items():
        if key == "zip":
            for group in values:
                keys = list(group.keys())
                axes.append((keys, [group[k] for k in keys]))
        else:
            axes.append(([key], [values]))
    return axes


def value_text(value):
    return json.dumps(value, separators=(",", ":"), sort_keys=True)


def gpus_of(doc, sets):
    cluster = dict(doc.get("cluster", {}))
    for assignment in sets:
        key, _, text = assignment.partition("=")
        if key in ("cluster.nodes", "cluster.gpus_per_node"):
            cluster[key.split(".")[1]] = json.loads(text)
    return int(cluster.get("nodes", 1)) * int(cluster.get("gpus_per_node", 1))


def cases():
    out = []
    for name in sorted(os.listdir(os.path.join(ROOT, "scenarios"))):
        if not name.endswith(".json"):
            continue
        path = os.path.join("scenarios", name)
        with open(os.path.join(ROOT, path)) as f:
            doc = json.load(f)
        stem = name[: -len(".json")]
        points = [("base", [])]
        if "sweep" in doc:
            axes = sweep_axes(doc["sweep"])
            longest = max(len(values[0]) for _, values in axes)
            for i in range(longest):
                sets = []
                for keys, values in axes:
                    for key, vals in zip(keys, values):
                        sets.append(f"{key}={value_text(vals[i % len(vals)])}")
                points.append((f"point{i}", sets))
        engine = doc.get("engine", "analytic")
        for label, sets in points:
            out.append({"name": f"{stem}/{label}", "scenario": path, "set": sets})
            if engine == "analytic" and "variability" not in doc and gpus_of(doc, sets) <= 64:
                out.append({"name": f"{stem}/{label}.flow", "scenario": path, "set": sets + ["engine=flow"]})
        if stem == "quickstart":
            out.append({"name": f"{stem}/base.flow-nosym", "scenario": path,
                        "set": ["engine=flow", 'flow={"symmetry":"off"}']})
    return out


def run_case(binary, case, tmp):
    out_dir = os.path.join(tmp, case["name"].replace("/", "_"))
    argv = [binary, "run", os.path.join(ROOT, case["scenario"]), "--out", out_dir, "--no-trace"]
    for s in case["set"]:
        argv += ["--set", s]
    done = subprocess.run(argv, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{case['name']}: ddlsim exited {done.returncode}: {done.stderr.strip()}")
    with open(os.path.join(out_dir, "summary.json")) as f:
        summary = json.load(f)
    summary["sim"].pop("wall_s", None)
    return summary


def main():
    if len(sys.argv) < 2:
        raise SystemExit(__doc__)
    binary = os.path.abspath(sys.argv[1])
    check = "--check" in sys.argv[2:]
    all_cases = cases()
    differ = []
    with tempfile.TemporaryDirectory(prefix="ddlsim-goldens-") as tmp:
        for case in all_cases:
            summary = run_case(binary, case, tmp)
            text = json.dumps(summary, indent=2, sort_keys=True) + "\n"
            target = os.path.join(GOLDEN, case["name"] + ".json")
            if check:
                with open(target) as f:
                    if f.read() != text:
                        differ.append(case["name"])
                continue
            os.makedirs(os.path.dirname(target), exist_ok=True)
            with open(target + ".tmp", "w") as f:
                f.write(text)
            os.replace(target + ".tmp", target)
    if check:
        for name in differ:
            print(f"differs: {name}")
        print(f"{len(all_cases) - len(differ)} of {len(all_cases)} goldens identical")
        return 1 if differ else 0
    manifest = os.path.join(GOLDEN, "cases.json")
    with open(manifest + ".tmp", "w") as f:
        f.write(json.dumps({"cases": all_cases}, indent=2) + "\n")
    os.replace(manifest + ".tmp", manifest)
    print(f"{len(all_cases)} goldens written to {os.path.relpath(GOLDEN, ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
