#!/usr/bin/env bash
# Before a release: the static check on the kernels and on their int32 twins, then the
# validation report with the nightly hypothesis profile.
#
#   ci/pre_release.sh [OUT_DIR] [KERNEL_PATH...]    (default: release-report kernels)
#
# Run it on a GPU runner (OVERFLOW_PYTHON=python3) to cover every tier, GPU included: there
# the GPU tier is required (--require-gpu), so a run that could not reach the device fails.
# On a CPU it covers all but the GPU tier.
source "$(dirname "$0")/env.sh"
out=${1:-release-report}
shift || true
paths=("$@")
[ ${#paths[@]} -gt 0 ] || paths=(kernels)
mkdir -p "$out"
set +e
"$PYTHON" -m triton_overflow lint "${paths[@]}" | tee "$out/lint.txt"
lint=${PIPESTATUS[0]}
"$PYTHON" -m triton_overflow lint --twins "${paths[@]}" >"$out/lint-twins.txt"
twins=$?
"$PYTHON" -m triton_overflow lint --format sarif --output "$out/lint.sarif" "${paths[@]}" >/dev/null
set -e
cat "$out/lint-twins.txt"
if [ "$lint" -ne 0 ]; then
    echo "pre-release: the static check did not pass on ${paths[*]} (exit $lint)"
    exit 1
fi
if [ "$twins" -ne 1 ]; then
    echo "pre-release: the static check no longer flags the int32 twins (exit $twins)"
    exit 1
fi
extra=()
if "$PYTHON" -c "import torch, sys; sys.exit(not torch.cuda.is_available())"; then
    extra=(--require-gpu)
fi
workers=()
if "$PYTHON" -c "import xdist" 2>/dev/null; then
    workers=(-n "${OVERFLOW_WORKERS:-auto}")
fi
exec "$PYTHON" -m triton_overflow validate --out "$out/validation" --profile nightly -- \
    "${extra[@]}" "${workers[@]}"
