"""Command line: ``python -m harness lint [--twins] PATH...`` and ``python -m harness validate``."""

import argparse
import sys


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m harness", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    lint = commands.add_parser(
        "lint", help="static check: i32 multiplies that feed pointer offsets (exit 0 clean, "
        "1 findings, 2 cannot check)")
    lint.add_argument("paths", nargs="+", help="kernel module (dotted), .py file, or folder")
    lint.add_argument("--twins", action="store_true",
                      help="lint the int32 twins of the kernels instead (expected: findings)")
    validate = commands.add_parser(
        "validate", help="run every tier this machine can run and print the kernel x detector "
        "table; writes Markdown and JUnit XML")
    validate.add_argument("--out", default="validation-report", help="output folder")
    validate.add_argument("--profile", default=None,
                          help="hypothesis profile (dev, ci, nightly); default from the environment")
    validate.add_argument("pytest_args", nargs="*", help="extra pytest arguments, after --")
    args = parser.parse_args(argv)
    if args.command == "lint":
        from harness.lint import main as lint_main
        return lint_main(args.paths, twins=args.twins)
    from harness.validate import main as validate_main
    return validate_main(args.out, args.profile, args.pytest_args)


if __name__ == "__main__":
    sys.exit(main())
