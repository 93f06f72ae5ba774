#!/usr/bin/env bash
# Before a release: the static check on the kernels and on their int32 twins, then the
# validation report with the nightly hypothesis profile. Run it on a GPU runner
# (OVERFLOW_PYTHON=python3) to cover every tier; on a CPU it covers all but the GPU tier.
source "$(dirname "$0")/env.sh"
out=${1:-release-report}
mkdir -p "$out"
"$PYTHON" -m harness lint kernels | tee "$out/lint.txt"
set +e
"$PYTHON" -m harness lint --twins kernels >"$out/lint-twins.txt"
twins=$?
set -e
cat "$out/lint-twins.txt"
if [ "$twins" -ne 1 ]; then
    echo "pre-release: the static check no longer flags the int32 twins (exit $twins)"
    exit 1
fi
exec "$PYTHON" -m harness validate --out "$out/validation" --profile nightly
