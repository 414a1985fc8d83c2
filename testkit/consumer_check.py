"""What an application does with a pinned kernel: load it with kernelpin, run its op on a real image.

    python consumer_check.py REPO IMAGE [cpu|cuda]     (run inside the application's project)

Prints one JSON line: the loaded build (version, variant, op namespace, where its files came from) and how
the op's output compares with the BT.601 reference computed in float32 as the operator's contract states
it, `round_half_even((0.299 r + 0.587 g) + 0.114 b)`, and with OpenCV's fixed-point cvtColor.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import cv2
import numpy as np
import torch
from PIL import Image

import kernelpin


def reference(rgb: np.ndarray) -> np.ndarray:
    r, g, b = (rgb[..., c].astype(np.float32) for c in range(3))
    luma = (np.float32(0.299) * r + np.float32(0.587) * g) + np.float32(0.114) * b
    return np.rint(np.clip(luma, 0, 255)).astype(np.uint8)


def main(repo_id: str, image: str, device: str) -> None:
    module = kernelpin.load(repo_id)
    rgb = np.asarray(Image.open(image).convert("RGB"))
    gray = module.img2gray(torch.from_numpy(rgb.copy()).to(device), dim=-1, keepdim=False)
    result = gray.cpu().numpy()
    expected = reference(rgb)
    opencv = cv2.cvtColor(rgb, cv2.COLOR_RGB2GRAY)
    metadata = module.metadata()
    assert module.__file__ is not None  # a package loaded from its files
    print(
        json.dumps(
            {
                "version": metadata.get("semver", metadata["version"]),
                "variant": metadata["variant"],
                "namespace": module.NAMESPACE,
                "directory": str(Path(module.__file__).parent),
                "device": str(gray.device),
                "shape": list(result.shape),
                "mismatches": int((result != expected).sum()),
                "max_diff_opencv": int(np.abs(result.astype(np.int16) - opencv.astype(np.int16)).max()),
            }
        )
    )


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3] if len(sys.argv) > 3 else "cpu")
