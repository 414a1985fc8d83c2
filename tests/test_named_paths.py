"""Every repository path that a tracked file names, in a comment, a docstring, a message or a doc, exists.

What counts as a path: a token that starts with one of the checkout's tracked top-level folders and a slash
(`tools/gpu/session.sh`, `tests/conda/`, `../csrc/layout.h` relative to the file that names it), and a module
path under `tools.`/`testkit.`/`benchmarks.`/`tests.` (`python -m testkit.gpu_e2e`: every dotted part up to the
last module must exist); in C/C++ sources, a bare file name (`layout.h`) too. Tokens with placeholders (`<variant>`, `{name}`, `$OUT`, `...`) are patterns, not
paths, and `*` globs must match something. Records of past runs (benchmarks/results/) name the paths of their
day and are not read. tests/test_docs.py checks the docs' links and doc-relative paths besides."""

from __future__ import annotations

import re
import subprocess
from fnmatch import fnmatch
from functools import cache
from pathlib import Path

import pytest

from tests.test_docs import ELSEWHERE

ROOT = Path(__file__).resolve().parents[1]
TEXT_SUFFIXES = {".py", ".sh", ".toml", ".yaml", ".yml", ".md", ".cpp", ".h", ".cu", ".cuh", ".in", ".txt", ".cfg"}
TEXT_NAMES = {"dev", "run", ".gitignore"}
# Records of runs name the paths of the day they ran; this file names missing paths as its examples.
NOT_READ = ("benchmarks/results/", "tests/test_named_paths.py")
# Written by builds and runs, not kept in git (fnmatch patterns): a file may name them though a clone lacks them.
GENERATED = ("tools/ci/node/node_modules", "examples/*.gray.png")
# Paths that a file names on purpose although this checkout lacks them: other projects' files, and the files of
# the throwaway trees tests build in tmp_path. By file, so that a real path gone missing elsewhere is still found.
NAMED_ON_PURPOSE = {
    "*": ELSEWHERE,
    "tests/test_build_op.py": {
        "csrc/cpu.cpp",
        "csrc/shared.h",
        "csrc/kernel.cu",
        "csrc/kernel.cuh",
        "torch-ext/binding.cpp",
    },
    "tests/conda/test_recipe_sync.py": {"csrc/missing.cpp"},  # a broken build.toml's missing source
    # Another workflow of this repository, a signer the channel's release policy must refuse.
    "tests/conda/test_channel_consumers.py": {".github/workflows/nightly.yml"},
    # A package tree the parser-declaration check builds in tmp_path.
    "tests/kernelpin/journeys/test_untrusted_parsers.py": {"kernelpin/sub", "kernelpin/sub/m.py"},
    "tests/test_docs.py": {"tools/x.py"},  # the example of what its check reads
    # Test files the interop-skip check makes up to show what it refuses.
    "tests/interop_suites.toml": {"tests/kernelpin/test_x.py"},
    "tests/test_interop_skips.py": {"tests/kernelpin/test_x.py", "tests/kernelpin/test_other.py"},
    # Signer identities: the release workflows of other repositories (acme/kernels, kernels-community).
    **{
        file: {f".github/workflows/{name}.yaml" for name in workflows}
        for file, workflows in {
            "benchmarks/signature_bench.py": ("release",),
            "docs/kernelpin.md": ("release", "build", "build-mac", "build-windows", "sign-old-builds"),
            "kernelpin/trust/policy.py": ("release", "build"),
            "testkit/sigstore_root.py": ("build",),
            "tests/kernelpin/journeys/test_lock_signatures.py": ("release", "x"),
            "tests/kernelpin/journeys/test_capability_builds.py": ("release",),
            "tests/kernelpin/trust/test_signature.py": ("release", "pr", "build", "build-mac", "other"),
            "tests/kernelpin/trust/test_trust_policy.py": ("release",),
            "tests/kernelpin/trust/test_trust_gate.py": ("release", "other", "build", "build-mac"),
            "tests/kernelpin/journeys/test_trust_paths.py": ("build",),
            "tests/kernelpin/journeys/test_verify_conda.py": ("release",),
            "tests/kernelpin/journeys/test_hostile_hub_answers.py": ("release",),
            "tests/kernelpin/trust/test_moved_policy.py": ("a", "b"),
        }.items()
    },
}
PLACEHOLDER = re.compile(r"[<>{}$%]|\.\.\.")
MODULE_ROOTS = ("tools", "testkit", "benchmarks", "tests")
FILE_SUFFIXES = {"log", "json", "txt", "md", "py", "sh", "toml", "yaml", "csv", "png"}  # tests.log: a file


@cache
def _tracked() -> list[str]:
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    return [path for path in listed.split("\0") if path and (ROOT / path).is_file()]


@cache
def _path_token() -> re.Pattern[str]:
    folders = sorted({path.split("/")[0] for path in _tracked() if "/" in path}, key=len, reverse=True)
    top = "|".join(re.escape(folder) for folder in folders)
    return re.compile(rf"(?<![\w.\-/:])(?P<path>(?:\.\./|\./)*(?:{top})/[\w.*/<>{{}}$%\-]*)")


# The same path spelled as pathlib parts: ROOT / "tools" / "builder" / "config.py".
PATH_PARTS = re.compile(r'(?:"[\w.*-]+"\s*/\s*)+"[\w.*-]+"')
MODULE_TOKEN = re.compile(rf"(?<![\w./-])(?P<module>(?:{'|'.join(MODULE_ROOTS)})(?:\.[a-z_][a-z0-9_]*)+)")


# In C/C++ sources a bare file name is a sibling's: `layout.h`, `img2gray_kernels.cuh` (not `#include <...>`).
C_SOURCES = {".h", ".cuh", ".cpp", ".cu"}
C_FILE_NAME = re.compile(r"(?<![\w./<-])(?P<name>[A-Za-z_][\w-]*\.(?:h|cuh|cpp|cu))\b(?![\w/])")


def _files_to_read() -> list[str]:
    return [
        path
        for path in _tracked()
        if not path.startswith(NOT_READ) and (Path(path).suffix in TEXT_SUFFIXES or Path(path).name in TEXT_NAMES)
    ]


def _exists(named_in: Path, token: str) -> bool:
    token = token.rstrip("/.")
    base = named_in.parent if token.startswith(("./", "../")) else ROOT
    target = base / token
    if not target.resolve().is_relative_to(ROOT):
        return False
    relative = target.resolve().relative_to(ROOT).as_posix()
    if any(fnmatch(relative, generated) or relative.startswith(generated + "/") for generated in GENERATED):
        return True
    if "*" in token:
        return any(ROOT.glob(relative))
    return target.exists()


def _module_exists(module: str) -> bool:
    """`testkit.gpu_e2e`, `tests.test_dev`, `tools.builder.config.BuildConfig` (after a module, its attributes).
    These packages' __init__ files define nothing, so a name under a package is a module or a package."""
    path = ROOT
    for part in module.split("."):
        if (path / f"{part}.py").is_file():
            return True
        if not (path / part).is_dir():  # a package, namespace packages (testkit) too
            return False
        path = path / part
    return True


def missing_paths(relative: str, text: str) -> list[str]:
    named_in = ROOT / relative
    missing = []
    on_purpose = NAMED_ON_PURPOSE["*"] | NAMED_ON_PURPOSE.get(relative, set())
    for number, line in enumerate(text.splitlines(), 1):
        for match in _path_token().finditer(line):
            token = match["path"].rstrip(".,;:)'\"`")
            if not PLACEHOLDER.search(token) and token not in on_purpose and not _exists(named_in, token):
                missing.append(f"{relative}:{number}: {token}")
        for match in PATH_PARTS.finditer(line):
            token = "/".join(re.findall(r'"([^"]+)"', match[0]))
            if _path_token().fullmatch(token) and token not in on_purpose and not _exists(named_in, token):
                missing.append(f"{relative}:{number}: {token}")
        for match in C_FILE_NAME.finditer(line) if named_in.suffix in C_SOURCES else ():
            if match["name"] not in {Path(path).name for path in _tracked()} and match["name"] not in on_purpose:
                missing.append(f"{relative}:{number}: {match['name']}")
        for match in MODULE_TOKEN.finditer(line):
            module = match["module"].rstrip(".")
            if module.rsplit(".", 1)[1] not in FILE_SUFFIXES and not _module_exists(module):
                missing.append(f"{relative}:{number}: {module}")
    return missing


def test_the_check_finds_what_is_not_there() -> None:
    # The check itself: a missing file, a renamed folder, a dead module and a dead relative path are found;
    # placeholders, globs that match, generated files and present paths are not.
    text = (
        "see tools/gpu/session.sh and `tools/gpu/gone.sh`; python -m testkit.gpu_e2e, python -m tools.gpu.gone\n"
        "recipe/<variant>.yaml, tests/*/test_*.py, tools/ci/node/node_modules/.bin, ../csrc/layout.h, "
        '../csrc/gone.h, tools.ci.workflow.flavour, ROOT / "tools" / "gone" / "op.py", "tools" / "ci"\n'
        "#include <cuda_runtime.h> as layout.h plans it, in torch_binding.h"
    )
    assert missing_paths("csrc/img2gray.h", text) == [
        "csrc/img2gray.h:1: tools/gpu/gone.sh",
        "csrc/img2gray.h:1: tools.gpu.gone",
        "csrc/img2gray.h:2: ../csrc/gone.h",
        "csrc/img2gray.h:2: tools/gone/op.py",
        "csrc/img2gray.h:3: torch_binding.h",
    ]


def test_every_named_path_exists() -> None:
    assert set(NAMED_ON_PURPOSE) - {"*"} <= set(_tracked())  # the allowance follows a renamed test file
    missing = [
        where
        for relative in _files_to_read()
        for where in missing_paths(relative, (ROOT / relative).read_text(encoding="utf-8", errors="replace"))
    ]
    assert missing == []


def test_every_git_show_of_a_record_resolves() -> None:
    # The records of earlier runs live in git history; the docs say where (`git show 632436a:benchmarks/...`).
    shallow = (
        subprocess.run(
            ["git", "rev-parse", "--is-shallow-repository"], cwd=ROOT, capture_output=True, text=True, check=True
        ).stdout.strip()
        == "true"
    )
    if shallow:
        pytest.skip("a shallow clone lacks the history the records are in")
    named = {
        (relative, match[1])
        for relative in _files_to_read()
        for match in re.finditer(r"git show ([0-9a-f]{7,40}:[\w./-]+)", (ROOT / relative).read_text(errors="replace"))
    }
    assert named  # the experiments' README names some (docs/verification.md keeps current records only)
    missing = [
        f"{relative}: {revision}"
        for relative, revision in sorted(named)
        if subprocess.run(["git", "cat-file", "-e", revision], cwd=ROOT, capture_output=True).returncode
    ]
    assert missing == []
