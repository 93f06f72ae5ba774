#!/usr/bin/env bash
# The test command: every tier this machine can run, on all cores (pytest-xdist; set
# OVERFLOW_WORKERS=0 to run serially). Extra arguments go to pytest.
source "$(dirname "$0")/env.sh"
workers=()
if "$PYTHON" -c "import xdist" 2>/dev/null; then
    workers=(-n "${OVERFLOW_WORKERS:-auto}" --dist worksteal)
fi
exec "$PYTHON" -m pytest "${workers[@]}" "$@"
