"""The public API as a user's code and a type checker see it: the names ``triton_overflow``
exports, the ``py.typed`` marker, and mypy resolving ``from triton_overflow import ...``."""

import importlib
import importlib.resources
import subprocess
import sys

import pytest

import triton_overflow

PUBLIC = {
    "OVERFLOWS": "triton_overflow.cases", "SAFE": "triton_overflow.cases",
    "Case": "triton_overflow.cases", "RowsCase": "triton_overflow.cases",
    "SlotTableCase": "triton_overflow.cases", "HugeRun": "triton_overflow.cases",
    "CompileSpec": "triton_overflow.cases", "OverflowTests": "triton_overflow.plugin.tiers",
    "RowMismatch": "triton_overflow.compare", "assert_rows_close": "triton_overflow.compare",
    "assert_rows_equal": "triton_overflow.compare", "Benchmark": "triton_overflow.bench",
}


def test_all_names_the_public_api():
    assert sorted(triton_overflow.__all__) == sorted(PUBLIC)


@pytest.mark.parametrize("name", sorted(PUBLIC))
def test_each_public_name_is_its_home_module_object(name):
    assert getattr(triton_overflow, name) is getattr(importlib.import_module(PUBLIC[name]), name)


def test_an_unknown_name_is_an_attribute_error():
    with pytest.raises(AttributeError, match="RowCase"):
        getattr(triton_overflow, "RowCase")


def test_importing_the_package_does_not_import_torch():
    """The pytest plugin imports the package before torch is needed."""
    done = subprocess.run([sys.executable, "-c", "import sys, triton_overflow; "
                           "print('torch' in sys.modules)"],
                          capture_output=True, text=True, timeout=120)
    assert done.stdout.strip() == "False", done.stdout + done.stderr


def test_the_package_is_marked_typed():
    assert importlib.resources.files("triton_overflow").joinpath("py.typed").is_file()


def test_mypy_resolves_the_public_names(tmp_path):
    """Run as a user's project would, outside this repository: the installed package, found
    through its py.typed marker, gives the real classes, and a misspelt name is an error
    rather than something a module ``__getattr__`` lets through."""
    pytest.importorskip("mypy", reason="mypy is not installed (ci/requirements-cpu.txt pins it)")
    (tmp_path / "uses.py").write_text("from triton_overflow import Benchmark, RowsCase\n\n"
                                      "reveal_type(RowsCase)\nreveal_type(Benchmark)\n")
    (tmp_path / "misspelt.py").write_text("from triton_overflow import RowCase\n")
    # torch is not what is checked here, and following it takes most of mypy's time.
    (tmp_path / "mypy.ini").write_text("[mypy]\n[mypy-torch.*]\nfollow_imports = skip\n")
    done = subprocess.run([sys.executable, "-m", "mypy", "--strict", "--config-file", "mypy.ini",
                           "--cache-dir", str(tmp_path / "cache"), "uses.py", "misspelt.py"],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path)
    errors = [line for line in done.stdout.splitlines() if ": error:" in line]
    assert len(errors) == 1 and errors[0].startswith("misspelt.py:1:") \
        and '"RowCase"' in errors[0], done.stdout + done.stderr
    assert "triton_overflow.cases.RowsCase" in done.stdout, done.stdout
    assert "triton_overflow.bench.Benchmark" in done.stdout, done.stdout
