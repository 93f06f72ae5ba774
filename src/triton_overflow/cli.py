"""The command line: ``triton-overflow`` (or ``python -m triton_overflow``).

* ``lint PATH...``: the static check (exit 0 no error, 1 an error, 2 no error but not everything
  checked, 3 a usage error: nothing was checked);
* ``record -o FILE -- COMMAND...``: run any command with Triton's launches recorded;
* ``repro FILE:LINE (--launch TOML | --launches JSON)``: a test of one finding past 2**31 on
  the engine's own kernel, and a report (exit 0 written, 3 a usage error);
* ``validate``: run the test suite and print the kernel x detector table.
"""

import argparse
import os
import sys

EPILOG = ("levels: error (can pass 2**31 at a realistic shape), warning and note (bounded by what "
          "the kernel states). Exit codes of lint: 0 every kernel checked and no error; 1 at "
          "least one error (with --fail-on warning, a warning too; with --baseline, only those "
          "not in it); 2 no error, but nothing found, nothing checked, or some kernels not "
          "checked; 3 the command was used wrongly (an unknown option or a bad value, an "
          "unreadable baseline or launches file): nothing was checked")


# The lint command's options: (flags, argparse keywords).
LINT_OPTIONS = (
    (("--twins", ), dict(action="store_true",
                         help="check the int32 twins of the kernels (expected: findings)")),
    (("--launches", ), dict(metavar="FILE", help="compile each kernel exactly as recorded by "
                            "`record` and report headroom at those launches (paths, if given, "
                            "narrow the kernels)")),
    (("--limits", ), dict(metavar="NAME=VALUE,...", help="limits of a deployment: kernel "
                          "arguments by name (a pointer argument's value is the largest entry "
                          "of its table), grid0..grid2 or rows (= grid0) programs; says whether "
                          "each finding wraps within it")),
    (("--allow-empty", ), dict(action="store_true", help="exit 0, not 2, when the paths hold no "
                               "kernel at all (for hooks that pass every changed file)")),
    (("--fail-on", ), dict(choices=("error", "warning", "note"), default="error",
                           help="the least level that makes the exit code 1 (default: error)")),
    (("--baseline", ), dict(metavar="FILE", help="fail only on findings not in FILE (written by "
                            "--write-baseline); matched by file, kernel and product, not by "
                            "line")),
    (("--write-baseline", ), dict(metavar="FILE", help="record today's findings in FILE, each "
                                  "with a reason to fill in (reasons already in FILE are kept), "
                                  "and exit 0 (unless nothing could be checked)")),
    (("--prune-baseline", ), dict(action="store_true", help="with --baseline: remove from it the "
                                  "entries whose kernel was checked and that match no finding "
                                  "any more (widened or removed)")),
    (("--no-exec", ), dict(action="store_true", help="run nothing of the files but what Triton "
                           "needs to build the kernels (Triton's imports, literal constants, "
                           "the jit functions); every other name is a stand-in: for code you "
                           "do not trust")),
    (("--verify-fixes", ), dict(action="store_true", help="compile each error's fix into its "
                                "kernel and keep the first that holds: the product gone, none "
                                "added (about doubles the time; for the files you fix)")),
    (("--envelope", ), dict(metavar="FILE|NAME", help="the deployment envelope: a TOML file "
                            "with an [envelope] table (the largest dimensions and the tensors' "
                            "shapes, so that a level follows from what a tensor can hold), or "
                            "a preset: `serving`, `training`, or `none` for the shape alone "
                            "(default: [tool.triton-overflow.envelope] of the pyproject.toml "
                            "here or above, else `serving`; see docs/envelope.md)")),
    (("--no-envelope", ), dict(action="store_true", help="judge each product by its shape "
                               "alone, whatever envelope is given or found")),
    (("--top", ), dict(type=int, metavar="N", default=0, help="show only the N findings that "
                       "reach furthest past 2**31 (with an envelope), worst first")),
    (("-j", "--jobs"), dict(type=int, metavar="N", default=0, help="check N files at a time, "
                            "each in its own process (default: one per core)")),
    (("--no-cache", ), dict(action="store_true", help="check every file again, ignoring and "
                            "not writing the reports kept from earlier runs (kept under "
                            "$TRITON_OVERFLOW_CACHE, else ~/.cache/triton-overflow)")),
    (("--format", ), dict(choices=("text", "json", "sarif", "github"), default="text",
                          help="text; json (its schema: docs/json-report.md); sarif 2.1.0, for "
                          "code scanning; github: annotations as GitHub Actions workflow "
                          "commands")),
    (("--output", ), dict(metavar="FILE", help="write the report here, not to stdout")),
)


USAGE_ERROR = 3  # lint's exit codes 0-2 are its verdicts


class _Parser(argparse.ArgumentParser):
    """argparse exits 2 on a usage error; 2 is a verdict of lint's, so usage errors exit 3."""

    def error(self, message):
        self.print_usage(sys.stderr)
        self.exit(USAGE_ERROR, f"{self.prog}: error: {message}\n")


REPRO_HELP = """\
Write a pytest file that reproduces one finding on the engine's own kernel, and a report.

The launch, described (TOML; "rows" is the launch's rows, which the test sets):

    kernel = "pkg/ops/logits.py:_num_nans_kernel"
    rows = 4
    grid = ["rows"]
    [arguments]
    logits_ptr = {shape = ["rows", 151936], dtype = "float32"}
    logits_stride = 151936
    num_nans_ptr = {shape = ["rows"], dtype = "int32"}
    vocab_size = 151936
    BLOCK_SIZE = 8192

or recorded: `triton-overflow record -o launches.json -- pytest tests/test_logits.py`, then
`--launches launches.json`. A tensor may give its `values` (flat) or a `fill`; otherwise
floats are random and ints zero. "slots" sizes the tables a loaded index selects (the tensor
the product addresses among them); a grid axis "rows/N" has a program per N rows. A table of
offsets places the slot checked by its values (values = ["slot", "slot + 1"]); a table of
addresses is {pointers = ["name"]}, its tensors under [pointees]. The rows a reproduction
handles and what it cannot show: docs/repro.md in the suite's repository.

Exit codes: 0 written (with --run: and it reproduces), 1 written but --run found the tests are
no reproduction, 3 a usage error (nothing written).
"""


def parser():
    """The argument parser of every command."""
    top = _Parser(prog="triton-overflow", description=__doc__,
                  formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = top.add_subparsers(dest="command", required=True)
    lint = commands.add_parser(
        "lint", help="static check: i32 multiplies that feed pointer offsets", epilog=EPILOG)
    lint.add_argument("paths", nargs="*",
                      help="kernel files, folders (searched recursively) or dotted modules")
    for flags, options in LINT_OPTIONS:
        lint.add_argument(*flags, **options)
    record = commands.add_parser(
        "record", help="run a command and record every Triton kernel launch it makes")
    record.add_argument("-o", "--output", required=True, metavar="FILE",
                        help="the launches file (JSON) to write")
    record.add_argument("--no-table-ranges", action="store_true",
                        help="do not read int tables' smallest and largest entries (saves a "
                        "device synchronisation per launch)")
    record.add_argument("argv", nargs=argparse.REMAINDER, metavar="COMMAND",
                        help="the command to run, after --")
    repro = commands.add_parser(
        "repro", help="write a test that takes one finding's product past 2**31 on the "
        "engine's own kernel, and a report", description=REPRO_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    repro.add_argument("finding", metavar="FILE:LINE", help="the finding, as the lint names it")
    launch = repro.add_mutually_exclusive_group()
    launch.add_argument("--launch", metavar="TOML", help="a launch of the kernel, described")
    launch.add_argument("--launches", metavar="JSON",
                        help="launches recorded by `triton-overflow record` around a small test")
    repro.add_argument("--findings", metavar="JSON",
                       help="the lint's JSON report to read the finding from (default: run the "
                       "lint on FILE)")
    repro.add_argument("--product", help="which product, where the line has several")
    repro.add_argument("--rows-from", metavar="SOURCE",
                       help="where the product's row comes from in this launch, where the "
                       "finding describes another variant of the kernel (flags pick another "
                       "path): program_id(AXIS), loop:ARGUMENT or load:TABLE")
    repro.add_argument("-o", "--output", default="overflow-repro", metavar="DIR",
                       help="where to write the test and the report (default: overflow-repro)")
    repro.add_argument("--run", action="store_true",
                       help="run the test and add its results to the report")
    validate = commands.add_parser(
        "validate", help="run the tests that fill the kernel x detector table (those with a "
        "covers or widening mark); print the table; write Markdown and JUnit XML")
    validate.add_argument("--out", default="validation-report", help="output folder")
    validate.add_argument("--every-test", action="store_true",
                          help="run every test, not only those of the table (the table is "
                          "written all the same)")
    validate.add_argument("--profile", default=None,
                          help="hypothesis profile (dev, ci, nightly), passed as "
                          "--hypothesis-profile")
    validate.add_argument("pytest_args", nargs="*", help="extra pytest arguments, after --")
    return top


def main(argv=None):
    arguments = parser()
    args = arguments.parse_args(argv)
    if args.command == "lint":
        return _lint(args)
    if args.command == "record":
        from triton_overflow.lint.record import main as record_main
        command = args.argv
        if command and command[0] == "--":
            command = command[1:]
        if not command:
            arguments.error("record needs a command to run, after --")
        return record_main(args.output, command, table_ranges=not args.no_table_ranges)
    if args.command == "repro":
        from triton_overflow.repro.write import main as repro_main
        if os.getcwd() not in sys.path:
            sys.path.insert(0, os.getcwd())
        return repro_main(args)
    from triton_overflow.plugin.validate import main as validate_main
    return validate_main(args.out, args.profile, args.pytest_args, args.every_test)


def _import_triton_from_where_it_is_installed():
    """Triton, imported before the current directory is importable: a kernel file of the
    folder named ``triton.py`` must not stand in for it (``python -m`` puts the folder first)."""
    import os
    here = ("", os.getcwd())
    saved = list(sys.path)
    sys.path[:] = [entry for entry in sys.path if entry not in here]
    try:
        import triton.language  # noqa: F401
    finally:
        sys.path[:] = saved


def _lint(args):
    import os
    _import_triton_from_where_it_is_installed()
    # As `python -m`, the current directory is importable: kernel files import their package.
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.insert(0, os.getcwd())
    from triton_overflow.interp import execution_mode
    # TTIR is built with the interpreter off, whatever the shell says.
    execution_mode.configure(execution_mode.COMPILE)
    from triton_overflow.lint import launches, report as formats
    from triton_overflow.lint import lint

    if not args.paths and not args.launches:
        return _usage_error("name at least one kernel file, folder or module (or --launches "
                            "FILE)")
    if args.prune_baseline and not args.baseline:
        return _usage_error("--prune-baseline needs --baseline FILE")
    baseline = None
    try:
        if args.baseline:
            from triton_overflow.lint.baseline import Baseline
            baseline = Baseline.load(args.baseline)
        if args.launches:
            result = launches.lint_launches(args.launches, args.paths)
        else:
            facts = launches.parse_limits(args.limits) if args.limits else None
            from triton_overflow.lint.driver import Progress
            if args.jobs < 0:
                raise ValueError("--jobs needs a positive number (or 0: one per core)")
            from triton_overflow.lint import envelope as envelopes
            envelope, defaulted = envelopes.chosen(args.envelope, args.no_envelope)
            if args.top < 0:
                raise ValueError("--top needs a positive number")
            result = lint(args.paths, twins=args.twins, facts=facts, execute=not args.no_exec,
                          verify_fixes=args.verify_fixes, jobs=args.jobs or _cores(),
                          progress=Progress(), use_cache=not args.no_cache, envelope=envelope)
            result.top = args.top
            if defaulted:
                result.notes.insert(0, f"levels judged by {envelope.source}, as no envelope "
                                    f"is given: state yours in pyproject.toml "
                                    f"(docs/envelope.md), or give `--envelope training` for a "
                                    f"training library, `--envelope none` for the shape alone")
    except ValueError as error:
        return _usage_error(str(error))
    result.fail_on = args.fail_on
    if baseline is not None:
        result.baseline = baseline
        _baseline_health(result, prune=args.prune_baseline)
    if args.format == "text":
        text = formats.as_text(result, args.paths)
    else:
        text = formats.FORMATS[args.format](result)
    if args.output:
        try:
            with open(args.output, "w") as handle:
                handle.write(text)
        except OSError as error:
            return _usage_error(f"cannot write the report to {args.output}: {error}")
        print(f"lint: wrote {args.output} (exit {result.exit_code})")
    else:
        sys.stdout.write(text)
    if args.allow_empty and not result.results and not result.problems:
        return 0
    if args.write_baseline:
        from triton_overflow.lint.baseline import write
        try:
            count, unexplained = write(result, args.write_baseline)
        except OSError as error:
            return _usage_error(f"cannot write the baseline {args.write_baseline}: {error}")
        print(f"lint: wrote {count} entries to the baseline {args.write_baseline}"
              + (f"; {unexplained} need a reason: replace each placeholder `reason` with why "
                 f"the product cannot pass 2**31 in your deployment" if unexplained else ""),
              file=sys.stderr)
        return 0 if result.results else result.exit_code
    return result.exit_code


def _cores():
    import os
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def _usage_error(message):
    print(f"lint: {message}", file=sys.stderr)
    return USAGE_ERROR


def _baseline_health(result, prune):
    """Say which baseline entries lack a reason and which are stale; remove the stale ones
    from the file with ``prune``."""
    baseline = result.baseline
    listed = 10
    stale = baseline.stale(result)
    pruned = {entry.key for entry in stale} if prune else set()
    unexplained = [entry for entry in baseline.unexplained() if entry.key not in pruned]
    if unexplained:
        print(f"lint: warning: {len(unexplained)} entries of the baseline {baseline.path} give "
              f"no reason; say in each `reason` why the product cannot pass 2**31:",
              file=sys.stderr)
        _list_entries(unexplained, listed)
    if stale and prune:
        baseline.without(stale).save()
        print(f"lint: removed {len(stale)} stale entries from the baseline {baseline.path}:",
              file=sys.stderr)
    elif stale:
        print(f"lint: warning: {len(stale)} entries of the baseline {baseline.path} match no "
              f"finding any more (widened or removed); --prune-baseline removes them:",
              file=sys.stderr)
    _list_entries(stale, listed)


def _list_entries(entries, listed):
    for entry in entries[:listed]:
        print(f"  {entry.describe()}", file=sys.stderr)
    if len(entries) > listed:
        print(f"  and {len(entries) - listed} more", file=sys.stderr)
