"""Stage a Hub release of the operator from its builds: `<out>/build/<variant>/` plus a README.md.

    python -m tools.release stage SOURCE... --repo acme/img2gray --out build/release
    python -m kernelpin publish build/release --repo acme/img2gray [--dry-run]

Each SOURCE is a conda package (`.conda`, the bits `pixi add img2gray` installs), a directory holding
conda packages (e.g. `output/`, the channel `pixi run build` writes), or a variant directory written by
`python -m tools.builder.op --out DIR`. A conda package installs the variant directory as `site-packages/<name>/`;
that directory is taken as it is. A variant directory built with `--capability-builds DIR.capabilities` brings its
per-capability builds along (staged as capabilities/<variant>/sm_XY/). Every file is checked against its metadata.json digest before it is
staged; variants of different versions, or two builds of one variant, are refused.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from kernelpin import KernelpinError
from kernelpin.files.atomic import staged_directory
from kernelpin.format import capabilities
from kernelpin.format.conda_package import CondaRecordError, variant_directory
from kernelpin.format.layout import BUILD_DIR, CAPABILITY_DIR, METADATA
from kernelpin.format.spec import check_repo_id
from kernelpin.publisher.release import PublishError, Release, check_release, read_variant, release_version
from tools.builder import capability_builds

ROOT = Path(__file__).resolve().parents[2]
CONDA_SUFFIX = ".conda"


def conda_packages(directory: Path) -> list[Path]:
    """The conda packages in a channel directory (any subdir, e.g. output/linux-64/)."""
    return sorted(path for path in directory.rglob(f"*{CONDA_SUFFIX}") if path.is_file())


def extract_variant(package: Path, into: Path) -> Path:
    """Unpack a conda package with py-rattler; return the variant directory it installs into site-packages."""
    from rattler.package.index_json import IndexJson
    from rattler.package_streaming import extract

    extract(package, into)
    name = IndexJson.from_package_directory(into).name.normalized
    # noarch: python packages keep `site-packages/`; per-python builds have `lib/pythonX.Y/site-packages/`.
    paths = [path.relative_to(into).as_posix() for path in into.rglob(METADATA)]
    try:
        return into / variant_directory(paths, f"{package} (conda package {name})")
    except CondaRecordError as error:
        raise PublishError(str(error)) from None


def collect(sources: Iterable[Path], workdir: Path) -> dict[str, tuple[Path, dict[str, Any], str]]:
    """Variant name -> (directory, checked metadata, where it came from)."""
    variants: dict[str, tuple[Path, dict[str, Any], str]] = {}

    def add(directory: Path, origin: str) -> None:
        metadata = read_variant(directory)
        name = metadata.get("variant")
        if not isinstance(name, str):
            raise PublishError(f'{origin}: {METADATA} has no "variant"; rebuild with `python -m tools.builder.op`')
        if name in variants:
            raise PublishError(
                f"two builds of variant {name}: {variants[name][2]} and {origin}; pass only the one to release"
            )
        variants[name] = (directory, metadata, origin)

    for source in sources:
        if source.is_dir() and (source / METADATA).is_file():
            add(source, str(source))
            continue
        packages = (
            [source]
            if source.suffix == CONDA_SUFFIX and source.is_file()
            else (conda_packages(source) if source.is_dir() else [])
        )
        if not packages:
            raise PublishError(
                f"{source}: neither a variant directory (with {METADATA}), nor a {CONDA_SUFFIX} package, "
                f"nor a directory holding {CONDA_SUFFIX} packages"
            )
        for package in packages:
            add(extract_variant(package, Path(tempfile.mkdtemp(prefix="conda-", dir=workdir))), str(package))
    if not variants:
        raise PublishError("nothing to stage: no sources given")
    return variants


def readme(repo_id: str, variants: dict[str, dict[str, Any]]) -> str:
    """The repository's README.md: what this release is, its variants, how to pin it with kernelpin."""
    first = variants[min(variants)]
    name, version = first.get("name", repo_id.split("/")[1]), release_version(first)
    rows = []
    for variant, metadata in sorted(variants.items()):
        backend = metadata.get("backend", {})
        kind = backend.get("type", "?") + (f" {backend['version']}" if backend.get("version") else "")
        archs = ", ".join(backend.get("archs", [])) or "-"
        provenance = metadata.get("provenance", {})
        commit = (provenance.get("source_commit") or "unknown")[:12]
        rows.append(f"| `{variant}` | {kind} | {archs} | {provenance.get('torch', '?')} | `{commit}` |")
    return "\n".join(
        [
            "---",
            f"license: {str(first.get('license', 'other')).lower()}",
            "tags:",
            "  - kernel",
            "---",
            "",
            f"# {name} {version}",
            "",
            f"Release v{version} of `{name}`. Each `build/<variant>/` holds the operator's Python package, its",
            "compiled library and a `metadata.json` (op namespace, backend and CUDA compute capabilities, the sha256",
            "of every file and the build's provenance).",
            "",
            "| variant | backend | compute capabilities | built with torch | source commit |",
            "|---|---|---|---|---|",
            *rows,
            "",
            "## Use it",
            "",
            "Pin it in your project's `pyproject.toml` and let kernelpin resolve, verify and install it. The integer",
            "is the major-version branch, which kernelpin and `kernels lock` read alike (a range such as",
            f'`"^{version}"` resolves against the version tags, for kernelpin only):',
            "",
            "```toml",
            "[tool.kernels.dependencies]",
            f'"{repo_id}" = {first["version"]}',
            "```",
            "",
            "```console",
            "$ kernelpin lock && kernelpin sync",
            "```",
            "",
            "```python",
            "import kernelpin",
            "",
            f'{name} = kernelpin.load("{repo_id}")',
            "```",
            "",
        ]
    )


def stage(sources: Sequence[Path], out: Path, repo_id: str) -> Release:
    """Lay out the release at `out` (replaced if present); return it checked as `kernelpin publish` will."""
    check_repo_id(repo_id)
    out = out.resolve()
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".release-work-", dir=out.parent) as work:
        variants = collect(sources, Path(work))
        versions = sorted({release_version(metadata) for _, metadata, _ in variants.values()})
        if len(versions) > 1:
            listing = "\n  ".join(f"{origin}: {release_version(metadata)}" for _, metadata, origin in variants.values())
            raise PublishError(
                f"the sources are of different versions ({', '.join(versions)}):\n  {listing}\n"
                "stage one version at a time"
            )
        # Assembled next to `out`, then swapped in: a half-staged release is never left at `out`.
        with staged_directory(out) as staging:
            for name, (directory, metadata, origin) in variants.items():
                shutil.copytree(
                    directory,
                    staging / BUILD_DIR / name,
                    copy_function=shutil.copyfile,
                    ignore=shutil.ignore_patterns("__pycache__"),
                )  # never in a release
                if metadata.get(capabilities.KEY):  # its per-capability builds, written beside it by the build
                    builds = capability_builds.beside(directory)
                    if not builds.is_dir():
                        raise PublishError(
                            f"{origin}: its {METADATA} lists per-capability builds, but {builds} is not there; "
                            "build it again with --capability-builds into that directory"
                        )
                    shutil.copytree(
                        builds,
                        staging / CAPABILITY_DIR / name,
                        copy_function=shutil.copyfile,
                        ignore=shutil.ignore_patterns("__pycache__"),
                    )
            (staging / "README.md").write_text(readme(repo_id, {n: m for n, (_, m, _) in variants.items()}))
            check_release(staging)
    return check_release(out)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tools.release", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    commands = parser.add_subparsers(dest="command", required=True)
    staging = commands.add_parser("stage", help="lay out build/<variant>/ + README.md from conda packages or builds")
    staging.add_argument("sources", nargs="+", type=Path, metavar="SOURCE")
    staging.add_argument("--repo", required=True, metavar="ORG/NAME", help="the Hub repository (named in README.md)")
    staging.add_argument("--out", type=Path, default=ROOT / "build" / "release", help="default: build/release")
    args = parser.parse_args(argv)
    try:
        release = stage(args.sources, args.out, args.repo)
    except KernelpinError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    print(f"staged {release.tag} ({', '.join(sorted(release.variants))}): {len(release.files)} files -> {release.root}")
    print(f"next: python -m kernelpin publish {release.root} --repo {args.repo} --dry-run")
    return 0


if __name__ == "__main__":
    sys.exit(main())
