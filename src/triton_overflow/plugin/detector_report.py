"""The detector report: which kernel x detector cell each test fills, how each ended, and a
progress line as each cell completes.

One ``DetectorReport`` per pytest process, registered as a plugin and kept in ``config.stash``
(as pytest's junitxml plugin keeps its writer). A test names its cells with the ``covers`` and
``widening``/``widening_site`` marks; its outcome travels on the test report's
``user_properties``, so that under pytest-xdist the controller, where the report is written,
sees every worker's. Each entry also carries how many tests its cell holds and how many cells
the run has, which is how the controller knows a cell is complete without collecting anything.
"""

import json
from collections import Counter, defaultdict

import pytest

CELL = "overflow-cell"
WIDENING_CELL = "overflow-widening"
COST = "overflow-interpreter-cost"  # set by the interpreter huge-case tests (tiers)
DETAIL = "overflow-detail"  # a test's user property: what its detector found
SLOWEST = 5
GOOD = {"fixed": "passed", "overflow": "overflows", "twin": "twin caught"}
BAD = {"fixed": "FAILED", "overflow": "STOPPED OVERFLOWING?", "twin": "TWIN MISSED"}


def cell_verdict(results):
    """The report's text for one kernel x detector cell, and its failures (one line each)."""
    parts, failures = [], []
    for role, good in GOOD.items():
        mine = [r for r in results if r["role"] == role]
        if not mine:
            continue
        failed = [r for r in mine if r["outcome"] == "failed"]
        skipped = [r for r in mine if r["outcome"] == "skipped"]
        if failed:
            parts.append(BAD[role])
            failures += [f"{r['test']}: {r['reason']}" for r in failed]
        elif len(skipped) == len(mine):
            parts.append(f"{'twin skipped' if role == 'twin' else 'skipped'}: {skipped[0]['reason']}")
        elif role == "overflow":
            details = sorted({r.get("detail") or "" for r in mine} - {""})
            parts.append(details[0] if details else good)
        else:
            peaks = [r["peak_gib"] for r in mine if r.get("peak_gib") is not None]
            parts.append(good + (f" (peak {max(peaks):.2f} GiB)" if peaks else ""))
    if len(parts) == 2 and parts[1] == f"twin {parts[0]}":
        parts = parts[:1]  # the same skip reason for both roles
    return ", ".join(parts), failures


def widening_verdict(results):
    """One line for a kernel's per-widening mutants under one detector."""
    counts = Counter({"failed": "SURVIVED", "skipped": "skipped"}.get(r["outcome"], "caught")
                     for r in results)
    return ", ".join(f"{counts[k]} {k}" for k in ("caught", "SURVIVED", "skipped") if counts[k])


class DetectorReport:
    """The plugin object: attaches cell entries to test reports (in every process), gathers
    them (where reports arrive: the controller under xdist) and writes the JSON."""

    def __init__(self, config, path=None, progress=False):
        self.config, self.path, self.progress = config, path, progress
        self.cells = defaultdict(list)
        self.widenings = []
        self.collection_errors = []
        self.costs = []
        self._sizes = {}
        self._done = defaultdict(list)
        self._seconds = Counter()
        self._completed = 0

    # --- where tests run ------------------------------------------------------------------

    def pytest_collection_finish(self, session):
        sizes = Counter(key for item in session.items for key in _progress_keys(item))
        self._sizes = dict(sizes)

    @pytest.hookimpl(hookwrapper=True, tryfirst=True)  # sees --require-gpu's verdict
    def pytest_runtest_makereport(self, item, call):
        outcome = yield
        report = outcome.get_result()
        if not (report.when == "call" or (report.when == "setup" and report.outcome != "passed")):
            return
        detail = next((value for name, value in item.user_properties
                       if name == DETAIL), "")
        common = {"outcome": report.outcome, "reason": reason(report), "detail": detail,
                  "test": item.nodeid, "cells": len(self._sizes)}
        entries = [(CELL, {"kernel": kernel, "detector": detector, "role": role,
                           "peak_gib": _peak(item), **common,
                           "size": self._sizes.get((kernel, detector), 1)})
                   for kernel, detector, role in _covers(item)]
        site, widening = _widening_marks(item)
        if site:
            key = _widening_key(site.kwargs["kernel"], widening.kwargs["detector"])
            entries.append((WIDENING_CELL, {**site.kwargs, "detector": widening.kwargs["detector"],
                                            **common, "size": self._sizes.get(key, 1)}))
        if entries:
            report.user_properties = [*report.user_properties, *entries]

    # --- where reports arrive -------------------------------------------------------------

    def pytest_runtest_logreport(self, report):
        if report.outcome == "rerun":  # pytest-rerunfailures: the last try counts
            return
        for name, entry in report.user_properties:
            if name == CELL:
                entry = dict(entry)
                key = (entry.pop("kernel"), entry.pop("detector"))
                self.cells[key].append(entry)
                self._count(key, entry, report.duration)
            elif name == COST and report.when == "call":  # pytest copies item properties
                self.costs.append(entry)
            elif name == WIDENING_CELL:
                self.widenings.append(dict(entry))
                self._count(_widening_key(entry["kernel"], entry["detector"]), entry,
                            report.duration)

    def _count(self, key, entry, seconds):
        self._done[key].append(entry)
        self._seconds[key] += seconds
        if (not self.progress or hasattr(self.config, "workerinput")
                or len(self._done[key]) != entry["size"]):
            return
        self._completed += 1
        kernel, detector = key
        if detector.startswith("widenings"):
            verdict = widening_verdict(self._done[key])
        else:
            verdict = cell_verdict(self._done[key])[0]
        total = entry["cells"]
        terminal = self.config.pluginmanager.get_plugin("terminalreporter")
        if terminal is not None:
            writer = getattr(terminal, "_tw", None)  # the progress dots leave a line open
            if getattr(writer, "width_of_current_line", 0):
                terminal.write("\n")
            terminal.write_line(
                f"triton-overflow: [{self._completed:>{len(str(total))}}/{total}] {kernel}, "
                f"{detector}: {verdict} ({self._seconds[key]:.1f} s; "
                f"{total - self._completed} cells to go)")

    def pytest_collectreport(self, report):
        if report.failed:
            text = str(report.longrepr).strip().splitlines()
            error = next((line.lstrip("E ").strip() for line in reversed(text)
                          if line.startswith("E ")), text[-1] if text else "collection failed")
            self.collection_errors.append({"test": report.nodeid, "reason": error[:300]})

    def pytest_terminal_summary(self, terminalreporter):
        known = sorted((kernel, detector, result["detail"])
                       for (kernel, detector), results in self.cells.items()
                       for result in results
                       if result["role"] == "overflow" and result["outcome"] == "passed"
                       and result.get("detail"))
        if known:
            terminalreporter.write_line("triton-overflow: known overflows (expect=OVERFLOWS, caught):")
            for kernel, detector, detail in dict.fromkeys(known):
                terminalreporter.write_line(f"  {kernel}: {detector}: {detail}")
        slowest = sorted(self.costs, key=lambda cost: -cost["seconds"])[:SLOWEST]
        if slowest:
            terminalreporter.write_line("triton-overflow: slowest interpreter huge cases "
                                        "(seconds, by phase; programs run, peak resident "
                                        "memory):")
            for cost in slowest:
                phases = ", ".join(f"{phase} {seconds:.1f}"
                                   for phase, seconds in (cost.get("phases") or {}).items())
                terminalreporter.write_line(
                    f"  {cost['case']}: {cost['seconds']:.1f} s ({phases}), "
                    f"{cost['programs']} programs, {cost['resident_gib']} GiB")

    def pytest_sessionfinish(self, session, exitstatus):
        if not self.path or hasattr(session.config, "workerinput"):
            return
        rows = [{"kernel": kernel, "detector": detector, "results": results}
                for (kernel, detector), results in sorted(self.cells.items())]
        with open(self.path, "w") as handle:
            json.dump({"exitstatus": int(exitstatus), "cells": rows,
                       "widenings": self.widenings,
                       "collection_errors": self.collection_errors}, handle, indent=1)


REPORT = pytest.StashKey[DetectorReport]()


def detectors():
    """The report's columns, in order: the small-batch and static detectors, then a huge one
    per memory backend."""
    from triton_overflow.engine.memory import BACKENDS
    from triton_overflow.plugin.tiers import SMALL_DETECTORS
    return tuple(SMALL_DETECTORS) + tuple(backend.detector for backend in BACKENDS.values())


def widening_detectors():
    """The columns of the widening matrix: the backends the mutant tests run on."""
    from triton_overflow.engine.memory import BACKENDS
    return tuple(backend.detector for backend in BACKENDS.values() if backend.mutant_tests)


def detail(request, text):
    """Record what the test's detector found (an overflow's line, how a twin was caught)."""
    request.node.user_properties.append((DETAIL, text))


def _widening_key(kernel, detector):
    return (kernel, f"widenings undone, {detector}")


def _covers(item):
    """(kernel, detector, role) of each report cell ``item`` fills, once each (a cell marked
    on the class and on the function is one)."""
    return list(dict.fromkeys((m.kwargs["kernel"], m.kwargs["detector"],
                               m.kwargs.get("role", "fixed"))
                              for m in item.iter_markers("covers")))


def _widening_marks(item):
    """The ``widening_site`` and ``widening`` marks of a mutant test, or (None, None)."""
    site, widening = item.get_closest_marker("widening_site"), item.get_closest_marker("widening")
    return (site, widening) if site and widening else (None, None)


def _progress_keys(item):
    """The cell of each entry ``item`` will report (a cell once per role it fills)."""
    keys = [(kernel, detector) for kernel, detector, _ in _covers(item)]
    site, widening = _widening_marks(item)
    if site:
        keys.append(_widening_key(site.kwargs["kernel"], widening.kwargs["detector"]))
    return keys


def reason(report):
    """One line saying why a test was skipped or failed: the skip reason, or the first line of
    the failure's message (the wrap, the row, the fault), not the line that raised it."""
    if report.skipped and isinstance(report.longrepr, tuple):
        return report.longrepr[2].removeprefix("Skipped: ")
    if not report.failed:
        return ""
    crash = getattr(report.longrepr, "reprcrash", None)
    text = crash.message if crash is not None and crash.message else str(report.longrepr)
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    for prefix in ("Failed: ", "AssertionError: "):
        lines = [line.removeprefix(prefix) for line in lines]
    return (lines[0] if lines else "failed")[:300]


def _peak(item):
    for name, value in item.user_properties:
        if name == "case" and isinstance(value, dict):
            return value.get("peak_gib")
    return None
