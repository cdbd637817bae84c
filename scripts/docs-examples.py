#!/usr/bin/env python3
"""Runs the worked examples of the docs and writes their output beside them, so that no figure in them is copied by
hand (issue #31).

    scripts/docs-examples.py BUILD/sim/ddlsim           # run every example, rewrite its output block
    scripts/docs-examples.py BUILD/sim/ddlsim --check   # run them and compare; exit 1 on a difference

An example is a fenced block of commands after a line `<!-- example NAME -->` in README.md or docs/*.md; its output
block follows it, after `<!-- output NAME: written by scripts/docs-examples.py -->`, and holds each command (`$ ...`)
and what it printed (stdout, then stderr). The commands run with bash, one after another, in a scratch directory that
holds the repository's `scenarios/` and `tests/data/` (what a fresh clone has: no file outside the repository), with
`ddlsim` on PATH as the given binary; every command must exit 0. An example's output block is created the first time.
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLE = re.compile(r"<!-- example (?P<name>[a-z0-9-]+) -->\n```sh\n(?P<commands>.*?)```\n"
                     r"(?:\n?<!-- output (?P=name): written by scripts/docs-examples.py -->\n```text\n.*?```\n)?",
                     re.S)
TIMEOUT_S = 300  # per command: the examples are chosen to take seconds


def commands(block):
    """The block's commands, a line ending in a backslash continued on the next."""
    out, current = [], ""
    for line in block.splitlines():
        current += line + "\n"
        if not line.endswith("\\"):
            if current.strip():
                out.append(current.rstrip("\n"))
            current = ""
    return out


def run_example(name, block, binary):
    """The output block's text: each command and what it printed."""
    with tempfile.TemporaryDirectory(prefix=f"ddlsim-docs-{name}-") as scratch:
        os.makedirs(os.path.join(scratch, "tests"))
        os.symlink(os.path.join(ROOT, "scenarios"), os.path.join(scratch, "scenarios"))
        os.symlink(os.path.join(ROOT, "tests", "data"), os.path.join(scratch, "tests", "data"))
        bin_dir = os.path.join(scratch, ".bin")
        os.makedirs(bin_dir)
        os.symlink(os.path.abspath(binary), os.path.join(bin_dir, "ddlsim"))
        env = dict(os.environ, PATH=bin_dir + os.pathsep + os.environ.get("PATH", ""))
        text = ""
        for command in commands(block):
            done = subprocess.run(["bash", "-c", command], cwd=scratch, env=env, capture_output=True, text=True,
                                  timeout=TIMEOUT_S)
            if done.returncode != 0:
                sys.exit(f"docs-examples: example {name}: `{command}` exited {done.returncode}: "
                         f"{(done.stderr or done.stdout).strip()[:500]}")
            text += f"$ {command}\n{done.stdout}{done.stderr}"
        return text


def main():
    args = [a for a in sys.argv[1:] if a != "--check"]
    if len(args) != 1 or not os.access(args[0], os.X_OK):
        sys.exit("usage: scripts/docs-examples.py BUILD/sim/ddlsim [--check]")
    check = "--check" in sys.argv[1:]
    docs = [os.path.join(ROOT, "README.md")] + sorted(
        os.path.join(ROOT, "docs", f) for f in os.listdir(os.path.join(ROOT, "docs")) if f.endswith(".md"))
    differ, examples = [], 0
    for path in docs:
        with open(path, encoding="utf-8") as f:
            text = f.read()

        def replace(m):
            nonlocal examples
            examples += 1
            output = run_example(m["name"], m["commands"], args[0])
            return (f"<!-- example {m['name']} -->\n```sh\n{m['commands']}```\n\n"
                    f"<!-- output {m['name']}: written by scripts/docs-examples.py -->\n```text\n{output}```\n")

        new = EXAMPLE.sub(replace, text)
        if new == text:
            continue
        if check:
            differ.append(os.path.relpath(path, ROOT))
        else:
            tmp = path + f".tmp.{os.getpid()}"
            with open(tmp, "w", encoding="utf-8") as f:
                f.write(new)
            os.replace(tmp, path)
            print(f"docs-examples: rewrote {os.path.relpath(path, ROOT)}")
    if examples == 0:
        sys.exit("docs-examples: no example found (<!-- example NAME --> before a ```sh block)")
    if differ:
        sys.exit(f"docs-examples: the output of {examples} examples differs from what {', '.join(differ)} shows: "
                 "run scripts/docs-examples.py BUILD/sim/ddlsim and commit the docs")
    print(f"docs-examples: {examples} examples {'as the docs show' if check else 'run'}")


if __name__ == "__main__":
    main()
