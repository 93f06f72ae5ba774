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

from triton_overflow.repro.launch import (LaunchError, check_arguments, described,
                                          from_record, parse, read, with_slots)

PROGRAM = re.compile(r"program_id\([012]\)")
LOOP = re.compile(r"loop variable over int argument `(\w+)`")
LOADED = re.compile(r"value loaded from `(\w+)`")
ROWS_FROM = re.compile(r"program_id\([012]\)|(loop|load):\w+")
POSITION = re.compile(r"program_id\([012]\)|loop variable over .*|block offsets|constant")
STRIDE = re.compile(r"int argument `(\w+)`")


class ReproError(ValueError):
    """What stops a reproduction from being written, said to the user as it is."""


def main(args):
    """The ``repro`` command; the exit code (0 written, and with ``--run`` reproduced; 1
    written, but ``--run`` found it does not reproduce; 3 a usage error)."""
    try:
        written = write(args.finding, args.launch, args.launches, Path(args.output),
                        args.findings, args.product, args.rows_from)
    except (ReproError, LaunchError) as error:
        print(f"repro: {error}", file=sys.stderr)
        return 3
    test, report = written
    print(f"repro: wrote {test} and {report}")
    if args.run:
        results, seconds, reproduces = run(test, int(args.finding.rpartition(":")[2]))
        report.write_text(report.read_text() + results)
        if seconds:
            test.write_text(test.read_text().replace("\n    seconds = {}\n",
                                                     f"\n    seconds = {seconds!r}\n", 1))
        print(results)
        if not reproduces:
            return 1
    else:
        print(f"repro: run it with `python -m pytest {test}`; `--run` runs it and adds the "
              "results to the report")
    return 0


def write(where, launch_file, launches_file, output, findings_file=None, product=None,
          rows_from=None):
    """(test file, report file) for the finding at ``where`` (``file:line``); ``rows_from``,
    where given, says where the product's row comes from instead of the finding's operands."""
    file, _, line = where.rpartition(":")
    if not file or not line.isdigit():
        raise ReproError(f"a finding is FILE:LINE (as the static check prints it); got {where!r}")
    if rows_from is not None and not ROWS_FROM.fullmatch(rows_from):
        raise ReproError(f"--rows-from is program_id(AXIS), loop:ARGUMENT or load:TABLE; got "
                         f"{rows_from!r}")
    finding, report = _finding(Path(file), int(line), findings_file, product)
    inferred, stride = _row_and_stride(finding, required=rows_from is None)
    rows_from = rows_from or inferred
    launch = _launch(finding, launch_file, launches_file, rows_from)
    parameters = _parameters(Path(finding["kernel_file"]), finding["kernel"])
    if parameters is not None:
        check_arguments(launch, parameters)
    attributes = _attributes(finding, launch, output, rows_from, stride,
                             _same_row_fixes(report, finding, rows_from))
    note = _offsets_note(parse(attributes["launch_description"]), rows_from)
    if note:
        print(f"repro: note: {note}", file=sys.stderr)
    output.mkdir(parents=True, exist_ok=True)
    stem = f"{finding['kernel'].strip('_')}_{Path(finding['file']).stem}_{finding['line']}"
    test = output / f"test_overflow_{stem}.py"
    test.write_text(_test_text(finding, attributes, stem, test.name))
    report = output / f"overflow_{stem}.md"
    report.write_text(_report_text(finding, test, attributes))
    return test, report


def _finding(file, line, findings_file, product):
    if findings_file:
        try:
            report = json.loads(Path(findings_file).read_text())
        except (OSError, json.JSONDecodeError) as error:
            raise ReproError(f"cannot read {findings_file}: {error}") from None
        findings = _at(report, file, line, product)
    else:
        if not file.is_file():
            raise ReproError(f"no file {file}")
        report = _lint(file)
        findings = _at(report, file, line, product)
        package = Path(file.parts[0]) if len(file.parts) > 1 else None
        if not findings and not _elsewhere(report, file, []) and package is not None and \
                package.is_dir():
            # A jit helper's products are found in the kernels that call it, anywhere.
            print(f"repro: no kernel of {file} reports an error in it; checking the kernels of "
                  f"{package}/ that may call its helpers", file=sys.stderr)
            report = _lint(package)
            findings = _at(report, file, line, product)
    if not findings:
        raise ReproError(f"the static check reports no finding at {file}:{line}"
                         + (f" with product `{product}`" if product else "")
                         + _elsewhere(report, file, "; it has no error"))
    if len({(f["product"], f["kernel"]) for f in findings}) > 1:
        products = ", ".join(f"`{f['product']}` ({f['kernel']})" for f in findings)
        raise ReproError(f"{file}:{line} has {len(findings)} findings: {products}; choose one "
                         "with --product")
    return findings[0], report


def _same_row_fixes(report, finding, rows_from):
    """The fixes of the kernel's other products whose row is the finding's, in the finding's
    file: widened alone, the finding's product leaves theirs, which the test reaches too. A
    warning counts as an error does (the envelope may judge the other tensor small; the test's
    row wraps it all the same)."""
    own = finding.get("fix") or {}
    seen = {(own.get("line"), own.get("replace"))}
    fixes = []
    for kernel in report.get("kernels", []):
        for other in kernel.get("findings", []):
            fix = other.get("fix") or {}
            key = (fix.get("line"), fix.get("replace"))
            if other.get("level") not in ("error", "warning") or \
                    other["kernel"] != finding["kernel"] or \
                    other["file"] != finding["file"] or key in seen or not fix.get("line") or \
                    _row_and_stride(other, required=False)[0] != rows_from:
                continue
            seen.add(key)
            fixes.append({"line": fix["line"], "replace": fix["replace"], "with": fix["with"]})
    return sorted(fixes, key=lambda fix: fix["line"])


def _elsewhere(report, file, otherwise):
    """Where ``report`` has errors in ``file``, said; else ``otherwise``."""
    lines = sorted({f["line"] for k in report.get("kernels", []) for f in k.get("findings", [])
                    if Path(f["file"]).resolve() == file.resolve()
                    and f.get("level") == "error"})
    return f"; its errors are at lines {', '.join(map(str, lines))}" if lines else otherwise


def _lint(path):
    completed = subprocess.run([sys.executable, "-m", "triton_overflow", "lint", str(path),
                                "--format", "json"], capture_output=True, text=True)
    try:
        return json.loads(completed.stdout)
    except json.JSONDecodeError:
        raise ReproError(f"the static check of {path} failed:\n{completed.stderr[-2000:]}") \
            from None


def _at(report, file, line, product):
    """The findings of ``report`` at ``file:line`` (with ``product``), each with the file of
    the kernel it was found in."""
    return [dict(f, kernel_file=k["file"]) for k in report.get("kernels", [])
            for f in k.get("findings", [])
            if Path(f["file"]).resolve() == file.resolve() and f["line"] == line
            and (product is None or f["product"] == product)]


def _launch(finding, launch_file, launches_file, rows_from):
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
               and Path(r["file"]).resolve() == Path(finding["kernel_file"]).resolve()]
    if not records:
        raise ReproError(f"{launches_file} records no launch of {finding['kernel']} "
                         f"({finding['kernel_file']}): record a test that launches it")
    huge = _huge(finding)
    record = max(records, key=lambda r: sum(x["count"] for x in r["launches"]))
    axis = int(rows_from[11]) if rows_from.startswith("program_id(") else 0
    launch = from_record(record, huge, rows_from.startswith("load:"), axis)
    return dataclasses.replace(launch, file=finding["kernel_file"])


def _parameters(file, kernel):
    """(name, has a default) of each parameter of ``kernel`` as ``file`` defines it, or None
    where it is not a plain ``def`` there."""
    import ast
    try:
        tree = ast.parse(file.read_text())
    except (OSError, SyntaxError):
        return None
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == kernel:
            arguments = node.args.posonlyargs + node.args.args
            defaults = len(node.args.defaults)
            found = [(a.arg, index >= len(arguments) - defaults)
                     for index, a in enumerate(arguments)]
            found += [(a.arg, d is not None) for a, d in zip(node.args.kwonlyargs,
                                                             node.args.kw_defaults)]
            return found
    return None


def _huge(finding):
    if not finding.get("tensors"):
        raise ReproError(f"the finding at {finding['file']}:{finding['line']} does not say which "
                         "tensor its product addresses")
    return finding["tensors"][0]


def _row_and_stride(finding, required=True):
    """(rows_from, stride argument or None) of a finding, from what its operands are made of;
    rows_from None where not ``required`` and the operands do not say."""
    rows_from = stride = None
    for operand in finding["operands"]:
        parts = set(operand.split(" and "))
        loop = [LOOP.fullmatch(part) for part in parts]
        programs = [part for part in parts if PROGRAM.fullmatch(part)]
        if rows_from is None and len(programs) == 1 and \
                parts - set(programs) <= {"block offsets", "constant"}:
            rows_from = programs[0]
        elif rows_from is None and len(parts) == 1 and loop[0]:
            rows_from = f"loop:{loop[0][1]}"
        elif rows_from is None and len(tables := {m[1] for m in map(LOADED.search, parts)
                                                  if m}) == 1 and \
                all(LOADED.fullmatch(part) or POSITION.fullmatch(part) for part in parts):
            rows_from = f"load:{tables.pop()}"  # an index, or an offset plus a position
        elif stride is None and len(parts) == 1 and (match := STRIDE.fullmatch(operand)):
            stride = match[1]
    if rows_from is None and required:
        raise ReproError(f"`{finding['product']}`: its row is {' and '.join(finding['operands'])}; "
                         "a reproduction is written for a row that is a program id (times a "
                         "block or not), a loop over an int argument, or an index loaded from "
                         "one table (alone, or an offset plus a program id or a loop: a "
                         "position); where the launch takes another path of the kernel than "
                         "the finding describes, say which with --rows-from")
    return rows_from, stride


def _attributes(finding, launch, output, rows_from, stride, also_fix=()):
    huge = _huge(finding)
    if huge not in launch.tensors:
        raise ReproError(f"the launch has no tensor argument `{huge}`, which the product "
                         "addresses")
    if rows_from.startswith("load:") and not launch.slots:
        launch = with_slots(launch, huge)
    root = Path(finding["kernel_file"]).resolve()
    for _ in Path(finding["kernel_file"]).parts:
        root = root.parent
    fix = finding.get("fix") or {}
    where = {} if finding["file"] == finding["kernel_file"] else {"line_in": finding["file"]}
    return {"root": _relative(root, output.resolve()), "source": finding["kernel_file"],
            "kernel": finding["kernel"], **where, "line": finding["line"],
            "product": finding["product"], "huge": huge, "rows_from": rows_from,
            "stride": stride, "fix": {"line": fix.get("line"), "replace": fix.get("replace"),
                                      "with": fix.get("with")},
            **({"also_fix": list(also_fix)} if also_fix else {}),
            "seconds": {},
            "launch_description": described(launch)}


def _offsets_note(launch, rows_from):
    """What to change where the row's table looks like offsets (a cumulative count that ends
    at the huge tensor's rows) and its values do not place the slot: filled with the slot, such
    a table puts request 0 over the rows below it, and no request at the slot."""
    if not rows_from.startswith("load:"):
        return None
    name = rows_from.removeprefix("load:")
    table = launch.tensors.get(name)
    if table is None or not table.values or table.places_slot or len(table.values) < 2:
        return None
    values = list(table.values)
    if values != sorted(values) or values[-1] != launch.described_slots:
        return None
    return (f"`{name}` holds {values}, a cumulative count ending at the {values[-1]} rows of "
            "the tensor the product addresses: if the kernel reads a request's rows from it, "
            f"describe the launch with {name} = {{..., values = [\"slot\", \"slot + 1\"]}} "
            "and rows = 2, so that a request starts at the slot checked (docs/repro.md, \"A "
            "table of offsets\"); `--run` says whether the test reproduces the wrap")


def _relative(path, start):
    import os
    return Path(os.path.relpath(path, start)).as_posix()


def _class_name(stem):
    return "".join(part.capitalize() for part in re.split(r"[^0-9a-zA-Z]+", stem) if part)


def _test_text(finding, attributes, stem, test_name):
    name = _class_name(stem)
    body = "\n".join(f"    {key} = {pprint.pformat(value, width=88, sort_dicts=False)}"
                     .replace("\n", "\n" + " " * (len(key) + 7))
                     for key, value in attributes.items())
    return f'''"""An i32 offset overflow in `{finding["kernel"]}` ({finding["file"]}:{finding["line"]}):
`{finding["product"]}`.

Written by `triton-overflow repro`. Run it with `python -m pytest {test_name}` where the
suite is installed (pip install triton-overflow-suite): on a CPU the interpreter tests run,
on a CUDA GPU the GPU tests too. The kernel is the engine's own, loaded from its source;
the tensor `{attributes["huge"]}` is taken past 2**31 elements with its highest rows planted as
copies of row 0 (the skip reasons state the memory). The tests of the kernel as shipped fail while
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


def _diff(path, fixes):
    """The unified diff of ``fixes`` written into ``path`` as the test writes them in
    (``edited_text``), a hunk a line."""
    from triton_overflow.lint.verify import edited_text
    if not path.is_file():
        return ""
    text = path.read_text()
    lines = text.splitlines(keepends=True)
    hunks = []
    for fix in sorted(fixes, key=lambda fix: fix.get("line") or 0):
        edited = edited_text(text, fix["line"], fix["replace"], fix["with"]) \
            if fix.get("line") else None
        if edited is None:
            continue
        old, new = lines[fix["line"] - 1], edited.splitlines(keepends=True)[fix["line"] - 1]
        hunk = "".join(difflib.unified_diff([old], [new], f"a/{path}", f"b/{path}", n=0))
        hunk = re.sub(r"^@@ -\d+ \+\d+ @@", f"@@ -{fix['line']} +{fix['line']} @@", hunk,
                      flags=re.M)
        hunks.append(hunk if not hunks else hunk.split("\n", 2)[2])
    return "".join(hunks)


def _report_text(finding, test, attributes):
    fix = finding.get("fix") or {}
    also = attributes.get("also_fix", [])
    diff = _diff(Path(finding["file"]), [attributes["fix"], *also])
    reach = finding.get("reach")
    if isinstance(reach, int):
        reach = (f"the envelope lets {', '.join(f'`{t}`' for t in finding.get('tensors', []))} "
                 f"reach {reach:,} elements (2**31 is 2,147,483,648)")
    reach = reach or finding.get("headroom") or ""
    arguments = attributes["launch_description"]["arguments"]
    stride = arguments.get(attributes["stride"]) if attributes["stride"] else None
    if isinstance(stride, int) and stride > 0:
        first = -(-2**31 // stride)
        reach = (f"{reach}; at the launch's row stride {stride:,} (`{attributes['stride']}`), "
                 f"from row {first:,} of `{attributes['huge']}`")
    return f"""# i32 offset overflow: `{finding["kernel"]}`, {finding["file"]}:{finding["line"]}

- product: `{finding["product"]}` ({" x ".join(finding["operands"])})
- addresses: {", ".join(f"`{t}`" for t in finding.get("tensors", []))}
- wraps: {reach}
- why it is an error: {finding.get("why", "")}
- test: `{test.name}` (`python -m pytest {test.name}`)

## The fix

{fix.get("text", "(none proposed)")}{_also_text(also)}

```diff
{diff.rstrip() or "(the fix's line is not in the file)"}
```
"""


def _also_text(also):
    if not also:
        return ""
    lines = ("line " if len(also) == 1 else "lines ") + ", ".join(str(fix["line"]) for fix in also)
    return (f"; and, for the other products of the same row in this kernel ({lines}), "
            "their own fixes, which the test with the fix writes in too (widened alone, the "
            "finding's product leaves theirs to wrap)")


DURATION = re.compile(r"([0-9.]+)s call +\S+::(test_interpreter|test_gpu)\[")


WRAP_SHOWN = re.compile(r"(?:as shipped|with the fix), (?:in the interpreter|on the GPU "
                        r"\([^)]*\)): (?:an i32 product wraps at [^:\n]+:\d+: int32 [^(\n]*|"
                        r"the kernel faults[^\n]{0,80}|a checked row differs[^\n]{0,120})")
SHIPPED_AT = re.compile(r"as shipped, in the interpreter: an i32 product wraps at [^:\n]*?"
                        r"([^/\s]+\.py):(\d+):")


def run(test, finding_line=None):
    """Run the generated tests: (their results as a report section: each test's verdict, what
    each failure showed, whether that is what a reproduction should show, and where the
    shipped kernel wrapped if not at ``finding_line``; the slowest test of each tier that ran,
    in seconds; whether it reproduces)."""
    completed = subprocess.run([sys.executable, "-m", "pytest", str(test.resolve()), "-q",
                                "-rA", "-p", "no:cacheprovider", "--tb=short", "--durations=0",
                                "--durations-min=0"],
                               capture_output=True, text=True, cwd=test.parent)
    verdicts = [(line.split()[0], line.split()[1].rsplit("::", 1)[-1])
                for line in completed.stdout.splitlines()
                if line.startswith(("PASSED", "FAILED", "ERROR")) and len(line.split()) > 1]
    seconds: dict[str, float] = {}
    for match in DURATION.finditer(completed.stdout):
        tier = match[2].removeprefix("test_")
        if any(name.startswith(match[2]) for _, name in verdicts):
            seconds[tier] = max(seconds.get(tier, 0.0), round(float(match[1]), 1))
    shown = sorted({match[0] for match in WRAP_SHOWN.finditer(completed.stdout)})
    shown = [re.sub(r"\S*/(?=[^/\s]+\.py[ :])", "", line) for line in shown]
    wrong = [name for verdict, name in verdicts
             if (verdict == "FAILED") != ("as-shipped" in name) or verdict == "ERROR"]
    ran_gpu = any("test_gpu" in name for _, name in verdicts)
    last = completed.stdout.strip().splitlines()[-1:] or ["(no output)"]
    reproduces = bool(verdicts) and not wrong
    verdict = ("as a reproduction should be: every test of the kernel as shipped fails, every "
               "test with the fix passes" if reproduces else
               "NOT as a reproduction should be: " + (", ".join(wrong) or "no test ran"))
    elsewhere = sorted({f"{match[1]}:{match[2]}" for match in
                        SHIPPED_AT.finditer(completed.stdout)
                        if finding_line is not None and int(match[2]) != finding_line})
    if elsewhere:
        verdict += (f"; the kernel as shipped wrapped first at {', '.join(elsewhere)}, not at the "
                    f"finding's line {finding_line}: an earlier product of the same row wraps "
                    "before it")
    if not verdicts:
        last = [*completed.stdout.strip().splitlines()[-6:], *completed.stderr.strip()
                .splitlines()[-6:]] or ["(no output)"]
    section = "\n".join([
        "", "## Results", "", f"{verdict}{'' if ran_gpu else ' (no GPU here: GPU tests skipped)'}.",
        "", "```", *[f"{v} {name}" for v, name in verdicts], *last, "```", "",
        "What the failing tests showed:", "", "```", *(shown or ["(no failure)"]), "```", ""])
    return section, seconds, reproduces
