"""The Python face of the operator: argument handling and fake (meta) kernels for torch.compile.

The exact build registers autograd in C++ (torch-ext/torch_binding.cpp), where it costs nothing when no
gradient is needed; the stable-ABI build has no C++ autograd: its gradient is registered from Python and its calls
that need none are routed around it (stable_abi.py).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import NoReturn

import torch

from ._ops import ABI, CHW_DIM, HWC_DIM, NAMESPACE, cpp_callable, ops

WEIGHTS: dict[str, tuple[float, float, float]] = {
    "bt601": (0.299, 0.587, 0.114),  # ITU-R BT.601: torchvision, OpenCV, PIL
    "bt709": (0.2126, 0.7152, 0.0722),  # ITU-R BT.709: HDTV
}

SUPPORTED_DTYPES = (torch.uint8, torch.float16, torch.bfloat16, torch.float32, torch.float64)

Weights = str | Sequence[float]


# Resolved once: the per-call path of a named weight set is a dict lookup.
_WEIGHT_LISTS = {name: list(values) for name, values in WEIGHTS.items()}
# The schema's default: left out of the call, it skips converting a Python list on every call.
_DEFAULT_NAME = "bt601"
_DEFAULT_WEIGHTS = _WEIGHT_LISTS[_DEFAULT_NAME]
_PLAIN_TENSOR, _grad_enabled, _dynamo_compiling = (
    torch.Tensor,
    torch.is_grad_enabled,
    torch.compiler.is_dynamo_compiling,
)
_transforms_active = torch._C._are_functorch_transforms_active
# torch.autograd.forward_ad's level: >= 0 while forward-mode AD is on (its dual_level, torch.func.jvp, gradcheck).
_forward_ad = torch.autograd.forward_ad


def _weights_argument(w: list[float]) -> tuple:
    """The weights as the op's optional argument: none for the schema's default."""
    return () if w is _DEFAULT_WEIGHTS else (w,)


def channel_weights(weights: Weights) -> list[float]:
    """Resolve a weights name or three numbers to the list the operator takes (do not mutate it)."""
    if isinstance(weights, str):
        try:
            return _WEIGHT_LISTS.get(weights) or _WEIGHT_LISTS[weights.lower()]
        except KeyError:
            raise ValueError(
                f"img2gray: unknown weights {weights!r}; use one of {sorted(WEIGHTS)} or three floats (R, G, B)"
            ) from None
    problem = f"img2gray: weights must be a name ({', '.join(sorted(WEIGHTS))}) or three finite numbers (R, G, B)"
    if isinstance(weights, Mapping):  # iterating one gives its keys, in no channel order
        raise ValueError(f"{problem}, got a mapping {weights!r}; pass (R, G, B) as a tuple")  # noqa: TRY004  # as every bad weights value
    try:
        values = [float(w) for w in weights]
    except (TypeError, ValueError):
        raise ValueError(f"{problem}, got {weights!r}") from None
    if len(values) != 3 or not all(math.isfinite(w) for w in values):
        raise ValueError(f"{problem}, got {values!r}")
    return values


def checked_dim(x: torch.Tensor, dim: int) -> int:
    """`dim` as a non-negative index into `x`'s dims; an IndexError naming `dim` and its range otherwise."""
    rank = x.dim()
    if not -rank <= dim < rank:
        accepted = f"one of {-rank}..{rank - 1}" if rank else "none: the input is 0-d"
        raise IndexError(
            f"img2gray: dim={dim} is out of range for an input of shape {tuple(x.shape)} "
            f"(accepted: {accepted}); use dim=-3 for (..., 3, H, W) and dim=-1 for (..., H, W, 3)"
        )
    return dim % rank


def _raise_from_call(error: RuntimeError, x: torch.Tensor, dim: int) -> NoReturn:
    """A dim out of range raises IndexError from either build. The stable-ABI library can only raise RuntimeError
    (c10::IndexError is libtorch's C++ ABI), so that one case is told apart here, after the fact, with the
    library's message: the call that succeeds pays nothing for it."""
    if x.dim() and not -x.dim() <= dim < x.dim():
        raise IndexError(str(error)) from None
    raise error


def _call(op, x: torch.Tensor, dim: int, *args, **kwargs):
    try:
        return op(x, dim, *args, **kwargs)
    except RuntimeError as error:
        _raise_from_call(error, x, dim)


def img2gray(
    x: torch.Tensor,
    *,
    dim: int = -3,
    weights: Weights = _DEFAULT_NAME,
    keepdim: bool = True,
    out: torch.Tensor | None = None,
) -> torch.Tensor:
    """Convert RGB to grayscale along the channel dimension `dim` (size 3).

    `dim=-3` for `(..., 3, H, W)` tensors, `dim=-1` for `(..., H, W, 3)` images. The result has the
    input's dtype and device, with the channel dimension kept at size 1 unless `keepdim=False`.
    uint8 is computed in float32, rounded half to even and saturated.
    """
    if out is None:
        # The most frequent call, in one Python frame (each frame, and the op object's own __call__, measured in a
        # single eager GPU call's host time): the default weights are the schema's (nothing to convert), and a plain
        # tensor that records no graph (and, forward-mode AD off, carries no tangent) goes straight to the C++ op that
        # needs no gradient (_NO_GRAD_CALL, or an overload without the arguments left at their defaults), one that
        # records a graph or may carry a tangent outside functorch's transforms straight to what records it
        # (_GRAD_CALL), which carries the tangent too.
        given = () if weights is _DEFAULT_NAME else _weights_argument(channel_weights(weights))
        plain = type(x) is _PLAIN_TENSOR and not _dynamo_compiling()
        try:
            if plain and not (x.requires_grad and _grad_enabled()) and _forward_ad._current_level < 0:
                result = (
                    _NO_GRAD_CALL(x, dim, *given)
                    if given
                    else _CHW_CALL(x)
                    if dim == CHW_DIM
                    else _HWC_CALL(x)
                    if dim == HWC_DIM
                    else _DEFAULT_WEIGHTS_CALL(x, dim)
                )
            elif plain and not _transforms_active():
                result = _GRAD_CALL(x, dim, *given)
            elif plain and _forward_ad._current_level >= 0:  # torch.func.jvp, jacfwd
                result = _TRANSFORMS_GRAD_CALL(x, dim, *given)
            else:
                result = _FUNCTIONAL_OP(x, dim, *given)
        except RuntimeError as error:
            _raise_from_call(error, x, dim)
        return result if keepdim else result.squeeze(dim)
    w = channel_weights(weights)
    if not keepdim:
        out_dim = checked_dim(x, dim)  # before out's shape: a wrong dim is the caller's real mistake
        if out.dim() != x.dim() - 1:
            raise RuntimeError(
                f"img2gray: out has shape {tuple(out.shape)} but the result (keepdim=False) has {x.dim() - 1} dims"
            )
        _call(ops.img2gray.out, x, dim, w, out=out.unsqueeze(out_dim))
        return out
    _call(ops.img2gray.out, x, dim, w, out=out)
    return out


def _fake_result_shape(x: torch.Tensor, dim: int) -> list[int]:
    """What torch.compile needs to trace a call: the result's shape, or the library's refusal where there is none
    (its messages, torch-ext/contract.h; tests/test_op_contract.py compares them). The rest of the contract (dtype,
    weights, out=) is checked by the library's kernel when the compiled code runs."""
    rank = x.dim()
    if rank == 0:
        _refuse(RuntimeError("img2gray: expected an image tensor with a channel dimension of size 3, got a 0-d tensor"))
    if not -rank <= dim < rank:
        _refuse(IndexError(f"Dimension out of range (expected to be in range of [{-rank}, {rank - 1}], but got {dim})"))
    if x.shape[dim] != 3:
        _refuse(
            RuntimeError(
                f"img2gray: expected 3 channels (R, G, B) at dim {dim % rank}, got size {x.shape[dim]} in "
                f"input of shape [{', '.join(str(size) for size in x.shape)}]; use dim=-3 for (..., 3, H, W) "
                "tensors and dim=-1 for (..., H, W, 3) images"
            )
        )
    shape = list(x.shape)
    shape[dim] = 1
    return shape


def _refuse(error: Exception) -> NoReturn:
    if ABI == "stable":  # raised below the library's router, whose caller would otherwise get no text
        stable_abi.leave_error_text(str(error))
    raise error


# Defaults as in the schema: the dispatcher drops arguments that equal their defaults.
def _fake(x: torch.Tensor, dim: int = -3, weights: Sequence[float] = WEIGHTS["bt601"]) -> torch.Tensor:
    return x.new_empty(_fake_result_shape(x, dim))


def _fake_out(
    x: torch.Tensor, dim: int = -3, weights: Sequence[float] = WEIGHTS["bt601"], *, out: torch.Tensor
) -> None:
    _fake_result_shape(x, dim)


def _fake_chw(x: torch.Tensor) -> torch.Tensor:
    return x.new_empty(_fake_result_shape(x, CHW_DIM))


def _fake_hwc(x: torch.Tensor) -> torch.Tensor:
    return x.new_empty(_fake_result_shape(x, HWC_DIM))


def register_fakes(namespace: str, overloads: Sequence[str] = ("default", "out")) -> None:
    """Fake kernels for `overloads` of `namespace`'s img2gray: the public two, and a build's internal ones, each
    named for what it is (an out= overload's name ends in "out"; "chw" and "hwc": img2gray(input) with the default
    weights and dim=-3 or dim=-1)."""
    for overload in overloads:
        fake = {"out": _fake_out, "chw": _fake_chw, "hwc": _fake_hwc}.get(overload.rpartition("_")[2], _fake)
        torch.library.register_fake(f"{namespace}::img2gray" + ("" if overload == "default" else f".{overload}"), fake)


if ABI == "stable":
    from . import stable_abi

    # An autograd.Function around the no-grad overload, entered at its C++ apply, and the same Function in the form
    # functorch's transforms take (stable_abi._gradient).
    _GRAD_CALL, _TRANSFORMS_GRAD_CALL = stable_abi.define(NAMESPACE, register_fakes)
else:  # the exact library defined the ops (and the public name, which forwards to them in C++)
    register_fakes(NAMESPACE, ("default", "out", "chw", "hwc"))
    _GRAD_CALL = _TRANSFORMS_GRAD_CALL = ops.img2gray.default  # its C++ autograd kernel records graph and tangent
# Looked up once: an overload lookup on every call is measurable on a small image. _NO_GRAD_CALL is the C++
# callable (`_op`) behind the overload for a plain tensor that records no graph: the exact build's own op, whose C++
# autograd kernel passes such a call through, and the stable-ABI build's `no_grad`, which skips its routers
# (stable_abi.py); _DEFAULT_WEIGHTS_CALL the same for a call that gives no weights (the stable build's
# `no_grad_default_weights`), and _CHW_CALL and _HWC_CALL for one that gives no weights with dim=-3 or dim=-1 (the
# `chw` and `hwc` overloads, the stable build's `no_grad_chw` and `no_grad_hwc`: each argument torch converts or
# looks up cost a small CPU call 0.1-0.35 us, torch-ext/contract.h). torch.compile traces the OpOverload object instead:
# Dynamo cannot trace `_op`.
_FUNCTIONAL_OP = ops.img2gray.default
if ABI == "stable":
    _NO_GRAD_CALL, _DEFAULT_WEIGHTS_CALL = stable_abi.no_grad_calls(ops.img2gray)
    _CHW_CALL, _HWC_CALL = cpp_callable(ops.img2gray.no_grad_chw), cpp_callable(ops.img2gray.no_grad_hwc)
else:
    _NO_GRAD_CALL = _DEFAULT_WEIGHTS_CALL = cpp_callable(_FUNCTIONAL_OP)
    _CHW_CALL, _HWC_CALL = cpp_callable(ops.img2gray.chw), cpp_callable(ops.img2gray.hwc)
