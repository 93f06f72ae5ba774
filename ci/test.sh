#!/usr/bin/env bash
# The test command: every test this machine can run, on all cores (pytest-xdist; set
# OVERFLOW_WORKERS=0 to run serially). Extra arguments go to pytest. The run also leaves the
# validation report (validation-report/report.md, as ci/validate.sh writes it), so one command
# gives both.
source "$(dirname "$0")/env.sh"
# First the public modules' annotations (pyproject.toml's [tool.mypy] names them); a failure
# stops the script. An interpreter of one's own (OVERFLOW_PYTHON) may lack mypy: then it says so.
if [ -z "${OVERFLOW_PYTHON:-}" ] || "$PYTHON" -c "import mypy" 2>/dev/null; then
    "$PYTHON" -m mypy
else
    echo "test: mypy is not installed in $PYTHON; the type check is skipped"
fi
workers=()
if [ -n "${OVERFLOW_WORKERS:-}" ] && "$PYTHON" -c "import xdist" 2>/dev/null; then
    workers=(-n "$OVERFLOW_WORKERS")
fi
exec "$PYTHON" -m triton_overflow validate --every-test -- "${workers[@]}" "$@"
