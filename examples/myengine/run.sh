#!/usr/bin/env bash
# Use triton-overflow-suite as a kernel team would: a fresh virtual environment, the suite
# installed from its path (not editable), this package installed, and pytest, the static check
# and the validation report run from this directory with no PYTHONPATH.
#
#   examples/myengine/run.sh [VENV_DIR]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
suite=$(cd "$here/../.." && pwd)
venv=${1:-$(mktemp -d)/venv}
unset PYTHONPATH TRITON_INTERPRET
echo "example: installing the suite and myengine into $venv"
python3 -m venv "$venv"
pip=("$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-compile)
"${pip[@]}" -r "$suite/ci/requirements-cpu.txt"
"${pip[@]}" --no-deps "$suite"
"${pip[@]}" --no-deps -e "$here"
"$venv/bin/python" -m compileall -q -j 0 "$("$venv/bin/python" -c \
    'import sysconfig; print(sysconfig.get_paths()["purelib"])')" >/dev/null || true
cd "$here"
export PATH="$venv/bin:$PATH"

echo "example: the static check"
triton-overflow lint src/myengine/sampling.py
set +e
triton-overflow lint src/myengine/softcap.py
status=$?
set -e
if [ "$status" -ne 1 ]; then
    echo "example: the static check should flag softcap.py (exit 1), got exit $status"
    exit 1
fi

echo "example: the buggy launchers declared safe fail, naming the file and the line"
set +e
red=$(python -m pytest -q -p no:cacheprovider --overflow-expect '*_unwidened=safe' \
      -k "unwidened and (static_check or interpreter_huge_case)" 2>&1)
status=$?
set -e
echo "$red" | tail -n 12
for where in "logsoftmax.py:22" "penalty.py:28"; do
    if [ "$status" -ne 1 ] || ! grep -q "$where" <<<"$red"; then
        echo "example: the unwidened cases should fail at $where (pytest exit 1), got exit $status"
        exit 1
    fi
done

echo "example: a finding as a reproduction: record a small launch, write the tests, run them"
work=$(mktemp -d)
TRITON_INTERPRET=1 triton-overflow record -o "$work/launches.json" -- python repro/small_launch.py
triton-overflow repro src/myengine/penalty.py:28 --launches "$work/launches.json" -o "$work/repro"
triton-overflow repro src/myengine/softcap.py:18 --launch repro/softcap.toml -o "$work/repro"
set +e
red=$(python -m pytest -q -p no:cacheprovider -rA "$work/repro" -k interpreter 2>&1)
status=$?
set -e
echo "$red" | grep -E "^(PASSED|FAILED)" || true
for where in "penalty.py:28" "softcap.py:18"; do
    if [ "$status" -ne 1 ] || ! grep -q "as shipped, in the interpreter: an i32 product wraps at .*$where" <<<"$red"; then
        echo "example: the reproduction of $where should fail as shipped, naming the line"
        exit 1
    fi
done
if [ "$(grep -c '^PASSED.*-widened-' <<<"$red")" -ne 4 ]; then
    echo "example: the reproductions with the fix should pass"
    exit 1
fi

echo "example: the tests and the validation report"
triton-overflow validate --out "$(mktemp -d)/report" -- -q
