"""Recipe test: the operator is registered and computes BT.601 grayscale (on the GPU too when one exists)."""

import torch

import img2gray

metadata = img2gray.metadata()
cuda_build = metadata["backend"]["type"] == "cuda"
for dispatch_key in ("CPU", "CUDA") if cuda_build else ("CPU",):
    assert torch._C._dispatch_has_kernel_for_dispatch_key(img2gray.add_op_namespace_prefix("img2gray"), dispatch_key), (
        f"{img2gray.NAMESPACE}::img2gray has no {dispatch_key} kernel"
    )


def reference(x: torch.Tensor) -> torch.Tensor:
    r, g, b = x.double().unbind(1)
    return (0.299 * r + 0.587 * g + 0.114 * b).unsqueeze(1)


x = torch.rand(1, 3, 64, 64, generator=torch.Generator().manual_seed(0))
torch.testing.assert_close(torch.ops.img2gray.img2gray(x).double(), reference(x), rtol=1e-6, atol=1e-6)
print(f"img2gray {metadata['semver']} ({metadata['variant']}): CPU result matches the reference")
if cuda_build and torch.cuda.is_available():
    result = torch.ops.img2gray.img2gray(x.cuda()).cpu().double()
    torch.testing.assert_close(result, reference(x), rtol=1e-6, atol=1e-6)
    print(
        f"img2gray {metadata['semver']} ({metadata['variant']}): CUDA result on "
        f"{torch.cuda.get_device_name()} matches the reference"
    )
