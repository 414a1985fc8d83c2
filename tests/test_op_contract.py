"""The op's contract is one for both builds (torch-ext/contract.h): the exact and the stable-ABI build define the same
schemas and refuse every bad call alike, with the same error type and the same message, on every entry point; where
the fake kernel (what torch.compile traces with) refuses a call, it says what the library says."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# Run in a fresh process with both builds imported (a process may define a torch.ops namespace only once, and the
# first build imported owns the public name). Prints {"schemas": {abi: [...]}, "refusals": {abi: {case: ...}}}.
PROBE = r"""
import importlib.util, json, sys
import torch
from torch._subclasses.fake_tensor import FakeTensorMode


def load(name, directory):
    spec = importlib.util.spec_from_file_location(name, directory + "/__init__.py", submodule_search_locations=[directory])
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


class Subclass(torch.Tensor):
    pass


BT601 = [0.299, 0.587, 0.114]
rand = lambda *shape: torch.rand(*shape)
# case -> (input, dim, weights (None: not given), out or None)
CASES = {
    "wrong channel size": (lambda: rand(1, 4, 8, 8), -3, BT601, None),
    "dim out of range": (lambda: rand(3, 8, 8), 3, BT601, None),
    "negative dim out of range": (lambda: rand(3, 8, 8), -4, BT601, None),
    "0-d tensor": (lambda: torch.tensor(1.0), -3, BT601, None),
    "int32": (lambda: torch.zeros(3, 4, 4, dtype=torch.int32), -3, BT601, None),
    "bool": (lambda: torch.zeros(3, 4, 4, dtype=torch.bool), -3, BT601, None),
    "two weights": (lambda: rand(3, 4, 4), -3, [0.5, 0.5], None),
    "weight inf in float32": (lambda: rand(3, 4, 4), -3, [1e39, 0.0, 0.0], None),
    "nan weight in float64": (lambda: rand(3, 4, 4).double(), -3, [0.5, float("nan"), 0.5], None),
    "out shape": (lambda: rand(3, 4, 4), -3, BT601, lambda x: torch.empty(1, 4, 5)),
    "out dtype": (lambda: rand(3, 4, 4), -3, BT601, lambda x: torch.empty(1, 4, 4, dtype=torch.float64)),
    "out with overlapping elements": (lambda: rand(3, 4, 4), -3, BT601, lambda x: torch.empty(1, 1, 1).expand(1, 4, 4)),
    "out overlaps input": (lambda: rand(3, 4, 4), -3, BT601, lambda x: x[:1]),
    "out, input requires grad": (lambda: rand(3, 4, 4).requires_grad_(), -3, BT601, lambda x: torch.empty(1, 4, 4)),
    # Without weights at dim -3 and -1 img2gray.img2gray calls overloads that take only the input.
    "wrong channel size, no weights": (lambda: rand(1, 4, 8, 8), -3, None, None),
    "wrong channel size at dim -1, no weights": (lambda: rand(8, 8, 4), -1, None, None),
    "0-d tensor at dim -1, no weights": (lambda: torch.tensor(1.0), -1, None, None),
    "int32 at dim -1, no weights": (lambda: torch.zeros(4, 4, 3, dtype=torch.int32), -1, None, None),
    "bool at dim -3, no weights": (lambda: torch.zeros(3, 4, 4, dtype=torch.bool), -3, None, None),
}


def refusal(call):
    try:
        call()
    except Exception as error:
        return [type(error).__name__, str(error)]
    return None


def entry_points(module, x, dim, weights, make_out):
    ops = module.ops
    if make_out is None:
        given = () if weights is None else (weights,)
        keywords = {} if weights is None else {"weights": weights}
        return {"the build's op": lambda: ops.img2gray.default(x, dim, *given),
                "the build's packet": lambda: ops.img2gray(x, dim, *given),
                "the public op": lambda: torch.ops.img2gray.img2gray(x, dim, *given),
                "the op's own dispatch (a subclass)": lambda: ops.img2gray.default(x.as_subclass(Subclass), dim, *given),
                "img2gray.img2gray": lambda: module.img2gray(x, dim=dim, **keywords)}
    out = make_out(x)
    return {"the build's op": lambda: ops.img2gray.out(x, dim, weights, out=out),
            "the build's packet": lambda: ops.img2gray(x, dim, weights, out=out),
            "the public op": lambda: torch.ops.img2gray.img2gray.out(x, dim, weights, out=out),
            "the op's own dispatch (a subclass)": lambda: ops.img2gray.out(x.as_subclass(Subclass), dim, weights, out=out),
            "img2gray.img2gray": lambda: module.img2gray(x, dim=dim, weights=weights, out=out)}


builds = {abi: load("img2gray_" + abi, directory) for abi, directory in json.loads(sys.argv[1])}
schemas, refusals, fake = {}, {}, {}
for abi, module in builds.items():
    ns = module.NAMESPACE
    schemas[abi] = [str(getattr(getattr(torch.ops, ns).img2gray, overload)._schema).replace(ns + "::", "<ns>::")
                    for overload in ("default", "out")]
    refusals[abi] = {f"{case}, {entry}": refusal(call) for case, (make, dim, weights, make_out) in CASES.items()
                     for entry, call in entry_points(module, make(), dim, weights, make_out).items()}
    with FakeTensorMode() as mode:
        fake[abi] = {case: refusal(lambda: module.ops.img2gray.default(mode.from_tensor(make()), dim,
                                                                       *(() if weights is None else (weights,))))
                     for case, (make, dim, weights, make_out) in CASES.items() if make_out is None}
    # The overloads img2gray.img2gray calls without weights at dim -3 and -1, called directly, eager and fake.
    names = {"exact": ("chw", "hwc"), "stable": ("no_grad_chw", "no_grad_hwc")}[abi]
    overloads = {-3: getattr(module.ops.img2gray, names[0]), -1: getattr(module.ops.img2gray, names[1])}
    for case, (make, dim, weights, make_out) in CASES.items():
        if weights is None:
            refusals[abi][f"{case}, the internal overload"] = refusal(lambda: overloads[dim](make()))
            with FakeTensorMode() as mode:
                fake[abi][f"{case}, the internal overload"] = refusal(lambda: overloads[dim](mode.from_tensor(make())))
schemas["public"] = [str(torch.ops.img2gray.img2gray.default._schema), str(torch.ops.img2gray.img2gray.out._schema)]
print(json.dumps({"schemas": schemas, "refusals": refusals, "fake": fake}))
"""


@pytest.fixture(scope="module")
def probed(exact_build: Path, stable_build: Path) -> dict:
    builds = json.dumps([["exact", str(exact_build)], ["stable", str(stable_build)]])
    result = subprocess.run([sys.executable, "-c", PROBE, builds], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-4000:]
    return json.loads(result.stdout.splitlines()[-1])


def test_both_builds_define_the_same_schemas(probed):
    schemas = probed["schemas"]
    weights = "float[] weights=[0.29899999999999999, 0.58699999999999997, 0.114]"  # as torch prints 0.299, 0.587
    assert (
        schemas["exact"]
        == schemas["stable"]
        == [
            f"<ns>::img2gray(Tensor input, int dim=-3, {weights}) -> Tensor",
            f"<ns>::img2gray.out(Tensor input, int dim=-3, {weights}, *, Tensor(a!) out) -> ()",
        ]
    )
    assert schemas["public"] == [schema.replace("<ns>::", "img2gray::") for schema in schemas["exact"]]


def test_both_builds_refuse_every_bad_call_alike_on_every_entry_point(probed):
    """Word for word. The one difference is the documented one: the stable ABI raises no IndexError (a C++ type of
    libtorch's), so a dim out of range is a RuntimeError from its ops and an IndexError from img2gray.img2gray."""
    exact, stable = probed["refusals"]["exact"], probed["refusals"]["stable"]
    assert exact.keys() == stable.keys()
    assert all(refusal is not None for refusal in exact.values()), [call for call, r in exact.items() if r is None]

    def documented(call: str) -> bool:
        return (
            stable[call] == ["RuntimeError", exact[call][1]]
            and exact[call][0] == "IndexError"
            and call.split(",")[0] in {"dim out of range", "negative dim out of range"}
            and not call.endswith("img2gray.img2gray")
        )

    differences = {
        call: {"exact": exact[call], "stable": stable[call]}
        for call in exact
        if exact[call] != stable[call] and not documented(call)
    }
    assert not differences, json.dumps(differences, indent=1)


def test_the_fake_kernel_refuses_as_the_library_does_where_it_refuses(probed):
    """The fake kernel checks only what it needs for the result's shape; the library checks the rest when compiled
    code runs. Each of its refusals is the library's, word for word."""
    for abi, fake in probed["fake"].items():
        eager = {case.removesuffix(", the build's op"): refusal for case, refusal in probed["refusals"][abi].items()}
        refused = {case: refusal for case, refusal in fake.items() if refusal is not None}
        shape_cases = (
            "wrong channel size, no weights",
            "wrong channel size at dim -1, no weights",
            "0-d tensor at dim -1, no weights",
        )
        assert set(refused) == {
            "wrong channel size",
            "dim out of range",
            "negative dim out of range",
            "0-d tensor",
            *shape_cases,
            *(f"{case}, the internal overload" for case in shape_cases),
        }
        for case, refusal in refused.items():
            assert refusal == eager[case], (abi, case)
