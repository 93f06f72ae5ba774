#!/usr/bin/env bash
# The GPU tier alone (pytest -m gpu, on pytest-xdist workers sized to the machine), timed,
# with the device memory in use sampled every 250 ms. With --hold-all-but GIB another process first takes all but GIB of every visible
# device and holds it for the whole run: how a shared or small (16-24 GiB) card looks.
#
#   ci/gpu_tier.sh OUT_DIR [--hold-all-but GIB] [-- PYTEST_ARGS...]
#
# Writes OUT_DIR/pytest.log, OUT_DIR/junit.xml and OUT_DIR/gpu-memory.csv; prints the pytest
# summary, the wall time and the peak memory in use per device last. Exits as pytest did.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: ci/gpu_tier.sh OUT_DIR [--hold-all-but GIB] [-- PYTEST_ARGS...]}
shift
hold=""
if [ "${1:-}" = "--hold-all-but" ]; then
    hold=$2
    shift 2
fi
[ "${1:-}" = "--" ] && shift
python=${PYTHON:-${OVERFLOW_PYTHON:-python3}}
mkdir -p "$out"

holder=""
if [ -n "$hold" ]; then
    "$python" - "$hold" <<'PY' &
import signal, sys, time, torch
keep = float(sys.argv[1]) * 2**30
held = []
for index in range(torch.cuda.device_count()):
    free, _ = torch.cuda.mem_get_info(index)
    held.append(torch.empty(int(free - keep), dtype=torch.uint8, device=f"cuda:{index}"))
    print(f"gpu_tier: holding {(free - keep) / 2**30:.1f} GiB of device {index}, "
          f"{torch.cuda.mem_get_info(index)[0] / 2**30:.1f} GiB left free", flush=True)
signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
while True:
    time.sleep(1)
PY
    holder=$!
    sleep 20  # let the holder take its memory before the run measures what is free
fi

sampler=""
if command -v nvidia-smi >/dev/null 2>&1; then
    nvidia-smi --query-gpu=index,memory.used --format=csv,noheader,nounits -lms 250 \
        >"$out/gpu-memory.csv" 2>/dev/null &
    sampler=$!
fi
# In parallel unless the arguments choose: `-n auto` is sized by the suite's plugin to the CPUs
# and the devices' free memory.
workers=()
if "$python" -c "import xdist" 2>/dev/null && ! printf '%s\n' "$@" | grep -qE '^(-n|--numprocesses)'; then
    workers=(-n auto --dist worksteal)
fi
started=$(date +%s)
"$python" -m pytest -m gpu -p no:cacheprovider -rs --junitxml="$out/junit.xml" "${workers[@]}" \
    "$@" >"$out/pytest.log" 2>&1
status=$?
wall=$(( $(date +%s) - started ))
[ -n "$sampler" ] && kill "$sampler" 2>/dev/null
[ -n "$holder" ] && kill "$holder" 2>/dev/null
grep -E "^(SKIPPED|FAILED|ERROR)" "$out/pytest.log" | head -n 40
grep -E "triton-overflow: huge cases per GPU" "$out/pytest.log"
tail -n 1 "$out/pytest.log"
if [ -s "$out/gpu-memory.csv" ]; then
    "$python" - "$out/gpu-memory.csv" <<'PY'
import sys
peaks = {}
for line in open(sys.argv[1]):
    index, used = (part.strip() for part in line.split(","))
    peaks[index] = max(peaks.get(index, 0), int(used))
print("gpu_tier: peak device memory in use (MiB, every process):",
      ", ".join(f"device {i}: {p}" for i, p in sorted(peaks.items())))
PY
fi
"$python" - "$out/junit.xml" <<'PY'
import ast, sys, xml.etree.ElementTree as tree
peaks = {}
for prop in tree.parse(sys.argv[1]).iter("property"):
    if prop.get("name") == "case":
        case = ast.literal_eval(prop.get("value"))
        peaks.setdefault(case["backend"], []).append(case["peak_gib"])
for backend, values in sorted(peaks.items()):
    print(f"gpu_tier: {backend}: {len(values)} cases passed, largest per-case peak "
          f"{max(values):.3f} GiB (the huge tensor and the case's own tensors)")
PY
echo "gpu_tier: wall time ${wall} s; pytest exit ${status}"
exit $status
