"""The static check's report as text, JSON or SARIF 2.1.0 (for code-scanning views)."""

import json
from pathlib import Path

from triton_overflow.lint.rules import RULES, KernelNotChecked
from triton_overflow.locations import shown

# The JSON report's schema (docs/json-report.md): fields are only added within a version;
# renaming or removing one, or changing its meaning, makes the next version.
JSON_SCHEMA_VERSION = 1
JSON_SCHEMA = Path(__file__).parent / "schemas" / f"lint-report-v{JSON_SCHEMA_VERSION}.json"


def finding_line(finding, root=None, baseline=None):
    twin = " [int32 twin]" if finding.twin_of else ""
    known = " [in the baseline]" if baseline is not None and baseline.known(finding, root) else ""
    return (f"{shown(finding.file, root)}:{finding.line}: {finding.level}: {finding.kernel}: "
            f"{finding.message()}{twin}{known}")


def fix_line(finding):
    """The finding's fix on a line of its own, or None."""
    if not finding.fix:
        return None
    checked = " (verified: compiled with it, the product gone)" if finding.fix.verified else ""
    return f"    fix: {finding.fix.describe()}{checked}"


def as_text(report, paths=(), root=None):
    lines = [f"note: {note}" for note in report.notes]
    ordered = sorted(report.findings, key=lambda f: (f.file, f.line, f.product, f.kernel))
    if report.top:
        from triton_overflow.lint.envelope import ranked
        ordered = ranked(ordered, report.top)
        lines.append(f"note: the {len(ordered)} of {len(report.findings)} findings that reach "
                     f"furthest past 2**31 (--top {report.top}), worst first")
    for finding in ordered:
        lines.append(finding_line(finding, root, report.baseline))
        if fix_line(finding):
            lines.append(fix_line(finding))
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


def as_github(report, root=None):
    """GitHub Actions workflow commands: an annotation per finding not in the baseline (error,
    warning, notice), per kernel that could not be checked, and per baseline entry with no
    reason or no finding left; then the summary line. GitHub shows an annotation on the
    pull request's diff where its line is among the changed ones."""
    annotate = {"error": "error", "warning": "warning", "note": "notice"}
    lines = []
    known = report.baseline.known if report.baseline is not None else (lambda f, r=None: False)
    ordered = sorted(report.findings, key=lambda f: (LEVEL_ORDER[f.level], f.file, f.line))
    for finding in ordered:
        if known(finding, root):
            continue
        message = f"{finding.kernel}: {finding.message()}"
        if finding.fix:
            message += f"\nFix: {finding.fix.describe()}"
        lines.append(_workflow_command(annotate[finding.level], message, {
            "file": shown(finding.file, root), "line": finding.line,
            "col": finding.column + 1, "title": f"int32 offset product in {finding.kernel}"}))
    for problem in report.problems:
        file, line = _problem_location(problem)
        lines.append(_workflow_command("warning", problem.format(root), {
            "file": shown(file, root), "line": line, "title": "kernel not checked"}))
    if report.baseline is not None:
        where = shown(report.baseline.path, root)
        for entry in report.baseline.unexplained():
            lines.append(_workflow_command("warning", f"{entry.describe()}: give the reason this "
                                           f"product cannot pass 2**31", {
                                               "file": where, "title": "baseline entry "
                                               "without a reason"}))
        for entry in report.baseline.stale(report, root):
            lines.append(_workflow_command("notice", f"{entry.describe()} matches no finding "
                                           f"any more: remove it (--prune-baseline)", {
                                               "file": where, "title": "stale baseline entry"}))
    lines.append(as_text(report, root=root).splitlines()[-1])
    return "\n".join(lines) + "\n"


LEVEL_ORDER = {"error": 0, "warning": 1, "note": 2}


def _workflow_command(command, message, properties):
    def escape(text, table):
        for character, code in table:
            text = str(text).replace(character, code)
        return text
    data = (("%", "%25"), ("\r", "%0D"), ("\n", "%0A"))
    prop = data + ((":", "%3A"), (",", "%2C"))
    fields = ",".join(f"{name}={escape(value, prop)}" for name, value in properties.items())
    return f"::{command} {fields}::{escape(message, data)}"


def as_json(report, root=None):
    return json.dumps({
        "schema_version": JSON_SCHEMA_VERSION,
        "exit_code": report.exit_code,
        "kernels": [{"kernel": r.name, "file": shown(r.file, root), "line": r.line,
                     "variants_compiled": r.variants, "twin": bool(r.twin_of),
                     "launch": r.launch or None,
                     "findings": [_finding_dict(f, root, report.baseline)
                                  for f in r.findings]}
                    for r in report.results],
        "not_checked": [{"where": p.where, "kernel": p.kernel or None, "reason": p.reason}
                        for p in report.problems],
        "notes": report.notes,
        "baseline": _baseline_dict(report, root),
        "seconds": {shown(file, root): round(seconds, 2)
                    for file, seconds in sorted(report.seconds.items())},
    }, indent=1) + "\n"


def _baseline_dict(report, root):
    baseline = report.baseline
    if baseline is None:
        return None
    return {"file": str(baseline.path), "new_findings": len(report.failing),
            "unexplained": [entry.as_dict() for entry in baseline.unexplained()],
            "stale": [entry.as_dict() for entry in baseline.stale(report, root)]}


def _finding_dict(finding, root, baseline=None):
    return {"file": shown(finding.file, root), "line": finding.line, "column": finding.column,
            "kernel": finding.kernel, "product": finding.product,
            "operands": list(finding.operands), "headroom": finding.headroom or None,
            "largest": finding.largest, "level": finding.level, "why": finding.why,
            "stand_ins": list(finding.stand_ins), "fingerprint": fingerprint(finding, root),
            "cast_after": finding.cast_after,
            "fix": finding.fix.as_dict() if finding.fix else None,
            "baselined": baseline is not None and baseline.known(finding, root),
            "tensors": list(finding.tensors), "reach": finding.reach,
            "message": finding.message()}


def fingerprint(finding, root=None):
    """Stable across line moves: the file, the kernel and the product as written."""
    import hashlib
    text = f"{shown(finding.file, root)}|{finding.kernel}|{' '.join(finding.product.split())}"
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def as_sarif(report, root=None):
    from triton_overflow import __version__
    from triton_overflow.lint.baseline import key as baseline_key
    results = []
    for finding in report.findings:
        text = f"{finding.kernel}: {finding.message()}"
        result = {
            "ruleId": finding.rule.id, "level": finding.level,
            "message": {"text": text + (f"\nFix: {finding.fix.describe()}" if finding.fix
                                        else "")},
            "locations": [_location(finding.file, finding.line, finding.column + 1, root)],
            "partialFingerprints": {"kernelProduct/v1": fingerprint(finding, root)},
        }
        fix = _sarif_fix(finding, root)
        if fix is not None:
            result["fixes"] = [fix]
        if report.baseline is not None:
            entry = report.baseline.entries.get(baseline_key(finding, root))
            result["baselineState"] = "unchanged" if entry else "new"
            if entry:
                result["suppressions"] = [{"kind": "external", "status": "accepted",
                                           "justification": entry.reason}]
        results.append(result)
    for problem in report.problems:
        file, line = _problem_location(problem)
        results.append({
            "ruleId": KernelNotChecked.id, "level": KernelNotChecked.default_level,
            "message": {"text": problem.format(root)},
            "locations": [_location(file, line, 1, root)],
        })
    return json.dumps({
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {
                "name": "triton-overflow", "version": __version__,
                "rules": [rule.sarif() for rule in RULES]}},
            "originalUriBaseIds": {"SRCROOT": {"uri": Path(root or Path.cwd()).resolve().as_uri()
                                               + "/"}},
            "results": results,
        }],
    }, indent=1) + "\n"


def _problem_location(problem):
    """(file, line) of a kernel or file that could not be checked (line 1 for a file)."""
    file, _, line = problem.where.rpartition(":")
    return (file, int(line) or 1) if line.isdigit() else (problem.where, 1)


def _sarif_fix(finding, root):
    """A SARIF fix (a replacement of the region the fix's source spans), or None where the fix
    is advice only or its source cannot be found where it says."""
    import linecache

    from triton_overflow.lint.verify import locate, region
    fix = finding.fix
    if fix is None or fix.with_ is None:
        return None
    text = "".join(linecache.getlines(finding.file))
    span = locate(text, fix.line, fix.replace)
    if span is None:
        return None
    start_line, start_column, end_line, end_column = region(text, span)
    return {"description": {"text": fix.describe()}, "artifactChanges": [{
        "artifactLocation": {"uri": shown(finding.file, root), "uriBaseId": "SRCROOT"},
        "replacements": [{
            "deletedRegion": {"startLine": start_line, "startColumn": start_column,
                              "endLine": end_line, "endColumn": end_column},
            "insertedContent": {"text": fix.with_}}]}]}


def _location(file, line, column, root):
    return {"physicalLocation": {
        "artifactLocation": {"uri": shown(file, root), "uriBaseId": "SRCROOT"},
        "region": {"startLine": max(1, int(line)), "startColumn": max(1, int(column))}}}


FORMATS = {"text": as_text, "json": as_json, "sarif": as_sarif, "github": as_github}
