"""Rebuild the two copies of vLLM's Triton sampling kernels that ``ci/real_samplers`` tests.

vLLM PR #46560 ("[Bugfix][Model Runner V2][Spec Decode] Fix int32 offset overflow in sampler
kernels") widened the row indices of the Model Runner V2 sampler and rejection-sampler kernels to
int64, in one squash commit. The copies are the files of that commit (``after``) and of its
parent (``before``). No vLLM code is kept in this repository: this script writes the copies from
a clone of vLLM (bare or not; only ``git show COMMIT:PATH`` is used) or from the raw text of the
files, and applies the only edits made to them: each vLLM import line is replaced, in place and
on one line (so every line number stays the upstream one), by an import of a small local
stand-in module, ``vllm_sampler_shims``, which this script also writes. Kernels and launchers
are otherwise byte for byte the upstream files; the blob id of every upstream file is checked.

    python ci/real_samplers/fetch.py --clone ~/src/vllm --out /work/vllm_samplers
    python ci/real_samplers/fetch.py --raw DIR --out /work/vllm_samplers
        # DIR/<commit>/<upstream path>: the raw files (e.g. from
        # https://raw.githubusercontent.com/vllm-project/vllm/<commit>/<upstream path>)

writes::

    OUT/before/vllm_sampler_shims.py   OUT/before/vllm_sampler_before/<module>.py  (+ __init__.py)
    OUT/after/vllm_sampler_shims.py    OUT/after/vllm_sampler_after/<module>.py    (+ __init__.py)
    OUT/manifest.json                  what was written from what, and every edited line

Put ``OUT/before`` and ``OUT/after`` on ``PYTHONPATH`` to run the cases (see README.md).
"""

import argparse
import hashlib
import json
import re
import subprocess
import sys
from pathlib import Path

REPO = "vllm-project/vllm"
PULL_REQUEST = 46560
FIX_COMMIT = "3c43237233a8f753a0ed24d95c0978b09f009d29"  # 2026-06-25, the squash merge of #46560
PARENT_COMMIT = "56ca5997eac9a6c69c7af482c18ced4c184f35dc"  # its only parent
SIDES = {"before": PARENT_COMMIT, "after": FIX_COMMIT}
PACKAGES = {"before": "vllm_sampler_before", "after": "vllm_sampler_after"}
SHIM_MODULE = "vllm_sampler_shims"

# Upstream path -> module name in the copies, with the git blob id of the file at each side.
FILES = {
    "vllm/v1/sample/ops/topk_topp_triton.py": (
        "topk_topp_triton", "d20cac37fcd798f7d745a12ec7ceaa2e2c0770ca",
        "c284ff61876be78921e8f9ee77c18e707b17e186"),
    "vllm/v1/worker/gpu/sample/bad_words.py": (
        "bad_words", "6286cc38359cbb48b45b10798c988c3c0838531b",
        "b5517dee1b18bdd3c8caaca63c03e381a3eb390b"),
    "vllm/v1/worker/gpu/sample/gumbel.py": (
        "gumbel", "fab53fef7ee8461786e1ff2c0cb54941c57658a2",
        "6dbb04cd933fdbe56df94337a90486e8c63af75c"),
    "vllm/v1/worker/gpu/sample/logit_bias.py": (
        "logit_bias", "f3f7c29b3f39c89bdb0df2ec4c8d8534a81821f8",
        "6c95ed7aacb31e0d6f17029a448fa97750395cf2"),
    "vllm/v1/worker/gpu/sample/logprob.py": (
        "logprob", "cf24c186e93ab12ba4898800c20b898213b977b2",
        "0028e8c3a9dc93a5094e1d700275a09270684144"),
    "vllm/v1/worker/gpu/sample/min_p.py": (
        "min_p", "4f08af2f5a5b5c3b9cfb0c95d96dbd8d155c7240",
        "b71ae6f3addf5245e30897e42348b4763a6c5858"),
    "vllm/v1/worker/gpu/sample/penalties.py": (
        "penalties", "b2ce2fb812a134712a03701f3738e5b5d17970d5",
        "25cb2f211d943a6faae2e8fec859f3527e196508"),
    "vllm/v1/worker/gpu/spec_decode/rejection_sampler_utils.py": (
        "rejection_sampler_utils", "92294e6c7e43bc529e4a82872800bdacd9aefc25",
        "bad70aa04511fb609c8f5f4f63a28a73823fb837"),
}

# The only edits: a whole vLLM import line -> its replacement ({package}: the copy's package).
# Every `vllm` import of every file must be listed; an unlisted one stops the script.
IMPORT_SHIMS = {
    "from vllm.triton_utils import tl, triton":
        f"from {SHIM_MODULE} import tl, triton",
    "from vllm.triton_utils import HAS_TRITON, tl, tldevice, triton":
        f"from {SHIM_MODULE} import HAS_TRITON, tl, tldevice, triton",
    "from vllm.utils.math_utils import next_power_of_2":
        f"from {SHIM_MODULE} import next_power_of_2",
    "from vllm.utils.math_utils import cdiv":
        f"from {SHIM_MODULE} import cdiv",
    "from vllm.utils.platform_utils import num_compute_units":
        f"from {SHIM_MODULE} import num_compute_units",
    "from vllm.utils.torch_utils import async_tensor_h2d":
        f"from {SHIM_MODULE} import async_tensor_h2d",
    "from vllm.sampling_params import SamplingParams":
        f"from {SHIM_MODULE} import SamplingParams",
    "from vllm.sampling_params import MAX_LOGPROB_TOKEN_IDS, SamplingParams":
        f"from {SHIM_MODULE} import MAX_LOGPROB_TOKEN_IDS, SamplingParams",
    "from vllm.v1.outputs import LogprobsTensors":
        f"from {SHIM_MODULE} import LogprobsTensors",
    "from vllm.v1.worker.gpu.buffer_utils import StagedWriteTensor, UvaBackedTensor":
        f"from {SHIM_MODULE} import StagedWriteTensor, UvaBackedTensor",
    "from vllm.v1.worker.gpu.buffer_utils import UvaBackedTensor":
        f"from {SHIM_MODULE} import UvaBackedTensor",
    "from vllm.v1.worker.gpu.states import RequestState":
        f"from {SHIM_MODULE} import RequestState",
    # The rejection sampler uses the Gumbel helpers of the same commit: the copy's own gumbel.
    # (Absolute, not relative: the suite imports a generated int32 twin of a file on its own.)
    "from vllm.v1.worker.gpu.sample.gumbel import gumbel_block_argmax, tl_rand64":
        "from {package}.gumbel import gumbel_block_argmax, tl_rand64",
}
_VLLM_IMPORT = re.compile(r"^\s*(from\s+vllm[.\s]|import\s+vllm\b)")

SHIM_SOURCE = '''\
"""Stand-ins for the vLLM names imported by the copies of vLLM's sampler files.

Written by ci/real_samplers/fetch.py of triton-overflow-suite. Only what the kernels and their
launchers use does anything; vLLM's per-request state classes stay in the copies unused, and
the names they annotate with are empty stand-ins that refuse to be built.
"""

from typing import NamedTuple

import torch
import triton
import triton.language as tl
import triton.language.extra.libdevice as tldevice

HAS_TRITON = True  # vllm.triton_utils: Triton is installed (it is, or nothing here imports)
MAX_LOGPROB_TOKEN_IDS = 128  # vllm.sampling_params at both commits


def cdiv(a: int, b: int) -> int:
    """vllm.utils.math_utils.cdiv."""
    return -(a // -b)


def next_power_of_2(n: int) -> int:
    """vllm.utils.math_utils.next_power_of_2."""
    return 1 if n < 1 else 1 << (n - 1).bit_length()


def num_compute_units(device_id: int = 0) -> int:
    """vllm.utils.platform_utils.num_compute_units on vLLM's CUDA platform."""
    return torch.cuda.get_device_properties(device_id).multi_processor_count


def async_tensor_h2d(data, device, dtype=None):
    """vllm.utils.torch_utils.async_tensor_h2d (used by the state classes only)."""
    return torch.as_tensor(data, dtype=dtype).to(device, non_blocking=True)


class LogprobsTensors(NamedTuple):
    """vllm.v1.outputs.LogprobsTensors: the fields compute_topk_logprobs fills."""

    logprob_token_ids: torch.Tensor
    logprobs: torch.Tensor
    selected_token_ranks: torch.Tensor
    cu_num_generated_tokens: list | None = None


class _NotBuilt:
    def __init__(self, *args, **kwargs):
        raise NotImplementedError(f"{type(self).__name__} is a stand-in for vLLM's class of "
                                  "that name: the copies only run kernels and launchers")


class SamplingParams(_NotBuilt):
    """vllm.sampling_params.SamplingParams (annotations of the state classes)."""


class RequestState(_NotBuilt):
    """vllm.v1.worker.gpu.states.RequestState (annotations of the state classes)."""


class UvaBackedTensor(_NotBuilt):
    """vllm.v1.worker.gpu.buffer_utils.UvaBackedTensor (the state classes)."""


class StagedWriteTensor(_NotBuilt):
    """vllm.v1.worker.gpu.buffer_utils.StagedWriteTensor (the state classes)."""
'''

INIT_SOURCE = '''\
"""vLLM's Triton sampling kernels {what} vLLM PR #{pr}: {repo} at {commit}.

Written by ci/real_samplers/fetch.py of triton-overflow-suite; see the manifest beside this
package. Each module is the upstream file with only its vLLM imports replaced (in place, one
line each) by imports from vllm_sampler_shims. Licensed as vLLM is (Apache-2.0).
"""
'''


def git_blob_id(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def upstream_text(path, commit, clone=None, raw=None):
    """The bytes of ``path`` at ``commit``, from a clone or a folder of raw files."""
    if clone is not None:
        result = subprocess.run(["git", "-C", str(clone), "show", f"{commit}:{path}"],
                                capture_output=True, check=False)
        if result.returncode:
            sys.exit(f"git show {commit}:{path} failed in {clone}: "
                     f"{result.stderr.decode().strip()}")
        return result.stdout
    file = Path(raw) / commit / path
    if not file.exists():
        sys.exit(f"missing raw file {file}")
    return file.read_bytes()


def shim(text, package):
    """``text`` with every vLLM import line replaced; returns (text, [(line, old, new)])."""
    lines = text.split("\n")
    edits = []
    for number, line in enumerate(lines, start=1):
        if not _VLLM_IMPORT.match(line):
            continue
        stripped = line.strip()
        if stripped not in IMPORT_SHIMS:
            sys.exit(f"line {number}: no shim for `{stripped}`; add it to IMPORT_SHIMS")
        indent = line[:len(line) - len(line.lstrip())]
        new = indent + IMPORT_SHIMS[stripped].format(package=package)
        lines[number - 1] = new
        edits.append((number, line, new))
    return "\n".join(lines), edits


def build(out, clone=None, raw=None):
    manifest = {"repo": REPO, "pull_request": PULL_REQUEST, "sides": {}}
    for side, commit in SIDES.items():
        package = PACKAGES[side]
        root = Path(out) / side
        target = root / package
        target.mkdir(parents=True, exist_ok=True)
        (root / f"{SHIM_MODULE}.py").write_text(SHIM_SOURCE)
        what = "before" if side == "before" else "as fixed by"
        (target / "__init__.py").write_text(INIT_SOURCE.format(
            what=what, pr=PULL_REQUEST, repo=REPO, commit=commit))
        entries = []
        for path, (module, blob_before, blob_after) in FILES.items():
            data = upstream_text(path, commit, clone, raw)
            expected = blob_before if side == "before" else blob_after
            if git_blob_id(data) != expected:
                sys.exit(f"{path} at {commit}: blob {git_blob_id(data)}, expected {expected} "
                         "(not the upstream file)")
            text, edits = shim(data.decode(), package)
            (target / f"{module}.py").write_text(text)
            entries.append({"module": f"{package}.{module}", "upstream_path": path,
                            "commit": commit, "blob": expected,
                            "edited_lines": [{"line": n, "upstream": old, "copy": new}
                                             for n, old, new in edits]})
        manifest["sides"][side] = {"commit": commit, "package": package, "files": entries}
    (Path(out) / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    return manifest


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--clone", type=Path, help="a clone of vllm-project/vllm (bare or not)")
    source.add_argument("--raw", type=Path, help="folder of raw files: RAW/<commit>/<path>")
    parser.add_argument("--out", type=Path, required=True, help="where the copies go")
    args = parser.parse_args(argv)
    manifest = build(args.out, clone=args.clone, raw=args.raw)
    for side, entry in manifest["sides"].items():
        edited = sum(len(f["edited_lines"]) for f in entry["files"])
        print(f"{side}: {entry['commit']} -> {args.out / side / entry['package']} "
              f"({len(entry['files'])} files, {edited} import lines shimmed)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
