# Sourced by the ci/ scripts: a Python with the suite installed, in $PYTHON.
#
# OVERFLOW_PYTHON=/path/to/python uses that interpreter as it is (a GPU runner's own
# environment, say; install the suite there with `pip install -e .`). Otherwise a virtual
# environment in .venv is created on first use, ci/requirements-cpu.txt installed into it and
# this repository installed editable; it is reused while those two files are unchanged.
set -euo pipefail
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
        # pip byte-compiles one file at a time; compileall on every core is faster.
        "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-compile \
            -r "$repo/ci/requirements-cpu.txt"
        "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-compile \
            --no-deps -e "$repo"
        "$venv/bin/python" -m compileall -q -j 0 "$("$venv/bin/python" -c \
            'import sysconfig; print(sysconfig.get_paths()["purelib"])')" >/dev/null || true
        echo "$wanted" >"$stamp"
    fi
    PYTHON="$venv/bin/python"
fi
export PYTHON
cd "$repo"
