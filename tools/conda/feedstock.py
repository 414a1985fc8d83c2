"""The release step that makes the conda-forge (feedstock) form of the recipe.

    python -m tools.conda.feedstock --ref v0.1.0 [--out build/feedstock]

1. `git archive` of REF as `<name>-<version>.tar.gz` (gzip without a timestamp: one commit, one sha256);
2. its sha256;
3. `<out>/recipe/recipe.yaml`: recipe/recipe.yaml with the local `path: ..` source replaced by the url of the
   archive as a GitHub release asset (`<repository>/releases/download/v<version>/<archive>`) and its sha256,
   and the provenance commit written in; plus the recipe's test script (no variant file: conda-forge's
   global pins choose compilers, CUDA, python_min and pytorch).

Upload the archive to the release (`gh release upload v<version> <out>/<archive>`), then copy `<out>/recipe/`
into the feedstock. The archive is the release asset: GitHub's own "Source code" tarballs are generated on
demand and their bytes are not guaranteed to stay the same.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import io
import shutil
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from kernelpin.files.atomic import write_atomic
from tools.builder.config import BuildConfig
from tools.conda.recipe_sync import RECIPE, replace_block

RECIPE_FILES = ("check_img2gray.py",)  # no variant file: the feedstock builds with the global pins
# The recipe's provenance expression; a feedstock build has no checkout to ask, so the commit is written in.
COMMIT_FROM_ENVIRONMENT = '${{ env.get("IMG2GRAY_SOURCE_COMMIT", default="") }}'


@dataclass(frozen=True)
class Feedstock:
    archive: Path
    sha256: str
    url: str
    recipe: Path
    commit: str


def archive_bytes(root: Path, ref: str, prefix: str) -> bytes:
    """`git archive` of `ref` as a gzip stream whose bytes depend on the commit only (no gzip mtime/name)."""
    tar = subprocess.run(
        ["git", "-C", str(root), "archive", "--format=tar", f"--prefix={prefix}/", ref], capture_output=True, check=True
    ).stdout
    buffer = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=buffer, compresslevel=9, mtime=0) as stream:
        stream.write(tar)
    return buffer.getvalue()


def feedstock_recipe(text: str, url: str, sha256: str, commit: str) -> str:
    if COMMIT_FROM_ENVIRONMENT not in text:
        raise ValueError(
            f"recipe/recipe.yaml no longer holds {COMMIT_FROM_ENVIRONMENT}; update tools/conda/feedstock.py"
        )
    text = replace_block(text, "source", [f"url: {url}", f"sha256: {sha256}"])
    return text.replace(COMMIT_FROM_ENVIRONMENT, f'"{commit}"')


def write_feedstock(ref: str, out: Path, config: BuildConfig | None = None) -> Feedstock:
    config = config or BuildConfig.load()
    try:
        commit = subprocess.run(
            ["git", "-C", str(config.root), "rev-parse", "--verify", f"{ref}^{{commit}}"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except subprocess.CalledProcessError as error:
        raise ValueError(
            f"{ref!r} is not a commit of {config.root}: tag the release first (git tag v{config.version})"
        ) from error
    stem = f"{config.name}-{config.version}"
    data = archive_bytes(config.root, commit, stem)
    sha256 = hashlib.sha256(data).hexdigest()
    url = f"{config.repository}/releases/download/v{config.version}/{stem}.tar.gz"
    out.mkdir(parents=True, exist_ok=True)
    archive = out / f"{stem}.tar.gz"
    archive.write_bytes(data)
    recipe_dir = out / "recipe"
    recipe_dir.mkdir(exist_ok=True)
    write_atomic(recipe_dir / "recipe.yaml", feedstock_recipe(RECIPE.read_text(), url, sha256, commit))
    for name in RECIPE_FILES:
        shutil.copyfile(RECIPE.parent / name, recipe_dir / name)
    return Feedstock(archive, sha256, url, recipe_dir / "recipe.yaml", commit)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ref", required=True, help="the release tag (or any commit), e.g. v0.1.0")
    parser.add_argument("--out", type=Path, default=Path("build/feedstock"))
    args = parser.parse_args(argv)
    try:
        feedstock = write_feedstock(args.ref, args.out)
    except ValueError as error:
        print(f"feedstock: {error}", file=sys.stderr)
        return 1
    print(f"archive  {feedstock.archive}  sha256 {feedstock.sha256}")
    print(f"url      {feedstock.url}")
    print(f"recipe   {feedstock.recipe} (commit {feedstock.commit})")
    print(
        f"next: gh release upload v{BuildConfig.load().version} {feedstock.archive}; copy {feedstock.recipe.parent}/ "
        "into the feedstock's recipe/"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
