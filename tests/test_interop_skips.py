"""The skip policy of the interop and differential suites (tests/interop_suites.toml, testkit/interop_skips.py):
checked on a real pytest run of a suite whose judge is missing. Failed before: `pytest.importorskip("kernels.variants")`
skipped the differential suite silently under kernels 0.19."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from testkit.interop_skips import SkipPolicy

ROOT = Path(__file__).resolve().parents[1]


def test_every_suite_exists_and_every_allowed_skip_names_one():
    policy = SkipPolicy.read()
    assert all((ROOT / suite).is_file() for suite in policy.suites)
    assert all(test.split("::")[0] in policy.suites for test in policy.allowed)


def test_a_skip_in_a_suite_fails_unless_listed():
    policy = SkipPolicy(("tests/kernelpin/test_x.py",), {"tests/kernelpin/test_x.py::test_listed": "a reason"})
    assert "a judge that cannot run is a failed check" in policy.problem(
        "tests/kernelpin/test_x.py::test_a", "no kernels"
    )
    assert policy.problem("tests/kernelpin/test_x.py::test_listed[1]", "no kernels") is None
    assert policy.problem("tests/kernelpin/test_other.py::test_a", "no kernels") is None


def test_a_module_level_importorskip_in_a_suite_fails_the_run(tmp_path):
    """The interop suite test_kernelize.py (`pytest.importorskip("kernels")` at its top) run where `kernels` cannot
    be imported: the run fails, naming the policy, instead of skipping."""
    (tmp_path / "sitecustomize.py").write_text("import sys\nsys.modules['kernels'] = None  # as if not installed\n")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-n",
            "0",
            "tests/kernelpin/front/test_kernelize.py",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{ROOT}"},
    )
    assert done.returncode != 0 and "a judge that cannot run is a failed check" in done.stdout, done.stdout[-2000:]
