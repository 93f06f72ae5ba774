"""``triton-overflow repro FILE:LINE``: from a finding and a launch, a test file and a report.

The finding comes from the static check (run on FILE here, or read from ``--findings``, a
report written by ``lint --format json``); the launch from ``--launch`` (a description, see
``triton_overflow.repro.launch``) or ``--launches`` (a file written by ``triton-overflow
record`` around the team's own small test). The test file defines a ``Reproduction`` of the
finding and a ``ReproductionTests`` class; the report says what the product is, the fix as a
diff, and the tests' results on the kernel as shipped and with the fix, once they are run
(``--run``).
"""

import dataclasses
import difflib
import json
import pprint
import re
import subprocess
import sys
from pathlib import Path

from triton_overflow.repro.launch import (LaunchError, described, from_record, read,
                                          with_slots)

OPERAND_ROW = {re.compile(r"program_id\(0\)$"): lambda m: "program_id(0)",
               re.compile(r"value loaded from `(\w+)`$"): lambda m: f"load:{m[1]}"}
OPERAND_STRIDE = re.compile(r"int argument `(\w+)`$")


class ReproError(ValueError):
    """What stops a reproduction from being written, said to the user as it is."""


def main(args):
    """The ``repro`` command; the exit code (0 written, 3 a usage error)."""
    try:
        written = write(args.finding, args.launch, args.launches, Path(args.output),
                        args.findings, args.product)
    except (ReproError, LaunchError) as error:
        print(f"repro: {error}", file=sys.stderr)
        return 3
    test, report = written
    print(f"repro: wrote {test} and {report}")
    if args.run:
        results = run(test)
        report.write_text(report.read_text() + results)
        print(results)
    else:
        print(f"repro: run it with `python -m pytest {test}`; `--run` runs it and adds the "
              "results to the report")
    return 0


def write(where, launch_file, launches_file, output, findings_file=None, product=None):
    """(test file, report file) for the finding at ``where`` (``file:line``)."""
    file, _, line = where.rpartition(":")
    if not file or not line.isdigit():
        raise ReproError(f"a finding is FILE:LINE (as the static check prints it); got {where!r}")
    finding = _finding(Path(file), int(line), findings_file, product)
    launch = _launch(finding, launch_file, launches_file)
    attributes = _attributes(finding, launch, output)
    output.mkdir(parents=True, exist_ok=True)
    stem = f"{finding['kernel'].strip('_')}_{Path(finding['file']).stem}_{finding['line']}"
    test = output / f"test_overflow_{stem}.py"
    test.write_text(_test_text(finding, attributes, stem))
    report = output / f"overflow_{stem}.md"
    report.write_text(_report_text(finding, test, attributes))
    return test, report


def _finding(file, line, findings_file, product):
    if findings_file:
        try:
            report = json.loads(Path(findings_file).read_text())
        except (OSError, json.JSONDecodeError) as error:
            raise ReproError(f"cannot read {findings_file}: {error}") from None
    else:
        if not file.is_file():
            raise ReproError(f"no file {file}")
        completed = subprocess.run([sys.executable, "-m", "triton_overflow", "lint", str(file),
                                    "--format", "json"],
                                   capture_output=True, text=True)
        try:
            report = json.loads(completed.stdout)
        except json.JSONDecodeError:
            raise ReproError(f"the static check of {file} failed:\n{completed.stderr[-2000:]}") \
                from None
    findings = [f for k in report.get("kernels", []) for f in k.get("findings", [])
                if Path(f["file"]).resolve() == file.resolve() and f["line"] == line]
    if product:
        findings = [f for f in findings if f["product"] == product]
    if not findings:
        raise ReproError(f"the static check reports no finding at {file}:{line}"
                         + (f" with product `{product}`" if product else ""))
    if len(findings) > 1:
        products = ", ".join(f"`{f['product']}` ({f['kernel']})" for f in findings)
        raise ReproError(f"{file}:{line} has {len(findings)} findings: {products}; choose one "
                         "with --product")
    return findings[0]


def _launch(finding, launch_file, launches_file):
    if launch_file:
        return read(launch_file)
    if not launches_file:
        raise ReproError("a reproduction needs a launch of the kernel: --launch FILE (a few "
                         "lines: see `triton-overflow repro --help`) or --launches FILE (written "
                         "by `triton-overflow record` around a small test of the kernel)")
    try:
        data = json.loads(Path(launches_file).read_text())
    except (OSError, json.JSONDecodeError) as error:
        raise ReproError(f"cannot read {launches_file}: {error}") from None
    records = [r for r in data.get("launches", []) if r["kernel"] == finding["kernel"]
               and Path(r["file"]).resolve() == Path(finding["file"]).resolve()]
    if not records:
        raise ReproError(f"{launches_file} records no launch of {finding['kernel']} "
                         f"({finding['file']}): record a test that launches it")
    launch = from_record(max(records, key=lambda r: sum(x["count"] for x in r["launches"])))
    return dataclasses.replace(launch, file=finding["file"])


def _attributes(finding, launch, output):
    if not finding.get("tensors"):
        raise ReproError(f"the finding at {finding['file']}:{finding['line']} does not say which "
                         "tensor its product addresses")
    rows_from = stride = None
    for operand in finding["operands"]:
        for pattern, rows in OPERAND_ROW.items():
            if (match := pattern.match(operand)) and rows_from is None:
                rows_from = rows(match)
                break
        else:
            if (match := OPERAND_STRIDE.match(operand)) and stride is None:
                stride = match[1]
    if rows_from is None:
        raise ReproError(f"`{finding['product']}`: its row is {' and '.join(finding['operands'])}; "
                         "a reproduction is written for a row that is program_id(0) or a value "
                         "loaded from an index table (write a Case for other rows)")
    huge = finding["tensors"][0]
    if huge not in launch.tensors:
        raise ReproError(f"the launch has no tensor argument `{huge}`, which the product "
                         "addresses")
    if rows_from.startswith("load:"):
        launch = with_slots(launch, huge)
    root = Path(finding["file"]).resolve()
    for _ in Path(finding["file"]).parts:
        root = root.parent
    fix = finding.get("fix") or {}
    return {"root": _relative(root, output.resolve()), "source": finding["file"],
            "kernel": finding["kernel"], "line": finding["line"],
            "product": finding["product"], "huge": huge, "rows_from": rows_from,
            "stride": stride, "fix": {"line": fix.get("line"), "replace": fix.get("replace"),
                                      "with": fix.get("with")},
            "launch_description": described(launch)}


def _relative(path, start):
    import os
    return Path(os.path.relpath(path, start)).as_posix()


def _class_name(stem):
    return "".join(part.capitalize() for part in re.split(r"[^0-9a-zA-Z]+", stem) if part)


def _test_text(finding, attributes, stem):
    name = _class_name(stem)
    body = "\n".join(f"    {key} = {pprint.pformat(value, width=88, sort_dicts=False)}"
                     .replace("\n", "\n" + " " * (len(key) + 7))
                     for key, value in attributes.items())
    return f'''"""An i32 offset overflow in `{finding["kernel"]}` ({finding["file"]}:{finding["line"]}):
`{finding["product"]}`.

Written by `triton-overflow repro`. Run it with `python -m pytest {{this file}}` where the
suite is installed (pip install triton-overflow-suite): on a CPU the interpreter tests run,
on a CUDA GPU the GPU tests too. The kernel is the engine's own, loaded from its source;
the tensor `{attributes["huge"]}` is taken past 2**31 elements with its highest rows planted as
copies of row 0 (well under 1 GiB of memory). The tests of the kernel as shipped fail while
the product wraps, naming the line; the tests of the kernel with the fix pass.
"""

from triton_overflow.repro import Reproduction, ReproductionTests


class {name}(Reproduction):
{body}


AS_SHIPPED = {name}()
WIDENED = {name}(widened=True)


class Test{name}(ReproductionTests):
    reproductions = [AS_SHIPPED, WIDENED]
'''


def _report_text(finding, test, attributes):
    fix = finding.get("fix") or {}
    diff = ""
    path = Path(finding["file"])
    if fix.get("line") and path.is_file():
        lines = path.read_text().splitlines(keepends=True)
        old = lines[fix["line"] - 1]
        new = old.replace(fix["replace"], fix["with"]) if fix["replace"] in old else None
        if new is not None:
            diff = "".join(difflib.unified_diff([old], [new], f"a/{finding['file']}",
                                                f"b/{finding['file']}", n=0))
            diff = re.sub(r"^@@ -\d+ \+\d+ @@", f"@@ -{fix['line']} +{fix['line']} @@", diff,
                          flags=re.M)
    reach = finding.get("reach") or finding.get("headroom") or ""
    arguments = attributes["launch_description"]["arguments"]
    stride = arguments.get(attributes["stride"]) if attributes["stride"] else None
    if isinstance(stride, int) and stride > 0:
        first = -(-2**31 // stride)
        reach = (f"{reach}; at the launch's row stride {stride:,} (`{attributes['stride']}`), "
                 f"from row {first:,} of `{attributes['huge']}`")
    return f"""# i32 offset overflow: `{finding["kernel"]}`, {finding["file"]}:{finding["line"]}

- product: `{finding["product"]}` ({" x ".join(finding["operands"])})
- addresses: {", ".join(f"`{t}`" for t in finding.get("tensors", []))}
- wraps: {reach if isinstance(reach, str) else json.dumps(reach)}
- why it is an error: {finding.get("why", "")}
- test: `{test.name}` (`python -m pytest {test.name}`)

## The fix

{fix.get("text", "(none proposed)")}

```diff
{diff.rstrip() or "(the fix's line is not in the file)"}
```
"""


def run(test):
    """Run the generated tests; their results as a report section."""
    completed = subprocess.run([sys.executable, "-m", "pytest", str(test), "-q", "-rA",
                                "-p", "no:cacheprovider", "--tb=line"],
                               capture_output=True, text=True, cwd=test.parent)
    lines = [line for line in completed.stdout.splitlines()
             if line.startswith(("PASSED", "FAILED", "SKIPPED", "ERROR"))]
    summary = completed.stdout.strip().splitlines()[-1:] or ["(no output)"]
    return ("\n## Results\n\n```\n" + "\n".join(lines + summary)[-6000:] + "\n```\n")
