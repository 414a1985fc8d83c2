"""What a `kernels` user does with our release: `kernels.get_kernel(REPO, version=MAJOR)`, then the op on a real
image, compared with the BT.601 reference (as testkit/consumer_check.py does for kernelpin.load).

    python kernels_check.py REPO MAJOR IMAGE [cpu|cuda]

Prints one JSON line: {"loaded": true, "file", "namespace", "metadata", "device", "mismatches"} or
{"loaded": false, "type", "message"} when `kernels` refuses the kernel.
"""

from __future__ import annotations

import json
import sys

import numpy as np
import torch
from PIL import Image


def main(repo_id: str, major: int, image: str, device: str) -> None:
    import kernels

    try:
        module = kernels.get_kernel(repo_id, version=major, trust_remote_code=True)
    except Exception as error:  # noqa: BLE001  # the JSON line reports any refusal, whatever its type
        print(
            json.dumps(
                {"loaded": False, "type": f"{type(error).__module__}.{type(error).__name__}", "message": str(error)}
            )
        )
        return
    rgb = np.asarray(Image.open(image).convert("RGB"))
    r, g, b = (rgb[..., c].astype(np.float32) for c in range(3))
    expected = np.rint(np.clip((np.float32(0.299) * r + np.float32(0.587) * g) + np.float32(0.114) * b, 0, 255))
    gray = module.img2gray(torch.from_numpy(rgb.copy()).to(device), dim=-1, keepdim=False)
    print(
        json.dumps(
            {
                "loaded": True,
                "file": module.__file__,
                "namespace": module.NAMESPACE,
                "metadata": module.metadata(),
                "device": str(gray.device),
                "mismatches": int((gray.cpu().numpy() != expected.astype(np.uint8)).sum()),
            }
        )
    )


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4] if len(sys.argv) > 4 else "cpu")
