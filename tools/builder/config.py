"""build.toml, read in one place: the kernel's identity, its CUDA capabilities and its declared sources.

Everything that needs the name, the version or the list of sources asks `BuildConfig.load()`: the build
(tools/builder/op.py), the conda tooling (the recipe's generated context, tools/conda/), the release step and
the tests. Sources are declared as kernel-builder declares them: `[torch] src` for the binding and one
`[kernel.<name>]` table per backend with its `backend` and `src`.
"""

from __future__ import annotations

import json
import re
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

# The recipe runs this module on its host python, conda-forge's python_min (3.10), which has no tomllib: there
# tomli (the package tomllib was taken from, same API) is a host requirement of the recipe.
if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[2]
BUILD_TOML = "build.toml"
BACKENDS = ("cpu", "cuda")
COMPILED_SUFFIXES = (".cpp", ".cu")
# What a build reads besides build.toml and the declared sources: the build tool itself and the
# pure-Python kernelpin modules it names the variant with (the Python package dir is added per kernel).
BUILD_TOOLS = (
    "tools/__init__.py",
    "tools/builder/__init__.py",
    "tools/builder/capability_builds.py",
    "tools/builder/config.py",
    "tools/builder/op.py",
    "tools/builder/toolkit_archs.json",
    "kernelpin",
)


ABIS = ("exact", "stable")

# What each CUDA toolkit of the matrix compiles, as its own tools list it (`nvcc --list-gpu-code`; PyPI's CUDA 12
# has no nvcc, there its ptxas's --gpu-name values): written by `python -m tools.maintainer.toolkits --write-table`
# from the toolkits it installs, never by hand (tests/test_toolkits.py checks the rows of the toolkits installed).
TOOLKIT_TABLE = Path(__file__).with_name("toolkit_archs.json")
TOOLKIT_ARCHS: dict[str, frozenset[str]] = {
    release: frozenset(archs) for release, archs in json.loads(TOOLKIT_TABLE.read_text())["compiles"].items()
}


def cuda_release(version: str) -> tuple[int, int]:
    """(major, minor) of a CUDA release ("12.6", "13.0.88")."""
    major, minor = version.split(".")[:2]
    return int(major), int(minor)


@dataclass(frozen=True)
class StableAbi:
    """The stable-ABI build: its oldest torch ("2.11") and the binding sources that replace [torch] src."""

    version: str
    sources: tuple[str, ...]

    @property
    def target(self) -> int:
        """TORCH_TARGET_VERSION: major << 56 | minor << 48."""
        major, minor = (int(part) for part in self.version.split("."))
        return major << 56 | minor << 48


class BuildConfigError(ValueError):
    """build.toml is missing something or names a file that is not there."""


@dataclass(frozen=True)
class BuildConfig:
    root: Path
    name: str
    version: str
    license: str
    homepage: str
    repository: str
    cuda_capabilities: dict[str, tuple[str, ...]]  # CUDA toolkit "major.minor" -> its TORCH_CUDA_ARCH_LIST entries
    torch_sources: tuple[str, ...]
    backend_sources: dict[str, tuple[str, ...]]  # "cpu" / "cuda" -> repository-relative paths
    stable_abi: StableAbi | None = None  # [torch.stable-abi]: the binding of the stable-ABI build
    upstream: str | None = None  # [general] upstream: the repository the kernel comes from (metadata `upstream`)
    kernels_minver: str | None = None  # [general] kernels-minver: the oldest `kernels` that loads the builds

    @classmethod
    def load(cls, root: Path = ROOT) -> BuildConfig:
        path = root / BUILD_TOML
        try:
            config = tomllib.loads(path.read_text())
        except (OSError, tomllib.TOMLDecodeError) as error:
            raise BuildConfigError(f"cannot read {path}: {error}") from error
        return cls.from_dict(config, root)

    @classmethod
    def from_dict(cls, config: dict, root: Path = ROOT) -> BuildConfig:
        general = _table(config, "general")
        backend_sources: dict[str, tuple[str, ...]] = {}
        for kernel, table in _table(config, "kernel").items():
            backend = table.get("backend")
            if backend not in BACKENDS:
                raise BuildConfigError(f"build.toml [kernel.{kernel}]: backend {backend!r} is not one of {BACKENDS}")
            backend_sources[backend] = backend_sources.get(backend, ()) + _sources(table, f"kernel.{kernel}", root)
        if "cpu" not in backend_sources:
            raise BuildConfigError(
                'build.toml declares no [kernel.*] table with backend = "cpu"; every build compiles it'
            )
        return cls(
            root=root,
            name=_string(general, "general", "name"),
            version=_string(general, "general", "version"),
            license=_string(general, "general", "license"),
            homepage=_string(general, "general", "homepage"),
            repository=_string(general, "general", "repository"),
            cuda_capabilities=_cuda_capabilities(_table(config, "cuda")),
            torch_sources=_sources(_table(config, "torch"), "torch", root),
            backend_sources=backend_sources,
            stable_abi=_stable_abi(_table(config, "torch"), root),
            upstream=_optional_string(general, "general", "upstream"),
            kernels_minver=_optional_string(general, "general", "kernels-minver"),
        )

    def capabilities_for(self, toolkit: str) -> tuple[str, ...]:
        """The capabilities a CUDA toolkit compiles: the list of the newest key at or below its release within its
        major (a new major may drop architectures: it needs its own list)."""
        major, minor = cuda_release(toolkit)
        keys = [
            key for key in self.cuda_capabilities if cuda_release(key)[0] == major and cuda_release(key)[1] <= minor
        ]
        if not keys:
            raise BuildConfigError(
                f"build.toml [cuda.capabilities] has no list for CUDA {toolkit}: add a "
                f'"{major}.{minor}" = [...] entry (it has {", ".join(self.cuda_capabilities) or "none"})'
            )
        return self.cuda_capabilities[max(keys, key=cuda_release)]

    @property
    def package_dir(self) -> str:
        """The Python package every build lays out next to the library."""
        return f"torch-ext/{self.name}"

    def sources(self, cuda: bool, abi: str = "exact") -> list[str]:
        """Every declared file of a build (CPU builds: torch + cpu; CUDA builds: + cuda), without repeats; the
        stable-ABI build takes [torch.stable-abi] src for [torch] src."""
        backends = ("cpu", "cuda") if cuda else ("cpu",)
        declared = self.binding_sources(abi) + tuple(
            path for backend in backends for path in self.backend_sources.get(backend, ())
        )
        return list(dict.fromkeys(declared))

    def binding_sources(self, abi: str) -> tuple[str, ...]:
        if abi == "exact":
            return self.torch_sources
        if abi == "stable" and self.stable_abi:
            return self.stable_abi.sources
        raise BuildConfigError(
            f"build.toml declares no {abi!r} build (abi is one of {ABIS}; stable needs a [torch.stable-abi] table)"
        )

    def compiled(self, cuda: bool, abi: str = "exact") -> list[Path]:
        """The translation units of a build, as absolute paths."""
        return [self.root / path for path in self.sources(cuda, abi) if path.endswith(COMPILED_SUFFIXES)]

    def build_inputs(self) -> list[str]:
        """Repository-relative paths a build reads: what a source copy (recipe, release rebuild) must hold."""
        stable = list(self.stable_abi.sources) if self.stable_abi else []
        declared = (
            self.sources(cuda=True) + stable + [path for paths in self.backend_sources.values() for path in paths]
        )
        return sorted({BUILD_TOML, self.package_dir, *declared, *BUILD_TOOLS})


def copy_build_inputs(config: BuildConfig, into: Path) -> Path:
    """Copy what a build reads into `into`: a source tree that builds like the checkout (release rebuilds,
    reproducibility checks)."""
    for relative in config.build_inputs():
        source, target = config.root / relative, into / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        if source.is_dir():
            shutil.copytree(source, target, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copyfile(source, target)
    return into


def _stable_abi(torch_table: dict, root: Path) -> StableAbi | None:
    table = torch_table.get("stable-abi")
    if table is None:
        return None
    version = table.get("version") if isinstance(table, dict) else None
    if not isinstance(version, str) or not re.fullmatch(r"2\.\d+", version) or int(version.split(".")[1]) < 10:
        raise BuildConfigError(
            f'build.toml [torch.stable-abi] needs version = "2.N" (N >= 10, the first torch '
            f"that enforces TORCH_TARGET_VERSION), got {version!r}"
        )
    return StableAbi(version, _sources(table, "torch.stable-abi", root))


def _cuda_capabilities(cuda_table: dict) -> dict[str, tuple[str, ...]]:
    table = cuda_table.get("capabilities", {})
    if not isinstance(table, dict):
        raise BuildConfigError(
            'build.toml [cuda.capabilities] needs one list per CUDA toolkit, e.g. "13.0" = ["7.5", "9.0", "12.1+PTX"]'
        )
    lists = {}
    for toolkit, archs in table.items():
        if toolkit not in TOOLKIT_ARCHS:
            raise BuildConfigError(
                f'build.toml [cuda.capabilities] "{toolkit}": not a CUDA toolkit whose '
                f"architectures are known ({', '.join(TOOLKIT_ARCHS)}); add it to tools/maintainer/toolkits.py and "
                "record what it compiles with `python -m tools.maintainer.toolkits --toolkit X.Y --write-table`"
            )
        if not isinstance(archs, list) or not archs or not all(isinstance(arch, str) for arch in archs):
            raise BuildConfigError(f'build.toml [cuda.capabilities] "{toolkit}" needs a list like ["8.0", "9.0+PTX"]')
        if unknown := [arch for arch in archs if arch.removesuffix("+PTX") not in TOOLKIT_ARCHS[toolkit]]:
            newest = max(TOOLKIT_ARCHS[toolkit], key=cuda_release)
            oldest = min(TOOLKIT_ARCHS[toolkit], key=cuda_release)
            raise BuildConfigError(
                f'build.toml [cuda.capabilities] "{toolkit}": CUDA {toolkit} cannot compile '
                f"{', '.join(unknown)} (it compiles {oldest} to {newest})"
            )
        lists[toolkit] = tuple(archs)
    return lists


def _table(config: dict, key: str) -> dict:
    value = config.get(key)
    if not isinstance(value, dict):
        raise BuildConfigError(f"build.toml has no [{key}] table; see the comments in build.toml for its layout")
    return value


def _optional_string(table: dict, where: str, key: str) -> str | None:
    return None if table.get(key) is None else _string(table, where, key)


def _string(table: dict, where: str, key: str) -> str:
    value = table.get(key)
    if not isinstance(value, str) or not value:
        raise BuildConfigError(f'build.toml [{where}] needs {key} = "..." (a non-empty string)')
    return value


def _sources(table: dict, where: str, root: Path) -> tuple[str, ...]:
    paths = table.get("src")
    if not isinstance(paths, list) or not paths or not all(isinstance(p, str) for p in paths):
        raise BuildConfigError(f'build.toml [{where}] needs src = ["path", ...] (repository-relative files)')
    for path in paths:
        pure = PurePosixPath(path)
        if pure.is_absolute() or ".." in pure.parts or str(pure) != path:
            raise BuildConfigError(f"build.toml [{where}] src {path!r}: give a normalized path inside the repository")
        if not (root / path).is_file():
            raise BuildConfigError(f"build.toml [{where}] src {path!r} does not exist under {root}")
    return tuple(paths)
