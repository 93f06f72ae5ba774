#!/usr/bin/env bash
# The test command: every tier this machine can run. Extra arguments go to pytest.
source "$(dirname "$0")/env.sh"
exec "$PYTHON" -m pytest "$@"
