"""What the stable-ABI build registers from Python: the schemas (with their tags, which the stable C ABI of
torch 2.11 cannot give), the fake kernels, the gradient (the stable ABI has no C++ autograd) and vmap's rule for the
overloads that record no graph, and the public
name `torch.ops.img2gray.img2gray` when no other build in this process defined it first. The kernels, and the
C++ Autograd kernels that keep Python off calls that need no gradient, are the library's
(torch-ext/torch_binding_stable.cpp), registered for each namespace through its C entry point.
"""

from __future__ import annotations

import ctypes
import re
from collections.abc import Callable, Sequence

import torch
from torch.autograd import forward_ad as _forward_ad

from ._ops import CHW_DIM, CHW_SCHEMA, HWC_DIM, HWC_SCHEMA, LIBRARY, OUT_SCHEMA, SCHEMA, cpp_callable, schema_defaults

PUBLIC_NAMESPACE = "img2gray"
# The overloads the op's C++ Autograd kernels route to, in this build's own namespace only, with the op's own
# arguments: `no_grad` and `no_grad_out` have no autograd kernel (torch's C++ fallback passes them through),
# `differentiable` has the Python one. `no_grad_default_weights` is `no_grad` without the weights argument, for
# the calls from Python that give none: torch would convert the default list for the library on every call, and
# the library read it back; `no_grad_chw` and `no_grad_hwc` are it with dim=-3 and dim=-1, without arguments to
# convert or look up (contract.h). The order matters: torch's TorchScript registry tells overloads with the same
# argument names and types apart by their order alone (contract.h), and with `no_grad_default_weights` defined after
# the others torch 2.13 aborted the interpreter's exit (an internal assert while the Library deregistered them; tests/op
# test_a_process_that_used_the_op_exits_cleanly).
_WEIGHTS_ARGUMENT = re.search(r", float\[\] weights=\[[^]]*\]", SCHEMA).group()
INTERNAL_SCHEMAS = (
    CHW_SCHEMA.replace("img2gray.chw(", "img2gray.no_grad_chw(", 1),
    HWC_SCHEMA.replace("img2gray.hwc(", "img2gray.no_grad_hwc(", 1),
    SCHEMA.replace("img2gray(", "img2gray.no_grad_default_weights(", 1).replace(_WEIGHTS_ARGUMENT, ""),
    SCHEMA.replace("img2gray(", "img2gray.no_grad(", 1),
    OUT_SCHEMA.replace("img2gray.out(", "img2gray.no_grad_out(", 1),
    SCHEMA.replace("img2gray(", "img2gray.differentiable(", 1),
)
INTERNAL_OVERLOADS = tuple(re.match(r"img2gray\.(\w+)\(", schema).group(1) for schema in INTERNAL_SCHEMAS)

_LIBRARY = ctypes.CDLL(str(LIBRARY))
_LIBRARY.img2gray_leave_error_text.argtypes = [ctypes.c_char_p]


def leave_error_text(message: str) -> None:
    """Give the library the text of an error raised in Python below one of its routers, which would otherwise
    reach the caller as a bare failure: torch passes a stable-ABI library no error text (torch-ext/torch_binding_stable.cpp)."""
    _LIBRARY.img2gray_leave_error_text(message.encode())


# torch.library.Library objects deregister their ops when collected: kept for the life of the process.
_LIBRARIES: list[torch.library.Library] = []


def _input_gradient(grad: torch.Tensor, dim: int, weights) -> torch.Tensor:
    # The op is linear: d out / d input[c] = weights[c], broadcast along the channel dim. Scalar products only,
    # so the backward also traces under torch.compile.
    return torch.cat([grad * weights[0], grad * weights[1], grad * weights[2]], dim)


def _define_namespace(
    namespace: str, kind: str, register_fakes: Callable[[str, Sequence[str]], None], build_namespace: bool
) -> torch.library.Library:
    library = torch.library.Library(namespace, kind)
    _LIBRARIES.append(library)
    tags = (torch.Tag.pt2_compliant_tag,)
    for schema in (SCHEMA, OUT_SCHEMA, *(INTERNAL_SCHEMAS if build_namespace else ())):
        library.define(schema, tags=tags)
    if _LIBRARY.img2gray_register_kernels(namespace.encode(), int(build_namespace)) != 0:
        raise ImportError(
            f"img2gray: torch refused the kernels of {LIBRARY.name} for torch.ops.{namespace}; "
            f"this build needs torch >= its stable ABI version (metadata.json), found {torch.__version__}"
        )
    register_fakes(namespace, ("default", "out", *(INTERNAL_OVERLOADS if build_namespace else ())))
    if build_namespace:
        op = getattr(torch.ops, namespace).img2gray.default
        default_dim, _ = schema_defaults(op._schema)
        for overload, dim in (
            ("no_grad", default_dim),
            ("no_grad_default_weights", default_dim),
            ("no_grad_chw", CHW_DIM),
            ("no_grad_hwc", HWC_DIM),
        ):
            torch.library.register_vmap(f"{namespace}::img2gray.{overload}", _batched(op, dim), lib=library)
    return library


def _batched(op, default_dim: int) -> Callable:
    """The vmap rule of an overload that records no graph, whose dim is `default_dim` when the call leaves it out.
    The Python entry points send functorch's wrappers there too: under vmap a wrapper of a tensor that requires grad
    reads requires_grad=False, and the batching fallback would call `no_grad` on the tensor below it, recording
    nothing (x.grad stayed None). The rule calls the op's own path on the tensor below the wrapper, whose own
    requires_grad routes it (one call for the batch)."""

    def rule(info, in_dims, x, dim=default_dim, *weights):  # the dispatcher leaves out arguments equal to defaults
        return op(*_batch_first(in_dims[0], x, dim), *weights), 0

    return rule


def _batch_first(in_dim: int, x: torch.Tensor, dim: int) -> tuple[torch.Tensor, int]:
    """`x` with its batch dim `in_dim` first, and the channel dim `dim` of each batch element as a dim of that."""
    x = x.movedim(in_dim, 0)
    rank = x.dim() - 1  # the rank each batch element has
    # A dim in range counts from the front past the batch dim; one out of range stays out of range.
    return x, dim + 1 if dim >= 0 else dim if dim >= -rank else dim - 1


FUNCTORCH_GRADIENT_UNSUPPORTED = (
    "img2gray: the stable-ABI build records its gradient below the dispatcher, which functorch's gradient transforms "
    "(torch.func.grad, vjp, jacrev) cannot enter, as they cannot the exact build's C++ autograd.Function; use "
    "torch.autograd (x.requires_grad_(), .backward() or torch.autograd.grad), also around torch.func.vmap"
)
FUNCTORCH_JVP_UNSUPPORTED = (
    "img2gray: torch.func.jvp (or jacfwd) reached the stable-ABI build's op through its C++ router (a tensor "
    "subclass, or a call from C++), below which functorch's transforms cannot enter the op's autograd.Function; call "
    "img2gray.img2gray or torch.ops.img2gray.img2gray from Python on plain tensors, or use torch.autograd.forward_ad"
)


def _differentiable_kernel(gradient: Callable, schema) -> Callable:
    """The Autograd kernel of `differentiable`, which the C++ router sends calls that record a graph or carry a
    forward-mode tangent to: the gradient's autograd.Function (_gradient). Under functorch's transforms it refuses
    with a message (torch's own refusal, raised below the router, would reach the caller without its text): there
    the Function can be entered only from Python, above the dispatcher (_route_python_calls, functional.py). vmap's
    rule (_batched) calls below its level, where no transform is active."""
    default_dim, default_weights = schema_defaults(schema)
    transforms_active = torch._C._are_functorch_transforms_active

    # The dispatcher leaves out the arguments that equal the schema's defaults.
    def kernel(x, dim=default_dim, weights=default_weights):
        if transforms_active():
            refusal = FUNCTORCH_GRADIENT_UNSUPPORTED if _forward_ad._current_level < 0 else FUNCTORCH_JVP_UNSUPPORTED
            leave_error_text(refusal)
            raise RuntimeError(refusal)
        return gradient(x, dim, weights)

    return kernel


# What torch's C++ apply looks up on an autograd.Function class on every call, by names it does not intern (so
# CPython's type cache never answers): defined on the class itself, each lookup stops there instead of walking the
# class's bases (measured: 0.75k of 27k instructions per call). Only those this torch has: torch 2.11 has no
# boxed_grads_call.
_APPLY_LOOKS_UP = ("setup_context", "clear_saved_tensors_on_access", "boxed_grads_call")


def _gradient(
    call_no_grad: Callable, call_default_weights: Callable, call_op: Callable, schema
) -> tuple[Callable, Callable]:
    """`gradient(x, *arguments)`, positional only: the op on a plain tensor, recording a graph node, through an
    autograd.Function entered at its C++ apply: also the Autograd kernel of `differentiable`, where the C++ router
    sends the op's own path (_differentiable_kernel). Through the router, with torch.library.register_autograd's
    Python kernel, a call measured 8x a small CPU call that needs no gradient; entered directly this one adds about
    what the exact build's C++ Function adds. autograd.Function.apply's Python wrapper (binding defaults for
    setup_context, unwrapping functorch's dead wrappers) is skipped: the caller leaves functorch's transforms to the
    op's own path."""

    default_dim, default_weights = schema_defaults(schema)
    inherited = torch.autograd.function._SingleLevelFunction.__dict__

    class Img2grayFunction(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, *arguments):  # grad mode is off in here: `no_grad` records nothing itself
            # Passed on as given: each argument given costs a conversion, and the schema holds the defaults.
            ctx.arguments = arguments
            return call_no_grad(x, *arguments) if len(arguments) > 1 else call_default_weights(x, *arguments)

        @staticmethod
        def backward(ctx, grad):
            given = ctx.arguments
            dim = given[0] if given else default_dim
            weights = given[1] if len(given) > 1 else default_weights
            return _input_gradient(grad, dim, weights), *(None for _ in given)

        @staticmethod
        def jvp(ctx, tangent, *_):
            # Linear in the input: the result's tangent is the op on the input's tangent, through the op's own
            # path, so that a tangent that requires grad records its graph.
            return call_op(tangent, *ctx.arguments)

    class Img2grayTransformsFunction(Img2grayFunction):
        """The same Function in the form functorch's transforms take (torch.func.jvp, and vmap around it): forward
        without ctx, setup_context, and a vmap rule of its own, which applies the Function again on the batch (a
        generated rule would run forward under vmap, whose overloads' rule (_batched) cannot enter it there)."""

        @staticmethod
        def forward(x, *arguments):
            return call_no_grad(x, *arguments) if len(arguments) > 1 else call_default_weights(x, *arguments)

        @staticmethod
        def setup_context(ctx, inputs, output):
            ctx.arguments = inputs[1:]

        @staticmethod
        def vmap(info, in_dims, x, dim=default_dim, *weights):
            return Img2grayTransformsFunction.apply(*_batch_first(in_dims[0], x, dim), *weights), 0

    for name in _APPLY_LOOKS_UP:
        if name in inherited:
            setattr(Img2grayFunction, name, inherited[name])
    return torch._C._FunctionBase.__dict__["apply"].__get__(None, Img2grayFunction), Img2grayTransformsFunction.apply


def _with_keywords(gradient: Callable, schema) -> Callable:
    """`gradient` taking `dim` and `weights` by keyword too (apply takes positional arguments only)."""
    default_dim, default_weights = schema_defaults(schema)

    def call(x, *arguments, **keywords):
        if keywords:
            bound = dict(zip(("dim", "weights"), arguments, strict=False)) | keywords
            arguments = (bound.get("dim", default_dim), bound.get("weights", default_weights))
        return gradient(x, *arguments)

    return call


def _route_python_calls(namespace: str, build_ops, gradient: Callable, transforms_gradient: Callable) -> None:
    """Give `torch.ops.<namespace>.img2gray(...)`, `.default` and `.out` the exact build's speed on small calls.

    The op's C++ routers cost nested boxed dispatcher calls (about 0.9 us of a 1.7 us small CPU call): the stable
    ABI has no redispatch below autograd. A call from Python on plain tensors goes to `no_grad` / `no_grad_out`
    directly instead, or, when it records a graph, through the gradient's autograd.Function (_gradient), also under
    functorch's transforms when forward-mode AD is on (torch.func.jvp: only from here, above the dispatcher, can they
    enter it); anything else (a tensor subclass, functorch's other transforms, out= with a gradient, an out= call
    while forward-mode AD is on: the C++ routers see tangents, which Python cannot cheaply) takes the op's own path. torch keeps one
    packet and one overload object per op, so their class is narrowed in place; where a torch refuses that, calls
    stay correct and only slower.
    """
    packet = getattr(torch.ops, namespace).img2gray
    # Bound once, as locals: each attribute lookup and Python frame on this path is measurable. `_op` is the C++
    # callable behind an overload object.
    call_no_grad, call_default_weights = no_grad_calls(build_ops)
    call_chw = cpp_callable(build_ops.no_grad_chw)  # a call that gives the input alone: nothing to convert or look up
    call_no_grad_out = cpp_callable(build_ops.no_grad_out)
    gradient = _with_keywords(gradient, build_ops.default._schema)
    transforms_gradient = _with_keywords(transforms_gradient, build_ops.default._schema)
    plain_tensor, grad_enabled, forward_ad = torch.Tensor, torch.is_grad_enabled, _forward_ad
    transforms_active = torch._C._are_functorch_transforms_active

    def needs_no_autograd(t) -> bool:  # records no graph and carries no tangent (forward-mode AD is off)
        return type(t) is plain_tensor and not (t.requires_grad and grad_enabled()) and forward_ad._current_level < 0

    class RoutedPacket(type(packet)):
        def __call__(self, /, *args, **kwargs):
            if args and type(x := args[0]) is plain_tensor:
                out = kwargs.get("out")
                if not (x.requires_grad and grad_enabled()) and forward_ad._current_level < 0:
                    if out is None:
                        if len(args) == 1 and not kwargs:
                            return call_chw(x)
                        if len(args) < 3 and "weights" not in kwargs:
                            return call_default_weights(*args, **kwargs)
                        return call_no_grad(*args, **kwargs)
                    if needs_no_autograd(out):
                        return call_no_grad_out(*args, **kwargs)
                elif out is None:
                    if not transforms_active():
                        return gradient(*args, **kwargs)  # records the graph and carries the tangent
                    if forward_ad._current_level >= 0:
                        return transforms_gradient(*args, **kwargs)
            return super().__call__(*args, **kwargs)

    class RoutedOverload(type(packet.default)):
        def __call__(self, /, *args, **kwargs):
            # needs_no_autograd, inlined: the most frequent call saves a frame.
            if args and type(x := args[0]) is plain_tensor:
                if not (x.requires_grad and grad_enabled()) and forward_ad._current_level < 0:
                    if len(args) == 1 and not kwargs:
                        return call_chw(x)
                    if len(args) < 3 and "weights" not in kwargs:
                        return call_default_weights(*args, **kwargs)
                    return call_no_grad(*args, **kwargs)
                if not transforms_active():
                    return gradient(*args, **kwargs)
                if forward_ad._current_level >= 0:
                    return transforms_gradient(*args, **kwargs)
            return super().__call__(*args, **kwargs)

    class RoutedOutOverload(type(packet.out)):
        def __call__(self, /, *args, **kwargs):
            if args and needs_no_autograd(args[0]) and needs_no_autograd(kwargs.get("out")):
                return call_no_grad_out(*args, **kwargs)
            return super().__call__(*args, **kwargs)

    try:
        packet.default.__class__ = RoutedOverload
        packet.out.__class__ = RoutedOutOverload
        packet.__class__ = RoutedPacket
    except TypeError:
        pass


def no_grad_calls(build_ops) -> tuple[Callable, Callable]:
    """The C++ callables (`_op`) of this build's `no_grad` and `no_grad_default_weights` (`build_ops`: its
    `torch.ops.<namespace>.img2gray`): where a plain tensor recording no graph is routed, with weights given and
    without."""
    return cpp_callable(build_ops.no_grad), cpp_callable(build_ops.no_grad_default_weights)


def _public_name_defined() -> bool:
    try:
        torch._C._dispatch_find_schema_or_throw(f"{PUBLIC_NAMESPACE}::img2gray", "")
    except RuntimeError:
        return False
    return True


def define(namespace: str, register_fakes: Callable[[str, Sequence[str]], None]) -> tuple[Callable, Callable]:
    """Define this build's ops under `namespace`, and the public name unless another build already did. Returns the
    gradient's entries for a plain tensor, `gradient(x, *arguments)` outside functorch's transforms and
    `transforms_gradient(x, *arguments)` under them with forward-mode AD on (_gradient)."""
    library = _define_namespace(namespace, "DEF", register_fakes, build_namespace=True)  # first: the routers' target
    namespaces = [namespace]
    if not _public_name_defined():
        _define_namespace(PUBLIC_NAMESPACE, "FRAGMENT", register_fakes, build_namespace=False)
        namespaces.append(PUBLIC_NAMESPACE)
    build_ops = getattr(torch.ops, namespace).img2gray
    gradient, transforms_gradient = _gradient(*no_grad_calls(build_ops), build_ops.default, build_ops.default._schema)
    library.impl("img2gray.differentiable", _differentiable_kernel(gradient, build_ops.default._schema), "Autograd")
    for defined in namespaces:
        _route_python_calls(defined, build_ops, gradient, transforms_gradient)
    return gradient, transforms_gradient
