"""The static check on real upstream int32 fixes: each file before and after its fix.

``fixes.json`` names, for each pair, the public repository, the fix commit and its parent, the
file, the products the fix widened (by line in the file before the fix) and the i32 products
the fix left behind (by line in the file after it). No third-party code is kept here: the files
are written from clones of those repositories, then linted as shipped (the engines are not
installed) and scored:

    python ci/real_fixes/score.py --repos DIR --corpus OUT [--envelopes] [--repo OWNER/NAME]
                                  [--jobs N] [--misses]

``DIR/<owner>/<name>`` (or ``DIR/<owner>+<name>``) is a clone, bare or not, of each repository.
The table says, per pair: the fixed sites reported at ``error`` before the fix, the residual
products still at ``error`` after it, the other products of the fixed file at ``error``, the
exit code after the fix, and the kernels that could not be checked; under it, how many
products still at ``error`` sit on lines the fix rewrote (a widening the check does not see).
"""

import argparse
import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parent
LINT_TIMEOUT = 600  # seconds one file's lint may take before it counts as not answered


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repos", required=True, type=Path, help="folder of the clones")
    parser.add_argument("--corpus", required=True, type=Path, help="where the files go")
    parser.add_argument("--no-exec", action="store_true", help="lint with --no-exec")
    parser.add_argument("--envelopes", action="store_true", help="lint each repository's "
                        "files with the envelope its team would write (envelopes/OWNER+NAME"
                        ".toml: training for training libraries); without it, by shape alone")
    parser.add_argument("--repo", action="append", help="score only this repository's "
                        "pairs (repeatable)")
    parser.add_argument("--jobs", type=int, default=os.cpu_count(),
                        help="lints run at once (default: all cores)")
    parser.add_argument("--misses", action="store_true", help="list each fixed site not at "
                        "error, and each other product at error, under the table")
    parser.add_argument("--timeout", type=int, default=LINT_TIMEOUT, help="seconds one "
                        f"file's lint may take (default {LINT_TIMEOUT})")
    parser.add_argument("--keep", action="store_true", help="write each file's JSON report "
                        "beside it in the corpus (FILE.json), to read the findings")
    args = parser.parse_args(argv)
    pairs = [pair for pair in json.loads((HERE / "fixes.json").read_text())["pairs"]
             if not args.repo or pair["repo"] in args.repo]
    totals = dict.fromkeys(("fixed", "hit", "residual", "residual_hit", "bounded",
                            "bounded_error", "not_checked", "clean", "clean_exit_0",
                            "invalid_json", "rewritten", "rewritten_error"), 0)
    totals["fixes"], totals["fixes_caught"] = set(), set()
    print("| pair | fixed sites at error before | residuals at error after | other products "
          "at error after | exit after | not checked |")
    print("|---|---|---|---|---|---|")
    sides = [_write_pair(pair, args.repos, args.corpus.resolve()) for pair in pairs]
    jobs = [(path, args.no_exec, _envelope(pair) if args.envelopes else None, args.timeout)
            for pair, pair_sides in zip(pairs, sides) for path in pair_sides]
    with ThreadPoolExecutor(max(1, args.jobs)) as pool:  # each lint is a process of its own
        linted = list(pool.map(lambda job: _lint(*job), jobs))
    if args.keep:
        for (path, *_), (_, report) in zip(jobs, linted):
            path.with_name(path.name + ".json").write_text(json.dumps(report, indent=1))
    misses = []
    for index, pair in enumerate(pairs):
        (_, report_before), (code_after, report_after) = linted[2 * index:2 * index + 2]
        if report_before is None or report_after is None:
            totals["invalid_json"] += 1
            print(f"| {pair['repo']} {pair['path']} | no JSON report (a crash, or past "
                  f"{args.timeout} s) |||||")
            continue
        row = _score(pair, report_before, report_after, code_after, totals, misses,
                     _rewritten_lines(pair, *sides[index]))
        print("| " + " | ".join(row) + " |")
    _summary(totals)
    if args.misses:
        print()
        print("\n".join(misses))
    return 0


def clone_of(repo, repos):
    """The clone of ``repo`` (``OWNER/NAME``) under ``repos``, or None."""
    owner, name = repo.split("/")
    candidates = (repos / owner / name, repos / f"{owner}+{name}",
                  repos / f"{owner}+{name}" / "repo")
    return next((p for p in candidates if (p / "HEAD").exists() or (p / ".git").exists()), None)


def _write_pair(pair, repos, corpus):
    clone = clone_of(pair["repo"], repos)
    if clone is None and not all(path.exists() for path in _sides(pair, corpus)):
        sys.exit(f"no clone of {pair['repo']} under {repos}")
    return write_sides(pair, clone and _git_dir(clone), corpus)


def _sides(pair, corpus):
    """Where the pair's files go: by repository, fix and the file's folder (one fix may touch
    two files of one name), each under its own name (a kernel file's name matters to Python:
    ``triton.py``)."""
    owner, name = pair["repo"].split("/")
    path = Path(pair["path"])
    folder = corpus / f"{owner}__{name}" / pair["fix_commit"][:10] / (
        "__".join(path.parent.parts) or "_")
    return [folder / side / path.name for side in ("before", "after")]


def write_sides(pair, git_dir, corpus):
    """The pair's file before and after the fix, written under ``corpus`` from ``git_dir``
    (once: a file already there is kept)."""
    files = []
    for target, commit in zip(_sides(pair, corpus), (pair["parent_commit"], pair["fix_commit"])):
        if not target.exists():
            shown = subprocess.run(["git", f"--git-dir={git_dir}", "show",
                                    f"{commit}:{pair['path']}"], capture_output=True)
            if shown.returncode != 0:
                sys.exit(f"{pair['repo']}: cannot read {pair['path']} at {commit}: "
                         f"{shown.stderr.decode().strip()} (fetch that commit into the clone)")
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(shown.stdout)
        files.append(target)
    return files


def _git_dir(clone):
    return clone / ".git" if (clone / ".git").exists() else clone


def _envelope(pair):
    """The repository's envelope here, else that of its whole tree (``ci/real_trees``), else
    the preset the pair names (``serving`` or ``training``: what its library does)."""
    path = HERE / "envelopes" / (pair["repo"].replace("/", "+") + ".toml")
    tree = HERE.parent / "real_trees" / pair["repo"].split("/")[1].lower() / "envelope.toml"
    return path if path.exists() else tree if tree.exists() else pair.get("envelope")


def _lint(path, no_exec, envelope=None, timeout=LINT_TIMEOUT):
    command = [sys.executable, "-m", "triton_overflow", "lint", "--format", "json", str(path)]
    command += ["--envelope", str(envelope)] if envelope else ["--no-envelope"]
    try:
        done = subprocess.run(command + (["--no-exec"] if no_exec else []),
                              capture_output=True, text=True, cwd=path.parent,
                              timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, None

    try:
        return done.returncode, json.loads(done.stdout)
    except json.JSONDecodeError:
        return done.returncode, None


def _findings(report):
    return [f for kernel in report["kernels"] for f in kernel["findings"]]


def _normal(text):
    return "".join((text or "").split())


def _errors_on(report, line, product=None):
    on_line = [f for f in _findings(report) if f["line"] == line]
    same = [f for f in on_line if _normal(f["product"]) == _normal(product)]
    return [f for f in (same or on_line) if f["level"] == "error"]


def _rewritten_lines(pair, before_path, after_path):
    """The lines of the file after the fix that the fix rewrote: of the lines it changed
    (``widened_after_lines``), those whose text, whitespace aside, the file before it does not
    have (a line only reformatted, or moved, is not a widening)."""
    before_text = _normal(before_path.read_text(errors="replace"))
    after_lines = after_path.read_text(errors="replace").splitlines()
    return {line for line in pair.get("widened_after_lines", [])
            if 0 < line <= len(after_lines) and _normal(after_lines[line - 1]) not in before_text}


def _score(pair, before, after, code_after, totals, misses, rewritten=frozenset()):
    fixed = pair["fixed_sites"]
    hit = [s for s in fixed if _errors_on(before, s["before_line"])]
    totals["fixes"].add(pair["fix_commit"])
    if hit:
        totals["fixes_caught"].add(pair["fix_commit"])
    name = f"{pair['repo']} {pair['fix_commit'][:8]} {Path(pair['path']).name}"
    for site in fixed:
        if site not in hit:
            said = [f for f in _findings(before) if f["line"] == site["before_line"]]
            said = [f for f in said if _normal(f["product"]) == _normal(site["product"])] or said
            misses.append(f"missed  {name}:{site['before_line']} `{site['product']}` "
                          f"[{said[0]['level'] + ': ' + said[0]['why'] if said else 'no finding'}]")
    residual = pair["residual_sites"]
    residual_hit = [s for s in residual if _errors_on(after, s["after_line"], s["product"])]
    known = {(s["after_line"], _normal(s["product"])) for s in residual}
    others = [f for f in _findings(after) if (f["line"], _normal(f["product"])) not in known]
    others_error = [f for f in others if f["level"] == "error"]
    misses += [f"error   {name}:{f['line']} (after) `{f['product']}` [{f['why']}]"
               for f in others_error]
    # A product on a line the fix rewrote, not a recorded residual, still at error: the
    # check does not see the widening.
    still = [f for f in others_error if f["line"] in rewritten]
    misses += [f"unseen  {name}:{f['line']} (after) `{f['product']}`: the fix rewrote this "
               f"line" for f in still]
    totals["rewritten"] += len(rewritten)
    totals["rewritten_error"] += len(still)
    not_checked = len(before["not_checked"]) + len(after["not_checked"])
    for key, value in (("fixed", len(fixed)), ("hit", len(hit)), ("residual", len(residual)),
                       ("residual_hit", len(residual_hit)), ("bounded", len(others)),
                       ("bounded_error", len(others_error)), ("not_checked", not_checked)):
        totals[key] += value
    if not residual:
        totals["clean"] += 1
        totals["clean_exit_0"] += code_after == 0
    return [f"{pair['repo']} `{Path(pair['path']).name}` ({pair['fix_commit'][:8]})",
            f"{len(hit)}/{len(fixed)}", f"{len(residual_hit)}/{len(residual)}",
            f"{len(others_error)}/{len(others)}", str(code_after), str(not_checked)]


def _summary(totals):
    def share(part, whole):
        return f"{part}/{whole} ({100 * part / whole:.1f}%)" if whole else "0/0"
    print()
    print(f"fixed sites at error before the fix: {share(totals['hit'], totals['fixed'])}")
    print(f"fixes with a fixed site at error before them: "
          f"{share(len(totals['fixes_caught']), len(totals['fixes']))}")
    print(f"residual products at error after it: "
          f"{share(totals['residual_hit'], totals['residual'])}")
    print(f"other products of the fixed files at error: "
          f"{share(totals['bounded_error'], totals['bounded'])}")
    print(f"products at error on the lines the fixes rewrote, not recorded residuals: "
          f"{totals['rewritten_error']} (of {totals['rewritten']} lines rewritten)")
    print(f"fixed files without a residual that exit 0: "
          f"{share(totals['clean_exit_0'], totals['clean'])}")
    print(f"kernels not checked: {totals['not_checked']}; reports that are not JSON: "
          f"{totals['invalid_json']}")


if __name__ == "__main__":
    sys.exit(main())
