#!/usr/bin/env bash
# The test command: every test this machine can run, on all cores (pytest-xdist; set
# OVERFLOW_WORKERS=0 to run serially). Extra arguments go to pytest. The run also leaves the
# validation report (validation-report/report.md, as ci/validate.sh writes it), so one command
# gives both.
source "$(dirname "$0")/env.sh"
# The public modules' annotations (pyproject.toml's [tool.mypy] names them), checked beside the
# tests run (mypy takes one core for its first seconds): its verdict is printed after them, and
# a failure fails the script.
# An interpreter of one's own (OVERFLOW_PYTHON) may lack mypy: then it says so.
typed=$(mktemp)
trap 'rm -f "$typed"' EXIT
if [ -z "${OVERFLOW_PYTHON:-}" ] || "$PYTHON" -c "import mypy" 2>/dev/null; then
    "$PYTHON" -m mypy >"$typed" 2>&1 &
    mypy_pid=$!
else
    echo "test: mypy is not installed in $PYTHON; the type check is skipped" >"$typed"
    mypy_pid=
fi
workers=()
if [ -n "${OVERFLOW_WORKERS:-}" ] && "$PYTHON" -c "import xdist" 2>/dev/null; then
    workers=(-n "$OVERFLOW_WORKERS")
fi
status=0
"$PYTHON" -m triton_overflow validate --every-test -- "${workers[@]}" "$@" || status=$?
typing=0
if [ -n "$mypy_pid" ]; then
    wait "$mypy_pid" || typing=$?
fi
echo "test: type check (mypy):"
cat "$typed"
if [ "$status" -ne 0 ]; then
    exit "$status"
fi
if [ "$typing" -ne 0 ]; then
    echo "test: the type check failed"
    exit 1
fi
