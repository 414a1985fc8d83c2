"""img2gray: RGB -> grayscale as a native PyTorch operator (CPU and CUDA)."""

import json
from pathlib import Path

import torch

from ._ops import NAMESPACE, add_op_namespace_prefix, ops
from .functional import SUPPORTED_DTYPES, WEIGHTS, img2gray

__all__ = ["NAMESPACE", "SUPPORTED_DTYPES", "WEIGHTS", "img2gray", "metadata", "ops"]


def metadata() -> dict:
    """What this build is: version, variant, backend and CUDA archs, provenance (from metadata.json)."""
    return json.loads(Path(__file__).with_name("metadata.json").read_text())


def _register_public_alias() -> "torch.library.Library | None":
    # `torch.ops.img2gray.img2gray` is the documented entry point. Each build registers under its own
    # namespace so that several can be loaded in one process; the first one imported also owns the
    # public name, which forwards to it (CompositeImplicitAutograd: autograd and compile follow).
    if torch._C._jit_get_schemas_for_operator("img2gray::img2gray"):
        return None
    library = torch.library.Library("img2gray", "FRAGMENT")
    for overload in ("default", "out"):
        native = getattr(ops.img2gray, overload)
        schema = str(native._schema).split("::", 1)[1]
        library.define(schema)
        library.impl(schema.split("(", 1)[0], native, "CompositeImplicitAutograd")
    return library


_PUBLIC_ALIAS = _register_public_alias()
