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
    echo "::error title=triton-overflow action::$1"
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
        && "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "$triton" numpy \
        && "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps \
            "${ACTION_PATH:?names the folder of action.yml}" \
        || fail "could not install $triton and the suite from $ACTION_PATH"
    echo "::endgroup::"
    python="$venv/bin/python"
fi

read -ra paths <<<"${INPUT_PATHS:-.}"
[ ${#paths[@]} -gt 0 ] || fail "paths names nothing to check"
arguments=(lint "${paths[@]}")
[ "$fail_on" = never ] || arguments+=(--fail-on "$fail_on")
[ -z "${INPUT_LIMITS:-}" ] || arguments+=(--limits "$INPUT_LIMITS")
[ -z "${INPUT_BASELINE:-}" ] || arguments+=(--baseline "$INPUT_BASELINE")
[ "${INPUT_NO_EXEC:-true}" = false ] || arguments+=(--no-exec)
if [ "$output" = sarif ]; then
    arguments+=(--format sarif --output "$sarif_file")
else
    arguments+=(--format github)
fi

"$python" -m triton_overflow "${arguments[@]}"
code=$?
{
    echo "exit-code=$code"
    [ "$output" = sarif ] && [ -s "$sarif_file" ] && echo "sarif-file=$sarif_file"
} >>"${GITHUB_OUTPUT:-/dev/null}"

case "$code" in
    0) exit 0 ;;
    1) [ "$fail_on" = never ] && exit 0
       echo "::error title=triton-overflow::int32 offset products at or above $fail_on" \
            "(see the annotations or the SARIF file)"
       exit 1 ;;
    2) if [ "${INPUT_FAIL_ON_UNCHECKED:-false}" = true ]; then
           echo "::error title=triton-overflow::some kernels could not be checked"
           exit 2
       fi
       echo "::warning title=triton-overflow::some kernels could not be checked, or none was found"
       exit 0 ;;
    3) fail "the lint refused its arguments (see its message above): check the inputs" ;;
    *) fail "the lint ended with exit code $code" ;;
esac
