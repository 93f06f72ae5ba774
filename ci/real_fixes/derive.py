"""Derive the fixed sites of an upstream int64 fix, to add it to ``fixes.json``.

A fixed site is an i32 product of the file before the fix that is no longer i32 after it: both
files are compiled by the lint (by shape alone, so every i32 product is listed whatever its
level), and a product of the file before counts as fixed where the line it sits on, carried to
the file after by a line diff, no longer holds it (or, on a changed line, where the kernel has
fewer of that product after). Residual sites (real products the fix left) need a reader, or
a later fix: ``--later-fixes`` adds to each pair, as residual sites, the fixed sites of a later
pair of the same file (its fix descends from this one) that the file after this fix still
holds, carried by a line diff from the later pair's file before, with the product on that line.

    python ci/real_fixes/derive.py GIT_DIR OWNER/NAME CORPUS COMMIT:PATH [...] > new.json
    python ci/real_fixes/derive.py --later-fixes REPOS CORPUS   # rewrites fixes.json
"""

import collections
import difflib
import json
import subprocess
import sys
from pathlib import Path

import score  # this folder's: the pair's files and the lint's report, as score.py writes them


def main(argv=None):
    argv = argv or sys.argv[1:]
    if argv[:1] == ["--later-fixes"]:
        _, repos, corpus = argv
        fixes = score.HERE / "fixes.json"
        table = json.loads(fixes.read_text())
        added = residuals_from_later_fixes(table["pairs"], Path(repos), Path(corpus))
        fixes.write_text(json.dumps(table, indent=1) + "\n")
        print(f"{added} residual sites from later fixes", file=sys.stderr)
        return 0
    git_dir, repo, corpus, *specs = argv
    pairs = []
    for spec in specs:
        commit, path = spec.split(":", 1)
        pair = derive(git_dir, repo, commit, path, Path(corpus))
        print(f"{repo} {commit} {path}: {len(pair['fixed_sites'])} fixed sites",
              file=sys.stderr)
        if pair["fixed_sites"]:
            pairs.append(pair)
    print(json.dumps(pairs, indent=1))
    return 0


def derive(git_dir, repo, commit, path, corpus):
    def git(*args):
        return subprocess.run(["git", f"--git-dir={git_dir}", *args], capture_output=True,
                              text=True, check=True).stdout.strip()
    fix = git("rev-parse", commit)
    pair = {"repo": repo, "fix_commit": fix, "parent_commit": git("rev-parse", f"{fix}^"),
            "path": path, "subject": git("log", "-1", "--format=%s", fix)}
    before_file, after_file = score.write_sides(pair, git_dir, corpus)
    before, after = _products(before_file), _products(after_file)
    carried, changed = _carried(before_file, after_file)
    after_on = collections.defaultdict(set)
    for finding in after:
        after_on[finding["line"]].add(_key(finding))
    count_before = collections.Counter(_key(f) for f in before)
    count_after = collections.Counter(_key(f) for f in after)
    sites, seen = [], set()
    for finding in sorted(before, key=lambda f: (f["line"], f["product"])):
        line = carried.get(finding["line"])
        gone = _key(finding) not in after_on[line] if line else \
            count_after[_key(finding)] < count_before[_key(finding)]
        if gone and (finding["line"], finding["product"]) not in seen:
            seen.add((finding["line"], finding["product"]))
            sites.append({"before_line": finding["line"], "kernel": finding["kernel"],
                          "product": finding["product"]})
    return {**pair, "fixed_sites": sites, "widened_after_lines": changed, "residual_sites": []}


LATER_FIX = "widened by the later fix {commit} of this file"


def residuals_from_later_fixes(pairs, repos, corpus):
    """Add to each pair the residual sites a later fix of the same file shows (``LATER_FIX``);
    return how many were added."""
    added = 0
    for earlier in pairs:
        earlier["residual_sites"] = [site for site in earlier["residual_sites"]
                                     if not site["why"].startswith(LATER_FIX.split("{")[0])]
        known = {(s["after_line"], "".join(s["product"].split()))
                 for s in earlier["residual_sites"]}
        after_file = score._write_pair(earlier, repos, corpus)[1]
        after_lines = after_file.read_text().splitlines()
        for later in pairs:
            if later is earlier or later["repo"] != earlier["repo"] or \
                    later["path"] != earlier["path"] or \
                    not _descends(repos, later, earlier["fix_commit"]):
                continue
            before_file = score._write_pair(later, repos, corpus)[0]
            carried, _ = _carried(before_file, after_file)
            for site in later["fixed_sites"]:
                line = carried.get(site["before_line"])
                product = "".join(site["product"].split())
                if line is None or product not in "".join(after_lines[line - 1].split()) or \
                        (line, product) in known:
                    continue
                known.add((line, product))
                earlier["residual_sites"].append({
                    "after_line": line, "product": site["product"],
                    "why": LATER_FIX.format(commit=later["fix_commit"][:10])})
                added += 1
    return added


def _descends(repos, pair, ancestor):
    """Whether ``pair``'s fix comes after commit ``ancestor`` (its parent descends from it)."""
    clone = score.clone_of(pair["repo"], repos)
    done = subprocess.run(["git", f"--git-dir={score._git_dir(clone)}", "merge-base",
                           "--is-ancestor", ancestor, pair["parent_commit"]],
                          capture_output=True)
    return done.returncode == 0


def _products(path):
    """Every i32 product of ``path``, whatever its level (the shape alone)."""
    _, report = score._lint(path, no_exec=False)
    if report is None:
        sys.exit(f"the lint of {path} printed something that is not JSON")
    return score._findings(report)


def _carried(before, after):
    """Each unchanged line of ``before`` -> its line in ``after``; the lines ``after`` changed."""
    old, new = before.read_text().splitlines(), after.read_text().splitlines()
    carried, changed = {}, []
    matcher = difflib.SequenceMatcher(None, old, new, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            carried.update({i1 + k + 1: j1 + k + 1 for k in range(i2 - i1)})
        else:
            changed += range(j1 + 1, j2 + 1)
    return carried, changed


def _key(finding):
    return finding["kernel"], "".join(finding["product"].split())


if __name__ == "__main__":
    sys.exit(main())
