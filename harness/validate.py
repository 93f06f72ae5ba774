"""The validation report: every tier this machine can run, as a kernel x detector table.

Runs the suite once (``pytest --detector-report``), then prints the table and writes it as
Markdown beside pytest's JUnit XML. A cell reads ``passed`` (the fixed kernel passed),
``twin caught`` (the detector failed the int32 twin, as it must), or ``skipped: <reason>``;
anything else is a failure, and the command exits 1.
"""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DETECTORS = ("correctness", "row-0 copy", "validation", "static", "interpreter huge",
             "gpu dense huge")


def main(out, profile=None, pytest_args=()):
    from harness.environment import describe

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    if profile:
        env["OVERFLOW_HYPOTHESIS_PROFILE"] = profile
    report_path = out / "detectors.json"
    report_path.unlink(missing_ok=True)
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider",
               f"--junitxml={out / 'junit.xml'}", f"--detector-report={report_path}",
               *pytest_args]
    print(f"validate: running {' '.join(command[2:])}", flush=True)
    started = time.monotonic()
    code = subprocess.call(command, cwd=ROOT, env=env)
    seconds = time.monotonic() - started
    if not report_path.exists():
        print(f"validate: pytest exited {code} without a detector report", flush=True)
        return 1
    cells = json.loads(report_path.read_text())["cells"]
    table, failures = build_table(cells)
    facts = describe()
    lines = ["# Validation report", ""]
    lines += [f"- {name}: {value}" for name, value in facts.items()]
    lines += [f"- pytest exit status: {code}; wall time {seconds:.0f} s", ""]
    lines += markdown_table(table)
    if failures:
        lines += ["", "## Failures", ""] + [f"- {failure}" for failure in failures]
    text = "\n".join(lines) + "\n"
    (out / "report.md").write_text(text)
    print()
    print(text)
    print(f"validate: wrote {out / 'report.md'}, {out / 'junit.xml'}")
    return 0 if code == 0 and not failures else 1


def build_table(cells):
    table, failures = {}, []
    for cell in cells:
        kernel, detector = cell["kernel"], cell["detector"]
        parts = []
        for role, good in (("fixed", "passed"), ("twin", "twin caught")):
            results = [r for r in cell["results"] if r["role"] == role]
            if not results:
                continue
            failed = [r for r in results if r["outcome"] == "failed"]
            skipped = [r for r in results if r["outcome"] == "skipped"]
            if failed:
                parts.append("FAILED" if role == "fixed" else "TWIN MISSED")
                failures += [f"{r['test']}: {r['reason']}" for r in failed]
            elif len(skipped) == len(results):
                label = "skipped" if role == "fixed" else "twin skipped"
                parts.append(f"{label}: {skipped[0]['reason']}")
            else:
                parts.append(good)
        if len(parts) == 2 and parts[1] == f"twin {parts[0]}":
            parts = parts[:1]  # the same skip reason for both roles
        table.setdefault(kernel, {})[detector] = ", ".join(parts)
    return table, failures


def markdown_table(table):
    columns = [d for d in DETECTORS if any(d in row for row in table.values())]
    columns += sorted({d for row in table.values() for d in row} - set(columns))
    lines = ["| kernel | " + " | ".join(columns) + " |", "|---" * (len(columns) + 1) + "|"]
    for kernel in sorted(table):
        lines.append(f"| {kernel} | " + " | ".join(table[kernel].get(c, "-") for c in columns) + " |")
    return lines
