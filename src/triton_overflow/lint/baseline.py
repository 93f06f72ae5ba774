"""A baseline of known findings, as static-analysis tools keep one.

``lint --write-baseline FILE`` records today's findings; ``lint --baseline FILE`` then fails
only on findings that are not in it. A finding is matched by its file, its kernel and its
product as written (whitespace aside), never by its line, so edits that move code keep it
matched; a product that is widened drops out of the report, and its entry out of the next
baseline written.
"""

import json
from pathlib import Path

VERSION = 1


class Baseline:
    def __init__(self, entries=()):
        self.entries = {tuple(entry) for entry in entries}

    def known(self, finding, root=None):
        return _key(finding, root) in self.entries

    @classmethod
    def load(cls, path):
        try:
            data = json.loads(Path(path).read_text())
        except (OSError, json.JSONDecodeError) as error:
            raise ValueError(f"cannot read the baseline {path}: {error}") from None
        if not isinstance(data, dict) or data.get("version") != VERSION:
            raise ValueError(f"{path} is not a baseline of version {VERSION} (written by "
                             f"`triton-overflow lint --write-baseline`)")
        return cls((item["file"], item["kernel"], item["product"])
                   for item in data.get("findings", []))


def write(report, path, root=None):
    """Record every finding of ``report`` in ``path``; returns how many."""
    from triton_overflow.lint.report import fingerprint
    items = sorted({_key(f, root): f for f in report.findings}.items())
    Path(path).write_text(json.dumps({
        "version": VERSION,
        "findings": [{"file": key[0], "kernel": key[1], "product": key[2], "level": f.level,
                      "fingerprint": fingerprint(f, root)} for key, f in items],
    }, indent=1) + "\n")
    return len(items)


def _key(finding, root=None):
    from triton_overflow.lint.report import shown
    return (shown(finding.twin_of or finding.file, root), finding.kernel,
            " ".join(finding.product.split()))
