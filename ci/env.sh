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
        "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-compile \
            -r "$repo/ci/requirements-cpu.txt"
        "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-compile \
            --no-deps -e "$repo"
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
