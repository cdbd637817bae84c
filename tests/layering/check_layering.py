#!/usr/bin/env python3
"""Fails when a source file includes a header from a layer above its own (docs/architecture.md).

    check_layering.py SOURCE_DIR            # check the tree; exit 1 listing every upward include
    check_layering.py --self-test           # the checker on made-up trees: it must catch an upward include

Layers, lowest first; each may include itself and those it lists. SimGrid's headers only in the flow engine.
"""
import os
import re
import sys
import tempfile

# layer: (directory, layers it may include)
LAYERS = {
    "core": ("core", set()),
    "dag": ("dag", {"core"}),
    "calibrate": ("calibrate", {"dag", "core"}),
    "traces": ("traces", {"dag", "core"}),
    "probe": ("cuda_probe", set()),  # standalone, links no other module (docs/architecture.md, "Module boundaries")
    "network": ("sim/network", {"core"}),
    "spec": ("sim/spec", {"network", "dag", "core"}),
    "plan": ("sim/plan", {"spec", "network", "dag", "core"}),
    "analytic": ("sim/analytic", {"plan", "spec", "network", "dag", "core"}),
    "flow": ("sim/flow", {"plan", "spec", "network", "dag", "core"}),
    "report": ("sim/report", {"plan", "spec", "network", "dag", "core"}),
    "cli": ("sim/cli", {"report", "analytic", "flow", "plan", "spec", "network", "calibrate", "traces", "dag", "core"}),
}
SIMGRID_LAYERS = {"flow"}
INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]')


def layer_of(relpath):
    """The layer a repository path belongs to (longest directory match), or None."""
    best = None
    for name, (directory, _) in LAYERS.items():
        if relpath == directory or relpath.startswith(directory + "/"):
            if best is None or len(directory) > len(LAYERS[best][0]):
                best = name
    return best


def violations(root):
    found = []
    checked = 0
    for name, (directory, _) in LAYERS.items():
        base = os.path.join(root, directory)
        for dirpath, dirnames, filenames in os.walk(base):
            dirnames.sort()
            for filename in sorted(filenames):
                if not filename.endswith((".hpp", ".cpp", ".h", ".cu", ".cuh")):
                    continue
                path = os.path.join(dirpath, filename)
                rel = os.path.relpath(path, root)
                own = layer_of(rel)
                if own != name:
                    continue  # a deeper layer's directory, visited as that layer
                checked += 1
                allowed = LAYERS[own][1] | {own}
                with open(path, encoding="utf-8") as f:
                    for number, line in enumerate(f, 1):
                        m = INCLUDE.match(line)
                        if not m:
                            continue
                        header = m.group(2)
                        if m.group(1) == "<":
                            if header.startswith("simgrid/") and own not in SIMGRID_LAYERS:
                                found.append(f"{rel}:{number}: includes <{header}>: only the flow engine uses SimGrid")
                            continue
                        target = layer_of(header)
                        if target is None and header.startswith("sim/"):
                            found.append(f"{rel}:{number}: includes \"{header}\", which is in no layer")
                        elif target is not None and target not in allowed:
                            found.append(f"{rel}:{number}: {own} includes \"{header}\" from {target}, "
                                         f"a layer it may not use (allowed: {', '.join(sorted(allowed))})")
    return found, checked


def self_test():
    def tree(files):
        root = tempfile.mkdtemp(prefix="ddlsim-layering-")
        for rel, text in files.items():
            os.makedirs(os.path.dirname(os.path.join(root, rel)), exist_ok=True)
            with open(os.path.join(root, rel), "w") as f:
                f.write(text)
        return root

    clean = tree({"sim/plan/a.cpp": '#include "sim/spec/scenario.hpp"\n#include "core/units.hpp"\n',
                  "sim/flow/f.cpp": "#include <simgrid/s4u/Engine.hpp>\n"})
    upward = tree({"sim/network/a.cpp": '#include "sim/plan/prepare.hpp"\n'})
    simgrid = tree({"sim/plan/b.cpp": "#include <simgrid/s4u/Comm.hpp>\n"})
    sideways = tree({"sim/analytic/c.cpp": '#include "sim/flow/flow_engine.hpp"\n'})
    dag_up = tree({"dag/d.cpp": '#include "sim/spec/scenario.hpp"\n'})
    calibrate_up = tree({"calibrate/e.cpp": '#include "dag/calibration.hpp"\n#include "sim/plan/prepare.hpp"\n'})
    traces_up = tree({"traces/f.cpp": '#include "dag/workload.hpp"\n#include "sim/spec/gpus.hpp"\n'})
    traces_sideways = tree({"traces/g.cpp": '#include "calibrate/measured.hpp"\n'})
    plan_calibrate = tree({"sim/plan/h.cpp": '#include "dag/measured.hpp"\n#include "calibrate/alpha_beta.hpp"\n'})
    ok = True
    for name, root, want in (("clean", clean, 0), ("upward", upward, 1), ("simgrid", simgrid, 1),
                             ("sideways", sideways, 1), ("dag_up", dag_up, 1), ("calibrate_up", calibrate_up, 1),
                             ("traces_up", traces_up, 1), ("traces_sideways", traces_sideways, 1),
                             ("plan_calibrate", plan_calibrate, 1)):
        got, _ = violations(root)
        if len(got) != want:
            print(f"self-test {name}: expected {want} violation(s), got {got}")
            ok = False
    return 0 if ok else 1


def main():
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    found, checked = violations(sys.argv[1])
    for v in found:
        print(v)
    print(f"{checked} files checked, {len(found)} upward include(s)")
    return 1 if found or checked == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
