"""Recipe test: the operator is registered and computes BT.601 grayscale (also on the GPU when one exists)."""

import json
from pathlib import Path

import torch

import img2gray

metadata = json.loads((Path(img2gray.__file__).parent / "metadata.json").read_text())
namespace = metadata["id"]
op = getattr(getattr(torch.ops, namespace), "img2gray")
assert torch._C._dispatch_has_kernel_for_dispatch_key(f"{namespace}::img2gray", "CPU"), "no CPU kernel registered"
if metadata["backend"]["type"] == "cuda":
    assert torch._C._dispatch_has_kernel_for_dispatch_key(f"{namespace}::img2gray", "CUDA"), "no CUDA kernel"


def reference(x: torch.Tensor) -> torch.Tensor:
    r, g, b = x.double().unbind(1)
    return (0.299 * r + 0.587 * g + 0.114 * b).unsqueeze(1)


x = torch.rand(1, 3, 64, 64, generator=torch.Generator().manual_seed(0))
torch.testing.assert_close(op(x).double(), reference(x), rtol=1e-5, atol=1e-5)
print(f"{namespace}: CPU result matches the reference")
if metadata["backend"]["type"] == "cuda" and torch.cuda.is_available():
    torch.testing.assert_close(op(x.cuda()).cpu().double(), reference(x), rtol=1e-5, atol=1e-5)
    print(f"{namespace}: CUDA result on {torch.cuda.get_device_name()} matches the reference")
