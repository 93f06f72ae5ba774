#!/usr/bin/env bash
# The compatibility job: the static check, the int32 twins and the interpreter tier on every
# supported Triton minor version (CPU only, torch from ci/requirements-cpu.txt).
#
#   ci/compat.sh [TRITON_VERSION...]     (default: 3.4.0 3.5.1 3.6.0 3.7.1 3.8.0 3.9.0)
#
# Each version is installed once into .compat/triton-<version> and put in front of the CPU
# environment's own Triton (the pinned one). Every version must give the same findings on the
# int32 twins as the pinned Triton. Exits non-zero when any version fails or the findings
# differ. .ci/run calls it with the newest release; the weekly workflow with every version.
source "$(dirname "$0")/env.sh"
versions=("$@")
[ ${#versions[@]} -gt 0 ] || versions=(3.4.0 3.5.1 3.6.0 3.7.1 3.8.0 3.9.0)
out=compat-report
mkdir -p "$out" .compat
status=0
pinned=$("$PYTHON" -c 'import triton; print(triton.__version__)')
echo "compat: the pinned Triton $pinned, the reference for the twins' findings"
set +e
"$PYTHON" -m triton_overflow lint --twins --format json kernels >"$out/twins-pinned.json"
set -e
for version in "${versions[@]}"; do
    target=.compat/triton-$version
    if [ ! -f "$target/.installed" ]; then
        echo "compat: installing triton==$version into $target"
        "$PYTHON" -m pip install --quiet --disable-pip-version-check --no-deps \
            --target "$target" "triton==$version" && touch "$target/.installed"
    fi
    export PYTHONPATH="$PWD/$target"
    echo "compat: Triton $("$PYTHON" -c 'import triton; print(triton.__version__)')"
    set +e
    "$PYTHON" -m triton_overflow lint kernels >"$out/lint-$version.txt"
    lint=$?
    "$PYTHON" -m triton_overflow lint --twins --format json kernels >"$out/twins-$version.json"
    twins=$?
    "$PYTHON" -m pytest -q -p no:cacheprovider -m "static or interp or selftest" \
        -n "${OVERFLOW_WORKERS:-2}" >"$out/tests-$version.log" 2>&1
    tests=$?
    set -e
    echo "compat: Triton $version: lint exit $lint (want 0), twins exit $twins (want 1)," \
         "tests exit $tests: $(tail -n 1 "$out/tests-$version.log")"
    { [ "$lint" -eq 0 ] && [ "$twins" -eq 1 ] && [ "$tests" -eq 0 ]; } || status=1
    unset PYTHONPATH
done
"$PYTHON" - "$out" "$pinned" "${versions[@]}" <<'PY' || status=1
import json, sys
out, pinned, versions = sys.argv[1], sys.argv[2], sys.argv[3:]
def findings(version):
    report = json.load(open(f"{out}/twins-{version}.json"))
    return {(f["file"], f["line"], f["kernel"], f["product"])
            for k in report["kernels"] for f in k["findings"]}
first = findings("pinned")
different = [v for v in versions if findings(v) != first]
for version in different:
    print(f"compat: Triton {version} differs from the pinned {pinned} on the twins:",
          sorted(findings(version) ^ first)[:10])
print(f"compat: {len(first)} twin findings, the same on the pinned {pinned} and on "
      f"{', '.join(versions)}" if not different else
      "compat: the twin findings differ between versions")
sys.exit(1 if different or not first else 0)
PY
exit $status
