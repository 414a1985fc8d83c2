"""img2gray: RGB -> grayscale as a native PyTorch operator (CPU and CUDA)."""

import json
from pathlib import Path

# Loading the library also defines the public name `torch.ops.img2gray.img2gray` when no other build in this
# process has (torch-ext/torch_binding.cpp).
from ._ops import NAMESPACE, ops

# Public though not in __all__ (a redundant alias says so): recipe/check_img2gray.py calls it on the package.
from ._ops import add_op_namespace_prefix as add_op_namespace_prefix
from .functional import SUPPORTED_DTYPES, WEIGHTS, img2gray

__all__ = ["NAMESPACE", "SUPPORTED_DTYPES", "WEIGHTS", "img2gray", "metadata", "ops"]


def metadata() -> dict:
    """What this build is: version, variant, backend and CUDA archs, provenance (from metadata.json)."""
    return json.loads(Path(__file__).with_name("metadata.json").read_text())
