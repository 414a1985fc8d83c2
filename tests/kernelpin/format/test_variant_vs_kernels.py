"""kernelpin's variant choice against the installed HF `kernels`' own parser and resolver, over a grid of machines
x variant names (legacy and kernel-builder's new names, SDKs, MLX).

The judge (tests/kernelpin/variant_judge.py) is kernels' code, imported, never a copy of its rules. kernelpin must agree
everywhere but where a documented deviation (variant_judge.DEVIATIONS, docs/kernelpin.md "Which variant") says
otherwise. CI runs this file with the newest kernels (0.19.1) and the oldest supported (0.17.2); a judge that cannot
be imported fails it (no importorskip). `python -m tests.kernelpin.variant_judge` runs the bigger grid of the issue.
"""

from __future__ import annotations

import itertools
import random
import sys
from types import SimpleNamespace

import pytest

from kernelpin import environment
from kernelpin.format.variant import NOARCH, TVM_FFI, Variant, select
from tests.kernelpin.variant_judge import (
    DEVIATIONS,
    JUDGE_0_19,
    NAMES,
    UNREADABLE,
    compared,
    compared_names,
    gpu_machines,
    kernelpin_order,
    kernels_accepted,
    kernels_backends,
    kernels_choice,
    kernels_variants,
    machines,
    parses,
    random_repository,
    tie_order,
)

MACHINES = machines()


def test_grid_covers_every_backend_and_kind():
    assert len(MACHINES) > 3000 and "TIES" in DEVIATIONS
    assert {env.selected.name for env in MACHINES} == {"cpu", "cuda", "rocm", "xpu", "metal", "cann", "neuron", "tpu"}
    assert {Variant.parse(name).framework for name in NAMES[:-UNREADABLE]} == {
        "torch",
        "torch-stable-abi",
        "tvm-ffi",
        "noarch",
        "mlx",
        "sdk",
    }
    for name in NAMES[-UNREADABLE:]:
        with pytest.raises(ValueError):
            Variant.parse(name)


def test_kernelpin_reads_every_name_as_the_judge_does():
    """Same names accepted and refused, and each name spelled back as kernels spells it (both spellings)."""
    for name in compared_names(NAMES):
        theirs = kernels_variants.parse_variant(name).variant_str if parses(name) else None
        try:
            ours = Variant.parse(name).name
        except ValueError:
            ours = None
        assert ours == theirs, name
    if JUDGE_0_19:
        assert len([name for name in NAMES if not parses(name)]) == UNREADABLE


def test_same_variants_in_the_same_order_on_every_machine():
    """Every name accepted by one is accepted by the other, ranked alike: this covers the choice among any
    subset of NAMES (the best of a subset is the first of it in this order)."""
    ordered = tie_order(compared_names(NAMES))
    disagreements, checked = [], 0
    for env in MACHINES:
        if not compared(env):
            continue
        checked += 1
        theirs, ours = kernels_accepted(ordered, env), kernelpin_order(ordered, env)
        if theirs != ours:
            disagreements.append(f"{env.describe()}:\n  kernels:   {theirs}\n  kernelpin: {ours}")
    assert checked > 1000
    assert not disagreements, f"{len(disagreements)} of {checked} machines:\n" + "\n".join(disagreements[:5])


def _kind(name: str) -> str:
    variant = Variant.parse(name)
    return f"{variant.framework}{'' if variant.legacy else '-new'}"


def test_ties_are_only_the_documented_ones():
    """Where kernels' order depends on its input's (TIES): before 0.19 a tvm-ffi and a Python-only build; in
    0.19 a legacy name and its new-format twin, and mlx-X with torch-X."""
    ordered = tie_order(compared_names(NAMES))
    ties = set()
    for env in MACHINES:
        if not compared(env):
            continue
        forward, backward = kernels_accepted(ordered, env), kernels_accepted(ordered[::-1], env)
        for a, b in itertools.combinations(forward, 2):
            if backward.index(a) > backward.index(b):
                ties.add(
                    frozenset((_kind(a), _kind(b)))
                    if JUDGE_0_19
                    else frozenset((Variant.parse(a).framework, Variant.parse(b).framework))
                )
    if JUDGE_0_19:
        assert ties == {
            frozenset(("torch", "torch-new")),
            frozenset(("torch-stable-abi", "torch-stable-abi-new")),
            frozenset(("tvm-ffi", "tvm-ffi-new")),
            frozenset(("mlx", "noarch")),
        }, ties
    else:
        assert ties == {frozenset((TVM_FFI, NOARCH))}


def test_gpu_archs_of_the_chosen_build():
    """On machines with a GPU, over random variant sets with random archs: kernels loads its first choice when
    its arch check passes and fails otherwise (no fallback); kernelpin chooses that build or refuses."""
    rng = random.Random(21)
    grid = gpu_machines(
        env
        for env in MACHINES
        if env.torch == (2, 13)
        and env.os == "linux"
        and env.arch == "x86_64"
        and env.cxx11_abi
        and env.tvm_ffi is None
        and not env.free_threaded
        and env.python == (3, 11)
        and not env.mlx
        and compared(env)
    )
    checked = refused = 0
    for env in grid:
        for _ in range(25):
            repository = random_repository(rng, env, 8)
            expected = kernels_choice(repository, env)
            refused += expected is None and bool(kernels_accepted(tie_order(repository), env))
            assert select(repository, env).chosen == expected, (env.describe(), repository)
            checked += 1
    assert checked > 1000 and refused > 50  # the arch check was exercised both ways


# Detection: kernelpin's environment.detect() and kernels' resolve_variants read the same simulated torch and
# platform; the choice must be the same.
TORCHES = {
    "cuda": {"cuda": "13.0", "hip": None, "mps": False, "xpu": None},
    "rocm": {"cuda": None, "hip": "7.1.25424-abc", "mps": False, "xpu": None},
    "mps": {"cuda": None, "hip": None, "mps": True, "xpu": None},
    "xpu": {"cuda": None, "hip": None, "mps": False, "xpu": "20250301"},
    "cpu": {"cuda": None, "hip": None, "mps": False, "xpu": None},
    "npu": {"cuda": None, "hip": None, "mps": False, "xpu": None, "privateuse": "npu"},
    "neuron": {
        "cuda": "12.8",
        "hip": None,
        "mps": False,
        "xpu": None,
        "neuron": True,
    },  # before CUDA, as kernels checks
    "tpu": {"cuda": None, "hip": None, "mps": False, "xpu": None, "tpu": True},
}
SYSTEMS = {
    "linux": ("Linux", "x86_64", ""),
    "linux-arm": ("Linux", "aarch64", ""),
    "mac26": ("Darwin", "arm64", "26.1"),
    "mac15": ("Darwin", "arm64", "15.5"),
    "windows": ("Windows", "AMD64", ""),
}


def simulated_torch(kind: str, cxx11: bool) -> SimpleNamespace:
    spec = TORCHES[kind]
    accelerator = SimpleNamespace(type="tpu") if spec.get("tpu") else None
    torch = SimpleNamespace(
        __version__="2.13.1+x",
        version=SimpleNamespace(cuda=spec["cuda"], hip=spec["hip"], xpu=spec["xpu"]),
        backends=SimpleNamespace(mps=SimpleNamespace(is_available=lambda: spec["mps"])),
        cuda=SimpleNamespace(is_available=lambda: False),
        accelerator=SimpleNamespace(current_accelerator=lambda: accelerator),  # how kernels 0.19 finds a TPU
        compiled_with_cxx11_abi=lambda: cxx11,
        _C=SimpleNamespace(_get_privateuse1_backend_name=lambda: spec.get("privateuse", "privateuseone")),
    )
    if spec.get("tpu"):
        torch.backends.tpu = SimpleNamespace()  # how kernels 0.17 finds one
    if spec.get("neuron"):
        torch.neuron = SimpleNamespace()
    return torch


@pytest.mark.parametrize("system", SYSTEMS)
@pytest.mark.parametrize("kind", TORCHES)
@pytest.mark.parametrize("cxx11", [True, False])
def test_detection_chooses_what_kernels_chooses(monkeypatch, system, kind, cxx11):
    name, machine, mac = SYSTEMS[system]
    monkeypatch.setitem(sys.modules, "torch", simulated_torch(kind, cxx11))
    collect_env = SimpleNamespace(get_cann_version=lambda: "8.1.RC1")  # what torch_npu reports
    for module in ("torch_npu", "torch_npu.utils"):
        monkeypatch.setitem(sys.modules, module, SimpleNamespace(utils=SimpleNamespace(collect_env=collect_env)))
    monkeypatch.setitem(sys.modules, "torch_npu.utils.collect_env", collect_env)
    monkeypatch.setattr("platform.system", lambda: name)
    monkeypatch.setattr("platform.machine", lambda: machine)
    monkeypatch.setattr("platform.mac_ver", lambda: (mac, ("", "", ""), ""))
    monkeypatch.setattr(kernels_backends, "has_torch", True)
    monkeypatch.setattr(kernels_variants, "has_torch", True)
    monkeypatch.setattr(kernels_variants, "has_tvm_ffi", False)
    monkeypatch.setattr(environment, "_tvm_ffi_version", lambda: None)
    if JUDGE_0_19:  # the interpreter's free-threading and MLX, which kernels 0.19 reads too: this one's, no MLX
        monkeypatch.setattr(kernels_variants, "has_mlx", False)
        monkeypatch.setattr(kernels_backends, "has_mlx", False)
    monkeypatch.setattr(environment, "_mlx_installed", lambda: False)
    env = environment.detect()
    if not compared(env):  # DEVIATIONS: kernelpin chooses as kernels 0.19 does there
        return
    names = tie_order(compared_names(NAMES))
    parsed = [kernels_variants.parse_variant(name) for name in names if parses(name)]
    theirs, _ = kernels_variants.resolve_variants(parsed)
    assert kernelpin_order(names, env) == [v.variant_str for v in theirs], env.describe()
    cpu, _ = kernels_variants.resolve_variants(parsed, backend="cpu")
    as_cpu = environment.with_backend(env, "cpu")
    assert kernelpin_order(names, as_cpu) == [v.variant_str for v in cpu], as_cpu.describe()
