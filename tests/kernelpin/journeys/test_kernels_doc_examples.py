"""Issue 50: `kernels`' own documented examples (the installed package's README and the Example blocks of the
docstrings of kernels.__all__) run with `from kernelpin import ...` in place of `from kernels import ...`, against
the local Hub of `./dev hub` (testkit/local_hub.py serves the kernels they load: kernels-community/activation and
relu, signed as kernels-community's CI signs them by the test kit's Sigstore, which the project around the examples
trusts in place of the public-good one: kernelpin's built-in policy for kernels-community holds). The only other
adaptation: on a machine without CUDA, the examples that put a model or a tensor on a device
put it on "cpu" (the Device and CUDAProperties examples, which only describe devices, stay as written). Each example that loads a
kernel says so: kernelpin's warning that it was loaded without a lock is on its stderr. Failed before: 33 of the
38 names were missing."""

from __future__ import annotations

import importlib.metadata
import inspect
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from testkit.local_hub import SIGSTORE_ROOT
from testkit.releasing import hub_env
from tests.kernelpin.journeys.test_doc_examples import docs_hub  # noqa: F401 (the fixture: `./dev hub`)

kernels = pytest.importorskip("kernels")
torch = pytest.importorskip("torch")

FENCE = re.compile(r"```python\n(.*?)```", re.DOTALL)
# The examples that load a kernel from the Hub (the others build repositories and mappings only).
LOADING = {"README", "get_kernel", "get_loaded_kernels", "get_kernelized_layers", "kernelize"}
ON_A_DEVICE = LOADING | {"use_kernel_mapping"}


def _examples() -> dict[str, str]:
    found = {}
    readme = importlib.metadata.metadata("kernels").get_payload() or ""  # the README, as the package ships it
    for number, block in enumerate(FENCE.findall(readme)):
        if "from kernels import" in block:
            found["README" if number == 0 else f"README-{number}"] = block
    for name in kernels.__all__:
        for number, block in enumerate(FENCE.findall(inspect.getdoc(getattr(kernels, name)) or "")):
            found[name if number == 0 else f"{name}-{number}"] = textwrap.dedent(block)
    return found


EXAMPLES = _examples()


def _adapted(name: str, code: str) -> str:
    code = code.replace("from kernels import", "from kernelpin import")
    return code if torch.cuda.is_available() or name not in ON_A_DEVICE else code.replace('"cuda"', '"cpu"')


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_kernels_example_runs_with_kernelpin(docs_hub, tmp_path: Path, name: str) -> None:
    env = hub_env(docs_hub.endpoint, tmp_path / "hf", KERNELPIN_STATE_DIR=str(tmp_path / "state"))
    (tmp_path / "pyproject.toml").write_text(
        f'[project]\nname = "app"\nversion = "0"\n\n[tool.kernelpin.trust]\ntrusted-root = '
        f'"{docs_hub.root / SIGSTORE_ROOT}"\n'
    )
    code = _adapted(name, EXAMPLES[name])
    assert "from kernelpin import" in code
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, env=env, timeout=300
    )
    assert done.returncode == 0, f"{name}:\n{code}\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
    if name in LOADING:  # through kernelpin's front, which says how to pin what it loaded
        assert "was loaded without a lock" in done.stderr, done.stderr[-3000:]
    if name == "get_kernel_variants":  # kernelpin's judgement, in kernels' objects
        assert done.stdout == "torch-universal: compatible\n"
    if name == "get_loaded_kernels":
        assert done.stdout.startswith("activation RepoInfo(repo_id='kernels-community/activation'")


def test_the_examples_are_kernels_own_and_cover_its_loaders() -> None:
    assert {"README", "get_kernel", "get_kernel_variants", "kernelize", "LayerRepository"} <= set(EXAMPLES)
