"""Write the results of a folder of reproductions into their reports.

    python ci/real_trees/repro_results.py FOLDER "vLLM 425c4eaf" \
        "interpreter (2-core CPU)=interp-junit.xml" "H200, aliased device memory=gpu-junit.xml"

Each JUnit XML file is a run of the folder's tests (``--junitxml``); each test file's report
(``overflow_<stem>.md`` beside ``test_overflow_<stem>.py``) gets a section "Results at LABEL"
with one row per test: where it ran, the kernel (as shipped or widened), the wrap, what it
showed, and its time. A section of the same label is replaced.
"""

import ast
import re
import sys
import xml.etree.ElementTree as ElementTree
from pathlib import Path

TEST_ID = re.compile(r"test_(?:interpreter|gpu)\[.*-(as-shipped|widened)-(negative|aliased)\]")
SHOWN = re.compile(r"(?:in the interpreter|on the GPU \([^)]*\)): (.*)")


def rows_of(junit: Path, where: str, folder: Path) -> dict[str, list[str]]:
    """Report rows of each test module in a JUnit file."""
    rows: dict[str, list[str]] = {}
    sources: dict[str, str] = {}
    for case in ElementTree.parse(junit).iter("testcase"):
        test = TEST_ID.fullmatch(case.get("name", ""))
        if test is None or case.find("skipped") is not None:
            continue
        module = case.get("classname", "").split(".")[0]
        failure = case.find("failure")
        if failure is not None:
            message = (failure.get("message") or "").splitlines()[0]
            shown = SHOWN.search(message)
            text = shown[1] if shown else message
            if module not in sources:
                found = re.search(r"^    source = '(.*)'$",
                                  (folder / f"{module}.py").read_text(), re.M)
                sources[module] = found[1] if found else "\0"
            text = re.sub(r"\S*/(?=" + re.escape(sources[module]) + ")", "", text)
            result = "FAILED: " + text[:140].split(" = ")[0]
        else:
            result = "passed" + _measured(case)
        kernel = "as shipped" if test[1] == "as-shipped" else "widened"
        rows.setdefault(module, []).append(
            f"| {where} | {kernel} | {test[2]} | {result} | {float(case.get('time', 0)):.1f} s |")
    return rows


def _measured(case: ElementTree.Element) -> str:
    for prop in case.iter("property"):
        if prop.get("name") == "case":
            try:
                value = ast.literal_eval(prop.get("value", ""))
            except (ValueError, SyntaxError):
                return ""
            peak = value.get("peak_gib")
            device = f", peak {peak:.3f} GiB on the device" if peak else ""
            return f" ({value.get('seconds')} s in the case{device})"
    return ""


def main(folder: str, label: str, *runs: str) -> int:
    gathered: dict[str, list[str]] = {}
    for run in runs:
        where, _, junit = run.partition("=")
        for module, rows in rows_of(Path(junit), where, Path(folder)).items():
            gathered.setdefault(module, []).extend(sorted(rows))
    heading = f"## Results at {label}"
    for module, rows in sorted(gathered.items()):
        report = Path(folder) / (module.replace("test_overflow_", "overflow_", 1) + ".md")
        if not report.is_file():
            print(f"no report {report} for {module}", file=sys.stderr)
            continue
        text = report.read_text()
        kept = text.split(f"\n{heading}\n")[0].rstrip("\n")
        table = ["| where | kernel | wrap | result | test time |", "|---|---|---|---|---|", *rows]
        report.write_text(f"{kept}\n\n{heading}\n\n" + "\n".join(table) + "\n")
        print(f"{report}: {len(rows)} results")
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
