# Sourced by the ci/ scripts: a Python with the suite's dependencies, in $PYTHON.
#
# OVERFLOW_PYTHON=/path/to/python uses that interpreter as it is (a GPU runner's own
# environment, say). Otherwise a virtual environment in .venv is created on first use and
# ci/requirements-cpu.txt installed into it; it is reused while that file is unchanged.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
if [ -n "${OVERFLOW_PYTHON:-}" ]; then
    PYTHON=$OVERFLOW_PYTHON
else
    venv="$repo/.venv"
    requirements="$repo/ci/requirements-cpu.txt"
    stamp="$venv/.requirements.sha256"
    wanted=$(sha256sum "$requirements" | cut -d' ' -f1)
    if [ ! -x "$venv/bin/python" ] || [ "$(cat "$stamp" 2>/dev/null)" != "$wanted" ]; then
        echo "env: installing ci/requirements-cpu.txt into .venv (first run takes a minute)"
        python3 -m venv "$venv"
        "$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r "$requirements"
        echo "$wanted" >"$stamp"
    fi
    PYTHON="$venv/bin/python"
fi
export PYTHON
cd "$repo"
