#!/usr/bin/env bash
# The main job: the validation report (kernel x detector table) in validation-report/.
# Extra arguments go to `triton-overflow validate`.
source "$(dirname "$0")/env.sh"
exec "$PYTHON" -m triton_overflow validate "$@"
