"""Score the static check on whole engine trees, as a team runs it in its own checkout.

Each tree in ``trees.json`` is a public repository at a pinned commit, the paths its kernels
live under and the envelope its team would write (``<tree>/envelope.toml``). This script runs
``triton-overflow lint PATHS --format json`` from the tree's root (the engine not installed),
with the envelope, in the default mode and with ``--no-exec``, cold (an empty cache) and warm
(the cache the cold run left), and prints per tree and mode: kernels declared, checked, not
checked by cause, findings by level, the real share of the errors among the findings triaged
by reading the kernel and its launcher (``<tree>/triage.json``), and the times.

    python ci/real_trees/score.py --checkout vllm=/path/to/vllm [--tree vllm] [--sample 30]

``--sample N`` prints N errors drawn at random (seeded) that are not triaged yet, to be read
and added to the triage file. Nothing of the trees is kept in this repository but commit ids,
envelopes and triage verdicts.
"""

import argparse
import ast
import collections
import json
import os
import random
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--checkout", action="append", default=[], metavar="TREE=PATH",
                        help="where a tree is checked out at its pinned commit")
    parser.add_argument("--tree", action="append", help="only these trees")
    parser.add_argument("--mode", action="append", choices=("exec", "no-exec"),
                        help="only these modes (default: both)")
    parser.add_argument("--sample", type=int, default=0,
                        help="print this many untriaged errors, drawn at random")
    parser.add_argument("--no-envelope", action="store_true",
                        help="judge by shape alone (a team with no envelope gets the "
                        "`serving` preset: --envelope serving)")
    parser.add_argument("--envelope", type=Path, metavar="TOML",
                        help="judge every tree with this envelope instead of its own")
    parser.add_argument("--jobs", type=int, default=0)
    parser.add_argument("--keep", metavar="FOLDER", help="keep each run's JSON report here")
    args = parser.parse_args(argv)
    trees = json.loads((HERE / "trees.json").read_text())["trees"]
    checkouts = dict(entry.split("=", 1) for entry in args.checkout)
    rows = []
    for tree in trees:
        if args.tree and tree["name"] not in args.tree:
            continue
        root = checkouts.get(tree["name"])
        if root is None:
            print(f"{tree['name']}: skipped (give --checkout {tree['name']}=PATH, a checkout of "
                  f"{tree['repo']} at {tree['commit']})", file=sys.stderr)
            continue
        _check_commit(Path(root), tree)
        for mode in args.mode or ("exec", "no-exec"):
            rows.append(_score(tree, Path(root), mode, args))
    _print_table(rows)
    return 0


def _check_commit(root, tree):
    try:
        head = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True,
                              text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        head = (root / ".commit").read_text().strip() if (root / ".commit").exists() else ""
    if head and head != tree["commit"]:
        print(f"{tree['name']}: warning: {root} is at {head}, not {tree['commit']}",
              file=sys.stderr)


def _score(tree, root, mode, args):
    envelope = None if args.no_envelope else (args.envelope
                                              or HERE / tree["name"] / "envelope.toml")
    command = [sys.executable, "-m", "triton_overflow", "lint", *tree["paths"],
               "--format", "json", "--allow-empty", "--fail-on", "error"]
    if envelope is not None:
        command += ["--envelope", str(envelope)]
    else:
        command += ["--no-envelope"]
    if mode == "no-exec":
        command.append("--no-exec")
    if args.jobs:
        command += ["-j", str(args.jobs)]
    with tempfile.TemporaryDirectory() as cache:
        environment = {**os.environ, "TRITON_OVERFLOW_CACHE": cache}
        cold, report = _timed(command, root, environment)
        warm, _ = _timed(command, root, environment)
    if args.keep:
        Path(args.keep).mkdir(parents=True, exist_ok=True)
        Path(args.keep, f"{tree['name']}-{mode}.json").write_text(json.dumps(report, indent=1))
    declared = _declared_kernels(root, tree["paths"])
    findings = [f for kernel in report["kernels"] for f in kernel["findings"]]
    errors = [f for f in findings if f["level"] == "error"]
    triage = _triage(tree)
    read = [f for f in errors if _key(f) in triage]
    real = [f for f in read if triage[_key(f)]["real"]]
    causes = collections.Counter(_cause(p["reason"]) for p in report["not_checked"])
    slowest = max(report.get("seconds", {}).items(), key=lambda item: item[1],
                  default=("", 0.0))
    if args.sample:
        _print_sample(tree, mode, [f for f in errors if _key(f) not in triage], args.sample)
    return dict(tree=tree["name"], mode=mode, declared=declared,
                checked=len(report["kernels"]),
                not_checked=sum(1 for p in report["not_checked"] if p["kernel"]),
                files_not_loaded=sum(1 for p in report["not_checked"] if not p["kernel"]),
                causes=causes, levels=collections.Counter(f["level"] for f in findings),
                errors=len(errors), read=len(read), real=len(real), cold=cold, warm=warm,
                slowest=slowest, exit_code=report["exit_code"],
                missed=[entry for entry in triage.values() if entry.get("must_be_error")
                        and not any(_key(f) == _entry_key(entry) for f in errors)])


def _timed(command, root, environment):
    started = time.monotonic()
    done = subprocess.run(command, cwd=root, env=environment, capture_output=True, text=True)
    elapsed = time.monotonic() - started
    if "Traceback (most recent call last)" in done.stderr:
        raise SystemExit(f"a traceback reached the user in {root}:\n{done.stderr[-3000:]}")
    try:
        return elapsed, json.loads(done.stdout)
    except json.JSONDecodeError:
        raise SystemExit(f"no JSON report (exit {done.returncode}):\n{done.stderr[-3000:]}")


def _declared_kernels(root, paths):
    """The Triton jit functions the paths declare that no other jit function calls (of their
    file, or of another through an import) and that take no builtin's ``_builder``: the
    kernels, read from the sources alone."""
    from triton_overflow.lint import discover
    from triton_overflow.lint.jit_functions import declared_jit_functions
    files, _ = discover.files_under([str(Path(root, base)) for base in paths])
    sys.path.insert(0, str(root))
    try:
        across = discover.helpers_called_across(files)
    finally:
        sys.path.remove(str(root))
    count = 0
    for file in files:
        try:
            tree = ast.parse(Path(file).read_text(errors="replace"))
        except SyntaxError:
            continue
        functions = declared_jit_functions(tree)
        names = {f.name for f in functions}
        called = {node.id for f in functions for node in ast.walk(f)
                  if isinstance(node, ast.Name) and node.id in names and node.id != f.name}
        count += sum(1 for f in functions if f.name not in called | across.get(file, set())
                     and not discover.BUILTIN_PARAMETERS & {a.arg for a in f.args.args +
                                                            f.args.kwonlyargs})
    return count


def _triage(tree):
    path = HERE / tree["name"] / "triage.json"
    if not path.exists():
        return {}
    return {_entry_key(entry): entry for entry in json.loads(path.read_text())["findings"]}


def _key(finding):
    return finding["file"], finding["kernel"], " ".join(finding["product"].split())


def _entry_key(entry):
    return entry["file"], entry["kernel"], " ".join(entry["product"].split())


def _cause(reason):
    reason = re.sub(r"`[^`]*`|'[^']*'|\"[^\"]*\"|\d+", "…", reason)
    return reason[:90]


def _print_sample(tree, mode, errors, count):
    picked = random.Random(f"{tree['name']}-{mode}").sample(errors, min(count, len(errors)))
    print(f"\n{tree['name']} ({mode}): {len(picked)} untriaged errors, drawn at random")
    for finding in sorted(picked, key=lambda f: (f["file"], f["line"])):
        print(json.dumps({"file": finding["file"], "line": finding["line"],
                          "kernel": finding["kernel"], "product": finding["product"],
                          "real": None, "why": ""}))


def _print_table(rows):
    print("\n| tree | mode | kernels | checked | not checked | errors | warnings | notes | "
          "errors read | real | exit | cold | warm | slowest file |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for row in rows:
        share = f"{row['real']}/{row['read']}" + (f" ({row['real'] / row['read']:.0%})"
                                                   if row["read"] else "")
        print(f"| {row['tree']} | {row['mode']} | {row['declared']} | {row['checked']} "
              f"({row['checked'] / max(row['declared'], 1):.0%}) | {row['not_checked']} "
              f"(+{row['files_not_loaded']} files) | {row['errors']} | "
              f"{row['levels']['warning']} | {row['levels']['note']} | {share} | "
              f"{row['real']} | {row['exit_code']} | {row['cold']:.0f} s | {row['warm']:.0f} s "
              f"| {Path(row['slowest'][0]).name} {row['slowest'][1]:.0f} s |")
    for row in rows:
        if row["causes"]:
            print(f"\n{row['tree']} ({row['mode']}), not checked, by cause:")
            for cause, count in row["causes"].most_common():
                print(f"  {count:4}  {cause}")
        for entry in row["missed"]:
            print(f"{row['tree']} ({row['mode']}): MISSED, not at error: {entry['file']}:"
                  f"{entry['line']} {entry['product']}")


if __name__ == "__main__":
    sys.exit(main())
