#!/usr/bin/env bash
# The action's one step (action.yml): the static check on INPUT_PATHS, reported as annotations
# or a SARIF file, failing the step per INPUT_FAIL_ON. GitHub runs it with the action's inputs
# as INPUT_* variables; anything else that sets them (a test, another CI) can run it the same way.
#
# Exit codes: 0 the gate passes; 1 findings at or above INPUT_FAIL_ON, not in the baseline;
# 2 kernels not checked (with INPUT_FAIL_ON_UNCHECKED=true) or an input it cannot use (the
# lint's own usage errors, exit 3, among them: a misspelt envelope name never passes the gate).
# The lint's own exit code goes to the step's output exit-code either way.
set -uo pipefail

fail() {
    local message=${1//'%'/'%25'}
    message=${message//$'\r'/'%0D'}
    echo "::error title=triton-overflow action::${message//$'\n'/'%0A'}"
    exit 2
}

fail_on=${INPUT_FAIL_ON:-error}
output=${INPUT_OUTPUT:-annotations}
sarif_file=${INPUT_SARIF_FILE:-triton-overflow.sarif}
case "$fail_on" in error|warning|note|never) ;; *)
    fail "fail-on must be error, warning, note or never, not '$fail_on'" ;; esac
case "$output" in annotations|sarif) ;; *)
    fail "output must be annotations or sarif, not '$output'" ;; esac
for flag in INPUT_FAIL_ON_UNCHECKED INPUT_NO_EXEC INPUT_INSTALL; do
    case "${!flag:-false}" in true|false) ;; *)
        fail "${flag#INPUT_} must be true or false, not '${!flag}'" ;; esac
done

python=${INPUT_PYTHON:-python3}
if [ "${INPUT_INSTALL:-true}" = true ]; then
    venv="${RUNNER_TEMP:-${TMPDIR:-/tmp}}/triton-overflow-venv"
    echo "::group::Installing the suite into $venv"
    # The lint needs Triton and numpy only: the suite's other dependencies (torch among them)
    # serve the huge-case tiers.
    triton="triton${INPUT_TRITON_VERSION:+==$INPUT_TRITON_VERSION}"
    [ -n "${INPUT_TRITON_VERSION:-}" ] || triton="triton>=3.4,<3.10"
    "$python" -m venv "$venv" \
        && "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-compile "$triton" numpy \
        && "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-compile --no-deps \
            "${ACTION_PATH:?names the folder of action.yml}" \
        || fail "could not install $triton and the suite from $ACTION_PATH"
    echo "::endgroup::"
    python="$venv/bin/python"
fi

# Paths are separated by spaces or lines (a YAML block scalar gives one per line).
read -ra paths <<<"${INPUT_PATHS//$'\n'/ }"
[ ${#paths[@]} -gt 0 ] || paths=(.)
for path in "${paths[@]}"; do
    # A file or folder that is not there is a typo, not "nothing to check"; a dotted module
    # name (no slash, no .py) is looked up by the lint itself.
    if [ ! -e "$path" ] && { [[ "$path" == */* ]] || [[ "$path" == *.py ]]; }; then
        fail "paths names $path, which does not exist (from $PWD)"
    fi
done
arguments=(lint "${paths[@]}")
[ "$fail_on" = never ] || arguments+=(--fail-on "$fail_on")
[ -z "${INPUT_LIMITS:-}" ] || arguments+=(--limits "$INPUT_LIMITS")
[ -z "${INPUT_ENVELOPE:-}" ] || arguments+=(--envelope "$INPUT_ENVELOPE")
[ -z "${INPUT_BASELINE:-}" ] || arguments+=(--baseline "$INPUT_BASELINE")
[ "${INPUT_NO_EXEC:-true}" = false ] || arguments+=(--no-exec)
printed=$(mktemp)
trap 'rm -f "$printed"' EXIT
if [ "$output" = sarif ]; then
    rm -f "$sarif_file"
    mkdir -p "$(dirname "$sarif_file")"
    arguments+=(--format sarif --output "$sarif_file")
else
    arguments+=(--format github)
fi

"$python" -m triton_overflow "${arguments[@]}" | tee "$printed"
code=${PIPESTATUS[0]}
{
    echo "exit-code=$code"
    if [ "$output" = sarif ] && [ "$code" -le 2 ] && [ -s "$sarif_file" ]; then
        echo "sarif-file=$sarif_file"
    fi
} >>"${GITHUB_OUTPUT:-/dev/null}"

# Kernels not checked, whatever else the exit code says (1 wins over 2 in it).
if [ "$output" = sarif ] && [ -s "$sarif_file" ]; then
    unchecked=$("$python" -c 'import json, sys
print(sum(r["ruleId"] == "kernel-not-checked"
          for r in json.load(open(sys.argv[1]))["runs"][0]["results"]))' "$sarif_file")
else
    unchecked=$(grep -c "title=kernel not checked" "$printed" || true)
fi

case "$code" in
    0|1|2) ;;
    3) fail "the lint refused its arguments (see its message above): check the inputs" ;;
    *) fail "the lint ended with exit code $code" ;;
esac
if [ "$code" -eq 2 ] || [ "${unchecked:-0}" -gt 0 ]; then
    if [ "${INPUT_FAIL_ON_UNCHECKED:-false}" = true ]; then
        echo "::error title=triton-overflow::some kernels could not be checked, or none was found"
        exit 2
    fi
    echo "::warning title=triton-overflow::some kernels could not be checked, or none was found"
fi
if [ "$code" -eq 1 ] && [ "$fail_on" != never ]; then
    echo "::error title=triton-overflow::int32 offset products at or above $fail_on" \
         "(see the annotations or the SARIF file)"
    exit 1
fi
exit 0
