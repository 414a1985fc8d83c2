"""What the stable-ABI build registers from Python: the schemas (with their tags, which the stable C ABI of
torch 2.11 cannot give), autograd and the out=/grad refusal (the stable ABI has no C++ autograd), and the public
name `torch.ops.img2gray.img2gray` when no other build in this process defined it first. The kernels are the
library's (torch-ext/torch_binding_stable.cpp), registered for each namespace through its C entry point.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable

import torch

from ._ops import LIBRARY

PUBLIC_NAMESPACE = "img2gray"
# As in torch-ext/torch_binding.cpp, the exact build's one place for them.
SCHEMA = "img2gray(Tensor input, int dim=-3, float[] weights=[0.299, 0.587, 0.114]) -> Tensor"
# The same op without an autograd kernel, in this build's own namespace only: img2gray.img2gray calls it when no
# gradient is needed, so that such a call runs no Python kernel (a Python autograd kernel costs more than a small
# image's whole conversion); torch's C++ autograd fallback passes it through.
NO_GRAD_SCHEMA = "img2gray.no_grad(Tensor input, int dim=-3, float[] weights=[0.299, 0.587, 0.114]) -> Tensor"
OUT_SCHEMA = "img2gray.out(Tensor input, int dim=-3, float[] weights=[0.299, 0.587, 0.114], *, Tensor(a!) out) -> ()"
BT601 = [0.299, 0.587, 0.114]
OUT_WITH_GRAD = ("img2gray.out(): functions with out=... arguments don't support automatic differentiation, but one "
                 "of the arguments requires grad; call img2gray without out= (or under torch.no_grad())")

# torch.library.Library objects deregister their ops when collected: kept for the life of the process.
_LIBRARIES: list[torch.library.Library] = []


def _setup_context(ctx, inputs, output) -> None:
    _, ctx.dim, ctx.weights = inputs


def _backward(ctx, grad: torch.Tensor):
    # The op is linear: d out / d input[c] = weights[c], broadcast along the channel dim. Scalar products only,
    # so the backward also traces under torch.compile.
    weights = ctx.weights
    return torch.cat([grad * weights[0], grad * weights[1], grad * weights[2]], ctx.dim), None, None


def _refuse_out_with_grad(namespace: str) -> Callable:
    out_op = getattr(torch.ops, namespace).img2gray.out

    def autograd_kernel(keyset, x, dim=-3, weights=BT601, *, out):  # the dispatcher drops default arguments
        # torch's own out= ops refuse alike (torch.mul(x, 2, out=o) with x.requires_grad); without this kernel
        # the op returned `out` detached, silently.
        if torch.is_grad_enabled() and (x.requires_grad or out.requires_grad):
            raise RuntimeError(OUT_WITH_GRAD)
        out_op.redispatch(keyset & torch._C._after_autograd_keyset, x, dim, weights, out=out)

    return autograd_kernel


def _define_namespace(namespace: str, kind: str, register_fakes: Callable[[str, bool], None], no_grad: bool) -> None:
    library = torch.library.Library(namespace, kind)
    _LIBRARIES.append(library)
    tags = (torch.Tag.pt2_compliant_tag,)
    library.define(SCHEMA, tags=tags)
    library.define(OUT_SCHEMA, tags=tags)
    if no_grad:
        library.define(NO_GRAD_SCHEMA, tags=tags)
    if ctypes.CDLL(str(LIBRARY)).img2gray_register_kernels(namespace.encode(), int(no_grad)) != 0:
        raise ImportError(f"img2gray: torch refused the kernels of {LIBRARY.name} for torch.ops.{namespace}; "
                          f"this build needs torch >= its stable ABI version (metadata.json), found {torch.__version__}")
    register_fakes(namespace, no_grad)
    torch.library.register_autograd(f"{namespace}::img2gray", _backward, setup_context=_setup_context)
    library.impl("img2gray.out", _refuse_out_with_grad(namespace), "Autograd", with_keyset=True)


def _public_name_defined() -> bool:
    try:
        torch._C._dispatch_find_schema_or_throw(f"{PUBLIC_NAMESPACE}::img2gray", "")
    except RuntimeError:
        return False
    return True


def define(namespace: str, register_fakes: Callable[[str, bool], None]) -> None:
    """Define this build's ops under `namespace`, and the public name unless another build already did."""
    _define_namespace(namespace, "DEF", register_fakes, no_grad=True)
    if not _public_name_defined():
        _define_namespace(PUBLIC_NAMESPACE, "FRAGMENT", register_fakes, no_grad=False)
