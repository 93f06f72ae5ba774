# Sourced by the ci/ scripts: a Python with the suite installed, in $PYTHON.
#
# OVERFLOW_PYTHON=/path/to/python uses that interpreter as it is (a GPU runner's own
# environment, say; install the suite there with `pip install -e .`). Otherwise a virtual
# environment in .venv is created on first use, ci/requirements-cpu.txt installed into it and
# this repository installed editable; it is reused while those two files are unchanged.
set -euo pipefail
# pip installs one wheel after another, on one core: the two large wheels (torch, Triton), the
# rest of the pinned list and the suite go in side by side instead. Every package is pinned
# (`--no-deps`), so no two installs write the same package; `pip check` proves the list whole.
install_side_by_side() {
    local python=$1 repo=$2 logs pids=() failed=0 i
    logs=$(mktemp -d)
    local pip=("$python" -m pip install --quiet --disable-pip-version-check --no-compile --no-deps)
    grep -E '^torch==' "$repo/ci/requirements-cpu.txt" >"$logs/0.txt"
    grep -E '^triton==' "$repo/ci/requirements-cpu.txt" >"$logs/1.txt"
    grep -vE '^(torch|triton)==' "$repo/ci/requirements-cpu.txt" >"$logs/2.txt"
    for i in 0 1 2; do
        "${pip[@]}" -r "$logs/$i.txt" >"$logs/$i.log" 2>&1 &
        pids+=($!)
    done
    "${pip[@]}" -e "$repo" >"$logs/3.log" 2>&1 &
    pids+=($!)
    for i in 0 1 2 3; do
        wait "${pids[$i]}" || { failed=1; cat "$logs/$i.log" >&2; }
    done
    if [ "$failed" -eq 0 ] && ! "$python" -m pip check --disable-pip-version-check \
            >"$logs/check.log" 2>&1; then
        cat "$logs/check.log" >&2
        failed=1
    fi
    rm -rf "$logs"
    if [ "$failed" -ne 0 ]; then
        echo "env: the install into $(dirname "$(dirname "$python")") failed" >&2
        return 1
    fi
}
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
if [ -n "${OVERFLOW_PYTHON:-}" ]; then
    PYTHON=$OVERFLOW_PYTHON
else
    venv="$repo/.venv"
    stamp="$venv/.requirements.sha256"
    wanted=$(cat "$repo/ci/requirements-cpu.txt" "$repo/pyproject.toml" | sha256sum | cut -d' ' -f1)
    if [ ! -x "$venv/bin/python" ] || [ "$(cat "$stamp" 2>/dev/null)" != "$wanted" ]; then
        echo "env: installing ci/requirements-cpu.txt and the suite into .venv (first run takes a minute)"
        python3 -m venv "$venv"
        install_side_by_side "$venv/bin/python" "$repo"
        echo "$wanted" >"$stamp"
    fi
    PYTHON="$venv/bin/python"
    # Nothing is byte-compiled at install (compiling all of site-packages costs more than the
    # modules a run imports): the first import of a module writes its bytecode, here even
    # where the shell says not to, as this environment is the suite's own.
    unset PYTHONDONTWRITEBYTECODE
fi
export PYTHON
cd "$repo"
