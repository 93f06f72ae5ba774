#!/usr/bin/env bash
# Nightly GPU job: every tier as a validation report, then the benchmark; short summary last.
#
#   ci/nightly.sh [OUT_DIR]        (default: nightly-report)
#
# Writes OUT_DIR/validation/{report.md,junit.xml,detectors.json}, OUT_DIR/benchmark.md, the
# logs, and OUT_DIR/gpu-memory.csv (device memory in use, sampled every 250 ms). Exits non-zero
# when any test failed or the GPU tier could not run (--require-gpu). OVERFLOW_HYPOTHESIS_PROFILE
# picks the hypothesis profile (nightly); OVERFLOW_WORKERS the number of pytest-xdist workers
# (default 8; 1 runs serially); OVERFLOW_DENSE=1 adds the dense-memory GPU huge cases (up to
# ~19 GiB of device memory each) to the virtual-memory ones.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:-nightly-report}
python=${PYTHON:-${OVERFLOW_PYTHON:-python3}}
mkdir -p "$out"
started=$(date +%s)

sampler=""
if command -v nvidia-smi >/dev/null 2>&1; then
    nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 250 \
        >"$out/gpu-memory.csv" 2>/dev/null &
    sampler=$!
fi

workers=${OVERFLOW_WORKERS:-8}
parallel=()
if [ "$workers" -gt 1 ] && "$python" -c "import xdist" 2>/dev/null; then
    parallel=(-n "$workers")
fi
dense=()
[ "${OVERFLOW_DENSE:-0}" = "1" ] && dense=(--dense-huge)
echo "nightly: validation report (profile ${OVERFLOW_HYPOTHESIS_PROFILE:-nightly}," \
     "${parallel[*]:-serial} ${dense[*]:-}) -> $out/validation"
"$python" -m triton_overflow validate --every-test --out "$out/validation" \
    --profile "${OVERFLOW_HYPOTHESIS_PROFILE:-nightly}" -- -q -rs --require-gpu \
    "${parallel[@]}" "${dense[@]}" >"$out/validation.log" 2>&1
validate_status=$?
echo "nightly: benchmark -> $out/benchmark.md"
"$python" ci/benchmark.py --out "$out/benchmark.md" >"$out/benchmark.log" 2>&1
benchmark_status=$?

[ -n "$sampler" ] && kill "$sampler" 2>/dev/null
wall=$(( $(date +%s) - started ))
peak=$(sort -n "$out/gpu-memory.csv" 2>/dev/null | tail -n 1)

echo
grep -E "^(=+ .*(passed|failed).* =+|[0-9]+ passed.*)$" "$out/validation.log" | tail -n 1
grep -E "triton-overflow: huge cases per GPU" "$out/validation.log"
sed -n '/^| kernel/,/^$/p' "$out/validation/report.md" 2>/dev/null
[ -f "$out/benchmark.md" ] && cat "$out/benchmark.md" || tail -n 20 "$out/benchmark.log"
echo "nightly: wall time ${wall} s; peak device memory in use ${peak:-unknown} MiB;" \
     "validate exit ${validate_status}, benchmark exit ${benchmark_status}"
[ "$validate_status" -eq 0 ] && [ "$benchmark_status" -eq 0 ]
