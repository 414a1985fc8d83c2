"""Keep recipe/recipe.yaml's copies of build.toml in step: its context literals and its source filter.

conda-forge's CI runs rattler-build without experimental features, so the recipe cannot read build.toml
(`load_from_file`). It holds generated blocks instead, between `# generated:<block>` and
`# end generated:<block>` lines; this tool rewrites them from build.toml, and `--check` (run by
tests/conda/test_recipe_sync.py) fails while they disagree.

    python -m tools.conda.recipe_sync            # rewrite the blocks
    python -m tools.conda.recipe_sync --check    # exit 1 and show the difference when stale
"""

from __future__ import annotations

import argparse
import difflib
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from kernelpin.files.atomic import write_atomic
from tools.builder.config import BuildConfig, cuda_release

RECIPE = Path(__file__).resolve().parents[2] / "recipe" / "recipe.yaml"
# The recipe ships the license text (about.license_file); the build itself never reads it.
RECIPE_ONLY_INPUTS = ("LICENSE",)


class RecipeBlockError(ValueError):
    """A generated block's marker lines are missing or repeated."""


def context_lines(config: BuildConfig) -> list[str]:
    values = {
        "name": config.name,
        "version": config.version,
        "license": config.license,
        "homepage": config.homepage,
        "repository": config.repository,
        # The oldest pytorch a stable-ABI package serves (empty: build.toml declares no stable build).
        "stable_abi": config.stable_abi.version if config.stable_abi else "",
    }
    return [f"{key}: {json.dumps(value)}" for key, value in values.items()] + [
        f"cuda_capabilities: {capabilities_expression(config)}"
    ]


def capabilities_expression(config: BuildConfig) -> str:
    """build.toml's per-toolkit capability lists as one recipe expression of cuda_compiler_version, with
    BuildConfig.capabilities_for's rule: the newest key at or below the toolkit's release within its major. Empty for
    a CPU variant or a toolkit without a list: the build (tools/builder/op.py) then refuses it by name."""
    ordered = sorted(config.cuda_capabilities, key=cuda_release, reverse=True)
    branches = [
        f"{json.dumps(';'.join(config.cuda_capabilities[key]))} if match(cuda_compiler_version, "
        f'">={key},<{cuda_release(key)[0] + 1}") else '
        for key in ordered
    ]
    return '${{ "" if cuda_compiler_version == "None" else ' + "".join(branches) + '"" }}'


def filter_includes(config: BuildConfig) -> list[str]:
    """The recipe's source filter: every build input (directories as `dir/**`) plus the license text."""
    includes = [path + "/**" if (config.root / path).is_dir() else path for path in config.build_inputs()]
    return sorted(includes + list(RECIPE_ONLY_INPUTS))


def source_lines(config: BuildConfig) -> list[str]:
    return [
        "path: ..",
        "use_gitignore: true",
        "filter:",
        "  include:",
        *(f"    - {path}" for path in filter_includes(config)),
    ]


def replace_block(text: str, block: str, lines: Sequence[str]) -> str:
    """`text` with the lines between `# generated:<block>` and `# end generated:<block>` replaced.

    The new lines take the indentation of the opening marker.
    """
    rows = text.splitlines(keepends=True)
    starts = [i for i, row in enumerate(rows) if row.strip().startswith(f"# generated:{block} ")]
    ends = [i for i, row in enumerate(rows) if row.strip() == f"# end generated:{block}"]
    if len(starts) != 1 or len(ends) != 1 or ends[0] < starts[0]:
        raise RecipeBlockError(
            f"recipe needs exactly one '# generated:{block} ...' line followed by one '# end generated:{block}' "
            f"line (found {len(starts)} and {len(ends)})"
        )
    indent = rows[starts[0]][: len(rows[starts[0]]) - len(rows[starts[0]].lstrip())]
    body = [f"{indent}{line}\n" for line in lines]
    return "".join(rows[: starts[0] + 1] + body + rows[ends[0] :])


def synced(text: str, config: BuildConfig) -> str:
    text = replace_block(text, "context", context_lines(config))
    return replace_block(text, "source", source_lines(config))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="only report whether the recipe is in step")
    parser.add_argument("--recipe", type=Path, default=RECIPE)
    args = parser.parse_args(argv)
    current = args.recipe.read_text()
    wanted = synced(current, BuildConfig.load())
    if current == wanted:
        print(f"{args.recipe} is in step with build.toml")
        return 0
    if args.check:
        diff = difflib.unified_diff(
            current.splitlines(keepends=True), wanted.splitlines(keepends=True), str(args.recipe), "from build.toml"
        )
        sys.stderr.writelines(diff)
        print(f"{args.recipe} disagrees with build.toml: run `python -m tools.conda.recipe_sync`", file=sys.stderr)
        return 1
    write_atomic(args.recipe, wanted)
    print(f"rewrote the generated blocks of {args.recipe}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
