"""The static check's report as text, JSON or SARIF 2.1.0 (for code-scanning views)."""

import json
from pathlib import Path

RULE = "i32-offset-product"
NOT_CHECKED_RULE = "kernel-not-checked"
_HELP = ("An int32 index (a program id, a loop variable or a value loaded from an int32 table) "
         "times an int32 stride wraps once the product passes 2**31 - 1: an illegal memory "
         "access or silently wrong rows. Widen the index first: `row.to(tl.int64) * stride`.")


def shown(file, root=None):
    root = Path.cwd() if root is None else Path(root)
    try:
        return str(Path(file).resolve().relative_to(root.resolve()))
    except (ValueError, OSError):
        return str(file)


def finding_line(finding, root=None):
    twin = " [int32 twin]" if finding.twin_of else ""
    return (f"{shown(finding.file, root)}:{finding.line}: {finding.level}: {finding.kernel}: "
            f"{finding.message()}{twin}")


def as_text(report, paths=(), root=None):
    lines = [f"note: {note}" for note in report.notes]
    ordered = sorted(report.findings, key=lambda f: (f.file, f.line, f.product, f.kernel))
    lines += [finding_line(f, root) for f in ordered]
    lines += [problem.format(root) for problem in report.problems]
    checked = len(report.results)
    flagged = sum(1 for r in report.results if r.findings)
    summary = (f"lint: {checked} {report.label} checked, {flagged} with findings, "
               f"{len(report.findings)} findings")
    counts = [f"{sum(1 for f in report.findings if f.level == level)} {level}s"
              for level in ("error", "warning", "note")]
    if report.findings:
        summary += " (" + ", ".join(counts) + ")"
    if report.baseline is not None:
        summary += f"; {len(report.failing)} not in the baseline"
    if report.problems:
        summary += f"; {len(report.problems)} could not be checked"
    lines.append(summary)
    if not checked and not report.problems:
        lines.append("lint: no @triton.jit kernel found under " + " ".join(map(str, paths)))
    return "\n".join(lines) + "\n"


def as_json(report, root=None):
    return json.dumps({
        "exit_code": report.exit_code,
        "kernels": [{"kernel": r.name, "file": shown(r.file, root), "line": r.line,
                     "variants_compiled": r.variants, "twin": bool(r.twin_of),
                     "launch": r.launch or None,
                     "findings": [_finding_dict(f, root) for f in r.findings]}
                    for r in report.results],
        "not_checked": [{"where": p.where, "kernel": p.kernel or None, "reason": p.reason}
                        for p in report.problems],
        "notes": report.notes,
    }, indent=1) + "\n"


def _finding_dict(finding, root):
    return {"file": shown(finding.file, root), "line": finding.line, "column": finding.column,
            "kernel": finding.kernel, "product": finding.product,
            "operands": list(finding.operands), "headroom": finding.headroom or None,
            "largest": finding.largest, "level": finding.level, "why": finding.why,
            "stand_ins": list(finding.stand_ins), "fingerprint": fingerprint(finding, root),
            "message": finding.message()}


def fingerprint(finding, root=None):
    """Stable across line moves: the file, the kernel and the product as written."""
    import hashlib
    text = f"{shown(finding.file, root)}|{finding.kernel}|{' '.join(finding.product.split())}"
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def as_sarif(report, root=None):
    from triton_overflow import __version__
    results = []
    for finding in report.findings:
        results.append({
            "ruleId": RULE, "level": finding.level,
            "message": {"text": f"{finding.kernel}: {finding.message()}"},
            "locations": [_location(finding.file, finding.line, finding.column + 1, root)],
            "partialFingerprints": {"kernelProduct/v1": fingerprint(finding, root)},
        })
    for problem in report.problems:
        file, _, line = problem.where.rpartition(":")
        if not line.isdigit():
            file, line = problem.where, "1"
        results.append({
            "ruleId": NOT_CHECKED_RULE, "level": "warning",
            "message": {"text": problem.format(root)},
            "locations": [_location(file, int(line) or 1, 1, root)],
        })
    return json.dumps({
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {
                "name": "triton-overflow", "version": __version__,
                "rules": [
                    {"id": RULE, "name": "Int32OffsetProduct",
                     "shortDescription": {"text": "i32 multiply feeds a pointer offset"},
                     "fullDescription": {"text": _HELP}, "help": {"text": _HELP},
                     "defaultConfiguration": {"level": "error"}},
                    {"id": NOT_CHECKED_RULE, "name": "KernelNotChecked",
                     "shortDescription": {"text": "a kernel could not be checked"},
                     "fullDescription": {"text": "The kernel could not be compiled or imported "
                                         "for the static check; it was not analysed."},
                     "defaultConfiguration": {"level": "warning"}},
                ]}},
            "originalUriBaseIds": {"SRCROOT": {"uri": Path(root or Path.cwd()).resolve().as_uri()
                                               + "/"}},
            "results": results,
        }],
    }, indent=1) + "\n"


def _location(file, line, column, root):
    return {"physicalLocation": {
        "artifactLocation": {"uri": shown(file, root), "uriBaseId": "SRCROOT"},
        "region": {"startLine": max(1, int(line)), "startColumn": max(1, int(column))}}}


FORMATS = {"text": as_text, "json": as_json, "sarif": as_sarif}
