"""Each CI job's host environment, as the project's matrix renders it, solved with py-rattler against stand-ins of
conda-forge's builds (tests/conda/support.py): the solve every `pixi run build ...` job starts with."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conda.support import conda_forge_records, write_channel
from tools.ci.workflow import workspace_platforms
from tools.conda.build import cuda_version_of, render_variants, variant_config
from tools.conda.channel import NoCandidateError, solve_environment


@pytest.mark.parametrize("platform", workspace_platforms())
def test_every_jobs_host_environment_solves_against_conda_forges_pytorch(platform: str, tmp_path: Path) -> None:
    """conda-forge builds pytorch for CUDA 12 with 12.9 (cuda-version >=12.9): a CUDA 12 job pinning cuda-version to
    another minor cannot get a pytorch at all. Failed before (the 12.6 matrix): the 3 cu126 jobs of each platform (6 in all) had
    no pytorch for `cuda-version ==12.6`. The solve runs with `__cuda` of the job's CUDA, as tools/conda/build.py
    declares it on a GPU-less runner."""
    channel = write_channel(tmp_path / "conda-forge", conda_forge_records(platform), platform)
    variants = render_variants(variant_config(), target_platform=platform)
    unsolvable = {}
    for variant in variants:
        cuda = cuda_version_of(variant)
        host = variant.recipe.requirements.to_dict()["host"]
        try:
            records = solve_environment([channel], host, cuda=cuda, platform=platform)
        except NoCandidateError as error:  # every failing job is reported, not only the first
            unsolvable[variant.recipe.build.string] = str(error).splitlines()[0]
            continue
        picked = {record.name.normalized: record for record in records}
        assert str(picked["pytorch"].version).startswith(str(variant.variant["pytorch"]) + ".")
        if cuda is None:
            assert str(picked["pytorch"].build).startswith("cpu_")
        else:
            assert str(picked["cuda-version"].version) == cuda
            # conda-forge's build for the job's CUDA major (its cuda130 pytorch serves cuda-version 13.2 too)
            assert str(picked["pytorch"].build).startswith(f"cuda{cuda.split('.')[0]}"), picked["pytorch"].build
    assert not unsolvable, unsolvable
    assert len(variants) == 12
