"""A baseline of known findings, as static-analysis tools keep one, each with its reason.

``lint --write-baseline FILE`` records today's findings, each with a ``reason`` to fill in (a
placeholder until someone says why the product cannot pass 2**31 in the deployment); a reason
already written for the same finding is kept. ``lint --baseline FILE`` then fails only on
findings that are not in it, and says which entries still lack a reason and which no longer
match a finding (the product was widened or removed: the entry is stale);
``--prune-baseline`` rewrites the file without the stale ones.

A finding is matched by its file, its kernel and its product as written (whitespace aside),
never by its line, so edits that move code keep it matched. An entry is stale only where its
kernel was checked whole in this run (every variant of its flags compiled, not one recorded
launch): linting part of a tree, or a kernel that could only be checked in part, leaves the
rest of the baseline alone, and so does writing it again.
"""

import json
from dataclasses import dataclass
from pathlib import Path

VERSION = 2
READABLE_VERSIONS = (1, 2)  # version 1 had no reasons
PLACEHOLDER = "TODO: why this product cannot pass 2**31 in our deployment, or widen it"


@dataclass(frozen=True)
class Entry:
    file: str
    kernel: str
    product: str
    reason: str = ""
    level: str = ""
    fingerprint: str = ""
    kernel_file: str = ""  # where the kernel is defined, when a helper elsewhere holds the product

    @property
    def key(self):
        return (self.file, self.kernel, self.product)

    @property
    def explained(self):
        return bool(self.reason.strip()) and self.reason.strip() != PLACEHOLDER

    def describe(self):
        return f"{self.file}: {self.kernel}: `{self.product}`"

    @property
    def kernel_key(self):
        return (self.kernel_file or self.file, self.kernel)

    def as_dict(self):
        entry = {"file": self.file, "kernel": self.kernel, "product": self.product,
                 "reason": self.reason, "level": self.level, "fingerprint": self.fingerprint}
        return {**entry, "kernel_file": self.kernel_file} if self.kernel_file else entry


class Baseline:
    def __init__(self, entries=(), path=None):
        self.entries = {entry.key: entry for entry in entries}
        self.path = path

    def known(self, finding, root=None):
        return key(finding, root) in self.entries

    def unexplained(self):
        """The entries with no reason, or the placeholder ``--write-baseline`` left."""
        return [entry for entry in self.entries.values() if not entry.explained]

    def stale(self, report, root=None):
        """The entries whose kernel this run checked whole and which match none of its
        findings."""
        checked = checked_whole(report, root)
        found = {key(finding, root) for finding in report.findings}
        return [entry for entry in self.entries.values()
                if entry.kernel_key in checked and entry.key not in found]

    @classmethod
    def load(cls, path):
        try:
            data = json.loads(Path(path).read_text())
        except (OSError, json.JSONDecodeError) as error:
            raise ValueError(f"cannot read the baseline {path}: {error}") from None
        if not isinstance(data, dict) or data.get("version") not in READABLE_VERSIONS \
                or not isinstance(data.get("findings", []), list):
            raise ValueError(f"{path} is not a baseline of a version this suite reads "
                             f"({', '.join(map(str, READABLE_VERSIONS))}; written by "
                             f"`triton-overflow lint --write-baseline`)")
        try:
            entries = [Entry(str(item["file"]), str(item["kernel"]),
                             " ".join(str(item["product"]).split()),
                             str(item.get("reason") or ""), str(item.get("level") or ""),
                             str(item.get("fingerprint") or ""),
                             str(item.get("kernel_file") or ""))
                       for item in data.get("findings", [])]
        except (KeyError, TypeError) as error:
            raise ValueError(f"{path}: a baseline entry lacks {error}: each needs file, kernel "
                             f"and product") from None
        return cls(entries, path=path)

    def save(self, path=None):
        entries = sorted(self.entries.values(), key=lambda entry: entry.key)
        Path(path or self.path).write_text(json.dumps({
            "version": VERSION, "findings": [entry.as_dict() for entry in entries],
        }, indent=1) + "\n")

    def without(self, entries):
        removed = {entry.key for entry in entries}
        return Baseline([e for e in self.entries.values() if e.key not in removed], self.path)


def write(report, path, root=None):
    """Record every finding of ``report`` in ``path``, keeping from a baseline already there
    the reasons given and the entries of kernels this run did not check whole; returns (how
    many entries, how many of them still need a reason)."""
    from triton_overflow.lint.report import fingerprint
    from triton_overflow.locations import shown
    try:
        old = Baseline.load(path).entries
    except ValueError:
        old = {}
    checked = checked_whole(report, root)
    entries = {k: e for k, e in old.items() if e.kernel_key not in checked}
    for result in report.results:
        kernel_file = shown(result.twin_of or result.file, root)
        for finding in result.findings:
            entry_key = key(finding, root)
            reason = old[entry_key].reason if entry_key in old and old[entry_key].explained \
                else PLACEHOLDER
            entries.setdefault(entry_key, Entry(
                *entry_key, reason=reason, level=finding.level,
                fingerprint=fingerprint(finding, root),
                kernel_file=kernel_file if kernel_file != entry_key[0] else ""))
    written = Baseline(entries.values(), path)
    written.save()
    return len(entries), len(written.unexplained())


def checked_whole(report, root=None):
    """(kernel file, kernel) of every kernel of ``report`` whose variants all compiled."""
    from triton_overflow.locations import shown
    return {(shown(r.twin_of or r.file, root), r.name) for r in report.results if r.complete}


def key(finding, root=None):
    from triton_overflow.locations import shown
    return (shown(finding.twin_of or finding.file, root), finding.kernel,
            " ".join(finding.product.split()))
