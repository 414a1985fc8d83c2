"""Generate the GitHub Actions workflow that builds the conda matrix on CI runners, one job per variant.

    python -m tools.ci.workflow            # rewrite .github/workflows/conda-packages.yml
    python -m tools.ci.workflow --check    # exit 1 when the committed workflow is stale

The jobs come from rendering recipe/recipe.yaml with the project's matrix (tools/conda/variants.yaml, what
`pixi run build` passes) for every plain platform of pixi.toml (as conda-forge's CI does from a feedstock's
variants): each runs `pixi run build FLAVOUR PYTORCH CUDA ABI`, which selects exactly that variant, and uploads
its package. The stable-ABI packages (torch_abi: stable) serve every torch from build.toml's [torch.stable-abi]
version on: one compile per backend and platform, and that one compile is the Hub's `torch-stable-abi211-...`
variant too (the release stages it from the package, as it stages the exact ones), so no other job compiles it.
Each stable job gates its package and the CPU one runs tests/op against the variant inside.

One Hub variant is not a conda package: `torch-stable-abi211-cu126-<arch>-linux`, for PyPI's torch+cu126 (kernel-builder's
required cu126; Colab). conda-forge has no pytorch for CUDA 12.6 (its CUDA 12 pytorch is built with 12.9, so the conda
CUDA 12 flavour is 12.9), so a `hub-` job per platform builds it as kernel-builder does: `tools.builder.op --abi stable`
with nvcc 12.6 (NVIDIA's CUDA 12.6 devel image) against PyPI's torch cu126 wheel. A release job, on a
`v*` tag, waits for every build and for the ABI gate (which gates the hub- variants too), then stages the packages and
the hub- variants, signs each variant's
metadata.json keylessly (Sigstore, the job's GitHub OIDC identity) and publishes them to the Hub, refusing an
unsigned variant.
"""

from __future__ import annotations

import argparse
import sys
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from kernelpin.files.atomic import write_atomic
from kernelpin.format.variant import CPU, STABLE_ABI, Variant, cuda
from tools.builder.config import BuildConfig
from tools.conda.build import ANY, REPO_ROOT, abi_of, cuda_version_of, render_variants, variant_config

WORKFLOW = REPO_ROOT / ".github" / "workflows" / "conda-packages.yml"
# GitHub-hosted runners that build each conda subdir natively.
RUNNERS = {"linux-64": "ubuntu-24.04", "linux-aarch64": "ubuntu-24.04-arm"}
# The machine (variant name's arch) of each conda subdir.
ARCHS = {"linux-64": "x86_64", "linux-aarch64": "aarch64"}
MANIFEST = REPO_ROOT / "pixi.toml"
PIXI_VERSION = "v0.77.0"
# The ABI gate of the release (glibc floor, abi3, and kernel-abi-check's stable-ABI rule for the stable packages'
# variants: no libtorch C++ symbol, no newer shim): tools/release/abi_gate.py checks every package in the channel.
ABI_GATE = "pixi run -e cpu python -m tools.release.abi_gate output"
# Where a stable job lays out its package's variant for tests/op, as the release stages it.
STABLE_CHECK_DIR = "build/stable-check"
# The Hub-only CUDA 12 stable variant (module docstring): toolkit, where its nvcc comes from, the torch it is built
# against (kernel-builder's oldest required torch, which PyPI has for cu126) and where the jobs put it.
HUB_CUDA = "12.6"
HUB_IMAGE = "nvidia/cuda:12.6.3-devel-ubuntu24.04"
HUB_TORCH = "torch==2.12.*"
HUB_TORCH_INDEX = "https://download.pytorch.org/whl/cu126"
HUB_DIR = "build/hub"


def flavour(cuda_version: str | None) -> str:
    """A job's backend as its id spells it: cpu, cuda129, cuda130."""
    return "cpu" if cuda_version is None else "cuda" + cuda_version.replace(".", "")


@dataclass(frozen=True)
class Job:
    """One rendered variant on one platform: an exact package (one pytorch minor) or a stable-ABI one."""

    platform: str
    pytorch: str
    cuda: str | None
    abi: str = "exact"

    @property
    def stable(self) -> bool:
        return self.abi == "stable"

    @property
    def id(self) -> str:
        if self.stable:
            return f"stable-{self.platform}-{flavour(self.cuda)}"
        return f"build-{self.platform}-{flavour(self.cuda)}-torch{self.pytorch.replace('.', '')}"

    @property
    def name(self) -> str:
        return (
            f"{self.platform} {self.variant}"
            if self.stable
            else f"{self.platform} {flavour(self.cuda)} torch {self.pytorch}"
        )

    @property
    def build_command(self) -> str:
        """The pixi task call that selects exactly this variant (flavour, pytorch minor, CUDA version, ABI); the one
        stable variant of a backend needs no pytorch pin."""
        pytorch = ANY if self.stable else self.pytorch
        return f"pixi run build {'cpu' if self.cuda is None else 'cuda'} {pytorch} {self.cuda or 'None'} {self.abi}"

    @property
    def variant(self) -> str:
        """The Hub variant a stable package holds (`torch-stable-abi211-cu130-x86_64-linux`)."""
        assert self.stable
        return stable_variant(self.platform, self.cuda)


def stable_variant(platform: str, cuda_version: str | None) -> str:
    """The Hub's stable-ABI variant of a backend on a platform (`torch-stable-abi211-cu126-aarch64-linux`)."""
    config = BuildConfig.load()
    assert config.stable_abi is not None
    backend = CPU if cuda_version is None else cuda(*(int(part) for part in cuda_version.split(".")))
    major, minor = config.stable_abi.version.split(".")
    floor = (int(major), int(minor))
    return Variant(STABLE_ABI, floor, backend, ARCHS[platform], "linux").name


@dataclass(frozen=True)
class HubJob:
    """The Hub-only stable CUDA 12.6 variant of one platform, built with tools.builder.op outside conda."""

    platform: str

    @property
    def id(self) -> str:
        return f"hub-{self.platform}-{flavour(HUB_CUDA)}"

    @property
    def variant(self) -> str:
        return stable_variant(self.platform, HUB_CUDA)

    @property
    def out(self) -> str:
        return f"{HUB_DIR}/{self.variant}"

    @property
    def build_command(self) -> str:
        return (
            f'git config --global --add safe.directory "$PWD" && python3 -m venv /opt/torch && '
            f'/opt/torch/bin/pip install --index-url {HUB_TORCH_INDEX} "{HUB_TORCH}" && /opt/torch/bin/pip install ninja && '
            f"CUDA_HOME=/usr/local/cuda /opt/torch/bin/python -m tools.builder.op --abi stable --cuda on --out {self.out}"
        )


def hub_jobs() -> list[HubJob]:
    return [HubJob(platform) for platform in workspace_platforms()]


def workspace_platforms(manifest: Path = MANIFEST) -> list[str]:
    """The conda subdirs pixi.toml targets (plain entries; named ones only add virtual packages)."""
    platforms = tomllib.loads(manifest.read_text())["workspace"]["platforms"]
    return [entry for entry in platforms if isinstance(entry, str)]


def matrix() -> list[Job]:
    jobs = []
    for platform in workspace_platforms():
        if platform not in RUNNERS:
            raise ValueError(f"pixi.toml platform {platform} has no CI runner: add one to RUNNERS in {__file__}")
        for variant in render_variants(variant_config(), target_platform=platform):
            jobs.append(Job(platform, str(variant.variant["pytorch"]), cuda_version_of(variant), abi_of(variant)))
    return sorted(jobs, key=lambda job: job.id)


def hub_repository(manifest: Path = MANIFEST) -> str:
    """The Hub repository the release goes to: the default of pixi.toml's publish task."""
    args = tomllib.loads(manifest.read_text())["feature"]["dev"]["tasks"]["publish"]["args"]
    [repo] = [arg["default"] for arg in args if arg["arg"] == "repo"]
    return repo


RELEASE_DIR = "build/release"
# Keyless signing with sigstore-python (a kernelpin dependency): the job's GitHub OIDC token is the identity
# Fulcio certifies, so each variant's metadata.json.sigstore names this workflow, its ref and commit.
SIGN_COMMAND = (
    f"for metadata in {RELEASE_DIR}/build/*/metadata.json; do pixi run -e cpu python -m sigstore sign "
    '--bundle "$metadata.sigstore" "$metadata" || exit 1; done'
)


def stage_command(repo: str, hub: Sequence[HubJob] = ()) -> str:
    """Stage the conda packages, exact and stable (the stable ones carry the torch-stable-abi variants), as pixi.toml's
    publish task does, and the Hub-only variants."""
    sources = " ".join(["output", *(job.out for job in hub)])
    return f"pixi run -e cpu python -m tools.release stage {sources} --repo {repo} --out {RELEASE_DIR}"


def publish_command(repo: str) -> str:
    """Publish what was staged and signed; an unsigned variant (or one whose bundle does not verify) is refused."""
    return f"pixi run -e cpu kernelpin publish {RELEASE_DIR} --repo {repo} --require-signatures"


def conda_channel(manifest: Path = MANIFEST) -> tuple[str, str]:
    """Where the conda packages go, (s3://bucket/path, the URL consumers add): pixi.toml's publish-conda defaults."""
    args = tomllib.loads(manifest.read_text())["feature"]["dev"]["tasks"]["publish-conda"]["args"]
    defaults = {arg["arg"]: arg["default"] for arg in args}
    return defaults["channel"], defaults["url"]


def conda_publish_command(manifest: Path = MANIFEST) -> str:
    """Publish the conda packages to the channel, each attested (CEP 27, served as a CEP 50 sidecar) with this job's
    OIDC token: the identity that signed the Hub variants in the step before."""
    channel, url = conda_channel(manifest)
    return f"pixi run -e cpu python -m tools.conda.publish output --channel {channel} --channel-url {url}"


def _setup_steps() -> list[str]:
    return [
        "      - uses: actions/checkout@v4",
        "      - uses: prefix-dev/setup-pixi@v0.9.3",
        "        with:",
        f"          pixi-version: {PIXI_VERSION}",
        "          cache: false",
    ]


def _download_packages() -> list[str]:
    return [
        "      - uses: actions/download-artifact@v4",
        "        with:",
        "          pattern: conda-*",
        "          path: output",
        "          merge-multiple: true",
        "      - uses: actions/download-artifact@v4",
        "        with:",
        "          pattern: hub-*",
        f"          path: {HUB_DIR}",
        "          merge-multiple: true",
    ]


def _hub_job(job: HubJob) -> list[str]:
    return [
        f"  {job.id}:",
        f"    name: {job.platform} {job.variant} (Hub only)",
        f"    runs-on: {RUNNERS[job.platform]}",
        f"    container: {HUB_IMAGE}",
        "    steps:",
        "      - name: Tools",
        "        run: apt-get update && apt-get install -y --no-install-recommends git python3-venv",
        "      - uses: actions/checkout@v4",
        "      - name: Build",
        f"        run: {job.build_command}",
        "      - uses: actions/upload-artifact@v4",
        "        with:",
        f"          name: {job.id}",
        f"          path: {HUB_DIR}",
        "          if-no-files-found: error",
        "",
    ]


def _job(job: Job, repo: str) -> list[str]:
    lines = [
        f"  {job.id}:",
        f"    name: {job.name}",
        f"    runs-on: {RUNNERS[job.platform]}",
        "    steps:",
        *_setup_steps(),
        "      - name: Build",
        f"        run: {job.build_command}",
    ]
    if job.stable:
        lines += ["      - name: ABI gate", f"        run: {ABI_GATE}"]
    if job.stable and job.cuda is None:  # the CUDA runners have no GPU: the CUDA build is tested on one (tools/gpu/)
        variant_dir = f"{STABLE_CHECK_DIR}/build/{job.variant}"
        lines += [
            "      - name: Test",
            (
                f"        run: pixi run -e cpu python -m tools.release stage output --repo {repo} --out {STABLE_CHECK_DIR} && "
                f'IMG2GRAY_OP_ABI=stable IMG2GRAY_OP_BUILD="$PWD/{variant_dir}" pixi run -e cpu pytest -q tests/op'
            ),
        ]
    lines += [
        "      - uses: actions/upload-artifact@v4",
        "        with:",
        f"          name: conda-{job.id.removeprefix('build-')}",
        "          path: output/*/*.conda",
        "          if-no-files-found: error",
        "",
    ]
    return lines


def render(jobs: Sequence[Job], hub: Sequence[HubJob] = ()) -> str:
    stable = [job for job in jobs if job.stable]
    lines = [
        "# Generated by `python -m tools.ci.workflow` from tools/conda/variants.yaml, build.toml and pixi.toml: do not edit.",
        f"# {len(jobs)} build jobs, one per rendered variant and platform ({len(stable)} of them stable-ABI packages, one",
        (
            "# per backend and platform, whose library is the Hub's stable variant too), and "
            f"{len(hub)} Hub-only job{'s' * (len(hub) != 1)}"
        ),
        f"# (the CUDA {HUB_CUDA} stable variant, no conda package); tests/ci/test_workflow.py fails when stale.",
        "name: conda packages",
        "",
        "on:",
        "  push:",
        "    branches: [main]",
        "    tags: ['v*']",
        "  pull_request:",
        "",
        "permissions:",
        "  contents: read",
        "",
        "jobs:",
    ]
    for job in jobs:
        lines += _job(job, hub_repository())
    for hub_job in hub:
        lines += _hub_job(hub_job)
    needs = ", ".join([*(job.id for job in jobs), *(job.id for job in hub)])
    lines += [
        "  abi-gate:",
        "    name: ABI gate",
        f"    needs: [{needs}]",
        "    runs-on: ubuntu-24.04",
        "    steps:",
        *_setup_steps(),
        *_download_packages(),
        "      - name: ABI gate",
        f"        run: {' '.join([ABI_GATE, *(job.out for job in hub)])}",
        "",
        "  release:",
        "    name: Stage, sign and publish to the Hub and the conda channel",
        f"    needs: [{needs}, abi-gate]",
        "    if: startsWith(github.ref, 'refs/tags/v')",
        "    runs-on: ubuntu-24.04",
        "    environment: release",
        "    permissions:",
        "      contents: read",
        "      id-token: write  # the OIDC token Sigstore certifies: the signer of every variant and conda package",
        "    steps:",
        *_setup_steps(),
        *_download_packages(),
        "      - name: Stage",
        f"        run: {stage_command(hub_repository(), hub)}",
        "      - name: Sign",
        f"        run: {SIGN_COMMAND}",
        "      - name: Publish",
        f"        run: {publish_command(hub_repository())}",
        "        env:",
        "          HF_TOKEN: ${{ secrets.HF_TOKEN }}",
        "      - name: Publish to the conda channel",
        f"        run: {conda_publish_command()}",
        "        env:  # the channel bucket's write credentials; reads are public",
        "          AWS_ACCESS_KEY_ID: ${{ secrets.CONDA_CHANNEL_ACCESS_KEY_ID }}",
        "          AWS_SECRET_ACCESS_KEY: ${{ secrets.CONDA_CHANNEL_SECRET_ACCESS_KEY }}",
    ]
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="exit 1 if the committed workflow is stale")
    args = parser.parse_args(argv)
    jobs = matrix()
    wanted = render(jobs, hub_jobs())
    current = WORKFLOW.read_text() if WORKFLOW.exists() else None
    if current == wanted:
        print(
            f"{WORKFLOW.relative_to(REPO_ROOT)} is up to date ({len(jobs)} build jobs, {sum(job.stable for job in jobs)} stable-ABI)"
        )
        return 0
    if args.check:
        print(f"{WORKFLOW.relative_to(REPO_ROOT)} is stale: run `python -m tools.ci.workflow`", file=sys.stderr)
        return 1
    write_atomic(WORKFLOW, wanted)
    print(
        f"wrote {WORKFLOW.relative_to(REPO_ROOT)} ({len(jobs)} build jobs, {sum(job.stable for job in jobs)} stable-ABI)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
