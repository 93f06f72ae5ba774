"""The validation report: every tier this machine can run, as a kernel x detector table.

Runs pytest once in the current directory (``--detector-report``; on every core with
pytest-xdist unless the extra arguments, passed on, choose; a line as each cell completes):
the tests that fill a cell (``-m "covers or widening"``, unless the arguments choose ``-m``), or
with ``every_test`` all of them, so that a run of the whole suite leaves the report too;
then prints the table and writes it as Markdown beside pytest's JUnit XML. A cell reads
``passed`` (the fixed kernel passed), ``twin caught`` (the detector failed the int32 twin, as it
must), ``overflows at file:line`` (a kernel declared known to overflow, caught as expected), or
``skipped: <reason>``; anything else is a failure. The command exits with pytest's status
where pytest failed, else 1 where a cell failed, else 0. GPU cells give the
largest peak device memory of their cases. Where ``$GITHUB_STEP_SUMMARY`` is set, the table is
appended to the job summary.
"""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from triton_overflow.plugin.detector_report import cell_verdict, detectors, widening_detectors


REPORT_TESTS = "covers or widening"  # the marks of the tests that fill the report's cells


def main(out, profile=None, pytest_args=(), every_test=False):
    from triton_overflow.engine.machine import describe

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    report_path = out / "detectors.json"
    report_path.unlink(missing_ok=True)
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--overflow-progress",
               f"--junitxml={out / 'junit.xml'}", f"--detector-report={report_path}",
               *([f"--hypothesis-profile={profile}"] if profile else []),
               *_selection(pytest_args, every_test), *_workers(pytest_args), *pytest_args]
    print(f"validate: running {' '.join(command[2:])}", flush=True)
    started = time.monotonic()
    code = subprocess.call(command)
    seconds = time.monotonic() - started
    if not report_path.exists():
        print(f"validate: pytest exited {code} without a detector report", flush=True)
        return 1
    detectors = json.loads(report_path.read_text())
    table, failures = build_table(detectors["cells"])
    widening_lines, widening_failures = widening_matrix(detectors.get("widenings", []))
    failures += widening_failures
    failures = [f"{error['test'] or 'collection'}: could not be collected: {error['reason']}"
                for error in detectors.get("collection_errors", [])] + failures
    facts = describe()
    lines = ["# Validation report", ""]
    lines += [f"- {name}: {value}" for name, value in facts.items()]
    lines += [f"- pytest exit status: {code}; wall time {seconds:.0f} s", ""]
    lines += markdown_table(table)
    if widening_lines:
        lines += ["", "## Every widening, undone alone (per-widening mutants)", ""] + widening_lines
    if failures:
        lines += ["", "## Failures", ""] + [f"- {failure}" for failure in failures]
    text = "\n".join(lines) + "\n"
    (out / "report.md").write_text(text)
    summary = os.environ.get("GITHUB_STEP_SUMMARY")
    if summary:
        with open(summary, "a") as handle:
            handle.write(text)
    print()
    print(text)
    print(f"validate: wrote {out / 'report.md'}, {out / 'junit.xml'}")
    return code or (1 if failures else 0)


def _selection(pytest_args, every_test):
    """``-m`` for the tests of the report, unless every test runs or the arguments choose."""
    chosen = any(a == "-m" or a.startswith("-m") and not a.startswith("--") for a in pytest_args)
    return [] if every_test or chosen else ["-m", REPORT_TESTS]


def _workers(pytest_args):
    """``-n auto`` (pytest-xdist, sized by the plugin) unless the arguments choose already."""
    import importlib.util
    chosen = any(a in ("-n", "--numprocesses", "no:xdist") or a.startswith(("-n", "--numprocesses="))
                 for a in pytest_args)
    if chosen or importlib.util.find_spec("xdist") is None:
        return []
    return ["-n", "auto", "--dist", "worksteal"]


def build_table(cells):
    table, failures = {}, []
    for cell in cells:
        text, failed = cell_verdict(cell["results"])
        table.setdefault(cell["kernel"], {})[cell["detector"]] = text
        failures += failed
    return table, failures


def widening_matrix(results):
    """Markdown lines of the widening x detector matrix, and the survivors as failures."""
    rows, failures = {}, []
    for result in results:
        key = (result["where"], result["kernel"], result["text"])
        if result["outcome"] == "failed":
            text = "SURVIVED"
            failures.append(f"{result['test']}: {result['reason']}")
        elif result["outcome"] == "skipped":
            text = f"skipped: {result['reason']}"
        else:
            text = result.get("detail") or "caught"
        rows.setdefault(key, {})[result["detector"]] = text.replace("|", "\\|")
    if not rows:
        return [], failures
    columns = [d for d in widening_detectors() if any(d in r for r in rows.values())]
    lines = ["| widening | kernel | undone | " + " | ".join(columns) + " |",
             "|---" * (len(columns) + 3) + "|"]
    for (where, kernel, text), cells in sorted(rows.items(), key=lambda item: _site_order(item[0])):
        lines.append(f"| {where} | {kernel} | `{text}` | "
                     + " | ".join(cells.get(c, "-") for c in columns) + " |")
    return lines, failures


def _site_order(key):
    file, _, line = key[0].rpartition(":")
    return (file, int(line) if line.isdigit() else 0)


def markdown_table(table):
    columns = [d for d in detectors() if any(d in row for row in table.values())]
    columns += sorted({d for row in table.values() for d in row} - set(columns))
    lines = ["| kernel | " + " | ".join(columns) + " |", "|---" * (len(columns) + 1) + "|"]
    for kernel in sorted(table):
        lines.append(f"| {kernel} | " + " | ".join(table[kernel].get(c, "-") for c in columns) + " |")
    return lines
