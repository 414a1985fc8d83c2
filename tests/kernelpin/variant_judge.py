"""HF `kernels`, the installed version, as the judge of variant choice, and a grid of simulated machines x names.

The judge is kernels' code, imported (through kernelpin.loading.kernels_internals, which knows where each
version keeps it), never a copy of its rules: its `_resolve_variant_for_system` (the choice by name, given a
machine's facts) and `_check_arch_incompatibility` (its check of the chosen build's archs against the GPU, fed
a simulated torch). kernelpin chooses as the newest kernels it was checked against (NEWEST, 0.19.1) does; CI
runs tests/kernelpin/format/test_variant_vs_kernels.py with that release and with the oldest supported (OLDEST,
0.17.2, tools/ci/lowest_deps.py), where the deviations below, each with its reason, are left out of the
comparison. The bigger run of the issue (many random repositories with random archs on every machine) is

    python -m tests.kernelpin.variant_judge [--repos 200] [--seed 21]

which prints the cases compared and every disagreement (none expected).
"""

from __future__ import annotations

import argparse
import functools
import inspect
import itertools
import logging
import random
import re
import sys
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from types import SimpleNamespace

from kernels._rust import Backend as MetadataBackend
from packaging.version import Version

from kernelpin.format.variant import MLX, NOARCH, SDK, Backend, Environment, Variant, select
from kernelpin.loading import kernels_internals

JUDGE = "the variant judge (tests/kernelpin/variant_judge.py)"
kernels_variants = kernels_internals.module("variants", JUDGE)
kernels_backends = kernels_internals.module("backends", JUDGE)
kernels_archs = kernels_internals.module("archs", JUDGE)
KERNELS_VERSION = kernels_internals.installed_version(JUDGE)
# Whether the judge has kernels 0.19's selection inputs (the interpreter's Python, free-threading, MLX).
JUDGE_0_19 = "python_version" in inspect.signature(kernels_variants._resolve_variant_for_system).parameters

# Where kernelpin's choice differs from the judge's, by design; each is applied to the judge's input or left out
# of the comparison, never hidden in kernelpin's code (docs/kernelpin.md, "Which variant").
DEVIATIONS = {
    # Every version: kernels' sort keys tie (kernels 0.19: a legacy name and its new-format twin with
    # cpython-3.9-abi3; mlx-X and torch-X; kernels 0.17-0.18: a tvm-ffi build whose backend minor is 0 or
    # unversioned and a Python-only build), and it keeps its input's order, the Hub listing read into a set:
    # arbitrary. kernelpin orders them: tvm-ffi before Python-only, then by name. The judge is fed that order.
    "TIES": "kernels' order among equal sort keys is its input's (a set's); kernelpin's is by name",
}
if not JUDGE_0_19:
    DEVIATIONS |= {
        "NEW_NAMES": "kernels before 0.19 cannot read kernel-builder's new names (sdk*, mlx-*, torch-X.Y-..., "
        "torch-stable-abi-X.Y-..., tvm-ffi-X.Y-...): only legacy names are compared",
        "ROCM714": "kernels before 0.19 read rocm714 as ROCm 71.4; 0.19 (and kernelpin) as 7.14",
        "ROCM_MINOR": "kernels 0.17 takes only the system's exact ROCm version; 0.18+ (and kernelpin) also a lower "
        "minor, as for CUDA: ROCm machines are not compared",
        "CANN_NOARCH": "kernels before 0.19 takes torch-npu on a CANN machine; 0.19 (and kernelpin) torch-cann: "
        "CANN machines are not compared",
        "FREE_THREADED": "kernels before 0.19 drops every compiled build on free-threaded Python before 3.15 and "
        "takes abi3 builds on 3.15; 0.19 (and kernelpin) take abi3t builds only: free-threaded "
        "machines are not compared",
    }

NAMES = [
    # per-torch builds: every backend, both ABI tags and none, other torch versions, CPU archs and OSes
    *(
        f"torch213-cxx11-{tag}-x86_64-linux"
        for tag in ("cpu", "cu118", "cu128", "cu129", "cu130", "cu131", "rocm70", "rocm71", "xpu20253", "cann81")
    ),
    "torch213-cxx98-cpu-x86_64-linux",
    "torch213-cxx98-cu130-x86_64-linux",
    "torch213-cpu-x86_64-linux",
    "torch213-cu130-x86_64-linux",
    "torch213-cu128-x86_64-linux",
    "torch213-cxx11-cu130-aarch64-linux",
    "torch213-cu130-aarch64-linux",
    "torch213-cann81-aarch64-linux",
    "torch212-cxx11-cpu-x86_64-linux",
    "torch212-cxx11-cu129-x86_64-linux",
    "torch212-cxx11-rocm71-x86_64-linux",
    "torch214-cxx11-cu130-x86_64-linux",
    "torch213-cxx11-rocm714-x86_64-linux",
    "torch213-cpu-aarch64-darwin",
    "torch213-cxx11-cpu-aarch64-darwin",
    "torch213-metal-aarch64-darwin",
    "torch212-metal-aarch64-darwin",
    "torch213-cpu-x86_64-windows",
    "torch213-cu130-x86_64-windows",
    "torch213-xpu20253-x86_64-windows",
    # stable ABI: several ABI versions and backends
    "torch-stable-abi29-cpu-x86_64-linux",
    "torch-stable-abi210-cu130-x86_64-linux",
    "torch-stable-abi210-cu128-x86_64-linux",
    "torch-stable-abi212-cu131-x86_64-linux",
    "torch-stable-abi213-cpu-x86_64-linux",
    "torch-stable-abi214-cu130-x86_64-linux",
    "torch-stable-abi210-rocm71-x86_64-linux",
    "torch-stable-abi210-xpu20253-x86_64-linux",
    "torch-stable-abi210-metal-aarch64-darwin",
    "torch-stable-abi212-cu130-x86_64-windows",
    "torch-stable-abi210-cu130-aarch64-linux",
    "torch-stable-abi210-cann81-aarch64-linux",
    "torch213-cxx11-neuron-x86_64-linux",
    "torch-stable-abi210-tpu-x86_64-linux",
    # tvm-ffi
    "tvm-ffi01-cu130-x86_64-linux",
    "tvm-ffi01-cu128-x86_64-linux",
    "tvm-ffi01-cpu-x86_64-linux",
    "tvm-ffi02-cu130-x86_64-linux",
    "tvm-ffi01-rocm71-x86_64-linux",
    "tvm-ffi01-metal-aarch64-darwin",
    # Python-only
    *(f"torch-{name}" for name in ("universal", "cpu", "cuda", "rocm", "xpu", "metal", "npu", "cann", "neuron", "tpu")),
    # kernel-builder's new names (kernels 0.19): per-torch, stable ABI and tvm-ffi builds with a Python floor
    # and ABI tag, legacy twins, free-threaded (abi3t) builds, every backend spelled out
    "torch-2.13-cxx11-cuda-13.0-cpython-3.10-abi3-x86_64-linux",
    "torch-2.13-cuda-13.0-cpython-3.10-abi3-x86_64-linux",
    "torch-2.13-cxx11-cuda-13.0-cpython-3.9-abi3-x86_64-linux",
    "torch-2.13-cxx11-cuda-12.8-cpython-3.12-abi3-x86_64-linux",
    "torch-2.13-cuda-13.0-cpython-3.15-abi3t-x86_64-linux",
    "torch-2.13-cpu-cpython-3.10-abi3-x86_64-linux",
    "torch-2.13-cpu-cpython-3.15-abi3t-aarch64-darwin",
    "torch-2.13-metal-cpython-3.10-abi3-aarch64-darwin",
    "torch-2.13-rocm-7.1-cpython-3.10-abi3-x86_64-linux",
    "torch-2.13-rocm-7.14-cpython-3.10-abi3-x86_64-linux",
    "torch-2.13-xpu-2025.3-cpython-3.10-abi3-x86_64-linux",
    "torch-2.13-cann-8.1-cpython-3.10-abi3-aarch64-linux",
    "torch-2.12-cxx98-cuda-13.0-cpython-3.10-abi3-x86_64-linux",
    "torch-2.13-neuron-cpython-3.10-abi3-x86_64-linux",
    "torch-stable-abi-2.11-cuda-13.0-cpython-3.10-abi3-x86_64-linux",
    "torch-stable-abi-2.11-cpu-cpython-3.15-abi3t-x86_64-linux",
    "torch-stable-abi-2.12-cuda-13.1-cpython-3.12-abi3-x86_64-linux",
    "torch-stable-abi-2.10-tpu-cpython-3.11-abi3-x86_64-linux",
    "torch-stable-abi-2.13-cpu-cpython-3.9-abi3-x86_64-linux",
    "tvm-ffi-0.1-cuda-13.0-cpython-3.10-abi3-x86_64-linux",
    "tvm-ffi-0.1-cpu-cpython-3.15-abi3t-x86_64-linux",
    "tvm-ffi-0.1-cuda-13.0-cpython-3.9-abi3-x86_64-linux",
    # SDKs and MLX
    "sdk",
    "sdk-cuda",
    "sdk-cpu",
    "sdk-metal",
    "sdk-cpython-3.12-abi3-x86_64-linux",
    "sdk-cpython-3.15-abi3t-x86_64-linux",
    "sdk-cuda-12.8-cpython-3.12-abi3-x86_64-linux",
    "sdk-cuda-13.0-cpython-3.10-abi3-x86_64-linux",
    "sdk-cpu-cpython-3.12-abi3-x86_64-linux",
    "sdk-rocm-7.1-cpython-3.10-abi3-x86_64-linux",
    "sdk-metal-cpython-3.11-abi3-aarch64-darwin",
    "mlx-metal",
    "mlx-cpu",
    "mlx-universal",
    # names neither reads
    "torch213-cxx11-cu130-x86_64",
    "torch213-cuda-x86_64-linux",
    "tvm-ffi-cpu-x86_64-linux",
    "build",
    "torch-2.13-cxx11-cuda-13.0-x86_64-linux",
    "sdk-cuda-13.0",
    "sdk-cuda-cpython-3.12-abi3-x86_64-linux",
    "mlx-0.1-metal",
    "torch213-cxx11-cu130-cpython-3.10-abi3-x86_64-linux",
    "torch-2.13-cpu-cpython-3.14-abi3t-x86_64-linux",
]
UNREADABLE = 10  # the last names above

PLATFORMS = [("linux", "x86_64"), ("linux", "aarch64"), ("darwin", "aarch64"), ("windows", "x86_64")]
BACKENDS = {
    "linux": [
        "cpu",
        "cu118",
        "cu128",
        "cu129",
        "cu130",
        "cu131",
        "rocm70",
        "rocm71",
        "rocm714",
        "xpu20253",
        "cann81",
        "neuron",
        "tpu",
    ],
    "darwin": ["cpu", "metal"],
    "windows": ["cpu", "cu130", "xpu20253"],
}
# The interpreters: below and above the names' Python floors, GIL and free-threaded.
PYTHONS = [((3, 11), False), ((3, 15), False), ((3, 13), True), ((3, 15), True)]
# The archs a build may list: CUDA capabilities with every suffix, gfx names, and strings neither can read.
CUDA_ARCHS = [
    ("8.0",),
    ("9.0a",),
    ("9.0a+PTX",),
    ("10.0f",),
    ("10.0f+PTX",),
    ("12.0+PTX",),
    ("8.0", "9.0", "12.0+PTX"),
    ("7.5", "8.6+PTX"),
    ("sm_100",),
    ("sm_100", "9.0"),
    ("9.0",),
    (),
]
ROCM_ARCHS = [("gfx90a", "gfx942"), ("gfx1100",), ("gfx942",), ()]
GPUS = {
    "cuda": [(7, 5), (8, 0), (8, 6), (9, 0), (9, 1), (10, 0), (10, 3), (11, 0), (12, 0), (13, 0)],
    "rocm": ["gfx942:sramecc+:xnack-", "gfx90a", "gfx1100"],
}


def compared(env: Environment) -> bool:
    """Whether the judge's choice on `env` is compared with kernelpin's (DEVIATIONS leave some machines out)."""
    if JUDGE_0_19:
        return True
    return not (env.free_threaded or env.selected.name in ("rocm", "cann"))


def compared_names(names: Iterable[str]) -> list[str]:
    """The names whose choice is compared (DEVIATIONS NEW_NAMES and ROCM714 leave some out before 0.19)."""
    if JUDGE_0_19:
        return list(names)
    return [name for name in names if "rocm714" not in name and _legacy(name)]


def _legacy(name: str) -> bool:
    try:
        variant = Variant.parse(name)
    except ValueError:  # unreadable to kernelpin; kernels before 0.19 read torch-2.13-... as Python-only
        return not re.match(r"torch-[0-9]", name)
    return variant.legacy and variant.framework not in (MLX, SDK)


def machines() -> list[Environment]:
    """Every platform x backend x torch x C++ ABI x macOS x tvm-ffi x Python x MLX combination above."""
    grid = []
    for (os_name, arch), torch, tvm_ffi, (python, free_threaded), mlx in itertools.product(
        PLATFORMS, [(2, 12), (2, 13), (2, 14), None], [None, (0, 1)], PYTHONS, [False, True]
    ):
        for tag, cxx11_abi, macos in itertools.product(
            BACKENDS[os_name],
            [True, False] if os_name == "linux" else [None],
            [(15, 5), (26, 0)] if os_name == "darwin" else [None],
        ):
            grid.append(
                Environment(
                    torch=torch,
                    arch=arch,
                    os=os_name,
                    cxx11_abi=cxx11_abi,
                    backend=Backend.parse(tag),
                    macos=macos,
                    tvm_ffi=tvm_ffi,
                    free_threaded=free_threaded,
                    python=python,
                    mlx=mlx,
                )
            )
    return grid


def gpu_machines(base: Iterable[Environment]) -> list[Environment]:
    """The CUDA and ROCm machines of `base`, each with every GPU of GPUS."""
    grid = []
    for env in base:
        for gpu in GPUS.get(env.selected.name, []):
            gpu_field = "gpu_capability" if env.selected.name == "cuda" else "gpu_arch"
            grid.append(replace(env, **{gpu_field: gpu}))
    return grid


@functools.cache
def _kernels_parse(name: str):
    """kernels' parse of a variant name, None when it skips the name (parsed once per name: the grid is big)."""
    try:
        return kernels_variants.parse_variant(name)
    except ValueError:
        return None


def parses(name: str) -> bool:
    return _kernels_parse(name) is not None


def tie_order(names: Iterable[str]) -> list[str]:
    """kernelpin's order among kernels' ties (TIES): tvm-ffi before Python-only, then by name."""

    def python_only(name: str) -> bool:
        try:
            return Variant.parse(name).framework in (NOARCH, MLX)
        except ValueError:
            return False

    return sorted(names, key=lambda name: (python_only(name), name))


def _backend(backend: Backend):
    """The judge's backend object for kernelpin's."""
    if backend.version is None:
        return {
            "cpu": kernels_backends.CPU,
            "metal": kernels_backends.Metal,
            "neuron": kernels_backends.Neuron,
            "tpu": kernels_backends.TPU,
        }[backend.name]()
    version = Version(f"{backend.version[0]}.{backend.version[1]}")
    return {
        "cuda": kernels_backends.CUDA,
        "rocm": kernels_backends.ROCm,
        "xpu": kernels_backends.XPU,
        "cann": kernels_backends.CANN,
    }[backend.name](version=version)


def _version(pair: tuple[int, int] | None) -> Version | None:
    return None if pair is None else Version(f"{pair[0]}.{pair[1]}")


@contextmanager
def _free_threaded_before_0_19(env: Environment) -> Iterator[None]:
    """kernels before 0.19 read free-threading from the interpreter; the simulated machine's is `env`'s."""
    original = kernels_variants._is_unsupported_free_threaded_build
    kernels_variants._is_unsupported_free_threaded_build = lambda: env.free_threaded and env.python < (3, 15)
    try:
        yield
    finally:
        kernels_variants._is_unsupported_free_threaded_build = original


def kernels_accepted(names: Sequence[str], env: Environment) -> list[str]:
    """The names kernels accepts on `env`, best first (its resolver on the machine's facts, in `names`' order
    where its keys tie)."""
    parsed = [variant for variant in map(_kernels_parse, names) if variant is not None]
    facts = (
        parsed,
        _backend(env.selected),
        env.arch,
        env.os,
        _version(env.torch),
        env.cxx11_abi,
        _version(env.tvm_ffi),
        _version(env.macos),
    )
    if JUDGE_0_19:
        accepted, _ = kernels_variants._resolve_variant_for_system(
            *facts, python_version=_version(env.python), free_threaded=env.free_threaded, has_mlx=env.mlx
        )
    else:
        with _free_threaded_before_0_19(env):
            accepted, _ = kernels_variants._resolve_variant_for_system(*facts)
    return [variant.variant_str for variant in accepted]


def _simulated_torch(env: Environment) -> SimpleNamespace:
    """What kernels.archs reads of torch, for a machine with `env`'s GPU (none visible when it has none)."""
    capability, gfx = env.gpu_capability, env.gpu_arch
    return SimpleNamespace(
        version=SimpleNamespace(
            cuda="13.0" if env.selected.name == "cuda" else None, hip="7.1" if env.selected.name == "rocm" else None
        ),
        cuda=SimpleNamespace(
            is_available=lambda: capability is not None or gfx is not None,
            get_device_capability=lambda: capability,
            current_device=lambda: 0,
            get_device_properties=lambda index: SimpleNamespace(gcnArchName=gfx),
        ),
    )


def kernels_arch_check_passes(name: str, archs: Sequence[str], env: Environment) -> bool:
    """Whether kernels' arch check (check_arch=True, its default) lets it load build `name` on `env`'s GPU."""
    backend = Variant.parse(name).backend
    backend_type = {"cuda": MetadataBackend.CUDA, "rocm": MetadataBackend.ROCm}.get(
        backend.name if backend else "", MetadataBackend.CPU
    )
    metadata = SimpleNamespace(name="k", backend=SimpleNamespace(archs=list(archs), backend_type=backend_type))
    real_torch = sys.modules.get("torch")
    sys.modules["torch"] = _simulated_torch(env)  # type: ignore[assignment]
    try:
        kernels_archs._check_arch_incompatibility(metadata, name)
    except RuntimeError:
        return False
    finally:
        if real_torch is None:
            del sys.modules["torch"]
        else:
            sys.modules["torch"] = real_torch
    return True


def kernels_choice(with_archs: dict[str, Sequence[str] | None], env: Environment) -> str | None:
    """What kernels.get_kernel loads from a repository with these builds (and archs) on `env`, or None when it
    finds no build or its arch check refuses the one it chose."""
    accepted = kernels_accepted(tie_order(with_archs), env)
    if not accepted:
        return None
    archs = with_archs[accepted[0]]
    return accepted[0] if not archs or kernels_arch_check_passes(accepted[0], archs, env) else None


def kernelpin_order(names: Iterable[str], env: Environment) -> list[str]:
    """kernelpin's ranking of the names that fit `env` by name, best first."""
    return list(select(dict.fromkeys(names), env).ranked)


def random_repository(rng: random.Random, env: Environment, size: int) -> dict[str, Sequence[str] | None]:
    pool = CUDA_ARCHS if env.selected.name == "cuda" else ROCM_ARCHS
    return {name: rng.choice([*pool, None]) for name in rng.sample(compared_names(NAMES), size)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repos", type=int, default=200, help="random repositories per machine")
    parser.add_argument("--seed", type=int, default=21)
    args = parser.parse_args(argv)
    logging.getLogger("kernels").setLevel(logging.ERROR)  # its free-threading warning, once per case
    rng = random.Random(args.seed)
    grid = [env for env in machines() if compared(env)]
    grid += gpu_machines(grid)
    cases = disagreements = 0
    for env in grid:
        for _ in range(args.repos):
            repository = random_repository(rng, env, rng.randint(1, 12))
            theirs, ours = kernels_choice(repository, env), select(repository, env).chosen
            cases += 1
            if theirs != ours:
                disagreements += 1
                print(f"{env.describe()}: kernels {theirs}, kernelpin {ours}: {repository}")
    print(
        f"kernels {KERNELS_VERSION}: {len(compared_names(NAMES))} names x {len(grid)} machines x {args.repos} "
        f"repositories: {cases} cases, {disagreements} disagreements (deviations: {', '.join(DEVIATIONS)})"
    )
    return 1 if disagreements else 0


if __name__ == "__main__":
    sys.exit(main())
