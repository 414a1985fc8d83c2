"""Generate the GitHub Actions workflow that builds the conda matrix on CI runners, one job per variant.

    python -m tools.ci.workflow            # rewrite .github/workflows/conda-packages.yml
    python -m tools.ci.workflow --check    # exit 1 when the committed workflow is stale

The jobs come from rendering recipe/recipe.yaml with the project's matrix (tools/conda/variants.yaml, what
`pixi run build` passes) for every plain platform of
pixi.toml (as conda-forge's CI does from a feedstock's variants): each runs `pixi run build FLAVOUR PYTORCH
CUDA`, which selects exactly that variant, and uploads its package. The stable-ABI variants
(`torch-stable-abi211-{cpu,cu130}-<arch>-linux`, build.toml [torch.stable-abi]) serve every torch from that
version on, so they are built once per backend and platform, not per pytorch pin: `tools.builder.op --abi stable`
in pixi's cpu or cuda environment, gated, the CPU one tested with tests/op, each uploaded as its variant
directory. A release job, on a `v*` tag, waits for every build and for the ABI gate, then stages the packages
and the stable variants together, signs each variant's metadata.json keylessly (Sigstore, the job's GitHub OIDC
identity) and publishes them to the Hub, refusing an unsigned variant.
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
from tools.conda.build import REPO_ROOT, variant_config, cuda_version_of, render_variants

WORKFLOW = REPO_ROOT / ".github" / "workflows" / "conda-packages.yml"
# GitHub-hosted runners that build each conda subdir natively.
RUNNERS = {"linux-64": "ubuntu-24.04", "linux-aarch64": "ubuntu-24.04-arm"}
# The machine (variant name's arch) of each conda subdir.
ARCHS = {"linux-64": "x86_64", "linux-aarch64": "aarch64"}
MANIFEST = REPO_ROOT / "pixi.toml"
PIXI_VERSION = "v0.77.0"
# The ABI gate of the release (glibc floor, abi3): tools/release/abi_gate.py checks every package in the channel.
# The stable variant directories lie in stable/<variant>/ (as built, as downloaded); the gate applies
# kernel-abi-check's stable-ABI rule to them (kernelpin/publisher/abi_gate.py: no libtorch C++ symbol, no newer shim).
STABLE_DIR = "stable"
ABI_GATE = f"pixi run -e cpu python -m tools.release.abi_gate output {STABLE_DIR}"


def flavour(cuda_version: str | None) -> str:
    """A job's backend as its id spells it: cpu, cuda129, cuda130."""
    return "cpu" if cuda_version is None else "cuda" + cuda_version.replace(".", "")


@dataclass(frozen=True)
class Job:
    platform: str
    pytorch: str
    cuda: str | None

    @property
    def id(self) -> str:
        return f"build-{self.platform}-{flavour(self.cuda)}-torch{self.pytorch.replace('.', '')}"

    @property
    def build_command(self) -> str:
        """The pixi task call that selects exactly this variant (flavour, pytorch minor, CUDA version)."""
        return f"pixi run build {'cpu' if self.cuda is None else 'cuda'} {self.pytorch} {self.cuda or 'None'}"


@dataclass(frozen=True)
class StableJob:
    """One stable-ABI variant: built once for its backend and platform, as it serves every torch from build.toml's
    [torch.stable-abi] version on. `cuda` is the CUDA its pixi environment pins, that of the nvcc it compiles
    with (None: CPU)."""

    platform: str
    cuda: str | None
    torch: tuple[int, int]  # [torch.stable-abi] version
    # The pixi environment with the torch (CPU or CUDA build) and, for CUDA, the nvcc it builds with.
    environment: str = "cpu"

    @property
    def variant(self) -> str:
        backend = CPU if self.cuda is None else cuda(*(int(part) for part in self.cuda.split(".")))
        return Variant(STABLE_ABI, self.torch, backend, ARCHS[self.platform], "linux").name

    @property
    def id(self) -> str:
        return f"stable-{self.platform}-{flavour(self.cuda)}"

    @property
    def out(self) -> str:
        return f"{STABLE_DIR}/{self.variant}"

    @property
    def build_command(self) -> str:
        # --cuda on: a CUDA job fails rather than quietly building a CPU-only library.
        return (f"pixi run -e {self.environment} python -m tools.builder.op --abi stable "
                f"--cuda {'off' if self.cuda is None else 'on'} --out {self.out}")

    @property
    def gate_command(self) -> str:
        return f"pixi run -e {self.environment} python -m tools.release.abi_gate {self.out}"


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
            jobs.append(Job(platform, str(variant.variant["pytorch"]), cuda_version_of(variant)))
    return sorted(jobs, key=lambda job: job.id)


def stable_matrix(manifest: Path = MANIFEST) -> list[StableJob]:
    """The stable-ABI variants: CPU on every plain platform; for each pixi environment whose feature pins a
    `cuda-version` (its nvcc's), CUDA on each platform that feature is solved for (a named platform declaring a
    driver), with that CUDA."""
    config = BuildConfig.load()
    if config.stable_abi is None:
        return []
    torch = tuple(int(part) for part in config.stable_abi.version.split("."))
    pixi = tomllib.loads(manifest.read_text())
    named = {entry["name"]: entry["platform"] for entry in pixi["workspace"]["platforms"] if isinstance(entry, dict)}
    jobs = [StableJob(platform, None, torch) for platform in workspace_platforms(manifest)]
    for environment, spec in pixi["environments"].items():
        for feature in (pixi["feature"][name] for name in spec["features"]):
            if cuda_version := feature.get("dependencies", {}).get("cuda-version"):
                jobs += [StableJob(named[name], cuda_version.removesuffix(".*"), torch, environment)
                         for name in feature["platforms"]]
    return sorted(jobs, key=lambda job: job.id)


def cuda_driver(manifest: Path = MANIFEST) -> str:
    """The driver's CUDA that the cuda environment's platforms declare (`cuda = ...`): CI runners have no GPU,
    so the CUDA jobs state it with CONDA_OVERRIDE_CUDA for pixi to install that environment."""
    platforms = tomllib.loads(manifest.read_text())["workspace"]["platforms"]
    [driver] = {entry["cuda"] for entry in platforms if isinstance(entry, dict) and "cuda" in entry}
    return driver


def hub_repository(manifest: Path = MANIFEST) -> str:
    """The Hub repository the release goes to: the default of pixi.toml's publish task."""
    args = tomllib.loads(manifest.read_text())["feature"]["dev"]["tasks"]["publish"]["args"]
    [repo] = [arg["default"] for arg in args if arg["arg"] == "repo"]
    return repo


RELEASE_DIR = "build/release"
# Keyless signing with sigstore-python (a kernelpin dependency): the job's GitHub OIDC token is the identity
# Fulcio certifies, so each variant's metadata.json.sigstore names this workflow, its ref and commit.
SIGN_COMMAND = (f'for metadata in {RELEASE_DIR}/build/*/metadata.json; do pixi run -e cpu python -m sigstore sign '
                '--bundle "$metadata.sigstore" "$metadata" || exit 1; done')


def stage_command(stable: Sequence[StableJob], repo: str) -> str:
    """Stage the conda packages and every stable variant (named one by one: a missing one fails the release),
    as pixi.toml's publish task does for output/ alone."""
    sources = " ".join(["output", *(job.out for job in stable)])
    return f"pixi run -e cpu python -m tools.release stage {sources} --repo {repo} --out {RELEASE_DIR}"


def publish_command(repo: str) -> str:
    """Publish what was staged and signed; an unsigned variant (or one whose bundle does not verify) is refused."""
    return f"pixi run -e cpu kernelpin publish {RELEASE_DIR} --repo {repo} --require-signatures"


def _setup_steps() -> list[str]:
    return [
        "      - uses: actions/checkout@v4",
        "      - uses: prefix-dev/setup-pixi@v0.9.3",
        "        with:",
        f"          pixi-version: {PIXI_VERSION}",
        "          cache: false",
    ]


def _download_packages() -> list[str]:
    """The conda packages into output/, the stable variant directories into stable/<variant>/."""
    return [
        "      - uses: actions/download-artifact@v4",
        "        with:",
        "          pattern: conda-*",
        "          path: output",
        "          merge-multiple: true",
        "      - uses: actions/download-artifact@v4",
        "        with:",
        "          pattern: stable-*",
        f"          path: {STABLE_DIR}",
        "          merge-multiple: true",
    ]


def _stable_job(job: StableJob) -> list[str]:
    lines = [
        f"  {job.id}:",
        f"    name: {job.platform} {job.variant}",
        f"    runs-on: {RUNNERS[job.platform]}",
    ]
    if job.cuda is not None:
        lines += ["    env:", f"      CONDA_OVERRIDE_CUDA: '{cuda_driver()}'"]
    lines += [
        "    steps:",
        *_setup_steps(),
        "      - name: Build",
        f"        run: {job.build_command}",
        "      - name: ABI gate",
        f"        run: {job.gate_command}",
    ]
    if job.cuda is None:  # the CUDA runners have no GPU: the CUDA build is tested on one (tools/gpu/stable_abi.sh)
        lines += [
            "      - name: Test",
            f"        run: IMG2GRAY_OP_ABI=stable IMG2GRAY_OP_BUILD=\"$PWD/{job.out}\" pixi run -e cpu pytest -q tests/op",
        ]
    lines += [
        "      - uses: actions/upload-artifact@v4",
        "        with:",
        f"          name: {job.id}",
        f"          path: {STABLE_DIR}/",  # the artifact holds <variant>/...: downloads merge into stable/
        "          if-no-files-found: error",
        "",
    ]
    return lines


def render(jobs: Sequence[Job], stable: Sequence[StableJob]) -> str:
    lines = [
        "# Generated by `python -m tools.ci.workflow` from tools/conda/variants.yaml, build.toml and pixi.toml: do not edit.",
        f"# {len(jobs)} build jobs, one per rendered variant and platform, and {len(stable)} stable-ABI builds, one per",
        "# backend and platform; tests/ci/test_workflow.py fails when stale.",
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
        lines += [
            f"  {job.id}:",
            f"    name: {job.platform} {flavour(job.cuda)} torch {job.pytorch}",
            f"    runs-on: {RUNNERS[job.platform]}",
            "    steps:",
            *_setup_steps(),
            "      - name: Build",
            f"        run: {job.build_command}",
            "      - uses: actions/upload-artifact@v4",
            "        with:",
            f"          name: conda-{job.id.removeprefix('build-')}",
            "          path: output/*/*.conda",
            "          if-no-files-found: error",
            "",
        ]
    for stable_job in stable:
        lines += _stable_job(stable_job)
    needs = ", ".join([*(job.id for job in jobs), *(job.id for job in stable)])
    lines += [
        "  abi-gate:",
        "    name: ABI gate",
        f"    needs: [{needs}]",
        "    runs-on: ubuntu-24.04",
        "    steps:",
        *_setup_steps(),
        *_download_packages(),
        "      - name: ABI gate",
        f"        run: {ABI_GATE}",
        "",
        "  release:",
        "    name: Stage, sign and publish to the Hub",
        f"    needs: [{needs}, abi-gate]",
        "    if: startsWith(github.ref, 'refs/tags/v')",
        "    runs-on: ubuntu-24.04",
        "    environment: release",
        "    permissions:",
        "      contents: read",
        "      id-token: write  # the OIDC token Sigstore certifies: the signer identity of every variant",
        "    steps:",
        *_setup_steps(),
        *_download_packages(),
        "      - name: Stage",
        f"        run: {stage_command(stable, hub_repository())}",
        "      - name: Sign",
        f"        run: {SIGN_COMMAND}",
        "      - name: Publish",
        f"        run: {publish_command(hub_repository())}",
        "        env:",
        "          HF_TOKEN: ${{ secrets.HF_TOKEN }}",
    ]
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="exit 1 if the committed workflow is stale")
    args = parser.parse_args(argv)
    jobs, stable = matrix(), stable_matrix()
    wanted = render(jobs, stable)
    current = WORKFLOW.read_text() if WORKFLOW.exists() else None
    if current == wanted:
        print(f"{WORKFLOW.relative_to(REPO_ROOT)} is up to date ({len(jobs)} build jobs, {len(stable)} stable-ABI)")
        return 0
    if args.check:
        print(f"{WORKFLOW.relative_to(REPO_ROOT)} is stale: run `python -m tools.ci.workflow`", file=sys.stderr)
        return 1
    write_atomic(WORKFLOW, wanted)
    print(f"wrote {WORKFLOW.relative_to(REPO_ROOT)} ({len(jobs)} build jobs, {len(stable)} stable-ABI)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
